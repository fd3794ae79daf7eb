"""The multi-panel figures of chapters 6, 7 and the landing page, as library functions: each
takes data (and an optional figure), returns the Figure, and draws one panel per item."""

from __future__ import annotations

from types import SimpleNamespace as NS

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from activation_wave import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _summary(model, n):
    rng = np.random.default_rng(n)
    ids = list(range(n + 1))
    c = np.abs(np.corrcoef(rng.normal(size=(n + 1, 20))))
    return NS(model=model, ids=ids, cka=c, compartments=[(0, 2), (3, n)], sets={"combined": [1, 3, n]},
              default=[2, n // 2, n - 3], entropy=list(rng.normal(3, 0.2, n + 1)))


def test_scores_vs_tau_draws_one_panel_per_score_with_its_rho():
    names = ["eagle3-default", "combined", "last-k", "random-0"]
    scores = {"S2 (nats)": [1.0, 2.0, 3.0, 4.0], "mean CKA": [0.9, 0.5, 0.7, np.nan]}
    fig = plots.plot_scores_vs_tau(scores, [1.3, 1.28, 1.25, 1.32], names, ylabel="tau")
    axes = fig.axes
    assert [ax.get_xlabel() for ax in axes] == list(scores)
    assert "Spearman rho = 0.20 (n = 4)" in axes[0].get_title() and "(n = 3)" in axes[1].get_title()
    assert all(ax.get_ylabel() == "tau" for ax in axes)
    again = plots.plot_scores_vs_tau(scores, [1.3, 1.28, 1.25, 1.32], names, fig=fig)  # redrawn on the given figure
    assert again is fig and len(fig.axes) == 2


def test_labels_of_two_close_points_do_not_overlap():
    """Two sets with nearly the same score and tau (chapter 6's entropy-greedy and exhaustive)
    get their labels on opposite sides of their points."""
    fig = plots.plot_scores_vs_tau({"S2": [4.44, 4.465, 4.0]}, [1.287, 1.2868, 1.32],
                                   ["entropy-greedy", "exhaustive", "eagle3-default"])
    offsets = {t.get_text(): t.xyann for t in fig.axes[0].texts}
    assert offsets["entropy-greedy"][1] > 0 > offsets["exhaustive"][1]
    assert offsets["EAGLE-3 default"][1] > 0  # code names drawn in plain words


def test_key_figure_has_the_selection_map_and_the_tau_bars():
    s = _summary("m", 12)
    fig = plots.plot_key_figure(s.ids, {"combined": [1, 3, 12], "eagle3-default": [2, 6, 9]},
                                ["random-0", "eagle3-default"], [1.32, 1.31], [1.28, 1.27], [1.36, 1.35],
                                compartments=s.compartments, entropy=s.entropy, xlabel="tau (outcome)")
    titles = [ax.get_title() for ax in fig.axes]
    assert "Which layers each rule picks" in titles and "Drafters reading those layers" in titles
    bars = next(ax for ax in fig.axes if ax.get_title() == "Drafters reading those layers")
    assert bars.get_xlabel() == "tau (outcome)"
    assert [t.get_text() for t in bars.get_yticklabels()] == ["random 0", "EAGLE-3 default"]  # plain words


def test_cka_and_selection_of_two_models_side_by_side():
    ss = [_summary("smollm2", 30), _summary("gemma", 18)]
    fig = plots.plot_cka_models(ss)
    titled = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titled == ["smollm2\n2 compartments", "gemma\n2 compartments"]  # two lines: clear of the colour bar
    fig = plots.plot_selection_models(ss)
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["smollm2", "gemma"]


def test_sweep_marks_the_single_seeds_when_given():
    prof = NS(ids=(0, 1, 2, 3), entropy2=(1.0, 2.0, 2.5, 2.7), median_norm=(1.0, 2.0, 3.0, 4.0),
              norm_ratio=(None, 2.0, 1.5, 1.33), cka_prev=(None, 0.9, 0.8, 0.85))
    args = ([1, 2, 3], [1.05, 1.10, 1.12], [1.0, 1.05, 1.08], [1.1, 1.15, 1.16], prof)
    fig = plots.plot_sweep(*args, reference=1.3, seeds={2: [1.08, 1.12]})
    top = fig.axes[0]
    assert len(top.collections) >= 1 and "single seeds" in [t.get_text() for t in top.get_legend().get_texts()]
    plain = plots.plot_sweep(*args, reference=1.3)
    assert "single seeds" not in [t.get_text() for t in plain.axes[0].get_legend().get_texts()]


def test_narrow_panels_get_fewer_layer_ticks_than_a_wide_figure():
    ss = [_summary(f"m{i}", 30) for i in range(3)]
    narrow = plots.plot_selection_models(ss)
    panel = next(ax for ax in narrow.axes if ax.get_title() == "m0")
    wide = plots.plot_selection_map(ss[0].ids, ss[0].sets, compartments=ss[0].compartments)
    n_narrow, n_wide = len(panel.get_xticks()), len(wide.axes[0].get_xticks())
    assert n_narrow <= 8 < n_wide <= 16


def test_decoding_cost_figure_marks_the_adopted_drafter_only_when_the_entry_has_one():
    import copy

    from activation_wave.core.results import load_benchmarks
    from activation_wave.plots.speed_figures import plot_decoding_costs

    spec = copy.deepcopy(load_benchmarks().get("speculative_decoding"))
    if not spec:
        pytest.skip("no speculative_decoding entry in the committed results")

    def labels(entry):
        fig = plot_decoding_costs(entry)
        out = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        plt.close(fig)
        return out

    spec["adopted"] = {"tau_t0": 1.5, "speedup_vs_plain_t0": 0.95}
    assert "data-scale drafter, chain, T=0 (measured)" in labels(spec)
    del spec["adopted"]
    assert not any("adopted" in t for t in labels(spec))
