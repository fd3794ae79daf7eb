"""The data-scale design: the pre-registered drafters in the pre-registered order, with the
right data prefixes and token budgets, and an analysis that finds an effect it is given."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest

from activation_wave.benchmarks import data_scale as ds
from activation_wave.core.config import DraftConfig
from activation_wave.core.paths import REPO_ROOT
from activation_wave.draft.experiment import drafter_dir
from activation_wave.study.chapters import drafter_data_scale as analysis

LAYERS = {"eagle3-default": (2, 15, 27), "random-0": (16, 19, 24), "combined": (7, 27, 29), "last-k": (28, 29, 30),
          "cka-diverse": (7, 18, 29)}
BASE = DraftConfig(epochs=10, seed=0, draft_vocab=4096, ttt_steps=3, lr=0.003, batch_tokens=2048, eval_every=1)


def test_design_is_the_pre_registered_one():
    jobs = ds.design(BASE, 324, 4860, 72_705, LAYERS)
    points = [(j.set, j.point, j.config.seed) for j in jobs]
    assert points == [("eagle3-default", "16x@B2", 0), ("random-0", "16x@B2", 0), ("combined", "16x@B2", 0),
                      ("last-k", "16x@B2", 0), ("eagle3-default", "4x@B1", 0), ("eagle3-default", "16x@B1", 0),
                      ("eagle3-default", "16x@B2", 1), ("random-0", "16x@B2", 1), ("combined", "16x@B2", 1),
                      ("last-k", "16x@B2", 1), ("eagle3-default", "16x@B4", 0)]
    by = {(j.set, j.point, j.config.seed): j.config for j in jobs}
    assert by[("eagle3-default", "4x@B1", 0)].train_records == 1296
    assert by[("last-k", "16x@B2", 1)].train_records == 5184
    assert by[("eagle3-default", "16x@B1", 0)].max_tokens == 727_050
    assert by[("eagle3-default", "16x@B4", 0)].max_tokens == 4 * 727_050
    # the recipe is the base's otherwise
    c = by[("combined", "16x@B2", 0)]
    assert dataclasses.replace(c, train_records=0, max_tokens=0, eval_every=1) == BASE
    assert len({drafter_dir_key(j) for j in jobs}) == len(jobs)


def drafter_dir_key(job):
    class Cache:  # drafter_dir only needs the cache's path
        path = REPO_ROOT
    return drafter_dir(Cache(), job.layers, job.config).name


def test_design_refuses_what_the_data_cannot_fill():
    with pytest.raises(ValueError, match="16x needs 5184 train prompts, the data has 1324"):
        ds.design(BASE, 324, 1000, 72_705, LAYERS)
    with pytest.raises(ValueError, match="run the drafters page first"):
        ds.design(BASE, 324, 4860, 72_705, {"eagle3-default": (2, 15, 27)})


def test_pre_registration_commit_precedes_every_use_and_holds_the_page():
    commit = ds.PRE_REGISTRATION["commit"]
    shown = subprocess.run(["git", "show", "--stat", "--format=%H", commit], cwd=REPO_ROOT, capture_output=True,
                           text=True)
    if shown.returncode != 0:
        pytest.skip("not a git checkout with history")
    assert shown.stdout.startswith(commit) and "book/data_scale_preregistration.md" in shown.stdout


def test_prefix_records_keeps_order_and_refuses_eval():
    from activation_wave.models.prompts import Response

    r = [Response(id=f"r{i}", prompt_ids=[1], response_ids=[2], finish="eos", text="") for i in range(3)]
    assert [x.id for x in ds.prefix_records(r[:1], r[1:])] == ["r0", "r1", "r2"]
    with pytest.raises(ValueError, match="train-split records only"):
        ds.prefix_records(r, [dataclasses.replace(r[0], split="eval")])


def _log(tokens: int, wall: float) -> dict:
    return {"tokens_trained": tokens, "train_wall_s": wall, "threads": 1, "n_tokens": tokens, "epochs": [{}]}


def test_analysis_finds_a_planted_set_effect_and_the_curve():
    rng = np.random.default_rng(0)
    base = 1.5 + 0.3 * rng.standard_normal(96)
    noise = lambda: 0.02 * rng.standard_normal(96)  # noqa: E731
    taus = {analysis.label("eagle3-default", "1x", "B1"): np.stack([base + noise() for _ in range(3)]),
            analysis.label("eagle3-default", "16x", "B1"): (base + 0.10 + noise())[None],
            analysis.label("eagle3-default", "16x", "B2"): np.stack([base + 0.2 + noise() for _ in range(2)]),
            analysis.label("last-k", "16x", "B2"): np.stack([base + 0.1 + noise() for _ in range(2)]),
            analysis.label("combined", "16x", "B2"): np.stack([base + 0.2 + noise() for _ in range(2)])}
    logs = {k: [_log(727_050 * (2 if "B2" in k else 1), 900.0 * (2 if "B2" in k else 1))] for k in taus}
    ids = [f"p{i}" for i in range(96)]
    doc = analysis.analyse(ids, taus, logs, LAYERS, strength=None, n_base=324, n_corpus=4860, base_tokens=72_705,
                           n_boot=2000, n_boot_seeds=2000)
    rows = {r["set"]: r for r in doc["sets"]}
    assert rows["last-k"]["verdict"] == "lower" and rows["last-k"]["hi"] < 0
    assert rows["combined"]["verdict"] == "within noise"
    sens = {r["set"]: r for r in doc["seed_sensitivity"]}  # seeds resampled too: a labelled sensitivity analysis
    assert set(sens) == {"last-k", "combined"} and sens["last-k"]["registered_verdict"] == "lower"
    assert sens["last-k"]["lo"] <= rows["last-k"]["lo"]
    v = analysis.page_values(doc)  # the page's values: H7's counts and the seeds each figure rests on
    from activation_wave.study import findings

    F = findings.from_hypotheses(analysis.hypotheses(doc), findings.registry()[1])  # H7's words: its record's
    h7 = F.counts("H7")
    assert (v["scale_n_sets"], h7["n"], h7["not_supported"], h7["within_noise"], h7["supported"]) == (2, 2, 1, 1, 0)
    assert F.top("H7") == "H7/combined" and F[F.top("H7")].word == "within noise"
    assert not any(k.startswith("scale_best") for k in v)  # the closest set is the record's, not the page's
    assert v["scale_d1_word"] == "higher" and v["scale_sens_n"] == len(doc["seed_sensitivity"])
    assert 0 < rows["combined"]["mde"] < 0.05
    assert [p["label"] for p in doc["points"]] == ["eagle3-default@1x@B1", "eagle3-default@16x@B1",
                                                   "eagle3-default@16x@B2"]
    assert doc["points"][1]["n_prompts"] == 5184 and doc["points"][2]["cpu_s"] == 1800.0
    assert doc["d1"]["lo"] > 0 and doc["d1"]["n_seeds"] == [1, 3]
    assert doc["target"]["reached"] is False and doc["target"]["best"]["label"] == "eagle3-default@16x@B2"
    entry = analysis.bench_entry(doc)
    assert {"label", "n_prompts", "n_positions", "cpu_s", "tau", "lo", "hi"} <= set(entry["points"][0])
    assert {"delta", "lo", "hi", "p_holm", "n_seeds"} <= set(entry["sets"][0])


def test_the_projection_recovers_a_planted_slope_and_says_what_the_target_takes():
    """Three budgets on a line of +0.1 tau per doubling of CPU-minutes (a little noise): the fit
    finds the slope inside its interval, and tau 2.0 from 1.6 at 40 minutes takes 4 doublings."""
    pts = [{"label": f"eagle3-default@16x@B{k}", "cpu_s": 600.0 * k, "tau": 1.4 + 0.1 * np.log2(k) + e}
           for k, e in ((1, 0.004), (2, -0.008), (4, 0.004))]
    p = analysis.projection(pts, 2.0)
    assert p["fit"]["b_lo"] < 0.1 < p["fit"]["b_hi"] and p["fit"]["n"] == 3
    assert p["from"] == "eagle3-default@16x@B4" and p["from_cpu_min"] == 40.0
    assert 40 * 2 ** 3.5 < p["cpu_min"] < 40 * 2 ** 4.5 and p["cpu_min_lo"] < p["cpu_min"] < p["cpu_min_hi"]
    assert analysis.projection(pts[:2]) is None
    flat = [dict(q, tau=1.5 + (0.01 if i == 1 else 0)) for i, q in enumerate(pts)]  # no gain: no budget reaches 2.0
    assert analysis.projection(flat, 2.0)["cpu_min"] is None


def test_h7_hypotheses_follow_the_verdicts():
    doc = {"h7_point": "16x@B2", "sets": [
        {"set": "a", "verdict": "lower", "delta": -0.05, "lo": -0.07, "hi": -0.03, "p_holm": 0.001, "n": 96, "n_seeds": 2},
        {"set": "b", "verdict": "higher", "delta": 0.05, "lo": 0.03, "hi": 0.07, "p_holm": 0.001, "n": 96, "n_seeds": 2},
        {"set": "c", "verdict": "close to the line", "delta": 0.02, "lo": 0.0, "hi": 0.04, "p_holm": 0.05, "n": 96,
         "n_seeds": 2}]}
    assert [h.supported for h in analysis.hypotheses(doc)] == [True, False, None]
    assert analysis.hypotheses(None) == []


def test_the_h7_point_becomes_the_strength_pages_third_budget():
    """data_scale's document -> strength_budget -> the strength page's analysis: a corpus budget
    with its own deltas, H5's corpus - top interaction (a planted gain is found, a steady set is
    not) and chapter 8's third-budget hypotheses."""
    from activation_wave.study.chapters import drafter_strength as st

    rng = np.random.default_rng(1)
    ids = [f"p{i}" for i in range(96)]
    base = 1.4 + 0.3 * rng.random(96)
    noise = lambda k: 0.01 * rng.standard_normal((k, 96))  # noqa: E731
    at = {"eagle3-default": base + 0.4, "last-k": base + 0.36, "combined": base + 0.46}
    taus = {analysis.label(n, "16x", "B2"): v + noise(2) for n, v in at.items()}
    logs = {k: [_log(1_454_100, 1800.0)] * 2 for k in taus}
    doc = analysis.analyse(ids, taus, logs, LAYERS, strength=None, n_base=324, n_corpus=4860, base_tokens=72_705,
                           n_boot=2000, n_boot_seeds=2000)
    corpus, cpu = analysis.strength_budget(doc, ids)
    assert set(corpus) == set(at) and corpus["combined"].shape == (2, 96) and cpu == 1800.0
    assert analysis.strength_budget(doc, ids[::-1]) == ({}, None)  # other prompts: no third budget
    top = {"eagle3-default": base + 0.2 + noise(3), "last-k": base + 0.16 + noise(3), "combined": base + 0.2 + noise(3)}
    bottom = {"eagle3-default": base, "last-k": base - 0.04, "combined": base}
    sdoc = st.analyse({"bottom": bottom, "top": top, st.CORPUS: corpus}, LAYERS, [], n_boot=2000, n_boot_seeds=500)
    assert [b["name"] for b in sdoc["budgets"]] == ["bottom", "top", st.CORPUS]
    inter = {r["set"]: r for r in sdoc["interaction_corpus"]}
    assert abs(inter["combined"]["delta"] - 0.06) < 0.01 and st.verdict(inter["combined"]) == "higher"
    assert st.verdict(inter["last-k"]) == "within noise"
    assert any(r["comparison"] == st.H5_CORPUS for r in sdoc["seed_sensitivity"])
    names = [h.name for h in st.hypotheses(sdoc)]
    assert "H5, third budget (combined)" in names and "H5, third budget (last-k)" in names
    v = st.page_values(sdoc, None, None, None)
    from activation_wave.study import findings

    F = findings.from_hypotheses(st.hypotheses(sdoc), findings.registry()[1])
    assert (F.counts("H5c")["n"], F.counts("H5c")["supported"]) == (2, 1) and not np.isnan(v["strength_corpus_tau"])
    assert st.interaction_corpus_rows(sdoc)[0]["set"] == "last-k"


