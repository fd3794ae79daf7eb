"""Figures of the data-and-capture chapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from activation_wave.plots._style import _ax

__all__ = ["plot_norm_profile", "plot_response_lengths"]


def plot_norm_profile(profile: Mapping[str, np.ndarray], layers: Sequence[int] | None = None, *,
                      ax: Axes | None = None, title: str | None = None) -> Figure:
    """Median / 99th-percentile / max token norm per layer index, log scale."""
    fig, ax = _ax(ax)
    x = np.asarray(layers if layers is not None else np.arange(len(profile["median_norm"])))
    for key, label, style in (("median_norm", "median token norm", "-o"), ("p99_norm", "99th percentile", "--"),
                              ("max_norm", "max token norm", ":")):
        ax.plot(x, profile[key], style, ms=3, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("layer index (hidden_states; 0 = embeddings)")
    ax.set_ylabel("L2 norm of a token's hidden state")
    ax.legend(frameon=False)
    if title:
        ax.set_title(title)
    return fig


def plot_response_lengths(lengths_by_group: Mapping[str, Sequence[int]], *, ax: Axes | None = None) -> Figure:
    """Histogram of response lengths (tokens) per group (e.g. per prompt source)."""
    fig, ax = _ax(ax)
    for name, lengths in lengths_by_group.items():
        ax.hist(lengths, bins=30, alpha=0.6, label=f"{name} (n={len(lengths)})")
    ax.set_xlabel("response length (tokens)")
    ax.set_ylabel("number of responses")
    ax.legend(frameon=False)
    return fig
