"""``wave bench`` says how long a benchmark should take before it starts: its recorded run, plus
the drafters (and their capture) a fresh clone trains first."""

from __future__ import annotations

import json

import pytest

from activation_wave import cli
from activation_wave.benchmarks import suite


def entry(drafters: dict[str, float], wall_s: float = 814.5) -> dict:
    """A recorded entry like the vllm one: its drafters under layer_sets, each with its training."""
    return {"wall_s": wall_s, "measured": "2026-12-06T06:32:26", "machine": {"cpu": "Xeon", "cpus": 2},
            "layer_sets": {name: {"drafter": key, "training": {"train_wall_s": s}}
                           for name, (key, s) in zip(("default", "rule"), drafters.items())}}


TIMINGS = {"longest": {suite.CAPTURE_NOTEBOOK: {"seconds": 993.3}}}


def test_a_fresh_clone_adds_the_drafters_and_the_capture(tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path))
    doc = {"vllm": entry({"capture/c1/drafters/a": 2667.0, "capture/c1/drafters/b": 2658.0})}
    e = suite.expected_duration("vllm", doc, TIMINGS)
    assert e["seconds"] == pytest.approx(814.5 + 2667 + 2658 + 993.3)
    assert e["drafters_to_train"] == ["capture/c1/drafters/a", "capture/c1/drafters/b"]
    text = suite.expected_text(e)
    assert text.startswith("[bench] vllm: expected about 1 h 59 min here: its recorded run 14 min (2026-12-06, Xeon")
    assert "2 drafters to train first (1 h 29 min as recorded) and the capture (17 min" in text
    (tmp_path / "capture" / "c1" / "drafters" / "a").mkdir(parents=True)  # one trained, the capture there
    e = suite.expected_duration("vllm", doc, TIMINGS)
    assert e["seconds"] == pytest.approx(814.5 + 2658) and e["parts"]["capture"] == 0
    (tmp_path / "capture" / "c1" / "drafters" / "b").mkdir()
    e = suite.expected_duration("vllm", doc, TIMINGS)
    assert e["seconds"] == 814.5 and suite.expected_text(e).endswith("its drafters already in the cache")


def test_no_record_no_estimate_and_entries_without_drafters():
    assert suite.expected_text(suite.expected_duration("vllm", {}, TIMINGS)) == "[bench] vllm: no recorded run, so no estimate"
    e = suite.expected_duration("metrics", {"metrics": {"wall_s": 48.9, "measured": "2026-11-30T05:54:24"}}, TIMINGS)
    assert suite.expected_text(e) == "[bench] metrics: expected about 1 min here: its recorded run 1 min (2026-11-30)"


def test_wave_bench_estimate_prints_and_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "benchmarks.json"
    out.write_text(json.dumps({"vllm": entry({"capture/c1/drafters/a": 2667.0})}))
    monkeypatch.setattr(suite, "run_benchmarks", lambda *a, **k: pytest.fail("--estimate ran a benchmark"))
    assert cli.main(["bench", "--only", "vllm", "--estimate", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("[bench] vllm: expected about ") and "1 drafter to train first (44 min as recorded)" in line


def test_the_estimate_is_printed_before_the_benchmark_starts(tmp_path, monkeypatch, capsys):
    from activation_wave.core.config import load_config

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "benchmarks.json"
    out.write_text(json.dumps({"metrics": {"wall_s": 48.9, "measured": "2026-11-30T05:54:24"}}))
    monkeypatch.setattr(suite, "entries", lambda: {"metrics": lambda cfg: print("RUNNING") or {"figure": 1}})
    suite.run_benchmarks(load_config("smoke", {}), out=out, only=["metrics"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[bench] metrics: expected about 1 min here: its recorded run 1 min (2026-11-30)"
    assert lines.index("RUNNING") > 0


def test_wave_bench_without_estimate_runs(tmp_path, monkeypatch):
    import activation_wave.benchmarks as B

    ran = []
    monkeypatch.setattr(B, "run_benchmarks", lambda cfg, out, only: ran.append(only))
    assert cli.main(["bench", "--only", "metrics", "--out", str(tmp_path / "b.json")]) == 0
    assert ran == [["metrics"]]