def test_the_page_shows_no_tau_before_the_design_has_run():
    v = analysis.page_values(None)
    assert v["scale_ran"] == "not measured" and v["scale_n_sets"] == 0
    assert all(np.isnan(v[k]) for k in ("scale_top_tau", "scale_mde", "scale_d1_delta", "scale_spread_16x_mid"))


def test_the_seed_spreads_are_named_by_the_drafters_they_come_from():
    doc = {"points": [{"n_prompts": 5184, "tokens_per_s": 800.0}], "h7_point": "16x@B2", "drafters": {
        "eagle3-default@1x@B1": {"per_seed": [[1.50, 1.52], [1.51, 1.52], [1.52, 1.53]]},
        "eagle3-default@16x@B2": {"per_seed": [[1.44, 1.46], [1.47, 1.49]]}}}
    v = analysis.page_values(doc)
    assert abs(v["scale_spread_1x"] - 0.015) < 1e-9 and abs(v["scale_spread_16x_mid"] - 0.03) < 1e-9


def test_the_benchmark_adopts_the_default_triples_strongest_single_drafter():
    from activation_wave.benchmarks.data_scale import strongest_label
    from activation_wave.core.config import ConfigError, load_config

    doc = {"drafters": {
        "eagle3-default@16x@B2": {"per_seed": [[1.9, 2.1, None], [2.3, 2.3, 2.2]]},
        "eagle3-default@16x@B4": {"per_seed": [[2.2, 2.2, 2.2]]},
        "last-k@16x@B2": {"per_seed": [[3.0, 3.0, 3.0]]},  # another set: never the benchmark's drafter
        "eagle3-default@1x@B1": {"per_seed": [[1.5, 1.5, 1.5], [1.4, 1.6, 1.5]]}}}
    lab, k, tau = strongest_label(doc)
    assert (lab, k) == ("eagle3-default@16x@B2", 1) and abs(tau - 2.2667) < 1e-3  # a None prompt is skipped, not 0
    with pytest.raises(ValueError, match="no default-triple drafter"):
        strongest_label({"drafters": {"last-k@16x@B2": {"per_seed": [[3.0]]}}})
    assert load_config("default", {"bench.drafter": "data_scale"}).bench.drafter == "data_scale"
    with pytest.raises(ConfigError, match="bench.drafter"):
        load_config("default", {"bench.drafter": "best"})


