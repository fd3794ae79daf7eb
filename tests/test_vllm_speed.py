"""The ``vllm`` benchmark's figures and checks, with a fake engine and canned answers (no vLLM):
settings that do not reach an engine stop the run, vLLM's counters give tau, the cost terms
add up, and the book's row reads the entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from activation_wave.benchmarks import vllm_speed as B
from activation_wave.engines import vllm as V

N_TOKENS = 20


class FakeEngine:
    """Answers as vLLM's worker does. A depth-d EAGLE-3 engine accepts ``accept`` drafts per
    round (the last round fewer), plain takes 10 ms a token, a round 12 + 2 d ms, a verify of
    1 + d tokens 8 + d ms of it and the draft 2 d ms. ``lie`` reports depth 3 whatever was asked;
    ``ignore_depth`` drafts 3 tokens a round whatever was asked."""

    lie = False
    ignore_depth = False
    accept = 1
    started: list = []

    def __init__(self, settings, log):
        self.settings = settings
        self.log = log
        self.counts = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_pos": [0] * (3 if self.ignore_depth else settings.depth)}
        FakeEngine.started.append(settings)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        pass

    def reported(self):
        s = self.settings
        spec = None
        if s.method:
            layers = json.loads((Path(s.draft) / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] \
                if s.method == "eagle3" else None
            spec = {"method": s.method, "model": s.draft, "num_speculative_tokens": 3 if self.lie else s.depth,
                    "prompt_lookup_min": s.ngram[0] if s.method == "ngram" else None,
                    "prompt_lookup_max": s.ngram[1] if s.method == "ngram" else None,
                    "synthetic": s.synthetic, "aux_layers": layers}
        return {"vllm": "0.32.0", "threads": s.threads, "speculative": spec}

    def counters(self):
        return json.loads(json.dumps(self.counts))

    def generate(self, prompt_ids, max_tokens, *, stop_token_ids=(), logprobs=None):
        s = self.settings
        n = min(max_tokens, N_TOKENS)
        tokens = [(sum(prompt_ids) + i) % 97 for i in range(n)]
        if s.method == "ngram" and prompt_ids[0] == 7:
            tokens[5] += 1  # one prompt parts from plain
        if logprobs:
            return {"tokens": tokens, "decode_s": 0.01 * (n - 1), "spec": None, "timers": {},
                    "top_logprobs": [[[t, -0.1], [t + 1, -0.3]] for t in tokens]}
        if s.method is None:
            return {"tokens": tokens, "decode_s": 0.010 * (n - 1), "spec": None,
                    "timers": {"target": {str(len(prompt_ids)): {"calls": 1, "ms": 30.0}, "1": {"calls": n - 1, "ms": 8.0 * (n - 1)}},
                               "draft": {"calls": 0, "ms": 0.0}}}
        d = 3 if self.ignore_depth else s.depth
        acc = d if s.synthetic else min(self.accept, d)
        hist = [0] * (d + 1)
        left, rounds, accepted = n - 1, 0, 0
        while left > 0:
            a = min(acc, left - 1)
            hist[a] += 1
            rounds += 1
            accepted += a
            left -= a + 1
        self.counts["drafts"] += rounds
        self.counts["draft_tokens"] += d * rounds
        self.counts["accepted_tokens"] += accepted
        for j in range(d):
            self.counts["accepted_per_pos"][j] += sum(hist[j + 1:])
        return {"tokens": tokens, "decode_s": (12 + 2 * d) / 1000 * rounds,
                "spec": {"histogram": hist, "num_draft_tokens": d * rounds},
                "timers": {"target": {str(len(prompt_ids)): {"calls": 1, "ms": 30.0},
                                      str(d + 1): {"calls": rounds, "ms": (8 + d) * rounds}},
                           "draft": {"calls": rounds + 1, "ms": 2.0 * d * (rounds + 1)}}}


@pytest.fixture()
def drafts(tmp_path):
    out = {}
    for name, layers in (("default", [2, 15, 27]), ("rule", [7, 27, 29])):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": layers}))
        out[name] = str(d)
    return out


@pytest.fixture(autouse=True)
def fresh_fake():
    FakeEngine.lie = FakeEngine.ignore_depth = False
    FakeEngine.accept = 1
    FakeEngine.started = []
    yield


PROMPTS = [("a", [7, 1, 2]), ("b", [3, 4, 5, 6]), ("c", [9, 9])]


def run_fake(drafts, tmp_path, threads=1):
    settings = B.engine_settings("target", drafts, threads)
    return B.measure(settings, PROMPTS, max_new=N_TOKENS, stop=[2], workdir=tmp_path, engine_cls=FakeEngine,
                     progress=False)


def test_measure_reads_tau_speedups_and_costs_from_the_engines(drafts, tmp_path):
    r = run_fake(drafts, tmp_path)
    assert r["phases"] == [["eagle3_d3", "rule_d3"], ["eagle3_d1", "eagle3_d2", "ngram_d3"]]
    assert sum(1 for s in FakeEngine.started if s.method) == 5  # each engine once, plain once for both phases
    # plain: 19 tokens after the first, 10 ms each
    assert r["plain"]["tokens_per_s"] == 100.0 and len(r["plain_by_phase"]) == 2
    d1, d3 = r["eagle3_d1"], r["eagle3_d3"]
    # 19 tokens after the first: 9 rounds accept one draft, the last accepts none (10 rounds)
    assert d3["tau"] == 1.9 and d3["drafted_per_round"] == 3 and d3["acceptance_by_position"] == [0.9, 0.0, 0.0]
    assert d1["tau"] == 1.9 and d1["acceptance_by_position"] == [0.9]
    # depth 3: 10 rounds of 18 ms for 19 tokens; plain 190 ms
    assert d3["speedup"] == round(190 / 180, 3) and d3["ci"][0] - 1e-3 <= d3["speedup"] <= d3["ci"][1] + 1e-3
    rc = d3["round_costs"]
    assert rc["plain_step_ms"] == 10.0 and rc["forward_1_ms"] == 8.0 and rc["verify_ms"] == 11.0
    assert rc["verify_cost"] == round(11 / 8, 3) and rc["round_ms"] == 18.0 and rc["round_in_plain_steps"] == 1.8
    assert rc["draft_ms_per_round"] == 6.0 and rc["rest_ms_per_round"] == 1.0
    assert rc["tau_needed"] == {"1x": 1.8, "1.5x": 2.7} and rc["tau_max"] == 4 and rc["ceiling"] == round(4 / 1.8, 3)
    assert r["ngram_d3"]["identical_to_plain"] == 2 and r["ngram_d3"]["first_difference"] == {"a": 5}
    m = r["ngram_d3"]["first_difference_margins"]["a"]
    assert m["position"] == 5 and m["margin_nats"] == 0.2
    assert r["eagle3_d3"]["identical_to_plain"] == 3
    row = r["per_prompt"][0]
    assert row["id"] == "a" and row["ngram_d3"]["identical_to_plain"] is False and "plain_1" in row and "plain_2" in row
    assert row["eagle3_d3"]["tau"] == 1.9


def test_a_setting_that_does_not_reach_the_engine_stops_the_run(drafts, tmp_path):
    FakeEngine.lie = True  # reports depth 3 for every engine
    with pytest.raises(V.VllmError, match="num_speculative_tokens 3, not 1"):
        run_fake(drafts, tmp_path)
    FakeEngine.lie = False
    FakeEngine.ignore_depth = True  # reports the depth but drafts 3 a round: the counters catch it
    with pytest.raises(RuntimeError, match="num_speculative_tokens=1 did not reach the engine"):
        run_fake(drafts, tmp_path)


def test_counter_checks():
    ans = [{"tokens": [1, 2], "spec": {"histogram": [1, 1], "num_draft_tokens": 2}}]
    ok = {"drafts": 2, "draft_tokens": 2, "accepted_tokens": 1, "accepted_per_pos": [1]}
    B.check_counters("e", 1, "eagle3", ok, ans)
    with pytest.raises(RuntimeError, match="disagree"):
        B.check_counters("e", 1, "eagle3", {**ok, "accepted_tokens": 2}, ans)
    with pytest.raises(RuntimeError, match="no draft"):
        B.check_counters("e", 1, "eagle3", {**ok, "drafts": 0}, ans)
    with pytest.raises(RuntimeError, match="plain engine drafted"):
        B.check_counters("p", 3, None, ok, ans)
    assert B.acceptance(ok)["tau"] == 1.5 and B.acceptance({**ok, "drafts": 0})["tau"] is None


def test_verdict_needs_accepted_drafts_and_reads_the_named_depth():
    entry = {"by_threads": {"1": {"eagle3_d3": {"tau": 1.0, "speedup": 1.2, "ci": [1.1, 1.3]}},
                            "2": {"eagle3_d1": {"tau": 1.5, "speedup": 1.3, "ci": [1.1, 1.5]},
                                  "eagle3_d3": {"tau": 1.6, "speedup": 1.05, "ci": [0.98, 1.1]}}}}
    v = B.verdict(entry)
    assert v["1"]["word"] == "no verdict"
    # depth 3, named before the run: not the best depth picked afterwards
    assert v["2"] == {"word": "within noise", "depth": 3, "speedup": 1.05, "ci": [0.98, 1.1], "tau": 1.6}
    assert B.verdict(entry, depth=1)["2"]["word"] == "faster"


def test_run_writes_an_entry_without_machine_paths(drafts, tmp_path, monkeypatch):
    """``run`` end to end with the fake: the entry's keys, and no absolute path of this machine."""
    from types import SimpleNamespace

    from activation_wave.core.results import without_cache_root

    monkeypatch.setattr(V, "Engine", FakeEngine)
    monkeypatch.setattr(V, "find_vllm", lambda: V.Vllm(tmp_path / "vllm"))
    monkeypatch.setattr(V, "write_target_dir", lambda target, out: Path("target"))
    def export(src, out, force=False):  # the real export writes into the run's work folder
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text((Path(src) / "config.json").read_text())
        return out

    monkeypatch.setattr(V, "export_vllm", export)
    monkeypatch.setattr(B, "held_out_prompts", lambda target, profile, n: PROMPTS[:n])
    monkeypatch.setattr(B, "rule_set", lambda cfg: {"rule": "combined", "layers": [7, 27, 29], "chapter6_tau": 1.38})
    import activation_wave.benchmarks.llamacpp_speed as L

    monkeypatch.setattr(L, "drafter_layers", lambda d: [2, 15, 27] if "default" in str(d) else [7, 27, 29])
    target = SimpleNamespace(n_layers=30, tokenizer=SimpleNamespace(eos_token_id=2), slug="t", fingerprint="f")
    import activation_wave.study.steps as S

    monkeypatch.setattr(S, "get_target", lambda cfg: target)
    cfg = SimpleNamespace(model="smollm2-135m", profile="default")
    e = B.run(cfg, drafter=drafts["default"], rule_drafter=drafts["rule"], n_prompts=3, max_new_tokens=N_TOKENS,
              threads=(1, 2), workdir=tmp_path / "work", progress=False)
    assert set(e["speedup"]) == {"1", "2"} and set(e["speedup"]["1"]) == {"1", "2", "3"}
    sp = e["speedup"]["2"]["3"]
    assert sp["ci"][0] - 1e-3 <= sp["speedup"] <= sp["ci"][1] + 1e-3
    assert e["tau"]["1"]["3"] == 1.9 and e["identical_to_plain"]["1"]["ngram_d3"] == "2/3"
    assert e["ngram"]["1"]["sizes"] == [2, 5] and e["layer_sets"]["rule"]["layers"] == [7, 27, 29]
    assert e["layer_sets"]["by_threads"]["1"]["rule_vs_default"]["speedup"] == 1.0
    assert e["cost_terms"]["2"]["3"]["round_in_plain_steps"] == 1.8
    assert e["ceiling"]["1"]["3"] == {"tau_max": 4, "speedup": round(4 / 1.8, 3), "round_in_plain_steps": 1.8}
    assert "cpu_triton_utils.py" in e["ceiling_how"]
    assert e["vllm"] == "0.32.0" and e["verdict"]["1"]["word"] in ("faster", "slower", "within noise")
    assert e["by_threads"]["1"]["per_prompt"][0]["id"] == "a"
    for key in ("drafter",):  # drafter folders: paths under the cache root become keys; nothing else absolute
        e["layer_sets"]["default"][key] = e["layer_sets"]["rule"][key] = "x"
    assert B.portable({"a": [str(tmp_path / "w" / "x")]}, tmp_path / "w") == {"a": ["<work>/x"]}
    text = json.dumps(without_cache_root(e))
    assert str(tmp_path) not in text and "/root/" not in text


