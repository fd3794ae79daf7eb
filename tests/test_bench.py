"""The benchmark runner: entries merge into one results file; settings come from the profile."""

from __future__ import annotations

import dataclasses
import json

import pytest

from activation_wave.benchmarks import PeakRSS
from activation_wave.benchmarks import suite as runner
from activation_wave.benchmarks import pipeline_cost as pipeline
from activation_wave.core.config import load_config
from activation_wave.decode.timing import rotated_medians


def test_default_profile_entry_sums_the_study_timings(tmp_path, monkeypatch):
    path = tmp_path / "timings.json"
    with pytest.raises(FileNotFoundError, match="wave study --profile default"):
        pipeline.bench_default_profile(None, path)
    path.write_text(json.dumps({"notebooks": {"00": 30.0, "06": 1770.0}, "last_run": {"seconds": 12.0},
                                "longest": {"06": {"seconds": 3570.0, "finished": "x"}}}))
    monkeypatch.setattr(pipeline, "REPO_ROOT", tmp_path)  # the entry names its source relative to the repo
    e = pipeline.bench_default_profile(None, path)
    # the fresh-clone figure sums each notebook's longest run (as the benchmark details page does) ...
    assert e["figure"] == 3600.0 and e["minutes"] == 60.0 and e["source"] == "timings.json"
    assert "longest" in e["unit"] and e["per_notebook_s"] == {"00": 30.0, "06": 3570.0}
    # ... and the last runs are a second, labelled sum
    assert e["last_runs_minutes"] == 30.0 and "last execution" in e["last_runs_unit"]


def test_benchmarks_record_cache_keys_not_machine_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    drafter = tmp_path / "cache" / "capture" / "m-1" / "drafters" / "L2-15-27-abc"
    monkeypatch.setattr(runner, "entries", lambda: {"spec": lambda cfg: {"drafter": str(drafter),
                                                                         "points": [{"drafter": str(drafter)}]}})
    out = tmp_path / "b.json"
    runner.run_benchmarks(load_config("smoke"), out)
    saved = json.loads(out.read_text())
    assert saved["spec"]["drafter"] == saved["spec"]["points"][0]["drafter"] == "capture/m-1/drafters/L2-15-27-abc"
    assert str(tmp_path) not in out.read_text()


def test_run_benchmarks_merges_entries_and_passes_the_config(tmp_path, monkeypatch):
    out = tmp_path / "b.json"
    out.write_text(json.dumps({"kept": {"figure": 1}}))
    seen = []
    monkeypatch.setattr(runner, "entries", lambda: {"fast": lambda cfg: seen.append(cfg) or {"figure": 2.0, "ratio": 1.5},
                                                    "skipped": lambda cfg: 1 / 0})
    cfg = load_config("smoke", {"bench.rounds": 3})
    doc = runner.run_benchmarks(cfg, out, only=["fast"])
    saved = json.loads(out.read_text())
    assert saved["kept"] == {"figure": 1} and saved["fast"]["ratio"] == 1.5 == doc["fast"]["ratio"]
    assert "peak_rss_mib" in saved["fast"] and "wall_s" in saved["fast"] and "machine" in saved
    assert saved["fast"]["machine"] == saved["machine"] and "bf16_units" in saved["fast"]["machine"]
    assert "machine" not in saved["kept"]  # an entry not run keeps what it had
    assert seen == [cfg] and seen[0].bench.rounds == 3
    with pytest.raises(ValueError, match="unknown benchmark.*'nope'"):
        runner.run_benchmarks(cfg, out, only=["nope"])


def test_peak_rss_sees_an_allocation():
    with PeakRSS(interval=0.001) as mem:
        block = bytearray(64 * 2**20)
        block[::4096] = b"x" * len(block[::4096])
    assert mem.peak - mem.start >= 32 and mem.start > 0


def test_rotated_medians_runs_every_callable_each_round_in_rotated_order():
    calls = []
    t = rotated_medians({k: (lambda k=k: calls.append(k)) for k in "abc"}, repeats=3)
    assert calls == list("abc") + list("bca") + list("cab") and set(t) == set("abc")
    calls.clear()
    rotated_medians({k: (lambda k=k: calls.append(k)) for k in "ab"}, repeats=2, rotate=False)
    assert calls == list("abab")


