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
    path.write_text(json.dumps({"notebooks": {"00": 30.0, "06": 3570.0}, "last_run": {"seconds": 12.0}}))
    monkeypatch.setattr(pipeline, "REPO_ROOT", tmp_path)  # the entry names its source relative to the repo
    e = pipeline.bench_default_profile(None, path)
    assert e["figure"] == 3600.0 and e["minutes"] == 60.0 and e["source"] == "timings.json"


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
