"""llama.cpp export and benchmark pieces that need no llama.cpp build: the converter's
inputs, the export checks, errors that name the setup command, and the parsing of
llama-server's timings and speculative statistics (canned JSON and log lines)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from helpers import install_fake_server
from activation_wave.benchmarks import llamacpp_speed as B
from activation_wave.models.drafter import Eagle3Drafter, save_drafter
from activation_wave.engines.llamacpp import (
    SETUP_COMMAND,
    LlamaCpp,
    LlamaCppError,
    convert_command,
    export_llamacpp,
    find_llamacpp,
    server_command,
    write_target_dir,
)

DRAFT_IDS = list(range(0, 128, 2))

# What a fake convert_hf_to_gguf.py checks, as the real one reads it (conversion/llama.py):
# the draft's top-level ids and the target folder's config.json and tokenizer.
FAKE_CONVERTER = textwrap.dedent('''
    import json, struct, sys, pathlib
    args = sys.argv[1:]
    draft = pathlib.Path(args[0])
    out = pathlib.Path(args[args.index("--outfile") + 1])
    tdir = pathlib.Path(args[args.index("--target-model-dir") + 1])
    cfg = json.loads((draft / "config.json").read_text())
    tcfg = json.loads((tdir / "config.json").read_text())
    assert (tdir / "tokenizer.json").exists(), "no tokenizer"
    body = json.dumps({"target_layers": cfg["eagle_aux_hidden_state_layer_ids"],
                       "n_layer": tcfg["num_hidden_layers"], "outtype": args[args.index("--outtype") + 1]})
    out.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + body.encode())  # a GGUF header (1 tensor), then JSON
''')


@pytest.fixture()
def fake_llamacpp(tmp_path):
    root = tmp_path / "llamacpp"
    (root / "src").mkdir(parents=True)
    (root / "src" / "convert_hf_to_gguf.py").write_text(FAKE_CONVERTER)
    return LlamaCpp(root)


def _drafter(tiny_llama, tmp_path, layers, fused_norm=False):
    d = Eagle3Drafter.from_target(tiny_llama, layers, DRAFT_IDS, fused_norm=fused_norm)
    return save_drafter(d, tmp_path / f"d{'-'.join(map(str, layers))}{'-norm' * fused_norm}")


def test_missing_install_names_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.delenv("LLAMACPP_DIR", raising=False)
    with pytest.raises(LlamaCppError, match="scripts/setup_llamacpp.sh"):
        find_llamacpp(tmp_path / "nowhere")
    assert SETUP_COMMAND == "bash scripts/setup_llamacpp.sh"


def test_target_dir_has_what_the_converter_reads(tiny_target, tmp_path):
    out = write_target_dir(tiny_target, tmp_path / "t")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 4 and cfg["hidden_size"] == 32 and cfg["vocab_size"] == 128
    assert cfg["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in cfg
    assert (out / "tokenizer.json").exists() and (out / "tokenizer_config.json").exists()


def test_convert_and_server_commands(fake_llamacpp, tmp_path):
    cmd = convert_command(fake_llamacpp, tmp_path / "d", tmp_path / "t", tmp_path / "o.gguf", "q8_0")
    assert cmd[0] == sys.executable and cmd[1].endswith("convert_hf_to_gguf.py")
    assert cmd[cmd.index("--target-model-dir") + 1] == str(tmp_path / "t") and cmd[cmd.index("--outtype") + 1] == "q8_0"
    srv = server_command(fake_llamacpp, tmp_path / "m.gguf", 8080, 2, draft=tmp_path / "d.gguf")
    assert srv[srv.index("-md") + 1] == str(tmp_path / "d.gguf") and srv[srv.index("--spec-type") + 1] == "draft-eagle3"
    assert srv[srv.index("-t") + 1] == srv[srv.index("-td") + 1] == "2"  # same threads for target and draft
    assert "-md" not in server_command(fake_llamacpp, tmp_path / "m.gguf", 8080, 1)


def test_export_runs_the_converter_with_the_target_folder(tiny_llama, tiny_target, fake_llamacpp, tmp_path):
    draft = _drafter(tiny_llama, tmp_path, [1, 2, 3])
    (tmp_path / "x").mkdir()
    out = export_llamacpp(draft, tmp_path / "x" / "draft.gguf", tiny_target, outtype="q8_0", llamacpp=fake_llamacpp)
    assert json.loads(out.read_bytes()[24:]) == {"target_layers": [1, 2, 3], "n_layer": 4, "outtype": "q8_0"}
    assert [p.name for p in (tmp_path / "x").iterdir()] == ["draft.gguf"]  # the work folder is removed


def test_export_gives_schema_1_checkpoints_the_top_level_ids(tiny_llama, tiny_target, fake_llamacpp, tmp_path):
    draft = _drafter(tiny_llama, tmp_path, [1, 2, 3])
    cfg = json.loads((draft / "config.json").read_text())
    old = {k: v for k, v in cfg.items() if k not in ("eagle_aux_hidden_state_layer_ids", "activation_wave")}
    old["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "target_num_hidden_layers": 4,
                           "layer_id_convention": "hidden_states index (vLLM)"}
    (draft / "config.json").write_text(json.dumps(old))
    out = export_llamacpp(draft, tmp_path / "draft.gguf", tiny_target, llamacpp=fake_llamacpp)
    assert json.loads(out.read_bytes()[24:])["target_layers"] == [1, 2, 3]  # not the converter's default


def test_export_refuses_what_llamacpp_would_misfeed(tiny_llama, tiny_target, fake_llamacpp, tmp_path):
    with pytest.raises(ValueError, match="only k = 3"):
        export_llamacpp(_drafter(tiny_llama, tmp_path, [1, 3]), tmp_path / "a.gguf", tiny_target,
                        llamacpp=fake_llamacpp)
    with pytest.raises(ValueError, match=r"cannot capture hidden_states \[4\]"):  # pre-norm last entry, Llama graph
        export_llamacpp(_drafter(tiny_llama, tmp_path, [1, 2, 4]), tmp_path / "b.gguf", tiny_target,
                        llamacpp=fake_llamacpp)
    with pytest.raises(ValueError, match="outtype"):
        export_llamacpp(tmp_path, tmp_path / "c.gguf", tiny_target, outtype="q4_0", llamacpp=fake_llamacpp)
    with pytest.raises(ValueError, match="cannot run this drafter: llamacpp .* applies no per-layer RMSNorm before fc"):
        export_llamacpp(_drafter(tiny_llama, tmp_path, [1, 2, 3], fused_norm=True), tmp_path / "d.gguf", tiny_target,
                        llamacpp=fake_llamacpp)
    assert not (tmp_path / "d.gguf").exists()


def test_converter_failure_is_reported(tiny_llama, tiny_target, fake_llamacpp, tmp_path):
    fake_llamacpp.converter.write_text("import no_such_module_wave_test  # stands for sentencepiece\n")
    with pytest.raises(LlamaCppError, match="(?s)failed.*setup_llamacpp.sh.*ModuleNotFoundError"):
        export_llamacpp(_drafter(tiny_llama, tmp_path, [1, 2, 3]), tmp_path / "a.gguf", tiny_target,
                        llamacpp=fake_llamacpp)


def test_cli_export_without_llamacpp_exits_2(tiny_target, tiny_llama, tmp_path, monkeypatch, capsys):
    from activation_wave import cli
    from activation_wave.study import steps as pipeline

    monkeypatch.setattr(pipeline, "get_target", lambda cfg: tiny_target)
    monkeypatch.setenv("LLAMACPP_DIR", str(tmp_path / "none"))
    draft = _drafter(tiny_llama, tmp_path, [1, 2, 3])
    rc = cli.main(["export", "--engine", "llamacpp", "--draft", str(draft), "--out", str(tmp_path / "d.gguf")])
    assert rc == 2 and "bash scripts/setup_llamacpp.sh" in capsys.readouterr().err


# ------------------------------------------------------------------ parsing llama.cpp's figures

# two responses' "timings" as llama-server returns them (tools/server/server-common.cpp)
PLAIN = [{"prompt_n": 40, "prompt_ms": 90.0, "predicted_n": 96, "predicted_ms": 2400.0},
         {"prompt_n": 55, "prompt_ms": 120.0, "predicted_n": 50, "predicted_ms": 1250.0}]
SPEC = [{"prompt_n": 40, "prompt_ms": 95.0, "predicted_n": 96, "predicted_ms": 3000.0, "draft_n": 150,
         "draft_n_accepted": 45},
        {"prompt_n": 55, "prompt_ms": 125.0, "predicted_n": 50, "predicted_ms": 1600.0, "draft_n": 78,
         "draft_n_accepted": 21}]
LOG = """
srv  log_server_r: request: POST /completion 127.0.0.1 200
spec print_stats: statistics     draft-eagle3: #calls(b,g,a) =    1      6      6, #gen drafts =      6, #acc drafts =     2, #gen tokens =     18, #acc tokens =     3, #mean acc len = 1.50, #acc rate/pos = (0.333, 0.167, 0.000), dur(b,g,a) = 0.100, 40.000, 0.500 ms
slot print_timing: id  0 | task 3 | draft acceptance = 0.29 (66 accepted / 228 generated), mean len = 1.83
spec print_stats: statistics     draft-eagle3: #calls(b,g,a) =    3     82     82, #gen drafts =     82, #acc drafts =    50, #gen tokens =    246, #acc tokens =    69, #mean acc len = 1.84, #acc rate/pos = (0.610, 0.183, 0.049), dur(b,g,a) = 0.300, 680.000, 6.500 ms
"""


def test_parse_spec_stats_reads_counts_times_and_rates():
    st = B.parse_spec_stats(LOG)
    assert len(st) == 2 and st[0]["type"] == "draft-eagle3"
    assert st[1]["calls_g"] == 82 and st[1]["acc_tokens"] == 69 and st[1]["t_g"] == 680.0
    assert st[1]["rate_pos"] == [0.610, 0.183, 0.049]
    d = B.stats_delta(st[0], st[1])  # counters are cumulative over the server's life
    assert d["calls_g"] == 76 and d["gen_tokens"] == 228 and d["acc_tokens"] == 66
    assert d["t_g"] == pytest.approx(640.0) and d["t_a"] == pytest.approx(6.0)
    assert B.stats_delta(None, st[0])["calls_g"] == 6
    assert B.parse_spec_stats("no statistics here") == []


def test_summaries_speedup_and_round_costs():
    plain, spec = B.summarize_timings(PLAIN), B.summarize_timings(SPEC)
    assert plain == {"tokens": 146, "ms": 3650.0, "tokens_per_s": 40.0}
    assert spec["draft_n"] == 228 and spec["draft_n_accepted"] == 66 and spec["acceptance"] == pytest.approx(66 / 228, abs=1e-4)
    assert spec["rounds"] == 146 - 66 - 2  # one target token per round; each first token came from the prompt pass
    assert spec["tau"] == pytest.approx(144 / 78, abs=1e-4)
    d = B.stats_delta(*B.parse_spec_stats(LOG))
    rc = B.round_costs(plain, spec, d)
    step, rnd = 3650.0 / 146, 4600.0 / 78
    assert rc["plain_step_ms"] == pytest.approx(step, abs=1e-3) and rc["round_ms"] == pytest.approx(rnd, abs=1e-3)
    assert rc["round_in_plain_steps"] == pytest.approx(rnd / step, abs=1e-3)
    assert rc["draft_ms_per_round"] == pytest.approx(640.0 / 78, abs=1e-3)
    assert rc["verify_and_rest_ms_per_round"] == pytest.approx(rnd - (640.0 + 6.0 + 0.2) / 78, abs=1e-2)
    # break-even needs tau = round cost in plain steps; 1.5x needs 1.5 times that
    assert rc["tau_needed"]["1x"] == pytest.approx(rnd / step, abs=1e-3)
    assert rc["tau_needed"]["1.5x"] == pytest.approx(1.5 * rnd / step, abs=1e-3)
    assert "draft_ms_per_round" not in B.round_costs(plain, spec, None)


def test_engine_comparison_rows_come_from_the_file():
    bench = {"speculative_decoding": {"tokens_per_s": {"plain_t0": 15.0, "spec_chain_t0": 19.5},
                                      "methods": {"spec_chain_t0": {"tau": 1.66}}, "lossless_t0_chain": "32/32"},
             "llamacpp": {"by_threads": {"1": {"plain": {"tokens_per_s": 40.0},
                                               "eagle3": {"tokens_per_s": 16.0, "speedup": 0.4, "tau": 1.5,
                                                          "identical_to_plain": 8, "prompts": 8}}}}}
    rows = B.engine_comparison(bench)
    assert [r["tokens_per_s"] for r in rows] == [15.0, 19.5, 40.0, 16.0]
    assert rows[1]["speedup"] == 1.3 and rows[1]["identical"] == "32/32" and rows[3]["identical"] == "8/8"
    assert B.engine_comparison({}) == [] and len(B.engine_comparison(bench, threads="2")) == 2
    # the adopted drafter (issue 41) is a third PyTorch row, from its own part of the entry
    bench["speculative_decoding"]["adopted"] = {"tokens_per_s": 21.0, "speedup_vs_plain_t0": 1.4, "tau_t0": 1.8,
                                                "lossless_t0_chain": "80/80"}
    rows = B.engine_comparison(bench)
    assert [r["tokens_per_s"] for r in rows] == [15.0, 19.5, 21.0, 40.0, 16.0]
    assert rows[2]["method"].endswith("adopted drafter") and rows[2]["speedup"] == 1.4 and rows[2]["tau"] == 1.8


def test_interleaving_alternates_the_order_prompt_by_prompt(monkeypatch):
    from activation_wave.engines import llamacpp

    calls = []

    def fake_complete(server, ids, max_new, **extra):
        assert not extra  # no per-request fields: this server build ignores speculative ones
        calls.append((server, ids[0]))
        return {"tokens": [ids[0]], "timings": {"predicted_n": 1, "predicted_ms": 1.0}}

    monkeypatch.setattr(llamacpp, "complete", fake_complete)
    res = B._interleaved({"plain": "P", "eagle3": "E"}, [("a", [1]), ("b", [2]), ("c", [3])], 8)
    assert calls == [("P", 1), ("E", 1), ("E", 2), ("P", 2), ("P", 3), ("E", 3)]
    assert [r["id"] for r in res["eagle3"]] == ["a", "b", "c"]


# ------------------------------------------------------------------ draft settings reach the server

# what llama-server 11434 logs at -lv 4 while it sets up an EAGLE-3 drafter (common/speculative.cpp)
SETTINGS_LOG = """
srv    load_model: loading draft model 'draft.gguf'
spec common_specu: adding speculative implementation 'draft-eagle3'
spec common_specu: - n_max={n_max}, n_min=0, p_min={p_min:f}, backend_sampling=1
srv          init: initializing, n_slots = 1
"""


def test_reported_settings_are_read_from_the_server_log():
    from activation_wave.engines.llamacpp import DraftSettings, check_draft_settings, reported_draft_settings

    log = SETTINGS_LOG.format(n_max=2, p_min=0.3)
    assert reported_draft_settings(log) == DraftSettings(n_max=2, p_min=0.3)
    assert reported_draft_settings("srv  init: no drafter") is None
    assert check_draft_settings(log, DraftSettings(2, 0.3)) == DraftSettings(2, 0.3)
    # the earlier sweep's failure: depth 1 requested, the server drafted with its defaults
    with pytest.raises(LlamaCppError, match="n_max=3, p_min=0, not the requested n_max=1"):
        check_draft_settings(SETTINGS_LOG.format(n_max=3, p_min=0.0), DraftSettings(n_max=1))
    with pytest.raises(LlamaCppError, match="p_min=0, not the requested n_max=4, p_min=0.6"):
        check_draft_settings(SETTINGS_LOG.format(n_max=4, p_min=0.0), DraftSettings(n_max=4, p_min=0.6))
    with pytest.raises(LlamaCppError, match="did not report its draft settings"):
        check_draft_settings("srv  init: no drafter", DraftSettings())


def test_settings_are_server_flags_never_request_fields(fake_llamacpp, tmp_path):
    from activation_wave.engines.llamacpp import DraftSettings, Server, complete

    srv = server_command(fake_llamacpp, tmp_path / "m.gguf", 8080, 1, draft=tmp_path / "d.gguf",
                         settings=DraftSettings(n_max=1, p_min=0.6))
    assert srv[srv.index("--spec-draft-n-max") + 1] == "1" and srv[srv.index("--spec-draft-p-min") + 1] == "0.6"
    default = server_command(fake_llamacpp, tmp_path / "m.gguf", 8080, 1, draft=tmp_path / "d.gguf")
    assert default[default.index("--spec-draft-p-min") + 1] == "0"  # explicit: its default changed upstream
    with pytest.raises(ValueError, match="ignores per-request speculative"):
        complete(Server("http://127.0.0.1:9", tmp_path / "log", None), [1], 4, **{"speculative.n_max": 1})
    with pytest.raises(ValueError, match="n_max >= 1"):
        DraftSettings(n_max=0)


# A stand-in for llama-server: answers /health and /completion, logs its draft settings as the
# real one does, drafts n_max tokens every round (none accepted) and logs llama.cpp's counters.
# IGNORE_FLAGS makes it behave like a build that drafts with its defaults whatever it is told.
FAKE_SERVER = textwrap.dedent('''
    import http.server, json, sys
    args = sys.argv[1:]
    opt = lambda name, default: args[args.index(name) + 1] if name in args else default
    ignore = IGNORE_FLAGS
    n_max = 3 if ignore else int(opt("--spec-draft-n-max", "3"))
    p_min = 0.0 if ignore else float(opt("--spec-draft-p-min", "0"))
    draft = "-md" in args
    print("argv:", *args, flush=True)
    if draft:
        print("spec common_specu: adding speculative implementation 'draft-eagle3'")
        print(f"spec common_specu: - n_max={n_max}, n_min=0, p_min={p_min:f}, backend_sampling=1", flush=True)
    calls = [0]

    JSON_HANDLER

    class H(JsonHandler):
        def do_POST(self):
            req = self.read_json()
            n = req["n_predict"]
            timings = {"predicted_n": n, "predicted_ms": 10.0 * n}
            if draft:
                calls[0] += n - 1
                timings.update(draft_n=(n - 1) * n_max, draft_n_accepted=0)
                print(f"spec print_stats: statistics     draft-eagle3: #calls(b,g,a) =    1 {calls[0]:6d} {calls[0]:6d}, "
                      f"#gen drafts = {calls[0]:6d}, #acc drafts =     0, #gen tokens = {calls[0] * n_max:6d}, "
                      f"#acc tokens =     0, dur(b,g,a) = 0.100, 1.000, 0.100 ms", flush=True)
            out = {"tokens": [req["prompt"][0]] * n, "timings": timings}
            if req.get("n_probs"):  # the top-2 log-probabilities, 1 nat apart except 0.05 at the last position
                out["completion_probabilities"] = [
                    {"id": 1, "top_logprobs": [{"id": 1, "logprob": -0.5}, {"id": 2, "logprob": -0.55 if i == n - 1 else -1.5}]}
                    for i in range(n)]
            self.send(out)

    http.server.HTTPServer(("127.0.0.1", int(opt("--port", "0"))), H).serve_forever()
''')


def _fake_server(root, ignore_flags):
    return install_fake_server(root, FAKE_SERVER.replace("IGNORE_FLAGS", str(ignore_flags)))


@pytest.mark.parametrize("ignore_flags", [False, True])
def test_a_setting_that_does_not_reach_the_server_stops_the_sweep(tmp_path, ignore_flags):
    from activation_wave.engines.llamacpp import DraftSettings

    lc = _fake_server(tmp_path / "lc", ignore_flags)
    prompts = [("a", [5, 6]), ("b", [7])]
    drafts = {"eagle3-f16": (tmp_path / "d.gguf", DraftSettings(n_max=1, p_min=0.3))}
    run = lambda: B.measure(lc, tmp_path / "t.gguf", tmp_path / "d.gguf", prompts, threads=1, max_new=6,  # noqa: E731
                            workdir=tmp_path / "w", drafts=drafts)
    if ignore_flags:
        with pytest.raises(LlamaCppError, match="n_max=3, p_min=0, not the requested n_max=1, p_min=0.3"):
            run()
        return
    r = run()["eagle3-f16"]
    assert r["server_settings"] == {"n_max": 1, "p_min": 0.3} and r["settings_checked"]
    assert r["drafted_per_round"] == 1.0 and r["round_costs"]["tau_max"] == 2
    row = B._row("eagle3-f16", r, outtype="f16")
    assert (row["depth"], row["p_min"]) == (1, 0.3)  # as the server reported them


def test_counters_that_contradict_the_depth_stop_the_sweep():
    from activation_wave.engines.llamacpp import DraftSettings

    # the earlier sweep at "depth 1": 2.92 drafted tokens per round
    stats = {"gen_drafts": 100, "gen_tokens": 292, "rate_pos": [0.4, 0.2, 0.1]}
    with pytest.raises(LlamaCppError, match="2.92 tokens per draft .* n_max = 1"):
        B.check_drafting("eagle3", DraftSettings(n_max=1), stats)
    B.check_drafting("eagle3", DraftSettings(n_max=3), stats)
    B.check_drafting("eagle3", DraftSettings(n_max=1), None)


def test_round_costs_say_which_speedups_the_depth_can_reach():
    plain, spec = B.summarize_timings(PLAIN), B.summarize_timings(SPEC)
    rc = B.round_costs(plain, spec, None, n_max=3)
    assert rc["tau_max"] == 4
    assert rc["reachable"] == {k: v <= 4 for k, v in rc["tau_needed"].items()}
    assert "tau_max" not in B.round_costs(plain, spec, None)
    # a draft server that never drafted (a high p_min) reports no draft_n: every round is one token
    idle = B.summarize_timings(PLAIN, draft=True)
    assert idle["draft_n"] == 0 and idle["tau"] == 1.0 and idle["rounds"] == 146 - 2


def test_patch_layer_inputs_adds_the_assignment_once(tmp_path):
    from activation_wave.engines.llamacpp import LlamaCppError, patch_layer_inputs

    graph = tmp_path / "src" / "models" / "qwen2.cpp"
    graph.parent.mkdir(parents=True)
    graph.write_text("    inpL = build_inp_embd(model.tok_embd);\n"
                     "    for (int il = 0; il < n_layer; ++il) {\n        ggml_tensor * inpSA = inpL;\n    }\n")
    assert patch_layer_inputs(tmp_path) == ["src/models/qwen2.cpp"]
    lines = graph.read_text().splitlines()
    assert lines[2].strip() == "res->t_layer_inp[il] = inpL;" and lines[3].strip() == "ggml_tensor * inpSA = inpL;"
    assert patch_layer_inputs(tmp_path) == []  # idempotent
    assert graph.read_text().count("t_layer_inp") == 1
    graph.write_text("for (int i = 0; i < n; ++i) {\n")
    with pytest.raises(LlamaCppError, match="expected one block loop"):
        patch_layer_inputs(tmp_path)


def test_a_model_free_method_runs_beside_eagle3_with_its_own_flags(tmp_path):
    from activation_wave.engines.llamacpp import DraftSettings

    lc = _fake_server(tmp_path / "lc", False)
    prompts = [("a", [5, 6]), ("b", [7]), ("c", [8])]
    r = B.measure(lc, tmp_path / "t.gguf", None, prompts, threads=1, max_new=6, workdir=tmp_path / "w",
                  drafts={"eagle3": (tmp_path / "d.gguf", DraftSettings())}, model_free={"ngram": B.NGRAM_FLAGS})
    assert r["ngram"]["server_flags"][:2] == ["--spec-type", "ngram-simple"]
    for name in ("ngram", "eagle3"):
        assert r[name]["identical_to_plain"] == 3 and r[name]["first_difference"] == {}
        lo, hi = r[name]["speedup_ci"]
        assert lo <= r[name]["speedup"] <= hi


def test_flags_reach_every_server_plain_included(tmp_path, capsys):
    from activation_wave.engines.llamacpp import DraftSettings

    lc = _fake_server(tmp_path / "lc", False)
    r = B.measure(lc, tmp_path / "t.gguf", None, [("a", [5, 6])], threads=1, max_new=4, workdir=tmp_path / "w",
                  drafts={"eagle3": (tmp_path / "d.gguf", DraftSettings())}, model_free={"ngram": B.NGRAM_FLAGS},
                  flags=("--no-repack",))
    logs = sorted((tmp_path / "w").glob("*.log"))
    assert len(logs) == 3 and all("--no-repack" in f.read_text() for f in logs)
    assert "[llama.cpp plain/eagle3/ngram, 1 thread(s) --no-repack] 1/1 prompt" in capsys.readouterr().err
    assert r["ngram"]["server_flags"][0] == "--no-repack" and r["eagle3"]["identical_to_plain"] == 1


def test_lossless_check_runs_default_flags_with_a_server_that_never_drafts(tmp_path):
    lc = _fake_server(tmp_path / "lc", False)
    chk = B.diagnose_lossless(lc, tmp_path / "t.gguf", tmp_path / "d.gguf", [("a", [5, 6]), ("b", [7])], threads=1,
                              max_new=4, workdir=tmp_path / "w")
    assert set(chk) == {"flags", "threads", "plain", "eagle3", "eagle3_never_drafts"}
    assert chk["eagle3"]["identical_to_plain"] == chk["eagle3_never_drafts"]["prompts"] == 2
    logs = {f.name: f.read_text() for f in (tmp_path / "w" / "default-flags").glob("*.log")}
    assert len(logs) == 3 and not any("--no-repack" in t for t in logs.values())
    assert any("--spec-draft-p-min 1" in t for t in logs.values())  # the server that never drafts


def test_pooled_speedup_interval_resamples_prompts_in_pairs():
    plain = [{"predicted_n": 10, "predicted_ms": 100.0}, {"predicted_n": 10, "predicted_ms": 200.0}]
    same = B.speedup_interval(plain, plain)
    assert same == (1.0, 1.0)  # every resample pairs a prompt with itself
    faster = [{"predicted_n": 10, "predicted_ms": 50.0}, {"predicted_n": 10, "predicted_ms": 200.0}]
    lo, hi = B.speedup_interval(plain, faster, n_boot=2000)
    assert 1.0 <= lo < hi <= 2.0  # between the two prompts' own ratios (2x and 1x)
    with pytest.raises(ValueError, match="paired timings needed"):
        B.speedup_interval(plain, faster[:1])


def test_first_difference_names_the_position():
    assert B.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert B.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert B.first_difference([1, 2], [1, 2, 3]) == 2


def test_tie_margins_read_plain_decodings_top_two_where_outputs_part(tmp_path):
    lc = _fake_server(tmp_path / "lc", False)
    prompts = [("a", [5, 6]), ("b", [7])]
    m = B.tie_margins(lc, tmp_path / "t.gguf", prompts, {"b": 3}, threads=1, workdir=tmp_path / "w")
    assert set(m) == {"b"} and m["b"]["position"] == 3 and m["b"]["margin_nats"] == pytest.approx(0.05)
    assert m["b"]["median_margin_before"] == pytest.approx(1.0) and (m["b"]["top1"], m["b"]["top2"]) == (1, 2)
    assert B.tie_margins(lc, tmp_path / "t.gguf", prompts, {}, threads=1, workdir=tmp_path / "w") == {}
