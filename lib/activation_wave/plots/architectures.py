"""Figures of the cross-model chapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from activation_wave.plots._style import LAYER_LABEL, _ax, model_label, set_label

__all__ = ["plot_entropy_relative_depth", "plot_cross_sweep", "plot_cka_models", "plot_selection_models"]


def plot_entropy_relative_depth(summaries: Sequence[Any], *, ax: Axes | None = None,
                                normalise: bool = True) -> Figure:
    """Layer entropy against relative depth (layer index / N), one line per model
    (:class:`~activation_wave.select.across_models.ModelSummary` objects), the EAGLE-3 default
    layers crossed; the legend sits below the axes, off the data.

    With ``normalise`` the entropy is divided by log(min(n, d)), the largest value it can
    take for n tokens of width d, so models of different widths share one scale.
    """
    fig, ax = _ax(ax, (6.4, 4.2))
    for i, s in enumerate(summaries):
        e = np.asarray(s.entropy, float)
        if normalise:
            e = e / np.log(min(s.n_tokens, s.hidden_size))
        ax.plot(s.relative_depth, e, "-o", ms=3, color=f"C{i}",
                label=f"{model_label(s.model)} (N = {s.n_layers}, width {s.hidden_size})")
        if s.default:
            d = np.asarray(s.default) / s.n_layers
            ax.plot(d, np.interp(d, s.relative_depth, e), "kx", ms=8,
                    label="EAGLE-3 default layers" if i == len(summaries) - 1 else None)
    ax.set_xlabel("relative depth (layer index / N)")
    ax.set_ylabel("matrix entropy / log min(n, d)" if normalise else "matrix entropy (nats)")
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small")
    return fig


def plot_cross_sweep(frame: Any, profiles: Sequence[tuple[str, int, Any]]) -> Figure:
    """Single-layer drafters of several models against relative depth (top: tau with its
    interval; ``frame`` from :func:`~activation_wave.study.chapters.cross_drafters.sweep_frame`)
    above each model's Renyi-2 entropy per layer (``profiles``: (model, N, LayerProfile)).
    One legend, above the top panel, off the data."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(7.2, 6.6), sharex=True, layout="constrained")
    for i, (model, n_layers, profile) in enumerate(profiles):
        f = frame[frame["model"] == model]
        t = f["tau"].to_numpy(float)
        axes[0].errorbar(f["relative depth"], t, yerr=[t - f["lo"].to_numpy(float), f["hi"].to_numpy(float) - t],
                         fmt="-o", ms=3, capsize=2, color=f"C{i}", label=f"{model_label(model)} (N = {n_layers})")
        ids = [j for j in profile.ids if j >= 1]
        e = [profile.entropy2[profile.ids.index(j)] for j in ids]
        axes[1].plot(np.asarray(ids) / n_layers, e, "-o", ms=3, color=f"C{i}")
    axes[0].set_ylabel("$\\tau$ of a drafter reading\none layer (tokens / forward)")
    axes[0].legend(frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(profiles))
    axes[1].set_ylabel("Renyi-2 entropy\nof the layer (nats)")
    axes[1].set_xlabel("relative depth of the layer read (layer index / N; 1 = last block, before the final norm)")
    return fig


def _model_axes(n: int, figsize: tuple[float, float], fig: Figure | None) -> tuple[Figure, list[Axes]]:
    """One panel per model side by side, on ``fig`` (cleared) or a new figure."""
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure(figsize=figsize, layout="constrained")
    else:
        fig.clear()
    return fig, list(np.atleast_1d(fig.subplots(1, max(n, 1))))


def plot_cka_models(summaries: Sequence[Any], *, fig: Figure | None = None) -> Figure:
    """Each model's CKA map with its compartments outlined, side by side
    (:class:`~activation_wave.select.across_models.ModelSummary` objects)."""
    from activation_wave.plots.layer_figures import plot_cka

    fig, axes = _model_axes(len(summaries), (11, 4.6), fig)
    for ax, s in zip(axes, summaries):
        plot_cka(s.ids, s.cka, compartments=s.compartments, ax=ax,
                 title=f"{model_label(s.model)}\n{len(s.compartments)} compartments")
        ax.set_xlabel(LAYER_LABEL)
        ax.set_ylabel(LAYER_LABEL)
    return fig


def plot_selection_models(summaries: Sequence[Any], *, fig: Figure | None = None) -> Figure:
    """Each model's selected layer sets (the EAGLE-3 default among them) over its
    compartments and layer entropy, side by side."""
    from activation_wave.plots.layer_figures import plot_selection_map

    fig, axes = _model_axes(len(summaries), (11, 3.8), fig)
    for ax, s in zip(axes, summaries):
        shown = {**s.sets, **({"eagle3-default": s.default} if s.default else {})}
        plot_selection_map(s.ids, shown, compartments=s.compartments, entropy=s.entropy, ax=ax,
                           title=model_label(s.model))
        ax.set_yticks(range(len(shown)), [set_label(n) for n in shown])
        ax.set_xlabel(LAYER_LABEL)
    return fig
