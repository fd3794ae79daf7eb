"""The chapters' analysis as library functions: the layer-convention helpers they share,
the one closed form of S_2, and each chapter's ``run`` on a tiny captured model, with
its result object written and read back by class."""

from __future__ import annotations

import json

import numpy as np
import pytest

from activation_wave.study.chapters import (cka_compartments, concat_entropy, data_and_capture, landing, layer_entropy,
                                      layer_selection, results_summary, token_filtering)
from activation_wave.study.chapters.cross_model import CrossModelResult
from activation_wave.select.across_models import layer_summary
from activation_wave.measure.entropy import (concat_entropy as eigen_concat, layer_entropies, pair_products, pairwise_renyi2,
                                     renyi2_from_products, renyi2_of_sets, renyi2_subset, subsets)
from activation_wave.core.layers import (candidate_ids, candidate_layers, default_or_none, last_block_entry, last_blocks,
                                    normed_entry, profile_positions, span_of, span_text)
from activation_wave.core.results import load_result, save_result


# ------------------------------------------------------------ shared helpers
def test_layer_convention_helpers():
    # index N is the pre-norm last block (capture schema 2): a candidate, and no index is normed
    assert candidate_layers(8) == list(range(1, 9)) and last_block_entry(8) == 8 and normed_entry(8) is None
    assert candidate_ids([0, 1, 2, 5]) == [1, 2, 5]
    assert profile_positions([0, 1, 2, 3, 4], 4) == [0, 1, 2, 3, 4]  # N compares on the residual scale
    assert profile_positions([0, 2, 4, 6], 8) == [0, 1, 2, 3]
    assert last_blocks(30, 3) == [28, 29, 30]
    with pytest.raises(ValueError, match="count=0"):
        last_blocks(30, 0)
    assert span_text([(0, 2), (3, 3), (4, 30)]) == "0-2, 3, 4-30"
    assert span_of([0, 3, 30], [(0, 2), (3, 3), (4, 30)]) == [1, 2, 3]
    with pytest.raises(ValueError, match="none of the spans"):
        span_of([31], [(0, 30)])
    assert default_or_none(30) == [2, 15, 27] and default_or_none(30, 4) is None and default_or_none(5) is None


def test_one_closed_form_of_s2_matches_the_eigen_route():
    H = np.random.default_rng(0).normal(size=(4, 50, 6))
    M, t = pair_products(H)
    got = [*renyi2_of_sets(M, t, [[0, 2], [1, 2]]), *renyi2_of_sets(M, t, [[0, 1, 3]])]
    want = [eigen_concat([H[0], H[2]], 2.0), eigen_concat([H[1], H[2]], 2.0), eigen_concat([H[0], H[1], H[3]], 2.0)]
    assert np.allclose(got, want, atol=1e-10)
    assert renyi2_subset(M, t, [0, 1, 3]) == pytest.approx(want[2], abs=1e-10)
    assert np.allclose(renyi2_from_products(M, t), layer_entropies(H, 2.0), atol=1e-10)
    pair = pairwise_renyi2(M, t)
    assert np.allclose(pair, pair.T) and pair[1, 2] == pytest.approx(want[1], abs=1e-10)
    with pytest.raises(ValueError, match=r"\[C, k\]"):
        renyi2_of_sets(M, t, [0, 1])


def test_the_cliff_is_the_largest_fall_over_every_layer_n_included():
    c = token_filtering.cliff_of([4.0, 4.5, 1.2, 3.9, 9.0], [0, 1, 2, 3, 4], 4)
    assert (c.from_layer, c.to_layer) == (1, 2)
    assert c.drop == pytest.approx(3.3) and c.before == 4.5 and c.after == 1.2 and c.recovery == pytest.approx(7.8)
    # N is the pre-norm last block (capture schema 2), on the residual scale: a fall into it counts
    assert token_filtering.cliff_of([4.0, 3.9, 3.8, 0.1], [0, 1, 2, 3], 3).to_layer == 3


