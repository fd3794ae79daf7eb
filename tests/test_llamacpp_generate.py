"""Responses from llama-server and their agreement with the PyTorch target's: request bodies,
canned replies (the HTTP layer mocked), a fake ``llama-server`` with parallel slots, the
records' engine provenance, and the agreement measure on synthetic records. No llama.cpp
build, no model weights."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from dataclasses import replace

import pytest

from helpers import install_fake_server
from activation_wave.engines import llamacpp_generate as G
from activation_wave.engines.llamacpp import LlamaCpp, server_command
from activation_wave.models.capture import data_hash
from activation_wave.models.prompts import (LEGACY_ENGINE, Prompt, Response, read_header, read_responses,
                                            write_responses)


def _reply(tokens, stop="eos", ms=10.0):
    return {"tokens": tokens, "stop_type": stop, "tokens_predicted": len(tokens),
            "timings": {"predicted_n": len(tokens), "predicted_ms": ms, "prompt_ms": 1.0}}


def _resp(rid, response_ids, prompt_ids=(1, 2), engine=""):
    return Response(id=rid, prompt_ids=list(prompt_ids), response_ids=list(response_ids), finish="eos", text="",
                    engine=engine)


# ----------------------------------------------------------------------------- requests and replies


def test_greedy_request_sends_token_ids_and_no_sampler_but_temperature():
    body = G.request_body([1, 9690, 198], 160)
    assert body["prompt"] == [1, 9690, 198]  # a token list: no template, no BOS added by the server
    assert body["temperature"] == 0.0 and body["samplers"] == ["temperature"]  # arg max, as torch greedy
    assert body["repeat_penalty"] == 1.0 and body["top_k"] == 0 and body["min_p"] == 0.0 and body["top_p"] == 1.0
    assert body["return_tokens"] and not body["cache_prompt"] and body["n_predict"] == 160
    assert G.request_body([1], 4, temperature=0.7, seed=12)["seed"] == 12
    with pytest.raises(ValueError, match="temperature -1"):
        G.request_body([1], 4, temperature=-1)


def test_replies_keep_the_end_token_and_map_the_stop_type():
    assert G.parse_reply(_reply([5, 6, 2], "eos"), 8) == ([5, 6, 2], "eos")
    assert G.parse_reply(_reply([5, 6, 7], "limit"), 3) == ([5, 6, 7], "length")
    assert G.parse_reply(_reply([5, 6, 7, 8], "limit"), 3) == ([5, 6, 7], "length")  # a finished UTF-8 char
    with pytest.raises(ValueError, match="stop_type 'word'"):
        G.parse_reply(_reply([5], "word"), 3)
    with pytest.raises(ValueError, match="ignores `return_tokens`"):
        G.parse_reply({"tokens": [], "stop_type": "limit", "tokens_predicted": 3}, 3)


def test_generate_keeps_item_order_and_seeds_by_item_not_by_slot(monkeypatch):
    bodies, in_flight, most = [], [0], [0]
    lock = threading.Lock()

    def fake_post(url, body, timeout=0):
        with lock:
            bodies.append(body)
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.05 if body["prompt"][0] == 10 else 0.01)  # the first finishes last
        with lock:
            in_flight[0] -= 1
        return _reply([body["prompt"][0], body["seed"], 2])

    monkeypatch.setattr(G, "_post", fake_post)
    items = [("a", [10]), ("b", [11]), ("c", [12])]
    run = G.generate("http://x", items, 8, engine="E", slots=2, temperature=0.7, seed=100)
    assert list(run.tokens) == ["a", "b", "c"] and most[0] == 2
    assert run.tokens == {"a": [10, 100, 2], "b": [11, 101, 2], "c": [12, 102, 2]}
    assert all(b["temperature"] == 0.7 for b in bodies)
    sp = run.speed()
    assert sp["new_tokens"] == 9 and sp["per_sequence_tokens_per_s"] == 300.0 and sp["slots"] == 2


def test_records_name_their_engine_and_keep_the_schema(tmp_path):
    run = G.GenerationRun(engine="llama.cpp llama-server b1-abc, gguf m.gguf sha256 00, slots 2, threads 1", slots=2,
                          tokens={"p1": [5, 2]}, finish={"p1": "eos"}, wall_s=1.0)
    p = Prompt(id="p1", text="hi", category="coding", split="eval", source="team")
    recs = G.to_responses(run, [("p1", p, [1, 2, 3])], decode=lambda ids: "x" * len(ids))
    path = write_responses(tmp_path / "r.jsonl", recs, {"key": "k", "engine": run.engine})
    back = read_responses(path)["p1"]
    assert back == recs[0] and back.engine.startswith("llama.cpp llama-server") and back.text == "xx"
    assert (back.split, back.category, back.prompt_ids) == ("eval", "coding", [1, 2, 3])
    assert read_header(path)["engine"] == run.engine
    # the engine is provenance, not content: capture cache keys hash the tokens only
    assert data_hash(recs) == data_hash([replace(recs[0], engine="")])


def test_records_written_before_engines_were_named_read_as_pytorch(tmp_path):
    path = tmp_path / "old.jsonl"
    old = {"id": "a", "prompt_ids": [1], "response_ids": [2], "finish": "eos", "text": "", "category": "general",
           "split": "train", "source": "team"}
    path.write_text(json.dumps({"schema": 1, "header": {"key": "k"}}) + "\n" + json.dumps(old) + "\n")
    assert read_responses(path)["a"].engine == LEGACY_ENGINE


def test_the_pytorch_path_names_its_engine(tiny_target, tmp_path):
    from activation_wave.models.prompts import _generate_cached

    items = [("a", Prompt(id="a", text="hello")), ("b", Prompt(id="b", text="hi there"))]
    done = _generate_cached(tiny_target, items, tmp_path / "r.jsonl", "k", 2, 3, progress=False)
    engines = {r.engine for r in done.values()}
    assert len(engines) == 1 and engines.pop().startswith("transformers ") and "batch 2" in done["a"].engine
    assert read_responses(tmp_path / "r.jsonl") == done


# ----------------------------------------------------------------------------- agreement


def test_agreement_counts_identical_responses_and_the_first_difference():
    ref = [_resp("a", [5, 6, 2]), _resp("b", [7, 8, 9, 10]), _resp("c", [1, 1]), _resp("d", [3]),
           _resp("t", [4], prompt_ids=[9])]
    cand = [_resp("a", [5, 6, 2]), _resp("b", [7, 8, 4, 4]), _resp("c", [1, 1, 1, 2]), _resp("e", [3]),
            _resp("t", [4], prompt_ids=[8])]
    a = G.greedy_agreement(ref, cand)
    rows = {r.id: r for r in a.per_prompt}
    assert rows["a"].identical and rows["a"].first_diff is None and rows["a"].share == 1.0
    assert rows["b"].first_diff == 2 and rows["b"].share == 0.5
    assert rows["c"].first_diff == 2 and rows["c"].share == 0.5  # the reference is a prefix: it stopped earlier
    assert a.missing == ["e"] and a.prompt_differs == ["t"]  # a template mismatch is not compared
    s = a.summary()
    assert (s["compared"], s["identical"], s["identical_share"]) == (3, 1, 0.3333)
    assert s["mean_prefix_share"] == round((1 + 0.5 + 0.5) / 3, 4) and s["median_first_diff"] == 2
    assert G.greedy_agreement([], []).summary()["identical_share"] is None


def test_agreement_of_a_set_with_itself_is_total():
    recs = [_resp(f"p{i}", list(range(i + 1))) for i in range(5)]
    s = G.greedy_agreement(recs, {r.id: r for r in recs}).summary()
    assert s["identical"] == s["compared"] == 5 and s["mean_prefix_share"] == 1.0


# ----------------------------------------------------------------------------- a fake llama-server


# Answers /health, /props (build_info) and /completion (the prompt's last token repeated, then
# the end token 2 when n_predict allows; the reply's slot count from -np), several at a time.
FAKE_SERVER = textwrap.dedent('''
    import http.server, json, sys
    args = sys.argv[1:]
    opt = lambda name: args[args.index(name) + 1]
    slots = int(opt("-np"))

    JSON_HANDLER

    class H(JsonHandler):
        def do_GET(self):
            self.send({"status": "ok"} if self.path == "/health" else {"build_info": f"b0-fake np{slots}"})

        def do_POST(self):
            req = self.read_json()
            n = req["n_predict"]
            toks = [req["prompt"][-1]] * min(n, 3) + ([2] if n > 3 else [])
            self.send({"tokens": toks, "stop_type": "eos" if n > 3 else "limit", "tokens_predicted": len(toks),
                       "timings": {"predicted_n": len(toks), "predicted_ms": 5.0, "prompt_ms": 1.0}})

    http.server.ThreadingHTTPServer(("127.0.0.1", int(opt("--port"))), H).serve_forever()
''')


@pytest.fixture()
def fake_server(tmp_path):
    return install_fake_server(tmp_path / "lc", FAKE_SERVER)


def test_slots_are_a_server_flag(tmp_path):
    cmd = server_command(LlamaCpp(tmp_path), tmp_path / "m.gguf", 8080, 1, slots=4, ctx=4096)
    assert cmd[cmd.index("-np") + 1] == "4" and cmd[cmd.index("-c") + 1] == "4096"
    with pytest.raises(ValueError, match="at least one slot"):
        server_command(LlamaCpp(tmp_path), tmp_path / "m.gguf", 8080, 1, slots=0)


def test_generate_with_a_fake_server(fake_server, tiny_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake")
    prompts = [Prompt(id="a", text="ab", split="eval"), Prompt(id="b", text="xyz", split="eval")]
    recs, run, header = G.generate_with_llamacpp(gguf, prompts, tiny_tokenizer, 6, slots=2, workdir=tmp_path / "w",
                                                 llamacpp=fake_server, progress=False)
    assert [r.id for r in recs] == ["a", "b"]
    assert recs[0].prompt_ids == tiny_tokenizer("ab")["input_ids"]  # no chat template: plain text ids
    assert recs[1].response_ids == [ord("z")] * 3 + [2] and recs[1].finish == "eos"
    assert recs[0].engine.startswith("llama.cpp llama-server b0-fake np2, gguf m.gguf sha256 ")
    assert recs[0].engine.endswith("slots 2, threads 1")
    assert header["engine"] == recs[0].engine and header["max_new_tokens"] == 6 and len(header["key"]) == 16
    short, _, _ = G.generate_with_llamacpp(gguf, prompts[:1], tiny_tokenizer, 2, workdir=tmp_path / "w",
                                           llamacpp=fake_server, progress=False)
    assert short[0].finish == "length" and len(short[0].response_ids) == 2


def test_the_cli_writes_responses_and_reports_agreement(tmp_path, monkeypatch, capsys):
    from activation_wave import cli

    ref = tmp_path / "ref.jsonl"
    write_responses(ref, [_resp("x", [5, 6]), _resp("y", [7, 8])], {"key": "k", "model": {"file": "m.gguf"}})

    def fake_generate(gguf, prompts, tok, max_new, **kw):
        assert max_new == 12 and kw["slots"] == 2 and kw["temperature"] == 0.0
        assert [p.split for p in prompts] == ["eval"] * len(prompts)
        run = G.GenerationRun(engine="llama.cpp fake", slots=2, tokens={"x": [5, 6], "y": [7, 9]},
                              finish={"x": "eos", "y": "eos"}, wall_s=2.0)
        recs = [replace(_resp("x", [5, 6]), engine=run.engine), replace(_resp("y", [7, 9]), engine=run.engine)]
        return recs, run, {"key": "k2", "engine": run.engine}

    monkeypatch.setattr(G, "generate_with_llamacpp", fake_generate)
    monkeypatch.setattr(G, "gguf_of_model", lambda name: tmp_path / "m.gguf")
    monkeypatch.setattr(G, "gguf_tokenizer", lambda gguf: None)
    out = tmp_path / "new.jsonl"
    argv = ["generate", "--engine", "llamacpp", "--split", "eval", "--out", str(out), "--slots", "2",
            "--max-new-tokens", "12", "--check-against", str(ref), "--json"]
    assert cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agreement"]["identical"] == 1 and doc["agreement"]["per_prompt"][1]["first_diff"] == 1
    assert doc["reference"]["engine"] == "" and doc["command"].startswith("wave generate --engine llamacpp")
    assert read_responses(out)["y"].engine == "llama.cpp fake" and read_header(out)["command"] == doc["command"]
    # wrong paths fail before any work, in one line
    assert cli.main(argv[:5] + ["--out", str(ref), "--check-against", str(ref)]) == 2
    assert "is the --check-against file" in capsys.readouterr().err
    assert cli.main(argv[:5] + ["--out", str(tmp_path / "r.txt")]) == 2
    assert cli.main(argv[:5] + ["--out", str(out), "--temperature", "0.7", "--check-against", str(ref)]) == 2
    assert "compares greedy responses" in capsys.readouterr().err


def test_divergence_logits_read_the_target_at_the_first_difference(tiny_target):
    import torch

    prompt = [5, 6, 7]
    with torch.no_grad():
        out = tiny_target.model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False,
                                         pad_token_id=0)[0, 3:].tolist()
    ref = _resp("a", out, prompt_ids=prompt)
    alt = (out[2] + 1) % 128
    cand = _resp("a", out[:2] + [alt, alt], prompt_ids=prompt)
    rows = G.divergence_logits(tiny_target, {"a": ref}, {"a": cand}, G.greedy_agreement([ref], [cand]))
    assert len(rows) == 1 and rows[0]["position"] == 2 and rows[0]["candidate_token"] == alt
    assert rows[0]["argmax_is_reference"] and rows[0]["gap"] >= 0 and rows[0]["top2_gap"] >= 0


def test_a_dequantized_gguf_holds_the_same_values_in_f32(tmp_path):
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
    from gguf.quants import dequantize, quantize

    src = tmp_path / "q.gguf"
    w = GGUFWriter(str(src), arch="llama")
    w.add_block_count(2)
    w.add_file_type(7)
    w.add_token_list(["a", "b"])
    q = quantize(np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32), GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.w", q, raw_shape=q.shape, raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("norm", np.ones(64, dtype=np.float32))
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    out = G.dequantize_gguf(src, tmp_path / "f32.gguf")
    r = GGUFReader(str(out))
    t = {x.name: x for x in r.tensors}
    assert t["blk.0.w"].tensor_type == GGMLQuantizationType.F32
    np.testing.assert_array_equal(t["blk.0.w"].data.reshape(4, 64), dequantize(q, GGMLQuantizationType.Q8_0))
    assert r.fields["general.file_type"].contents() == 0 and r.fields["llama.block_count"].contents() == 2
    assert r.fields["tokenizer.ggml.tokens"].contents() == ["a", "b"]


# ----------------------------------------------------------------------------- data.engine: llamacpp


PROMPTS3 = [Prompt(id=f"q{i}", text="abc"[: i + 1], split="train" if i else "eval") for i in range(3)]


def test_the_llamacpp_engine_fills_the_responses_cache(fake_server, tiny_target, tmp_path):
    """``data.engine: llamacpp``: the cache is written by the server (each record naming it),
    under a key of its own; a second call reads it without starting a server."""
    from activation_wave.core.config import DataConfig
    from activation_wave.models.prompts import generate_responses, responses_key

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake")
    cfg = DataConfig(max_new_tokens=6, batch_size=2, engine="llamacpp")
    assert responses_key(tiny_target, PROMPTS3, cfg) != responses_key(tiny_target, PROMPTS3, replace(cfg, engine="pytorch"))
    assert responses_key(tiny_target, PROMPTS3, cfg) != responses_key(tiny_target, PROMPTS3, replace(cfg, engine_slots=2))
    with G.ServerGenerator(gguf, slots=2, threads=1, workdir=tmp_path / "w", llamacpp=fake_server) as gen:
        recs, path = generate_responses(tiny_target, PROMPTS3, cfg, progress=False, generator=gen)
    assert [r.id for r in recs] == ["q0", "q1", "q2"]
    assert recs[2].response_ids[:3] == [recs[2].prompt_ids[-1]] * 3 and recs[2].finish == "eos"
    assert all(r.engine.startswith("llama.cpp llama-server b0-fake np2") for r in recs)
    assert gen._stack is None  # stopped at the end of the block
    idle = G.ServerGenerator(gguf, workdir=tmp_path / "w2", llamacpp=LlamaCpp(tmp_path / "nowhere"))
    again, _ = generate_responses(tiny_target, PROMPTS3, cfg, progress=False, generator=idle)
    assert again == recs and idle._stack is None  # all cached: no server was needed


def test_an_engine_the_config_does_not_name_is_refused(tiny_target, tmp_path):
    from activation_wave.core.config import DataConfig
    from activation_wave.models.prompts import TorchGenerator, generate_responses

    with pytest.raises(ValueError, match="data.engine is 'llamacpp' but no llamacpp generator"):
        generate_responses(tiny_target, PROMPTS3, DataConfig(engine="llamacpp"), progress=False)
    with pytest.raises(ValueError, match="data.engine is 'llamacpp' but the generator is a TorchGenerator"):
        generate_responses(tiny_target, PROMPTS3, DataConfig(engine="llamacpp"), progress=False,
                           generator=TorchGenerator(tiny_target, 8))
    gen = G.ServerGenerator(tmp_path / "m.gguf", workdir=tmp_path)
    with pytest.raises(ValueError, match="data.engine is 'pytorch' but the generator is a ServerGenerator"):
        generate_responses(tiny_target, PROMPTS3, DataConfig(), progress=False, generator=gen)


def test_two_servers_share_a_batch_and_give_what_one_gives(fake_server, tiny_target, tmp_path):
    """``data.engine_servers``: request i goes to server i % n with its own seed; with one slot
    per server the responses (and so the cache key, which does not name servers) are unchanged."""
    from activation_wave.core.config import DataConfig
    from activation_wave.models.prompts import generate_responses, responses_key

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake")
    cfg = DataConfig(max_new_tokens=6, batch_size=3, engine="llamacpp")
    assert responses_key(tiny_target, PROMPTS3, cfg) == responses_key(tiny_target, PROMPTS3,
                                                                      replace(cfg, engine_servers=2))
    got = {}
    for n in (1, 2):
        with G.ServerGenerator(gguf, slots=1, threads=1, workdir=tmp_path / f"w{n}", llamacpp=fake_server,
                               servers=n) as gen:
            got[n] = gen([[5, 6], [7], [8, 9, 10]], 6, seed=3)
            assert len(list((tmp_path / f"w{n}").glob("llama-server-*.log"))) == n
            assert gen.engine.endswith("servers 2") == (n == 2)
    assert got[1] == got[2] == [([6] * 3 + [2], "eos"), ([7] * 3 + [2], "eos"), ([10] * 3 + [2], "eos")]
    with pytest.raises(ValueError, match="servers=0"):
        G.ServerGenerator(gguf, workdir=tmp_path, servers=0)