def test_benchmark_drafter_config_adds_sampled_data_only():
    """The benchmark's drafter data: the profile's config plus sampled responses per train
    prompt, and nothing else changed (so the greedy responses and chapter 6 stay shared)."""
    from activation_wave.benchmarks.speedup import bench_config

    plain = load_config("smoke")
    cfg = bench_config("smoke")
    assert cfg.data.samples_per_prompt == plain.bench.samples_per_prompt > 0
    assert dataclasses.replace(cfg, data=plain.data) == plain
    assert bench_config("smoke", 0) == plain
    assert bench_config("smoke", 2, {"draft.lr": 0.01}).draft.lr == 0.01


def test_benchmark_drafter_keeps_its_cache_key():
    """The default profile's benchmark drafter and decoding settings are those the committed
    benchmarks.json was measured with (its drafter must not be retrained after the move)."""
    from activation_wave.benchmarks.speedup import bench_draft, bench_spec

    cfg = load_config("default")
    before = dataclasses.replace(cfg.draft, threads=1, epochs=10, ttt_steps=3, batch_tokens=2048)
    assert bench_draft(cfg) == before
    assert bench_spec(cfg) == dataclasses.replace(cfg.spec, threads=1, depth=3, draft_threshold=0.15,
                                                  max_new_tokens=96)
    assert load_config("default").bench.samples_per_prompt == 6
    # training may use more cores than the one-core timing: only the drafter's threads change
    more = load_config("default", {"bench.train_threads": 2})
    assert bench_draft(more) == dataclasses.replace(before, threads=2) and bench_spec(more) == bench_spec(cfg)


def test_overrides_round_trip_a_config():
    from activation_wave.benchmarks.speedup import _overrides

    cfg = load_config("smoke", {"bench.rounds": 5, "spec.depth": 2})
    assert _overrides(cfg) == {"bench.rounds": 5, "spec.depth": 2}
    assert load_config("smoke", _overrides(cfg)) == cfg


def test_bench_help_names_every_benchmark(capsys):
    from activation_wave.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in runner.entries()), text
    assert "--profile" in text and "--set" in text


def _fake_comparison(walls):
    """An online comparison of 3 prompts (2 HumanEval, 1 team) over len(walls) rounds: every method
    makes 10 tokens per prompt; ``walls[r][method]`` is its seconds per prompt in round r."""
    from activation_wave.decode.comparison import OnlineComparison
    from activation_wave.decode.rounds import merge_results, summarise

    ids = ["HumanEval/1", "HumanEval/2", "team-1"]

    def result(method, wall):
        per = [{"id": p, "token_ids": list(range(10)), "wall_s": wall, "rounds": 5, "drafted": [3] * 5,
                "accepted": [1] * 5} for p in ids]
        kind = "eagle3-chain" if method.startswith(("spec", "adopted")) else "plain-hf"
        return summarise(kind, 0.0, 3, per, [0, 5, 0, 0], [5, 5, 5], [5, 0, 0])

    per_round = tuple({m: result(m, w) for m, w in r.items()} for r in walls)
    pooled = {m: merge_results([r[m] for r in per_round]) for m in walls[0]}
    return OnlineComparison(tuple(ids), pooled, per_round), {p: p.split("/")[0].lower().split("-")[0] for p in ids}


def test_decoding_figures_report_every_round_its_spread_and_distinct_prompts():
    from activation_wave.benchmarks.speedup import _comparison_figures

    methods = ("plain_t0", "plain_t1", "prompt_lookup_t0", "spec_chain_t0", "spec_chain_t1")
    chain = [1.0 / 1.2, 1.0 / 1.3, 1.0 / 1.25, 1.0 / 1.35, 1.0 / 1.15]  # speedups 1.2 .. 1.35 over plain
    walls = [{m: (c if m.startswith("spec") else 1.0) for m in methods} for c in chain]
    cmp, source = _fake_comparison(walls)
    out = _comparison_figures(cmp, source)
    assert out["rounds"] == 5 and [round(r["speedup_vs_plain_t0"], 3) for r in out["by_round"]] == [1.2, 1.3, 1.25,
                                                                                                   1.35, 1.15]
    sp = out["round_spread"]["speedup_vs_plain_t0"]
    assert (round(sp["min"], 3), round(sp["max"], 3), sp["n"]) == (1.15, 1.35, 5)
    assert round(sp["lo"], 3) == 1.152 and round(sp["hi"], 3) == 1.348  # Student t, 4 degrees of freedom
    # prompts are counted once; their runs once per round
    assert out["by_source"]["humaneval"]["prompts"] == 2 and out["by_source"]["humaneval"]["prompt_runs"] == 10
    assert out["by_source"]["team"]["prompts"] == 1 and out["lossless_t0_chain"].startswith("15/15 prompt runs (5 rounds)")


