"""The drafter-strength page (study.chapters.drafter_strength): its design, H5's interaction,
H6's norm arm and the words the page prints, on synthetic per-prompt taus."""

from __future__ import annotations

import numpy as np
import pytest

from activation_wave.core.config import ConfigError, load_config
from activation_wave.study.chapters import drafter_strength as st

LAYERS = {"eagle3-default": (2, 15, 27), "combined": (7, 27, 29), "cka-diverse": (7, 18, 29),
          "last-k": (28, 29, 30), "random-0": (16, 19, 24)}


def _taus(seed=0, n=96, gain=0.0):
    """Per-prompt taus at two budgets: the default gains 0.2 at the top, combined gains ``gain``
    more than the default, last-k trails by 0.04 at both, the norm hurts at the top."""
    rng = np.random.default_rng(seed)
    base = 1.3 + 0.2 * rng.random(n)
    noise = lambda k: 0.01 * rng.standard_normal((k, n))  # noqa: E731
    bottom = {"eagle3-default": base, "combined": base - 0.02, "last-k": base - 0.04}
    top = {"eagle3-default": base + 0.2 + noise(3), "combined": base + 0.18 + gain + noise(3),
           "last-k": base + 0.16 + noise(3), "eagle3-default+norm": base + 0.1 + noise(3),
           "combined+norm": base + 0.18 + gain + noise(3)}
    return {"bottom": bottom, "top": top}


def test_design_reuses_the_screens_recipe_and_adds_the_norm_arm():
    cfg = load_config("default")
    from activation_wave.benchmarks.strength import design

    jobs = design(cfg, LAYERS)
    assert len(jobs) == 5 * 3 + 2 * 3 and {b for b, *_ in jobs} == {"top"}
    from activation_wave.benchmarks.recipe import base_recipe

    top = [c for b, n, _, c in jobs if n == "eagle3-default"]
    assert [c.seed for c in top] == [0, 1, 2] and top[0] == base_recipe(cfg).draft  # the screen's base, seed 0
    assert all(c.fused_norm for _, n, _, c in jobs if n.endswith("+norm"))
    more = design(load_config("default", {"strength.middle": "true", "strength.singles": "23,27"}), LAYERS)
    assert sum(b == "middle" for b, *_ in more) == 5 * 2
    assert [(n, c.epochs) for b, n, _, c in more if b == "middle"][0] == ("eagle3-default", 5)
    assert sum(n.startswith("single-") for _, n, *_ in more) == 2 * 2
    with pytest.raises(ConfigError, match="not among chapter 6's sets"):  # an input error: the study exits 2
        design(cfg, {"eagle3-default": (2, 15, 27)})


def test_interaction_detects_a_set_that_gains_with_budget_and_not_a_steady_one():
    doc = st.analyse(_taus(gain=0.05), LAYERS, ["eagle3-default", "combined"], n_boot=2000)
    inter = {r["set"]: r for r in doc["interaction"]}
    assert abs(inter["combined"]["delta"] - 0.05) < 0.01 and st.verdict(inter["combined"]) == "higher"
    assert abs(inter["last-k"]["delta"]) < 0.01 and st.verdict(inter["last-k"]) == "within noise"
    assert inter["combined"]["p_holm"] >= inter["combined"]["p"]
    top = next(b for b in doc["budgets"] if b["name"] == "top")
    assert abs(top["tau_default"]["tau"] - (np.mean(_taus()["bottom"]["eagle3-default"]) + 0.2)) < 0.01
    assert [c["set"] for c in top["comparison"]] == ["combined", "last-k"]  # the norm arm is not a set


def test_norm_arm_is_per_triple_and_says_when_it_hurts():
    doc = st.analyse(_taus(gain=0.05), LAYERS, ["eagle3-default", "combined"], n_boot=2000)
    norm = {r["set"]: r for r in doc["norm_arm"]}
    assert abs(norm["eagle3-default"]["delta"] + 0.1) < 0.01 and abs(norm["combined"]["delta"]) < 0.01
    rows = {r["triple"]: r for r in st.norm_rows(doc)}
    assert rows["eagle3-default"]["H6"] == "not supported: the norm hurts"
    assert rows["combined"]["H6"].startswith("not supported (within noise")
    v = st.page_values(doc, None, None, None)
    inter = {r["set"]: r for r in doc["interaction"]}
    assert st.verdict(inter["combined"]) == "higher" and abs(inter["combined"]["delta"] - 0.05) < 0.01
    assert st.verdict(inter["last-k"]) == "within noise"  # H5: only combined's gap moved
    from activation_wave.study import findings

    F = findings.from_hypotheses(st.hypotheses(doc), findings.registry()[1])  # the page counts the record's words
    assert (F.counts("H5")["n"], F.counts("H5")["supported"]) == (2, 1)
    assert (F.counts("H6")["n"], F.counts("H6")["lower"], F.counts("H6")["higher"]) == (2, 1, 0)  # the norm hurts the default
    assert "strength_h5_moved" not in v  # counted from the record only
    top = {c["set"]: c for c in next(b for b in doc["budgets"] if b["name"] == "top")["comparison"]}
    assert st.verdict(top["last-k"]) == "lower" and abs(top["last-k"]["delta"] + 0.04) < 0.01


