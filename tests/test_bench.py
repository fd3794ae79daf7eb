"""The benchmark runner: entries merge into one results file; helpers measure side by side."""

from __future__ import annotations

import json

import pytest

from activation_wave import bench


def test_side_by_side_returns_medians_of_interleaved_runs():
    calls = []
    a, b = bench.side_by_side(lambda: calls.append("m"), lambda: calls.append("b"), repeats=3)
    assert calls == ["b", "m"] * 3 and a >= 0 and b >= 0


def test_default_profile_entry_sums_the_study_timings(tmp_path, monkeypatch):
    path = tmp_path / "timings.json"
    with pytest.raises(FileNotFoundError, match="wave study --profile default"):
        bench.bench_default_profile(path)
    path.write_text(json.dumps({"notebooks": {"00": 30.0, "06": 3570.0}, "last_run": {"seconds": 12.0}}))
    monkeypatch.setattr(bench, "REPO_ROOT", tmp_path)  # the entry names its source relative to the repo
    e = bench.bench_default_profile(path)
    assert e["figure"] == 3600.0 and e["minutes"] == 60.0 and e["source"] == "timings.json"


def test_run_benchmarks_merges_entries(tmp_path, monkeypatch):
    out = tmp_path / "b.json"
    out.write_text(json.dumps({"kept": {"figure": 1}}))
    monkeypatch.setattr(bench, "_entries", lambda: {"fast": lambda: {"figure": 2.0, "ratio": 1.5},
                                                    "skipped": lambda: 1 / 0})
    doc = bench.run_benchmarks(out, only=["fast"])
    saved = json.loads(out.read_text())
    assert saved["kept"] == {"figure": 1} and saved["fast"]["ratio"] == 1.5 == doc["fast"]["ratio"]
    assert "peak_rss_mib" in saved["fast"] and "wall_s" in saved["fast"] and "machine" in saved


def test_rotated_medians_runs_every_callable_each_round_in_rotated_order():
    calls = []
    t = bench.rotated_medians({k: (lambda k=k: calls.append(k)) for k in "abc"}, repeats=3)
    assert calls == list("abc") + list("bca") + list("cab") and set(t) == set("abc")


def test_benchmark_drafter_config_adds_sampled_data_only():
    """The benchmark's drafter data: the profile's config plus sampled responses per train
    prompt, and nothing else changed (so the greedy responses and chapter 6 stay shared)."""
    import dataclasses

    from activation_wave.config import load_config
    from benchmarks.bench_decoding import DATA_OVERRIDES, bench_config

    plain = load_config("smoke")
    cfg = bench_config("smoke")
    assert cfg.data.samples_per_prompt == DATA_OVERRIDES["samples_per_prompt"] > 0
    assert dataclasses.replace(cfg, data=plain.data) == plain
    assert bench_config("smoke", 0) == plain


def test_bench_help_names_every_benchmark(capsys):
    from activation_wave.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in bench._entries()), text