def test_speed_entries_keep_every_prompt_run_with_its_identity_and_timing():
    from activation_wave.benchmarks.speedup import _prompt_rows, per_prompt_runs

    methods = ("plain_t0", "prompt_lookup_t0", "spec_chain_t0", "spec_chain_t1")
    cmp, _ = _fake_comparison([{m: 0.5 if m.startswith("spec") else 1.0 for m in methods}] * 2)
    cmp.per_round[1]["spec_chain_t0"].per_prompt[2]["token_ids"] = [7] * 10  # one run parts from plain
    rows = per_prompt_runs(cmp)
    assert [(r["round"], r["id"]) for r in rows][:4] == [(0, "HumanEval/1"), (0, "HumanEval/2"), (0, "team-1"),
                                                          (1, "HumanEval/1")]
    assert rows[0]["spec_chain_t0"] == {"tokens": 10, "wall_s": 0.5, "rounds": 5, "identical_to_plain": True}
    assert rows[5]["spec_chain_t0"]["identical_to_plain"] is False and rows[2]["spec_chain_t0"]["identical_to_plain"]
    assert "identical_to_plain" not in rows[0]["plain_t0"] and "identical_to_plain" not in rows[0]["spec_chain_t1"]
    # the precision entry checks each run against the plain run it names (its own precision; bf16 plain vs fp32)
    precision = {m: cmp.per_round[0][src] for m, src in (("plain_fp32", "plain_t0"), ("spec_chain_fp32", "spec_chain_t0"),
                                                         ("plain_bf16", "prompt_lookup_t0"),
                                                         ("spec_chain_bf16", "spec_chain_t1"))}
    refs = {"spec_chain_fp32": "plain_fp32", "spec_chain_bf16": "plain_bf16", "plain_bf16": "plain_fp32"}
    rows = _prompt_rows(precision, ["team-1"], refs.get)
    assert rows == [{"id": "team-1", **{m: {"tokens": 10, "wall_s": 0.5 if "spec" in m else 1.0, "rounds": 5}
                                        | ({"identical_to_plain": True} if m in refs else {}) for m in precision}}]


def test_the_adopted_drafter_is_measured_against_plain_and_the_recipe_drafter_in_the_same_rounds():
    from activation_wave.benchmarks.speedup import adopted_figures

    methods = ("plain_t0", "plain_t1", "prompt_lookup_t0", "spec_chain_t0", "adopted_chain_t0")
    walls = [{m: {"spec_chain_t0": 1 / 1.1, "adopted_chain_t0": c}.get(m, 1.0) for m in methods}
             for c in (1 / 1.3, 1 / 1.4, 1 / 1.35)]
    cmp, _ = _fake_comparison(walls)
    costs = {"step_ms": 10.0, "verify_ms": {"1": 10.0, "2": 11.0, "3": 12.0, "4": 13.0}, "draft_step_ms": 1.0}
    out = adopted_figures(cmp, costs, depth=3)
    assert [round(r["speedup_vs_plain"], 3) for r in out["by_round"]] == [1.3, 1.4, 1.35]
    assert abs(out["speedup_vs_recipe_drafter_t0"] - 1.35 / 1.1) < 0.01  # pooled over the same runs
    assert out["round_spread"]["speedup_vs_recipe_drafter"]["n"] == 3
    assert out["lossless_t0_chain"].startswith("9/9 prompt runs (3 rounds)")
    assert out["tau_t0"] == cmp.pooled["adopted_chain_t0"].tau and len(out["acceptance_by_position"]) == 3
    assert out["cost_model"]["predicted_chain_t0"]["break_even_tau"] == 1.6  # (13 + 3 x 1) / 10
    # the cost page's values read the entry the run writes (the adopted drafter's online tau, its break-even)
    from activation_wave.study.chapters.performance import pytorch_values

    v = pytorch_values({"per_prompt": [], "tau_t0": 1.8, "spec": {"depth": 3}, "cost_model": out["cost_model"],
                        "adopted": out, "speedup_vs_plain_t0": 1.2,
                        "tokens_per_s": {"plain_t0": 20.0, "spec_chain_t0": 24.0}})
    assert v["pta_tau"] == out["tau_t0"] and v["pt_break_even"] == pytest.approx(1.5)


