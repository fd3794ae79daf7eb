"""Figures of the drafter and speculative-decoding chapters.

Each function takes plain data (lists, dicts as written by :mod:`activation_wave.decode.rounds`
and :mod:`activation_wave.draft.training`), an optional ``ax``, and returns the Figure.
Layer sets are named as the selection chapter names them (``eagle3-default``,
``combined``, ...), so they keep their colours across chapters.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> fig = plot_acceptance_by_position({"eagle3-default": [0.4, 0.2, 0.1], "combined": [0.45, 0.25, 0.1]})
>>> fig.axes[0].get_xlabel()
'draft position j'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from activation_wave.plots._style import _ax, method_color, projected, set_label

__all__ = [
    "plot_acceptance_by_position",
    "plot_tau",
    "plot_tau_by_layer",
    "plot_sweep",
    "plot_score_vs_tau",
    "plot_scores_vs_tau",
    "plot_key_figure",
    "plot_cost_model",
    "plot_verify_cost",
    "plot_training_curves",
]


def plot_acceptance_by_position(acceptance: Mapping[str, Sequence[float]], *, ax: Axes | None = None,
                                title: str | None = "Draft acceptance by position",
                                ylabel: str = "share of rounds accepting\ndrafts 1 to j") -> Figure:
    """One line per layer set: acceptance of draft position 1..D.

    ``acceptance[name][i]`` is the share of rounds that accepted drafts ``1..i + 1`` among
    those that drafted ``i + 1`` (r_j of the background; ``SpecResult.acceptance_by_position`` or the offline
    ``acceptance_by_position``).
    """
    fig, ax = _ax(ax)
    for i, (name, acc) in enumerate(acceptance.items()):
        y = np.asarray(acc, dtype=float)
        ax.plot(np.arange(1, len(y) + 1), y, marker="o", label=set_label(name), color=method_color(name, i),
                alpha=0.8)
    ax.set_xlabel("draft position j")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    if title:
        ax.set_title(title)
    return fig


def plot_tau(names: Sequence[str], tau: Sequence[float], lo: Sequence[float] | None = None,
             hi: Sequence[float] | None = None, *, ax: Axes | None = None, reference: float | None = 1.0,
             title: str | None = "Mean accepted length per layer set",
             xlabel: str = "$\\tau$ (tokens / target forward)",
             ) -> Figure:
    """Horizontal bars of tau per layer set (first name on top), with an optional interval
    [lo, hi] (bootstrap CI or min/max over seeds). Horizontal, so that a dozen set names
    stay readable.

    ``reference`` draws a dashed line (tau = 1 is plain decoding).
    """
    own = ax is None
    fig, ax = _ax(ax)
    y = np.arange(len(names))
    t = np.asarray(tau, dtype=float)
    colors = [method_color(n, i) for i, n in enumerate(names)]
    ax.barh(y, t, color=colors, alpha=0.8)
    if lo is not None and hi is not None:
        err = np.vstack([t - np.asarray(lo, dtype=float), np.asarray(hi, dtype=float) - t])
        ax.errorbar(t, y, xerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
    if reference is not None:
        ax.axvline(reference, ls="--", color="grey", lw=1)
    ax.set_yticks(y, [set_label(n) for n in names])
    ax.invert_yaxis()
    ax.set_ylabel("layer set")
    ax.set_xlabel(xlabel)
    finite_hi = np.asarray(hi, dtype=float) if hi is not None else t
    lower = min(reference if reference is not None else float(np.nanmin(t)), float(np.nanmin(t))) * 0.95
    ax.set_xlim(lower, float(np.nanmax(np.fmax(t, finite_hi))) * 1.02)
    if title:
        ax.set_title(title)
    return projected(fig) if own else fig  # the projection style, on a figure of its own


def plot_tau_by_layer(layers: Sequence[int], tau: Sequence[float], lo: Sequence[float], hi: Sequence[float], *,
                      reference: float | None = None, ax: Axes | None = None) -> Figure:
    """Tau of drafters that read one layer, across depth, with intervals [lo, hi] and an
    optional dashed ``reference`` (the default triple's tau)."""
    fig, ax = _ax(ax, figsize=(6.4, 3.6))
    t = np.asarray(tau, dtype=float)
    ax.errorbar(list(layers), t, yerr=[t - np.asarray(lo, float), np.asarray(hi, float) - t], fmt="-o", ms=4,
                capsize=2, label="drafter reading one layer")
    if reference is not None:
        ax.axhline(reference, color="black", ls="--", lw=1, label="EAGLE-3 default triple")
    ax.set_xlabel("layer read by the drafter (0 = embeddings)")
    ax.set_ylabel("$\\tau$ (tokens / target forward)")
    ax.legend(frameon=False, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize="small")  # above the axes
    return fig


def plot_sweep(layers: Sequence[int], tau: Sequence[float], lo: Sequence[float], hi: Sequence[float],
               profile: Any, *, reference: float | None = None,
               seeds: Mapping[int, Sequence[float]] | None = None) -> Figure:
    """The single-layer sweep (top) over depth beside the layer profile of the statistics
    (``profile``: a chapter-6 ``LayerProfile``): Renyi-2 entropy, median token norm with its
    ratio to the previous layer, and CKA to the previous layer. ``seeds`` (layer -> tau of
    each seed) marks the single seeds of the layers trained more than once, so that the
    seed spread is seen beside the intervals over prompts."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, figsize=(7.2, 9.0), sharex=True, layout="constrained")
    plot_tau_by_layer(layers, tau, lo, hi, reference=reference, ax=axes[0])
    if seeds:
        xs = [layer for layer, ts in seeds.items() for _ in ts]
        ys = [t for ts in seeds.values() for t in ts]
        axes[0].scatter(xs, ys, marker="_", s=120, color="C3", zorder=3, label="single seeds")
        axes[0].legend(frameon=False, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize="small")
    axes[0].set_xlabel("")
    ids = list(profile.ids)
    axes[1].plot(ids, profile.entropy2, "-o", ms=3, color="C2")
    axes[1].set_ylabel("Renyi-2 entropy\nof the layer (nats)")
    # two quantities, one scale each: the axis labels take the colours and styles of their lines (no legend)
    axes[2].semilogy(ids, profile.median_norm, "-o", ms=3, color="C3")
    axes[2].set_ylabel("median token norm\n(solid, log scale)", color="C3")
    twin = axes[2].twinx()
    twin.plot(ids, [np.nan if r is None else r for r in profile.norm_ratio], ":", color="C4")
    twin.set_ylabel("norm ratio to previous\nlayer (dotted)", color="C4")
    axes[3].plot(ids, [np.nan if c is None else c for c in profile.cka_prev], "-o", ms=3)
    axes[3].set_ylabel("linear CKA to the\nprevious layer")
    axes[3].set_xlabel("layer index (0 = embeddings; N = last block, before the final norm)")
    return fig


def plot_score_vs_tau(scores: Sequence[float], tau: Sequence[float], names: Sequence[str] | None = None, *,
                      ax: Axes | None = None, xlabel: str = "selection score",
                      ylabel: str = "$\\tau$ (tokens / target forward)", title: str | None = None) -> Figure:
    """Scatter of a layer-set score against the drafter's tau, with Spearman's rho in the title."""
    from scipy.stats import spearmanr

    fig, ax = _ax(ax)
    s, t = np.asarray(scores, dtype=float), np.asarray(tau, dtype=float)
    names = list(names) if names is not None else [""] * len(s)
    placed: list[tuple[float, float]] = []  # label anchors in axis-fraction units
    span = [(float(np.nanmin(v)), float(np.nanmax(v) - np.nanmin(v)) or 1.0) if np.isfinite(v).any() else (0.0, 1.0)
            for v in (s, t)]
    for i, (a, b, n) in enumerate(zip(s, t, names)):
        ax.scatter([a], [b], color=method_color(n, i) if n else "C0", zorder=3)
        if n:
            u, v = (a - span[0][0]) / span[0][1], (b - span[1][0]) / span[1][1]
            crowded = any(abs(u - pu) < 0.15 and abs(v - pv) < 0.05 for pu, pv in placed)
            placed.append((u, v))  # a label near an earlier one goes below its point, not over it
            ax.annotate(set_label(n), (a, b), textcoords="offset points", xytext=(4, -11) if crowded else (4, 4),
                        fontsize="small")
    ok = np.isfinite(s) & np.isfinite(t)
    rho = spearmanr(s[ok], t[ok]).statistic if ok.sum() >= 3 else float("nan")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    rho_text = "n/a" if math.isnan(rho) else f"{rho:.2f}"
    ax.set_title((title + "\n" if title else "") + f"Spearman rho = {rho_text} (n = {int(ok.sum())})")
    return fig


def plot_scores_vs_tau(scores: Mapping[str, Sequence[float]], tau: Sequence[float], names: Sequence[str], *,
                       ylabel: str = "tau (tokens / target forward)", fig: Figure | None = None) -> Figure:
    """One :func:`plot_score_vs_tau` panel per score, side by side, on the same sets:
    ``scores`` maps each panel's x label to one score per set (the order of ``names`` and
    ``tau``)."""
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure(figsize=(5.5 * max(len(scores), 1), 4), layout="constrained")
    else:
        fig.clear()
    axes = np.atleast_1d(fig.subplots(1, max(len(scores), 1)))
    for ax, (label, x) in zip(axes, scores.items()):
        plot_score_vs_tau(x, tau, names, ax=ax, xlabel=label, ylabel=ylabel)
    return fig


def plot_key_figure(ids: Sequence[int], sets: Mapping[str, Sequence[int]], names: Sequence[str],
                    tau: Sequence[float], lo: Sequence[float], hi: Sequence[float], *,
                    compartments: Sequence[tuple[int, int]] | None = None, entropy: Sequence[float] | None = None,
                    xlabel: str = "tau (tokens / target forward)", fig: Figure | None = None) -> Figure:
    """The landing page's figure: left, the layer sets the selection rules pick over the
    compartments and layer entropy (:func:`~activation_wave.plots.layer_figures.plot_selection_map`);
    right, the tau of drafters reading the triples (``names``, ``tau`` and the interval
    ``lo``-``hi``, first on top; :func:`plot_tau`)."""
    import matplotlib.pyplot as plt

    from activation_wave.plots.layer_figures import plot_selection_map

    if fig is None:
        fig = plt.figure(figsize=(12, 4.2), layout="constrained")
    else:
        fig.clear()
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.2, 1]})
    plot_selection_map(ids, sets, compartments=compartments, entropy=entropy, ax=left,
                       title="Which layers each rule picks")
    plot_tau(names, tau, lo, hi, ax=right, title="Drafters reading those layers", xlabel=xlabel)
    return projected(fig)  # the projection style: a class projects the landing figure


def plot_cost_model(costs: Mapping[str, Any], measured: Sequence[tuple[float, float, str]] = (), *,
                    depth: int | None = None, ax: Axes | None = None, tau_max: float | None = None,
                    title: str | None = "Cost model: predicted vs measured speedup") -> Figure:
    """Predicted speedup against tau for one round's measured cost, with measured runs on top.

    ``costs`` comes from :func:`~activation_wave.decode.timing.measure_costs`; the curve is
    ``tau * step_ms / round_ms`` with ``round_ms = verify_ms[depth + 1] + draft_chain_ms``.
    ``measured`` holds ``(tau, measured speedup, label)`` points. The dotted vertical line
    is the ceiling tau = depth + 1, the dashed horizontal one break-even (speedup 1).
    """
    from activation_wave.decode.costs import cost_model

    fig, ax = _ax(ax)
    depth = int(costs.get("depth", 4) if depth is None else depth)
    ceiling_tau = depth + 1
    taus = np.linspace(1.0, tau_max or ceiling_tau, 50)
    pred = [cost_model(float(t), dict(costs), depth)["speedup"] for t in taus]
    ax.plot(taus, pred, color="black", label=f"predicted (depth {depth})")
    ax.axhline(1.0, ls="--", color="grey", lw=1, label="break-even")
    ax.axvline(ceiling_tau, ls=":", color="grey", lw=1, label=f"ceiling tau = {ceiling_tau}")
    for i, (t, sp, label) in enumerate(measured):
        ax.scatter([t], [sp], color=method_color(label, i), zorder=3, label=f"{label} (measured)")
    ax.set_xlabel("tau (tokens / target forward)")
    ax.set_ylabel("speedup over plain decoding")
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def plot_verify_cost(costs: Mapping[str, Any], *, ax: Axes | None = None,
                     title: str | None = "Cost of one target forward vs tokens verified") -> Figure:
    """Verify time relative to a one-token step, against the number of tokens checked at once."""
    fig, ax = _ax(ax)
    v = {int(k): float(t) for k, t in costs["verify_ms"].items()}
    ks = sorted(v)
    step = v[1]
    ax.plot(ks, [v[k] / step for k in ks], marker="o", color="black", label="target forward")
    if "draft_step_ms" in costs:
        ax.axhline(costs["draft_step_ms"] / step, ls=":", color="C1",
                   label=f"one draft step ({costs['draft_step_ms']:.1f} ms)")
    ax.axhline(1.0, ls="--", color="grey", lw=1)
    ax.set_xlabel("tokens in one forward")
    ax.set_ylabel(f"time / one-token step ({step:.0f} ms)")
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def plot_training_curves(log: Mapping[str, Any], *, ax: Axes | None = None,
                         title: str | None = "Drafter training: loss per unrolled step") -> Figure:
    """Loss of each training-time-test step over epochs, from a ``train_log.json``."""
    fig, ax = _ax(ax)
    epochs = log["epochs"]
    steps = len(epochs[0]["loss_by_step"])
    x = np.arange(1, len(epochs) + 1)
    for j in range(steps):
        ax.plot(x, [e["loss_by_step"][j] for e in epochs], marker="o", label=f"step {j + 1}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross entropy (nats)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize="small", ncol=2)
    if title:
        ax.set_title(title)
    return fig
