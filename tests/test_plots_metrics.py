"""Figures of chapters 1-5: each returns its Figure, draws on a given ax, labels its axes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from activation_wave.measure import entropy as E  # noqa: E402
from activation_wave import plots  # noqa: E402
from activation_wave.select import selection as S  # noqa: E402
from activation_wave.measure.layer_stats import LayerStats  # noqa: E402
from activation_wave.measure.cka import compartment_costs  # noqa: E402


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(6, 48, 5)).cumsum(0)
    groups = np.repeat(np.arange(6), 8)
    stats = LayerStats.from_hidden(H)
    return H, groups, stats


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _labelled(ax):
    return ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_entropy_depth_raw_and_normalised(data):
    H, g, _ = data
    bands = {"prompt": E.prompt_entropy(H, g, n_boot=10), "dataset": E.dataset_entropy(H, g, n_boot=3)}
    fig = plots.plot_entropy_depth(range(6), bands)
    ax = fig.axes[0]
    assert _labelled(ax) and len(ax.lines) == 2 and len(ax.collections) == 2  # lines + bands
    fig, axes = plt.subplots(1, 2)
    out = plots.plot_entropy_depth(range(6), bands, how="min", d=5, ax=axes[1])
    assert out is fig and "min" in axes[1].get_ylabel()
    assert max(axes[1].lines[1].get_ydata()) <= 1.0 + 1e-9  # normalised by the largest attainable value
    with pytest.raises(ValueError, match="needs n"):
        plots.plot_entropy_depth(range(6), {"x": np.ones(6)}, how="log_d")


def test_pair_entropy_and_gain(data):
    _, _, stats = data
    P = E.pairwise_renyi2(stats.M, stats.t)
    fig = plots.plot_pair_entropy(stats.ids, P)
    assert len(fig.axes) == 2 and _labelled(fig.axes[0])  # heat map + colorbar
    fig = plots.plot_pair_entropy(stats.ids, P, kind="gain")
    img = fig.axes[0].images[0].get_array()
    assert np.allclose(np.diag(img), 0.0) and fig.axes[1].get_ylabel().startswith("gain")
    with pytest.raises(ValueError, match="kind"):
        plots.plot_pair_entropy(stats.ids, P, kind="ratio")


def test_cka_with_compartments(data):
    _, _, stats = data
    comps = [(0, 1), (2, 5)]
    fig = plots.plot_cka(stats.ids, stats.cka, compartments=comps)
    ax = fig.axes[0]
    assert len(ax.patches) == 2 and _labelled(ax) and fig.axes[1].get_ylabel() == "linear CKA"
    fig = plots.plot_compartment_elbow(compartment_costs(stats.cka), 2)
    assert _labelled(fig.axes[0])


def test_filter_comparison_and_stability(data):
    H, g, _ = data
    curves = {
        "all": E.layer_entropies(H),
        "drop first": E.layer_entropies(H[:, 1:]),
        "median": E.layer_entropies(H, center="median"),
    }
    fig = plots.plot_filter_comparison(range(6), curves)
    assert len(fig.axes[0].lines) == 3 and _labelled(fig.axes[0])
    fig = plots.plot_filter_comparison(range(6), curves, delta=True)
    assert "difference" in fig.axes[0].get_ylabel()
    fig = plots.plot_stability_tokens([8, 16, 32], {"a": np.ones((3, 4)), "b": [1, 2, 3]}, ylabel="entropy")
    assert fig.axes[0].get_xscale() == "log" and _labelled(fig.axes[0])


def test_selection_map_and_lambda_sweep(data, tmp_path):
    _, _, stats = data
    sets = S.candidate_sets(stats, 2, n_random=2, methods=("entropy-greedy", "last-k", "random"))
    fig = plots.plot_selection_map(stats.ids, sets, compartments=stats.compartments, entropy=stats.entropy2)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(sets) and ax.get_xlabel()
    fig = plots.plot_lambda_sweep(S.sweep_lambda(stats, 2, lams=[0, 1, 4]))
    assert _labelled(fig.axes[0])
    fig.savefig(tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 1000


def test_data_scaling_plot_draws_points_fit_and_placeholder():
    pts = [{"loss_tokens": n, "tau_offline": 1.2 + 0.05 * np.log2(n / 1000)} for n in (1000, 2000, 4000)]
    fig = plots.plot_data_scaling(pts, {"a": 1.2 - 0.05 * np.log2(1000), "b": 0.05})
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_xscale() == "log"
    assert len(ax.lines) == 2 and np.allclose(ax.lines[1].get_ydata()[[0, -1]], [1.2, 1.3])
    # a point trained on extra sampled responses: own marker, labelled, fit extrapolated (dotted) to it
    more = pts + [{"loss_tokens": 12000, "tau_offline": 1.35, "samples_per_prompt": 2}]
    ax = plots.plot_data_scaling(more, {"a": 1.2 - 0.05 * np.log2(1000), "b": 0.05}).axes[0]
    assert len(ax.lines) == 4 and ax.lines[2].get_linestyle() == ":"
    assert np.isclose(ax.lines[2].get_ydata()[-1], 1.2 + 0.05 * np.log2(12))
    assert ax.lines[3].get_xdata().tolist() == [12000] and [t.get_text() for t in ax.texts] == ["k=2"]
    empty = plots.plot_data_scaling([]).axes[0]
    assert "not measured" in empty.texts[0].get_text()