def test_plain_bench_skips_the_opt_in_recipe_study(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "entries", lambda: {"fast": lambda cfg: ran.append("fast") or {},
                                                    "recipe": lambda cfg: ran.append("recipe") or {}})
    runner.run_benchmarks(load_config("smoke"), tmp_path / "b.json")
    assert ran == ["fast"]
    runner.run_benchmarks(load_config("smoke"), tmp_path / "b.json", only=["recipe"])
    assert ran == ["fast", "recipe"]


def test_training_precision_trains_each_dtype_it_reports(tiny_tokenizer, tmp_path, monkeypatch):
    """The benchmark alternates fp32 and bf16 training; each reported speed comes from a drafter
    trained in that precision (a test fails if the dtype setting never reaches training)."""
    from helpers import greedy_world, permutation_target

    from activation_wave.benchmarks import speedup
    from activation_wave.draft import training
    from activation_wave.study import steps

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    target = permutation_target(tiny_tokenizer, n_layers=8)
    responses, cache = greedy_world(target, tmp_path / "cap", n=12, max_new=12, eval_every=4)
    monkeypatch.setattr(speedup, "run_capture", lambda c, progress=True: steps.Captured(
        cfg=c, target=target, responses=responses, cache=cache, responses_path=tmp_path / "r.jsonl"))
    seen, real = [], training.train_drafter

    def spy(target, cache, layers, c, out, **k):
        seen.append((c.dtype, c.records_fraction, c.epochs))
        return real(target, cache, layers, c, out, **k)

    monkeypatch.setattr(training, "train_drafter", spy)
    cfg = dataclasses.replace(load_config("smoke"), draft=dataclasses.replace(load_config("smoke").draft,
                                                                                 draft_vocab=64, threads=1))
    out = speedup.run_training_precision(cfg, fraction=0.5, rounds=2, avx2_only=False, progress=False)
    assert [d for d, _, _ in seen] == ["fp32", "bf16", "fp32", "bf16"]
    assert {(f, e) for _, f, e in seen} == {(0.5, 1)}
    native = out["native"]
    assert len(native["tokens_per_s"]["fp32"]) == len(native["tokens_per_s"]["bf16"]) == 2
    assert out["ratio"] == pytest.approx(out["figure"] / out["baseline"]) and native["loss_positions"] > 0
    assert {"cpu", "bf16_units"} <= set(out) and "avx2_only" not in out


def test_training_precision_runs_the_avx2_case_in_a_child_limited_to_avx2(monkeypatch):
    import subprocess

    from activation_wave.benchmarks import speedup

    native = {"median": {"fp32": 300.0, "bf16": 700.0}, "ratio_fp32_over_bf16": 300 / 700}
    monkeypatch.setattr(speedup, "precision_speeds", lambda cfg, fraction, rounds: native)
    calls = []

    def fake_run(cmd, env, **kw):
        calls.append((cmd, env))
        return subprocess.CompletedProcess(cmd, 0, stdout='noise\n{"ratio_fp32_over_bf16": 20.0}\n', stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    out = speedup.run_training_precision(load_config("smoke"), fraction=0.1, rounds=1, progress=False)
    (cmd, env), = calls
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert json.loads(cmd[-1])["fraction"] == 0.1 and json.loads(cmd[-1])["profile"] == "smoke"
    assert out["avx2_only"] == {"ratio_fp32_over_bf16": 20.0} and out["ratio"] == pytest.approx(300 / 700)