def test_cost_model_row_for_the_book():
    bench = {"vllm": {"vllm": "0.32.0", "speedup": {"1": {"1": {}, "3": {}}},
                      "by_threads": {"1": {"eagle3_d3": {"tau": 1.7, "speedup": 0.9, "ci": [0.8, 1.0],
                                                         "identical_to_plain": 7, "prompts": 8,
                                                         "round_costs": {"plain_step_ms": 10.0, "verify_cost": 1.4,
                                                                         "draft_ms_per_round": 6.0, "round_ms": 19.0,
                                                                         "round_in_plain_steps": 1.9,
                                                                         "ceiling": 2.105}}}}}}
    row = B.cost_model_row(bench, "1")
    assert row == {"path": "vLLM 0.32.0 (CPU), 1 thread(s)", "depth": 3, "tau": 1.7, "plain_step_ms": 10.0,
                   "verify_cost": 1.4, "draft_ms": 6.0, "round_ms": 19.0, "round_in_plain_steps": 1.9,
                   "ceiling": 2.105, "speedup": 0.9,
                   "speedup_lo": 0.8, "speedup_hi": 1.0, "identical": "7/8"}
    assert B.cost_model_row({}, "1") is None and B.cost_model_row(bench, "2") is None


def test_cost_model_rows_put_the_three_paths_side_by_side():
    """On the committed results file: one row per path present, the same fields in each, and the
    ceiling computed one way for all ((depth + 1) / round in plain steps)."""
    from activation_wave.core.results import load_benchmarks

    bench = load_benchmarks()
    rows = B.cost_model_rows(bench, "1")
    paths = [r["path"].split(",")[0] for r in rows]
    want = [p for p, key in (("study loop (PyTorch)", "speculative_decoding"), ("llama.cpp", "llamacpp"),
                             (f"vLLM {V.VERSION} (CPU)", "vllm")) if key in bench]
    assert paths == want and len({tuple(sorted(r)) for r in rows}) == 1 and all("cpu" in r for r in rows)
    for r in rows:
        assert r["ceiling"] == pytest.approx((r["depth"] + 1) / r["round_in_plain_steps"], abs=2e-3)
        assert r["speedup_lo"] is None or r["speedup_lo"] <= r["speedup"] + 1e-3 <= r["speedup_hi"] + 2e-3
    assert B.cost_model_rows({}, "1") == []


