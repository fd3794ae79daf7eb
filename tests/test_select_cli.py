"""``wave select`` and its backend ``select_for_cli`` on tiny random models; and the helpers
the chapters 1-5 share with it (stats from a cache, bootstrap of several rules, rankings)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import captured

from activation_wave import cli
from activation_wave.study.chapters.cka_compartments import compartment_rows
from activation_wave.core.config import load_config
from activation_wave.measure.layer_stats import LayerStats, stats_from_cache
from activation_wave.core.layers import span_of, to_convention
from activation_wave.study.steps import Captured
from activation_wave.select.report import select_for_cli
from activation_wave.select.selection import lambda_choice, method_sets, rank_among_all, select_layers, sweep_lambda
from activation_wave.select.stability import bootstrap_methods, paired_difference


@pytest.fixture()
def cap4(tiny_target, tmp_path):
    """A capture of the 4-block tiny Llama: too shallow for the EAGLE-3 default."""
    return captured(tiny_target, tmp_path, "tiny-llama")


def _with(cap: Captured, **select) -> tuple[Captured, object]:
    cfg = load_config("smoke", {"metrics.token_budget": 96, "select.n_random": 2,
                                **{f"select.{k}": v for k, v in select.items()}}, model=cap.cfg.model)
    return cap, cfg


# ---------------------------------------------------------------- select_for_cli
def test_happy_path_on_an_8_block_model(cap8):
    out = select_for_cli(*_with(cap8))
    json.dumps(out)  # JSON-ready as it is
    assert out["model"] == "tiny-llama8" and out["n_layers"] == 8 and out["method"] == "combined" and out["k"] == 3
    assert len(out["selected"]) == 3 and all(1 <= i <= 8 for i in out["selected"])
    assert out["default"] == [2, 4, 5] and out["default_note"] is None
    for key in ("selected", "default"):
        assert {"renyi2", "renyi2_gain", "mean_cka", "max_cka", "rank", "percentile"} <= set(out["scores"][key])
    assert out["scores"]["selected"]["n_sets"] == 56  # C(8, 3) candidate triples
    # the snippets are in each engine's own convention, and say which
    assert str(out["selected"]) in out["exports"]["vllm"]
    assert str(to_convention(out["selected"], "specforge")) in out["exports"]["specforge"]
    assert "+1" in out["exports"]["sglang"] and "convention" in out["exports"]["specforge"]
    assert out["exports_detail"]["specforge"]["ids"] == [i - 1 for i in out["selected"]]
    # engines that cannot load a drafter on this set say so (SGLang never captures index N = 8)
    from activation_wave.engines.conventions import export_warnings

    assert out["engine_warnings"] == export_warnings(out["selected"], 8)
    assert any(w.startswith("sglang:") for w in out["engine_warnings"]) == (8 in out["selected"])
    # the table ranks every rule, default included, and names the token filter
    assert "eagle3-default" in out["table"] and "combined" in out["table"] and "quantile" in out["table"]
    assert out["filtered"] is True and 0 < out["n_tokens"] < 96
    assert [r["rank"] for r in out["ranking"]] == list(range(1, len(out["ranking"]) + 1))


def test_options_reach_the_selection(cap8):
    out = select_for_cli(*_with(cap8, method="exhaustive", k=2, filtered=False))
    assert out["k"] == 2 and len(out["selected"]) == 2 and out["filtered"] is False and out["n_tokens"] == 96
    assert out["default"] is None and "3 layers" in out["default_note"]
    assert out["scores"]["selected"]["rank"] == 1  # exhaustive = the best pair by S2
    d = select_for_cli(*_with(cap8, method="eagle3-default"))
    assert d["selected"] == d["default"] == [2, 4, 5]


def test_shallow_model_default_undefined(cap4):
    with pytest.raises(ValueError, match=r"undefined for N=4"):
        select_for_cli(*_with(cap4, method="eagle3-default"))
    out = select_for_cli(*_with(cap4, method="entropy-greedy"))  # other rules still answer
    assert out["default"] is None and "undefined" in out["default_note"] and out["scores"]["default"] is None


@pytest.mark.parametrize("select, match", [
    ({"k": 4}, r"k=4 \(--k\) but this model has only N=4"),
    ({"k": 0}, r"select.k = 0 is out of range: it must be >= 1"),  # rejected by SelectConfig itself
    ({"method": "magic"}, r"unknown selection method 'magic'.*entropy-greedy"),
])
def test_errors_name_the_fix(cap4, select, match):
    with pytest.raises(ValueError, match=match):
        select_for_cli(*_with(cap4, **select))


# --------------------------------------------------------------------- the CLI
@pytest.fixture()
def patched(monkeypatch):
    """Make `wave select` use a given capture instead of loading a model by name."""
    def use(cap: Captured) -> None:
        monkeypatch.setattr("activation_wave.study.steps.run_capture", lambda cfg, **kw: cap)
    return use


@pytest.mark.parametrize("argv, match", [
    (["--method", "magic"], "unknown selection method 'magic'"),
    (["--k", "0"], "--k 0: must be >= 1 (select.k)"),
    (["--k", "9"], "only N=4"),
    (["--method", "eagle3-default"], "undefined for N=4"),
])
def test_cli_errors_exit_2_with_the_message(cap4, patched, capsys, argv, match):
    patched(cap4)
    assert cli.main(["select", "--json", "--model", "tiny-llama", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wave select: error:") and match in err


def test_cli_json_and_text(cap8, patched, capsys):
    patched(cap8)
    assert cli.main(["select", "--json", "--model", "tiny-llama8", "--k", "3", "--method", "entropy-greedy"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "entropy-greedy" and out["default"] == [2, 4, 5]
    assert cli.main(["select", "--model", "tiny-llama8"]) == 0
    text = capsys.readouterr().out
    assert "EAGLE-3 default: [2, 4, 5]" in text and "specforge" in text


# ------------------------------------------------------- shared chapter helpers
def test_stats_from_cache_filters_by_quantile(cap8):
    cfg = cap8.cfg
    f = stats_from_cache(cap8.cache, cfg, filtered=True)
    u = stats_from_cache(cap8.cache, cfg, filtered=False, sample=f.sample)
    assert u.n_tokens == 96 and f.n_tokens == int((f.sample.next_entropy >= f.threshold).sum()) < 96
    assert f.hidden.shape == (9, f.n_tokens, 32) and len(f.groups) == f.n_tokens
    assert f.stats.ids == tuple(range(9)) and f.stats.n_blocks == 8


def test_method_sets_lambda_and_ranking(cap8):
    stats = stats_from_cache(cap8.cache, cap8.cfg, filtered=False).stats
    sets = method_sets(stats, 3, lam=0.5, n_random=2)
    assert sets["combined"] == select_layers(stats, 3, "combined", lam=0.5).ids
    assert sets["exhaustive"] == select_layers(stats, 3, "exhaustive").ids  # lam not applied to exhaustive
    assert {"eagle3-default", "random-0", "random-1"} <= set(sets)
    best = rank_among_all(stats, sets["exhaustive"])
    assert best["rank"] == 1 and best["n_sets"] == 56
    sweep = sweep_lambda(stats, 3, (0.0, 0.5, 4.0), search="exhaustive")
    ch = lambda_choice(sweep, 0.5)
    assert ch["ids"] == list(sweep.iloc[1]["ids"]) and ch["ids_at_zero"] == list(sets["exhaustive"])
    assert ch["entropy_cost"] >= -1e-12 and ch["lam_lo"] <= 0.5 <= ch["lam_hi"]


def test_bootstrap_methods_share_replicates():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(7, 80, 6)).cumsum(0)
    groups = np.repeat(np.arange(10), 8)
    recs: list = []
    out = bootstrap_methods(H, groups, ["entropy-greedy", "exhaustive"], 2, n_boot=4, seed=0, n_blocks=6,
                            track={"fixed": [1, 6]}, scores_out=recs, max_tokens=60)
    assert set(out) == {"entropy-greedy", "exhaustive"} and len(recs) == 4
    assert out["exhaustive"].sets["count"].sum() == 4
    assert {"fixed", "chosen:exhaustive"} <= set(recs[0])
    # on every replicate the replicate's own exhaustive choice scores at least as high as a fixed set
    assert all(r["chosen:exhaustive"] >= r["fixed"] - 1e-12 for r in recs)
    pdiff = paired_difference(recs, "chosen:exhaustive", "fixed")
    assert pdiff["lo"] >= -1e-12 and pdiff["n_boot"] == 4


def test_compartment_helpers():
    C = np.kron(np.eye(2), np.ones((3, 3))) * 0.8 + 0.2
    stats = LayerStats.from_products(range(6), M=C * 100, t=np.full(6, 10.0), cka=C)
    comps = [(0, 2), (3, 5)]
    assert span_of([1, 4, 5], comps) == [1, 2, 2]
    with pytest.raises(ValueError, match="none of the spans"):
        span_of([7], comps)
    rows = compartment_rows(stats, comps, mark={"default": [2, 4]})
    assert [r.size for r in rows] == [3, 3] and [r.marks["default"] for r in rows] == [[2], [4]]
    assert np.allclose([r.mean_cka_inside for r in rows], 1.0)
    assert np.allclose([r.mean_cka_neighbours for r in rows], 0.2)


def test_outlier_helpers_on_a_planted_sink():
    from activation_wave.measure.entropy import profile_summary
    from activation_wave.measure.filtering import compare_conditions, outlier_conditions, response_offsets, token_norms

    rng = np.random.default_rng(0)
    H = rng.normal(size=(4, 60, 8))
    pos = np.tile(np.arange(6), 10)
    H[2:, pos == 0] *= 300.0  # a sink on every sequence's first token from layer 2 on
    conds = outlier_conditions(pos, token_norms(H), drop_first=1, massive_factor=20)
    assert list(conds)[1] == "without the first position" and conds[list(conds)[3]][1] == "median"
    res = compare_conditions(H, conds, alpha=1.0)
    ref = profile_summary(res[list(res)[0]]["entropy"])
    assert ref["drop_to"] == 2 and ref["drop"] > 1.0  # the planted cliff
    for lab in list(res)[1:]:
        assert profile_summary(res[lab]["entropy"])["drop"] < 0.5 * ref["drop"]
    assert res[list(res)[3]]["cka"] is None and res[list(res)[1]]["cka"].shape == (4, 4)
    recs = [{"prompt_len": 3}, {"prompt_len": 5}]
    assert response_offsets([2, 3, 4, 4], [0, 0, 1, 1], recs).tolist() == [0, 1, 0, 0]


def test_token_count_stability_shapes():
    from activation_wave.measure.filtering import token_count_stability

    H = np.random.default_rng(1).normal(size=(5, 64, 6)).cumsum(0)
    st = token_count_stability(H, [8, 16, 64, 1000], n_rep=2, seed=0)
    assert st["sizes"].tolist() == [8, 16, 64] and st["profile_corr"].shape == (3, 2)
    assert np.allclose(st["cka_mad"][-1], 0.0) and np.allclose(st["profile_corr"][-1], 1.0)
    with pytest.raises(ValueError, match="no size"):
        token_count_stability(H, [2, 500])


def test_chapter_plot_helpers_return_labelled_figures():
    import matplotlib.pyplot as plt

    from activation_wave import plots

    ids = list(range(4))
    C = np.eye(4)
    figs = [plots.plot_entropy_normalisations(ids, {"a": np.arange(4.0) + 1}, d=8, n=16),
            plots.plot_cka_grid(ids, {"x": C, "y": C}, compartments={"x": [(0, 1), (2, 3)]}),
            plots.plot_token_entropy_hist(np.linspace(0, 3, 50), 1.0),
            plots.plot_norm_ratio(ids, {"first": [1, 5, 100, 2]}),
            plots.plot_layer_frequency(ids[1:], {"m": {1: 0.5, 3: 1.0}}, selected={"m": [3]})]
    assert len(figs[0].axes) == 4 and len([a for a in figs[1].axes if a.get_title()]) == 2
    for fig in figs:
        assert all(ax.get_xlabel() for ax in fig.axes if ax.get_title())
        plt.close(fig)