def test_tables_and_figure_render():
    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd

    from activation_wave.core.tables import format_table
    from activation_wave.plots import plot_strength_deltas

    doc = st.analyse(_taus(), LAYERS, ["eagle3-default", "combined"], n_boot=500)
    for rows in (st.tau_rows(doc), st.interaction_rows(doc), st.norm_rows(doc)):
        assert "<table" in format_table(pd.DataFrame(rows)).to_html()
    ax = plot_strength_deltas(doc).axes[0]
    # plain words in the legend, which sits beside the axes, off the data
    assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == ["combined", "last three"]
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1
    v = st.page_values(None, None, None, None)
    assert v["strength_top_n_sets"] == 0 and np.isnan(v["strength_top_tau"])


def test_a_handful_of_prompts_gives_no_verdict():
    assert st.verdict({"delta": 0.2, "p_holm": 0.001, "n": 2}) == "no verdict (n = 2 prompts)"


def test_epoch_deltas_figure_dashes_the_norm_arm():
    import matplotlib
    matplotlib.use("Agg")
    from activation_wave.plots import plot_strength_epochs

    curve = lambda t: [{"epoch": e, "tau_offline": t + 0.01 * e} for e in (1, 2, 3)]  # noqa: E731
    doc = {"curves": {"eagle3-default": curve(1.2), "combined": curve(1.18), "eagle3-default+norm": curve(1.1)}}
    deltas = st.epoch_deltas(doc)
    assert deltas["combined"] == [(1, -0.02), (2, -0.02), (3, -0.02)] and "eagle3-default" not in deltas
    lines = {ln.get_label(): ln for ln in plot_strength_epochs(deltas).axes[0].get_lines()}
    assert lines["EAGLE-3 default + norm"].get_linestyle() == "--" and lines["combined"].get_linestyle() == "-"


def test_the_page_values_say_whether_the_answer_differs_from_one_epoch():
    # combined trails after one epoch (-0.02) and gains 0.05 with budget: above the default at the top
    v = st.page_values(st.analyse(_taus(gain=0.05), LAYERS, ["eagle3-default", "combined"], n_boot=2000), None, None,
                       None)
    assert (v["strength_bottom_higher"], v["strength_top_higher"]) == (0, 1)
    assert v["strength_top_best"] == "combined" and v["strength_top_best_word"] == "higher"
    assert abs(v["strength_top_best_delta"] - 0.03) < 0.01
    steady = st.page_values(st.analyse(_taus(gain=0.0), LAYERS, ["eagle3-default", "combined"], n_boot=2000), None,
                            None, None)
    assert (steady["strength_bottom_higher"], steady["strength_top_higher"]) == (0, 0)
    assert steady["strength_top_best_word"] in ("lower", "within noise") and st.hypotheses(None) == []


def test_hypotheses_rows_follow_the_verdict_rules():
    doc = st.analyse(_taus(gain=0.05), LAYERS, ["eagle3-default", "combined"], n_boot=2000)
    h = {x.name: x for x in st.hypotheses(doc)}
    assert list(h) == ["H5 (combined)", "H5 (last-k)", "H6 (eagle3-default)", "H6 (combined)"]
    assert h["H5 (combined)"].supported is True and h["H5 (last-k)"].supported is False
    assert "within noise" in h["H5 (last-k)"].statistic and "n = 96 prompts" in h["H5 (combined)"].statistic
    assert h["H6 (eagle3-default)"].supported is False  # the norm hurts: H6 claims it helps
    few = st.analyse({b: {k: np.atleast_2d(v)[..., :4] for k, v in t.items()} for b, t in _taus().items()},
                     LAYERS, ["eagle3-default"], n_boot=200)
    assert {x.supported for x in st.hypotheses(few)} == {None}
    v = st.page_values(few, None, None, None)
    assert v["strength_top_higher"] == v["strength_top_lower"] == v["strength_top_noise"] == 0
    assert v["strength_top_best_word"] == "no verdict (n = 4 prompts)"


def test_training_costs_and_seed_resampled_values_are_read_from_the_results():
    import doctest

    assert doctest.testmod(st).failed == 0
    v = st.page_values({"budgets": [], "training": {"train_wall_s": [773.0, 3288.0, None],
                                                   "tokens_per_s": [509.0, 120.0]}}, None, None, None)
    assert (v["strength_train_n"], v["strength_train_s_min"], v["strength_train_s_max"]) == (2, 773.0, 3288.0)
    assert (v["strength_tok_s_min"], v["strength_tok_s_max"]) == (120.0, 509.0)
    row = {"comparison": "delta at the bottom budget", "set": "random-0", "delta": -0.008, "lo": -0.02, "hi": 0.004,
           "p_holm": 0.18, "verdict": "within noise", "registered_verdict": "lower", "registered_p_holm": 0.032,
           "changed": True}
    r = st.seed_resampled({"seed_sensitivity": [row]}, "delta at the bottom budget", "random-0")
    assert (r["verdict"], r["registered_verdict"], r["p_holm"]) == ("within noise", "lower", 0.18)
    assert st.seed_resampled(None, "delta at the bottom budget", "random-0")["verdict"] == "not testable"
    assert [x["set"] for x in st.sensitivity_table({"seed_sensitivity": [row, {**row, "set": "b", "changed": False}]})] \
        == ["random-0"]
