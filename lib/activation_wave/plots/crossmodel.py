"""Figures of the cross-model chapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._style import _ax

__all__ = ["plot_entropy_relative_depth"]


def plot_entropy_relative_depth(summaries: Sequence[Any], *, ax: Axes | None = None,
                                normalise: bool = True) -> Figure:
    """Layer entropy against relative depth (layer index / N), one line per model
    (:class:`~activation_wave.crossmodel.ModelSummary` objects).

    With ``normalise`` the entropy is divided by log(min(n, d)), the largest value it can
    take for n tokens of width d, so models of different widths share one scale.
    """
    fig, ax = _ax(ax)
    for s in summaries:
        e = np.asarray(s.entropy, float)
        if normalise:
            e = e / np.log(min(s.n_tokens, s.hidden_size))
        ax.plot(s.relative_depth, e, "-o", ms=3, label=f"{s.model} (N={s.n_layers}, d={s.hidden_size})")
        if s.default:
            d = np.asarray(s.default) / s.n_layers
            ax.plot(d, np.interp(d, s.relative_depth, e), "kx", ms=8)
    ax.set_xlabel("relative depth (layer index / N)")
    ax.set_ylabel("matrix entropy / log min(n, d)" if normalise else "matrix entropy (nats)")
    ax.legend(frameon=False, title="x: EAGLE-3 default layers")
    return fig