def test_filter_pieces_on_random_tokens():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(3, 40, 5))
    ent = np.arange(40, dtype=float) / 10
    f = token_filtering.entropy_filter(H, ent, [0, 1, 2], 2, quantile=0.75, alpha=1.0, seed=0, k_max=3)
    keep = ent >= np.quantile(ent, 0.75)
    assert f.n_kept == int(keep.sum()) == 10 and f.threshold == pytest.approx(np.quantile(ent, 0.75))
    assert np.allclose(f.entropy["kept"], layer_entropies(H[:, keep], 1.0))
    assert np.allclose(f.entropy["dropped"], layer_entropies(H[:, ~keep], 1.0))
    assert f.frac_sure == pytest.approx(1 / 40) and f.d_kept_mean == pytest.approx(
        np.mean(np.asarray(f.entropy["kept"]) - np.asarray(f.entropy["random"])))
    assert token_filtering.budget_sizes(300) == [32, 64, 128, 256, 300] and token_filtering.budget_sizes(20) == [20]
    assert [token_filtering._verdict(g) for g in ([True, True], [True, False], [False])] == ["all", "some", "none"]


def test_selection_size_helpers():
    by_k = {"2": {"f": {"g": [1, 2]}}, "3": {"f": {"g": [1, 2, 5]}}, "4": {"f": {"g": [1, 3, 5, 6]}}}
    assert not layer_selection.nested(by_k, "f", "g")
    assert layer_selection.nested({k: by_k[k] for k in ("2", "3")}, "f", "g")
    assert layer_selection.same_sets({"a": [1], "b": [2]}, {"a": [1], "b": [3]}, ["a", "b", "c"]) == 1


# ------------------------------------------------- chapters on a tiny capture
def _roundtrip(name, result, cfg, root, cls):
    save_result(name, result, cfg, root)
    back = load_result(name, cfg, root, cls=cls)
    assert json.loads(json.dumps(back, default=lambda o: o.__dict__)) is not None
    return back


