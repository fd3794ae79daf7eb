"""Figures of the performance chapter: benchmark ratios against targets, memory curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from activation_wave.plots._style import _ax

__all__ = ["plot_ratios", "plot_memory_curve", "plot_scaling", "plot_data_scaling"]


def plot_ratios(names: Sequence[str], ratios: Sequence[float], targets: Sequence[float | None], *,
                ax: Axes | None = None, xlabel: str = "ratio to the baseline measured in the same run") -> Figure:
    """Horizontal bars: each benchmark's ratio, with its target as a tick mark (log scale)."""
    fig, ax = _ax(ax, figsize=(6.4, 0.45 * len(names) + 1.2))
    y = np.arange(len(names))
    ok = [t is None or r >= t for r, t in zip(ratios, targets)]
    ax.barh(y, ratios, color=["#1b9e77" if o else "#d95f02" for o in ok])
    for yi, t in zip(y, targets):
        if t is not None:
            ax.plot([t, t], [yi - 0.4, yi + 0.4], color="black", lw=2)
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel(xlabel + " (black tick: target)")
    ax.invert_yaxis()
    return fig


def plot_memory_curve(curve: Mapping[int, float], baseline: Mapping[int, float] | None = None, *,
                      ax: Axes | None = None) -> Figure:
    """Resident memory against the number of streamed tokens (log x)."""
    fig, ax = _ax(ax)
    if not curve:
        ax.text(0.5, 0.5, "not measured yet: wave bench --only memory_scaling", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_xlabel("tokens streamed (all layers)")
        ax.set_ylabel("memory (MiB)")
        return fig
    n = np.array(sorted(int(k) for k in curve))
    ax.plot(n, [curve[k] if k in curve else curve[str(k)] for k in n], "-o", label="streaming (measured RSS)")
    if baseline:
        ax.plot(n, [baseline[k] if k in baseline else baseline[str(k)] for k in n], "--",
                label="holding all tokens at once (computed)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens streamed (all layers)")
    ax.set_ylabel("memory (MiB)")
    ax.legend(frameon=False)
    return fig


def plot_scaling(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, xlabel: str,
                 ax: Axes | None = None) -> Figure:
    """Time against problem size, one log-log line per measured function."""
    fig, ax = _ax(ax)
    for name, (x, t) in curves.items():
        ax.plot(x, t, "-o", ms=3, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seconds")
    ax.legend(frameon=False)
    return fig


def plot_data_scaling(points: Sequence[Mapping[str, Any]], fit: Mapping[str, float] | None = None, *,
                      ax: Axes | None = None) -> Figure:
    """A drafter's offline tau against its training tokens (log2 x): shares of the greedy
    responses, the log-linear fit over them (dotted where it extrapolates), and points
    trained on extra sampled responses (``samples_per_prompt`` > 0), labelled."""
    fig, ax = _ax(ax)
    if not points:
        ax.text(0.5, 0.5, "not measured yet: wave bench --only drafter_data_scaling", ha="center", va="center",
                transform=ax.transAxes)
    else:
        greedy = [p for p in points if not p.get("samples_per_prompt")]
        sampled = [p for p in points if p.get("samples_per_prompt")]
        n = np.array([p["loss_tokens"] for p in greedy], float)
        ax.plot(n, [p["tau_offline"] for p in greedy], "o", label="share of the greedy responses")
        if fit and len(n):
            grid = np.geomspace(n.min(), n.max(), 50)
            ax.plot(grid, fit["a"] + fit["b"] * np.log2(grid), "--", lw=1, color="C0",
                    label=f"fit: {fit['b']:+.3f} per doubling")
            top = max([n.max()] + [p["loss_tokens"] for p in sampled])
            if top > n.max():
                grid = np.geomspace(n.max(), top, 20)
                ax.plot(grid, fit["a"] + fit["b"] * np.log2(grid), ":", lw=1, color="C0")
        if sampled:
            ax.plot([p["loss_tokens"] for p in sampled], [p["tau_offline"] for p in sampled], "s", color="C1",
                    label="all greedy + k sampled per prompt")
            for p in sampled:
                ax.annotate(f"k={p['samples_per_prompt']}", (p["loss_tokens"], p["tau_offline"]),
                            textcoords="offset points", xytext=(6, -10), fontsize=8)
        ax.set_xscale("log", base=2)
        ax.legend(frameon=False)
    ax.set_xlabel("training tokens (response positions)")
    ax.set_ylabel("offline tau (eval split, T=0)")
    return fig
