"""What chapters 6, 7, 8 and the landing page say about "the best": always chapter 6's
pre-registered outcome, with intervals, read from the results files (issue 28, items 1-3, 7).

Most tests read the committed default-profile results (a re-execution may move the numbers,
so they check relations, not values); the seed-spread tests build per-seed tau by hand.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.study.chapters import eagle3_speedup as ch6
from activation_wave.core.config import load_config
from activation_wave.core.results import from_jsonable
from activation_wave.core.stats import mean_ci

ROOT = Path(__file__).resolve().parents[1] / "data" / "results" / "default" / "smollm2-135m"


def _load(name, cls):
    return from_jsonable(cls, json.loads((ROOT / f"{name}.json").read_text()))


@pytest.fixture(scope="module")
def pred():
    """The committed paired analysis."""
    return _load("06_predictors", dp.DrafterPredictors)


@pytest.fixture(scope="module")
def six():
    return _load("06_eagle3_speedup", ch6.Eagle3SpeedupResult)


def _with_seeds(pred, spread):
    """``pred`` with two seeds per single layer that has two, ``spread`` apart on every prompt."""
    sets = []
    for s in pred.sets:
        if len(s.layers) == 1 and len(s.seeds) == 2:
            y = np.array([np.nan if v is None else v for v in s.per_prompt], float)
            rows = (tuple(y - spread / 2), tuple(y + spread / 2))
            s = dataclasses.replace(s, per_seed=rows)
        sets.append(s)
    return dataclasses.replace(pred, sets=tuple(sets))


def test_outcome_rows_rank_on_the_outcome_with_intervals_and_paired_deltas(pred):
    rows = dp.outcome_rows(pred, 3)
    by = {s.set: s for s in pred.sets}
    assert [r.tau for r in rows] == sorted((r.tau for r in rows), reverse=True)
    assert all(r.tau == by[r.set].tau and r.lo <= r.tau <= r.hi for r in rows)
    assert all(not r.set.endswith("+norm") and len(r.layers) == 3 for r in rows)
    assert (rows[0].tau, rows[0].lo, rows[0].hi) == pytest.approx(mean_ci(by[rows[0].set].per_prompt))
    cmp = {c.set: c for c in pred.comparisons}
    for r in rows:
        if r.set == pred.reference:
            assert r.delta is None and not dp.is_within_noise(r)
            continue
        c = cmp[r.set]
        assert (r.delta, r.delta_lo, r.delta_hi, r.n) == (c.delta, c.lo, c.hi, c.n)
        assert r.p_holm == (c.p_holm_rules if c.family == "rules" else c.p_holm_all)
        assert r.family == ("rules" if c.family == "rules" else "all")


def test_the_ranking_names_the_outcome_top_and_when_a_comparison_is_within_noise(pred):
    top = dp.outcome_rows(pred, 3)[0]
    v = dp.ranking_values(pred, 3)
    assert (v["rank_top"], v["rank_top_layers"], v["rank_top_tau"]) == (top.set, str(list(top.layers)), top.tau)
    if top.set != pred.reference:
        assert (v["rank_vs"], v["rank_vs_delta"], v["rank_vs_lo"], v["rank_vs_hi"]) == (
            top.set, top.delta, top.delta_lo, top.delta_hi)
    # a top set whose interval excludes 0 but whose Holm p does not clear 0.05 is within noise
    row = dp.OutcomeRow("random-0", (16, 19, 24), 2, 1.32, 1.28, 1.36, 0.006, 0.0002, 0.012, 0.13, 96, "all")
    assert dp.is_within_noise(row)
    assert not dp.is_within_noise(dataclasses.replace(row, p_holm=0.001))
    assert dp.is_within_noise(dataclasses.replace(row, p_holm=0.001, delta_lo=-0.001))


def test_old_results_have_no_seed_spread_and_the_peak_text_says_so(pred):
    """Results written before per-seed tau was recorded load with ``per_seed`` None."""
    old = json.loads((ROOT / "06_predictors.json").read_text())
    for s in old["sets"]:
        s.pop("per_seed", None)
    pred = from_jsonable(dp.DrafterPredictors, old)
    assert all(s.per_seed is None for s in pred.sets)
    assert dp.seed_spread(pred) == dp.SeedSpread(0, None, None, ())
    peak = dp.single_layer_peak(pred)
    singles = dp.outcome_rows(pred, 1)
    assert peak.layer == singles[0].layers[0] and peak.tau == singles[0].tau and peak.n_layers == len(singles)
    # without a seed spread, "close" means within the peak's own interval over prompts
    assert all(peak.tau - tau <= peak.tau - peak.lo for _, tau in peak.close)
    v = dp.peak_values(peak)  # no seed spread recorded: the page's spread is NaN, not a number
    assert v["peak_spread_n"] == 0 and np.isnan(v["peak_spread"]) and v["peak_layer"] == peak.layer
    assert dp.single_layer_seeds(pred) == {}


def test_seed_spread_from_per_seed_tau_decides_whether_neighbouring_layers_differ(pred):
    wide = _with_seeds(pred, 0.05)
    sp = dp.seed_spread(wide)
    assert sp.n_sets == sum(1 for s in pred.sets if len(s.layers) == 1 and len(s.seeds) == 2)
    assert sp.mean == pytest.approx(0.05) and sp.largest == pytest.approx(0.05)
    peak = dp.single_layer_peak(wide)
    singles = dp.outcome_rows(pred, 1)
    assert [layer for layer, _ in peak.close] == [r.layers[0] for r in singles[1:] if singles[0].tau - r.tau <= 0.05]
    v = dp.peak_values(peak)
    assert v["peak_n_close"] == len(peak.close) > 0 and v["peak_spread"] == pytest.approx(0.05)
    assert v["peak_gap"] <= v["peak_spread"]  # neighbouring layers lie within the seed spread: not distinguishable
    seeds = dp.single_layer_seeds(wide)
    assert set(seeds) == {s.layers[0] for s in pred.sets if len(s.layers) == 1 and len(s.seeds) == 2}
    assert all(len(v) == 2 and v[1] - v[0] == pytest.approx(0.05) for v in seeds.values())
    # seeds that agree to 1e-6: every other layer is further below the peak than that
    tight = dp.peak_values(dp.single_layer_peak(_with_seeds(pred, 1e-6)))
    assert tight["peak_n_close"] == 0 and tight["peak_close"] == "none" and np.isnan(tight["peak_gap"])


def test_the_sweep_and_the_score_panels_follow_the_outcome(pred):
    rows = dp.sweep_rows(pred)
    assert [r.layers[0] for r in rows] == sorted(r.layers[0] for r in rows)
    tri = dp.outcome_rows(pred, 3)
    panels = dp.score_panels(pred, tri)
    assert list(panels) == list(dp.SCORE_LABELS.values())
    assert panels[dp.SCORE_LABELS["renyi2"]] == [pred.scores[r.set]["renyi2"] for r in tri]


def test_predictor_values_carry_interval_and_n(pred):
    s2 = next(p for p in pred.predictors if p.name == "renyi2" and p.units == "triples")
    v = dp.predictor_values(s2, "h2")
    assert (v["h2_rho"], v["h2_lo"], v["h2_hi"], v["h2_n"]) == (s2.rho, s2.lo, s2.hi, s2.n)
    assert (v["h2_word"] == "within noise") == (s2.lo <= 0 <= s2.hi)
    assert dp.predictor_values(None, "h2")["h2_word"] == "not testable"


def test_tau_definitions_go_from_the_training_time_evaluation_to_the_outcome(pred, six):
    cfg = load_config("default")
    rows = ch6.tau_definitions(six, pred, cfg)
    by = {s.set: s for s in pred.sets}["eagle3-default"]
    assert [r["value"] for r in rows] == pytest.approx([
        np.mean([r.tau for r in six.runs if r.set == "eagle3-default"]), by.tau_pooled,
        next(r.offline_all for r in six.reconciliation if r.set == "eagle3-default"), by.tau])
    assert rows[0]["value"] == pytest.approx(six.default.tau)  # the training-time tau the summary holds
    assert rows[0]["draft threshold"] == "none" and rows[1]["draft threshold"] == f"{pred.draft_threshold:g}"
    assert rows[0]["depth"] == cfg.draft.ttt_steps and rows[1]["depth"] == pred.depth


def test_chapter_8_ranks_on_the_outcome_and_gives_the_depth_split_an_interval(pred):
    from activation_wave.study.chapters import results_summary as ch8

    R = ch8.load_chapters(load_config("default"))
    rows = ch8.selection_rows(R)
    taus = [r["tau (outcome)"] for r in rows if r["tau (outcome)"] is not None]
    assert taus == sorted(taus, reverse=True) and "drafter tau" not in rows[0]
    out = {r.set: r for r in dp.outcome_rows(pred)}
    for r in rows:
        if r["tau (outcome)"] is not None:
            assert r["tau (outcome)"] == out[r["set"]].tau and r["delta tau vs default"] == out[r["set"]].delta
    d = ch8.depth_split(pred, R.data.info.n_layers, n_boot=500)
    assert d.n_late + d.n_early == len(dp.outcome_rows(pred, 3)) and d.n_prompts == len(pred.prompt_ids)
    assert d.delta == pytest.approx(d.tau_late - d.tau_early) and d.lo < d.delta < d.hi


def test_the_landing_page_reads_chapter_6s_registered_comparisons_and_ranks_on_the_outcome(pred):
    from activation_wave.study.chapters import landing

    from activation_wave.study import findings

    k, R = landing.run(load_config("default"))
    F = findings.load(load_config("default"))
    rules = [c for c in pred.comparisons if c.family == "rules" and c.p_holm_rules is not None]
    best = max(rules, key=lambda c: c.delta)
    h1 = F["H1"]
    assert (h1.compared, h1.value, h1.lo, h1.hi, h1.p, h1.n) == (best.set, best.delta, best.lo, best.hi,
                                                                 best.p_holm_rules, best.n)
    s2 = next(p for p in pred.predictors if p.name == "renyi2" and p.units == "triples")
    h2 = F["H2"]
    assert (h2.value, h2.lo, h2.hi, h2.n, k.n_triples) == (s2.rho, s2.lo, s2.hi, s2.n, s2.n)
    assert findings.headline(F)["scale"] == f"H7/{best.set}"  # the 16x row is the best rule's, as labelled
    assert [r.set for r in landing.ranked_triples(R)] == [r.set for r in dp.outcome_rows(pred, 3)]


def test_the_second_models_page_shows_its_triples_from_one_function():
    from activation_wave.plots._style import set_label
    from activation_wave.study.chapters import cross_drafters as cd

    xd = _load("07_cross_drafters", cd.CrossDrafterResult)
    f = cd.triples_frame(xd)
    assert list(f.columns) == ["model", "set", "layers", "seeds", "tau", "95% interval", "prompts with an accepted draft"]
    assert list(f["set"]) == [set_label(s.set) for s in xd.sets if len(s.layers) > 1]
    v = cd.page_values(xd, 2)
    c = xd.comparison
    assert v["xd_delta_word"] == ("within noise" if c.p >= 0.05 else "higher" if c.delta > 0 else "lower")