def test_chapters_run_on_a_tiny_capture(cap8, tmp_path):
    cfg, root = cap8.cfg, tmp_path / "results"
    ids = list(range(9))

    r0 = data_and_capture.run(cfg, cap8)
    assert r0.info.n_layers == 8 and r0.info.default_layers == [2, 4, 5] and r0.layers == ids
    assert r0.summary.records == 8 and r0.summary.response_positions > 0
    ratio = np.asarray(r0.norm_profile["max_norm"]) / np.asarray(r0.norm_profile["median_norm"])
    assert r0.max_norm_ratio == pytest.approx(ratio.max()) and r0.max_norm_ratio_layer == int(np.argmax(ratio))
    _roundtrip("00_data_and_capture", r0, cfg, root, data_and_capture.DataAndCaptureResult)
    nv = data_and_capture.norm_values(r0)
    assert nv["median_first"] == r0.norm_profile["median_norm"][0] and nv["last_layer"] == 8
    assert r0.summary.table()["response positions"] == r0.summary.response_positions

    r1 = layer_entropy.run(cfg, cap8)
    assert r1.ids == ids and len(r1.dataset.mean) == 9 and set(r1.orders) == {"1", "2", "inf"}
    # every index is on one scale now (N is the pre-norm last block), so the argmax is the plain one
    assert r1.dataset_summary["argmax"] == ids[int(np.argmax(r1.dataset.mean))]
    # the normed entry is reported apart, labelled, on the same tokens as index N (pre-norm)
    s = cap8.cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed, min_position=cfg.metrics.drop_first,
                                 layers=[8, "normed"])
    want = layer_entropies(s.hidden, cfg.metrics.alpha)
    assert r1.dataset.mean[-1] == pytest.approx(want[0]) and r1.normed_entropy == pytest.approx(want[1])
    assert abs(want[1] - want[0]) > 1e-3
    pv = layer_entropy.prose_values(r1)
    assert pv["ds_last_normed"] == r1.normed_entropy and pv["ds_last"] == r1.dataset.mean[-1]
    # direction words and comparisons come from the numbers (the page reads right on any model)
    assert pv["ds_trend"] == layer_entropy.trend_word(pv["ds_first"], pv["ds_last"], r1.band_width)
    assert pv["norm_vs_block"] in layer_entropy.NORM_VS_BLOCK.values() and pv["ds_drop"] >= 0
    assert pv["ds_min"] <= pv["ds_first"] and pv["ds_min"] <= pv["ds_max"]
    _roundtrip("01_layer_entropy", r1, cfg, root, layer_entropy.LayerEntropyResult)

    r2 = concat_entropy.run(cfg, cap8)
    assert r2.max_abs_diff < 1e-8 and r2.n_pairs == 28 and r2.n_triples == 56  # C(8, 2), C(8, 3)
    assert r2.best_triples[0].s2 == max(t.s2 for t in r2.best_triples) and r2.default.layers == [2, 4, 5]
    assert r2.best_pairs[0].layers == next(c.layers for c in r2.check if c.name == "best pair")

    r3 = cka_compartments.run(cfg, cap8)
    assert r3.compartments[0][0] == 0 and r3.compartments[-1][1] == 8
    assert sum(c.size for c in r3.table) == 9 and len(r3.compartments_k) == cfg.select.k
    assert 0 <= r3.explained <= 1 and r3.default_compartments == len(set(span_of([2, 4, 5], r3.compartments)))
    _roundtrip("03_cka_compartments", r3, cfg, root, cka_compartments.CkaCompartmentsResult)
    pv3 = cka_compartments.prose_values(r3)
    k3 = len(r3.compartments)
    assert pv3["k_auto_text"] == (f"{k3} compartments" if k3 != 1 else "1 compartment")

    r4 = token_filtering.run(cfg, cap8)
    assert r4.ids == ids and r4.n_tokens == 96 and 0 < r4.filter.n_kept < 96
    assert list(r4.sink.conditions) == list(token_filtering.CONDITION_KEYS)
    assert r4.sink.cliff.to_layer in ids[1:-1] and r4.sink.removed in ("all", "some", "none")
    assert r4.sink.at_cliff["all"] == pytest.approx(r4.sink.cliff.after)
    assert r4.response.sweep[0].n_dropped == 0 and token_filtering.low_row(r4.response) in r4.response.sweep
    lv = token_filtering.low_values(r4.response)  # a multiple is named even when no token exceeds any
    assert lv["f_low"] >= min(token_filtering.NORM_FACTORS) and lv["n_low_text"].split()[0] == str(lv["n_low"])
    back4 = _roundtrip("04_token_filtering", r4, cfg, root, token_filtering.TokenFilteringResult)
    assert back4.sink.cliff == r4.sink.cliff and back4.sink.conditions["no_first"].label == r4.sink.conditions["no_first"].label

    r5 = layer_selection.run(cfg, cap8)
    assert r5.default_layers == [2, 4, 5] and r5.sets["eagle3-default"] == [2, 4, 5]
    assert [x.rank for x in r5.ranking] == list(range(1, len(r5.ranking) + 1))
    assert r5.scores["exhaustive"]["rank"] == 1  # the exact maximiser of S_2 ranks first among all triples
    assert len(r5.paired) == 2 * len(layer_selection.DATA_RULES) and r5.n_bootstrap == 3
    assert set(r5.by_k) == {"2", "3", "4", "5"} and r5.lambda_choice["ids"] == r5.lambda_sweep[
        [x["lam"] for x in r5.lambda_sweep].index(cfg.select.lam)]["ids"]
    pv = layer_selection.prose_values(r5)
    assert pv["default_ids"] == "[2, 4, 5]" and pv["top_name"] == r5.ranking[0].name
    assert 1 <= pv["lam_same_n"] <= pv["n_lambda"] == len(r5.lambda_sweep)
    back5 = _roundtrip("05_layer_selection", r5, cfg, root, layer_selection.LayerSelectionResult)
    assert back5.sets == r5.sets and back5.default_row.percentile == r5.default_row.percentile

    # chapter 6 (another module) and 7, stubbed with the fields the readers use
    from activation_wave.study.chapters import drafter_predictors as dp
    from activation_wave.study.chapters import eagle3_speedup as ch6

    def row(name, ids, tau, arm):
        sc = r5.scores.get(name, {})
        return ch6.SetSummary(name, tuple(ids), len(ids), arm, tau, tau - 0.1, tau + 0.1, 1, sc.get("renyi2"),
                              sc.get("mean_cka"), None, 0.3, 10.0)

    trip = [row(m, s, 1.0 + 0.1 * max(s), "triples") for m, s in r5.sets.items()]
    summary = sorted(trip + [row("single-8", [8], 1.5, "sweep"), row("eagle3-default+norm", [2, 4, 5], 1.9, "norm")],
                     key=lambda r: -r.tau)
    tau_of = lambda r: ch6.SetTau(r.set, r.layers, r.tau, r.tau_lo, r.tau_hi)  # noqa: E731
    dflt = tau_of(next(r for r in trip if r.set == "eagle3-default"))
    online = {"eagle3-default": ch6.OnlineDrafter((2, 4, 5), 1.4, 1.3, 9.0, 8.0, 2, 2, 0.8, 0.8, 0.9, (0.4,), 1.4)}
    res6 = ch6.Eagle3SpeedupResult(
        runs=(), summary=tuple(summary), online=online,
        baselines=ch6.OnlineBaselines(8.0, 8.0, 9.0), prompts=("a", "b"), default=dflt,
        best=tau_of(max(trip, key=lambda r: r.tau)), best_rule=dflt, verdict=ch6.Verdict(0.0, True, "x"),
        reconciliation=(), training_capture="/c", training_records=1, training_positions=1,
        profile=ch6.LayerProfile((), (), (), (), ()))
    timing = dp.ProbeTiming(1.0, 0.1, 0.1, None, None, None, {})
    comp = dp.Comparison("exhaustive", (6, 7, 8), "rules", 0.1, 0.02, 0.2, 0.01, 0.02, 0.02, 50, 0.1, 0.04, 0.05)
    # the pre-registered outcome of each set: per-prompt tau around its summary tau (two prompts)
    outcome = tuple(dp.SetTaus(r.set, r.layers, (0,), r.tau, r.tau, (r.tau - 0.05, r.tau + 0.05)) for r in summary)
    paired = dp.DrafterPredictors(
        capture="/c", reference="eagle3-default", depth=3, draft_threshold=0.1, n_boot=10, prompt_ids=("a", "b"),
        missing_drafters=(), sets=outcome, comparisons=(comp,), mde_rules_pooled=0.05, scores={},
        predictors=(dp.Predictor("deepest", "triples", 0.9, 0.5, 1.0, len(trip)),
                    dp.Predictor("renyi2", "triples", -0.2, -0.7, 0.4, len(trip))),
        filtering=(), probe=timing, best_probe_triples=(), seconds=1.0)
    save_result("06_eagle3_speedup", res6, cfg, root)
    save_result("06_predictors", paired, cfg, root)
    save_result("07_cross_model", CrossModelResult([layer_summary(cap8.cache, cfg)]), cfg, root)
    from activation_wave.study.chapters import cross_drafters as cd

    g = cd.CrossDrafterResult(
        model="second", n_layers=18, rule="combined", prompt_ids=("a",) * 12, sets=(), comparison=None,
        depth=dp.Predictor("layer index", "single layers", 0.7, 0.3, 0.9, 18),
        entropy=dp.Predictor("Renyi-2 entropy", "single layers", 0.2, -0.3, 0.6, 18), entropy_vs_depth=0.5,
        profile=ch6.LayerProfile((), (), (), (), ()), training_records=1, training_positions=1, train_s=1.0,
        n_drafters=0)
    save_result(cd.NAME, g, cfg, root)

    s8 = results_summary.run(cfg, root)
    assert s8.depth.late_from == 6 and s8.depth.n_late == sum(max(r.layers) >= 6 for r in trip)
    assert s8.tau_spread == pytest.approx(max(r.tau for r in trip) - min(r.tau for r in trip))  # norm arm left out
    h = {x.name: x for x in s8.hypotheses}
    assert h["H1"].supported and h["H2"].supported is False and h["H4"].supported is None
    assert [x.name for x in s8.hypotheses] == ["H1", "H2", "H3", "H4", "G1", "G2", "G3"]
    assert h["G1"].supported is None and h["G2"].supported and h["G3"].supported is False
    rows = {r["set"]: r for r in s8.selection}
    assert rows["exhaustive"]["delta tau vs default"] == 0.1 and rows["exhaustive"]["Holm p"] == 0.02
    assert rows["eagle3-default"]["delta tau vs default"] is None
    assert s8.findings[2] == ("CKA compartments (response positions)", span_text(r3.compartments))
    assert list(results_summary.online_table(res6).index) == ["eagle3-default"]
    # once the drafter-strength page has run, its H5/H6 rows follow chapter 6's
    from activation_wave.study.chapters import drafter_strength as st

    row = {"set": "combined", "delta": 0.03, "lo": 0.01, "hi": 0.05, "p": 0.01, "p_holm": 0.02, "n": 96, "sd": 0.05}
    save_result(st.NAME, {"budgets": [], "interaction": [row], "norm_arm": [{**row, "delta": -0.02, "lo": -0.04,
                                                                              "hi": 0.0, "set": "eagle3-default"}]},
                cfg, root)
    names = [x.name for x in results_summary.run(cfg, root).hypotheses]
    assert names == ["H1", "H2", "H3", "H4", "H5 (combined)", "H6 (eagle3-default)", "G1", "G2", "G3"]

    from activation_wave.study import findings

    F = findings.record(cfg, root)
    key, chapters = landing.run(cfg, root)
    assert key.cliff_layer == r4.sink.cliff.to_layer and key.sink_ratio == pytest.approx(r4.sink.sink_peak)
    assert key.n_triples == len(trip) and key.n_layers == 8 and F["H1"].word == "supported"
    assert key.answer_layers == list(chapters.selection.sets[F["H1"].compared]) != key.default_layers  # H1 holds
    assert F["H2"].word == "within noise" and F["H2"].lo < 0 < F["H2"].hi
    assert key.second_model == "second" and F.get("G1").word == "not testable"
    scale = findings.headline(F)["scale"]
    assert F.get(scale).word == "not testable"  # the data-scale design has not run here
    assert list(landing.key_sets(chapters))[0] == "exhaustive"
    assert [r.set for r in landing.ranked_triples(chapters)] == [r.set for r in sorted(trip, key=lambda r: -r.tau)]


def test_tables_for_reading():
    import pandas as pd

    from activation_wave.core.tables import format_table

    html = format_table(pd.DataFrame({"x": [0.957, 1e-7], "share": [0.5, 0.25], "n": [3, 4]}), {"share": "{:.0%}"}).to_html()
    assert "0.957" in html and "0.000" in html and "50%" in html and "e-0" not in html


def test_a_key_value_table_renders_as_html():
    """Chapter 0's model and capture tables: an HTML table (a markdown table in an output reaches
    the book as raw pipes), no header row, integers with thousands separators."""
    from activation_wave.core.tables import key_value_table

    html = key_value_table({"model": "smollm2-135m", "tokens": 93623, "layer indices": "0..30"}).to_html()
    assert "<table" in html and "93,623" in html and "smollm2-135m" in html and "|" not in html
    assert "<th" not in html.replace("<thead>", "").split("<tbody>")[1]


def test_open_chapter_without_a_capture():
    import torch

    from activation_wave.study.steps import open_chapter

    old = torch.get_num_threads()
    try:
        cfg, cap = open_chapter("smoke", "", '{"metrics.token_budget": 64}', capture=False, threads=1)
        assert cap is None and cfg.metrics.token_budget == 64 and cfg.profile == "smoke"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(old)