def test_the_adopted_drafter_is_found_by_its_recorded_key_whatever_the_draft_settings(tmp_path, monkeypatch):
    """The decoding benchmark runs with its own drafter's settings (bf16, 2 training threads);
    the design's drafter must still be the one scored, found by the key its results record."""
    import json

    from activation_wave.core.config import load_config
    from activation_wave.study import steps

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path))
    key = "capture/m-1/drafters/L2-15-27-abc"
    (tmp_path / key).mkdir(parents=True)
    (tmp_path / key / "train_log.json").write_text(json.dumps({"n_records": 7, "config": {"seed": 3}}))
    doc = {"drafters": {"eagle3-default@16x@B4": {"per_seed": [[1.6, 1.5]], "keys": [key]},
                        "eagle3-default@1x@B1": {"per_seed": [[1.5, 1.5]], "keys": ["capture/m-0/drafters/x"]}}}
    monkeypatch.setattr(steps, "load_results", lambda name, cfg: doc)
    monkeypatch.setattr(ds, "profile_capture", lambda cfg, progress: 1 / 0)  # weights here: no capture opened
    cfg = load_config("default", {"draft.dtype": "bf16", "bench.train_threads": 2, "bench.drafter": "data_scale"})
    path, log, choice = ds.strongest(cfg, progress=False)
    assert path == str(tmp_path / key) and log == {"n_records": 7, "config": {"seed": 3}}
    assert choice == {"label": "eagle3-default@16x@B4", "seed_index": 0, "seed": 3, "tau": 1.55, "key": key}
    del doc["drafters"]["eagle3-default@16x@B4"]["keys"]
    with pytest.raises(ValueError, match="wave study --only 06b"):
        ds.strongest(cfg, progress=False)


def test_the_decoding_benchmark_refuses_an_adopted_drafter_it_is_not_given():
    from activation_wave.benchmarks import speedup
    from activation_wave.core.config import load_config

    assert speedup._adopted_drafter(load_config("smoke"), False, None) is None  # recipe: nothing adopted
    with pytest.raises(ValueError, match="bench.drafter=data_scale"):
        speedup._adopted_drafter(load_config("smoke", {"bench.drafter": "data_scale"}), False, None)
    picked = speedup._adopted_drafter(load_config("smoke", {"bench.drafter": "data_scale"}), False,
                                      lambda cfg, progress: ("/x", {"n_records": 3}, {"label": "a", "seed": 1}))
    assert picked == ("/x", {"n_records": 3}, {"benchmark": "data_scale", "label": "a", "seed": 1})