def test_the_large_target_runs_one_speculative_engine_at_a_time_beside_plain(drafts, tmp_path, monkeypatch):
    """``run_large`` (issue 64) with the fake: the 1.5B target's engines decode one speculative
    engine at a time beside plain (two fp32 1.5B engines fit in memory, five would not), every
    depth and n-gram measured, and the drafter must read the target's default triple."""
    from types import SimpleNamespace

    monkeypatch.setattr(V, "Engine", FakeEngine)
    monkeypatch.setattr(V, "find_vllm", lambda: V.Vllm(tmp_path / "vllm"))
    monkeypatch.setattr(V, "write_target_dir", lambda target, out: Path("target"))
    monkeypatch.setattr(V, "export_vllm", lambda src, out, force=False: Path(src))
    monkeypatch.setattr(B, "held_out_prompts", lambda target, profile, n: (PROMPTS * 4)[:n])
    target = SimpleNamespace(n_layers=28, tokenizer=SimpleNamespace(eos_token_id=2), slug="q", fingerprint="f")
    import activation_wave.study.steps as S

    monkeypatch.setattr(S, "get_target", lambda cfg: target)
    alive, most, released = [0], [0], []
    monkeypatch.setattr(S, "release_targets", lambda: released.append(alive[0]))

    class Counted(FakeEngine):
        def __init__(self, settings, log):
            assert released, "the parent's target was not released before an engine started"
            super().__init__(settings, log)
            alive[0] += 1
            most[0] = max(most[0], alive[0])

        def stop(self):
            alive[0] -= 1

    monkeypatch.setattr(V, "Engine", Counted)
    d = tmp_path / "qwen-drafter"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": [2, 14, 25]}))
    import activation_wave.benchmarks.llamacpp_speed as L

    monkeypatch.setattr(L, "drafter_layers", lambda p: json.loads((Path(p) / "config.json").read_text())[
        "eagle_aux_hidden_state_layer_ids"])
    from activation_wave.core.config import load_config

    cfg = load_config("default")
    e = B.run_large(cfg, drafter=d, n_prompts=3, max_new_tokens=N_TOKENS, threads=(1, 2), workdir=tmp_path / "w",
                    progress=False)
    assert e["prompt_ids"] == ["a", "b", "c"]  # the first 3 of the llamacpp_1.5b entry's 12
    assert most[0] == 2 and alive[0] == 0
    assert e["by_threads"]["2"]["phases"] == [["eagle3_d3"], ["eagle3_d2"], ["eagle3_d1"], ["ngram_d3"]]
    assert e["model"] == cfg.third.model and set(e["tau"]["1"]) == {"1", "2", "3"} and e["ngram"]["2"]["tau"]
    assert e["figure"] == e["speedup"]["2"]["3"]["speedup"] and B.LARGE == "vllm_1.5b"
    (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": [2, 15, 27]}))
    (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": [2, 14, 25]}))
    with pytest.raises(ValueError, match="n_prompts 13 is not 1 to 12"):
        B.run_large(cfg, drafter=d, n_prompts=13, threads=(1,), workdir=tmp_path / "w3", progress=False)
    (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": [2, 15, 27]}))
    with pytest.raises(ValueError, match="not the default triple"):
        B.run_large(cfg, drafter=d, n_prompts=3, threads=(1,), workdir=tmp_path / "w2", progress=False)


def test_the_large_targets_rounds_stand_side_by_side_per_engine():
    """The cost page's 1.5B rows: llama.cpp's (its corpus drafter) and vLLM's, the same fields,
    each naming its CPU; an engine without an entry gives no row."""
    lc_rc = {"plain_step_ms": 37.0, "verify_in_plain_steps": 3.5, "round_in_plain_steps": 3.83}
    bench = {"llamacpp_1.5b": {"machine": {"cpu": "AMD EPYC"}, "large": {"by_threads": {"2": {
        "eagle3_corpus": {"round_costs": lc_rc, "tau": 1.38, "speedup": 0.36, "speedup_ci": [0.33, 0.41],
                          "tokens_per_s": 9.8}, "plain": {"tokens_per_s": 27.0},
        "ngram": {"tau": 1.94, "speedup": 1.47}}}}}}
    rows = B.large_rows(bench, "2")
    assert len(rows) == 1 and rows[0]["round_in_plain_steps"] == 3.83 and rows[0]["ngram_tau"] == 1.94
    bench[B.LARGE] = {"vllm": "0.32.0", "dtype": "float32", "machine": {"cpu": "AMD EPYC"}, "by_threads": {"2": {
        "eagle3_d3": {"round_costs": {"plain_step_ms": 300.0, "verify_in_plain_steps": 1.2, "round_in_plain_steps": 1.5},
                      "tau": 1.4, "speedup": 0.93, "ci": [0.88, 0.98], "tokens_per_s": 2.1}, "plain": {"tokens_per_s": 2.3},
        "ngram_d3": {"tau": 1.6, "speedup": 1.1}}}}
    rows = B.large_rows(bench, "2")
    assert [r["path"][:4] for r in rows] == ["llam", "vLLM"] and rows[1]["verify_in_plain_steps"] == 1.2
    assert [(r["plain_tokens_per_s"], r["tokens_per_s"]) for r in rows] == [(27.0, 9.8), (2.3, 2.1)]
    assert rows[1].keys() == rows[0].keys() and rows[1]["cpu"] == "AMD EPYC" and B.large_rows(bench, "1") == []
    assert [(r["engine"], r["threads"]) for r in rows] == [("llama.cpp", 2), ("vLLM 0.32.0 (CPU)", 2)]
    bench[B.LARGE] |= {"prompt_ids": ["a", "b"], "max_new_tokens": 48, "identical_to_plain": {"2": {"eagle3_d3": "2/2"}}}
    v = B.large_values(bench, "2")
    assert (v["vbig_round"], v["lbig_round"], v["vbig_n"], v["vbig_identical"]) == (1.5, 3.83, 2, "2/2")
    assert v["vbig_vs_llama"] == pytest.approx(2.1 / 27.0) and v["vbig_cpus"] == "AMD EPYC"
    # each row names its drafter as the registry does, so the glance page's list says what it is
    from activation_wave.study import findings

    named = set(yaml.safe_load(findings.REGISTRY.read_text())["drafters"])
    assert {r["drafter"] for r in rows} <= named
