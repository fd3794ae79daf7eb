"""One look for every figure: the ``_ax`` helper, colour choices and small labelling helpers.

Every plotting function in :mod:`activation_wave.plots` takes ``ax=None`` and
returns the Figure; ``_ax`` makes a new figure when no axes are given. Nothing
here selects a backend, so the functions are safe under Agg (CI, papermill).

>>> fig, ax = _ax(None)
>>> fig is ax.figure
True
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: Default figure size (inches) of a single panel.
FIGSIZE = (6.4, 3.6)
#: Square panels (heat maps).
FIGSIZE_SQUARE = (5.2, 4.4)
#: Sequential colour map for similarities / entropies, diverging one for signed gains.
CMAP_SEQ = "viridis"
CMAP_DIV = "RdBu_r"
#: Fixed colours for the selection methods, so a method looks the same in every chapter.
METHOD_COLORS = {
    "entropy-greedy": "#1b9e77",
    "combined": "#d95f02",
    "exhaustive": "#7570b3",
    "cka-diverse": "#e7298a",
    "eagle3-default": "#000000",
    "last-k": "#66a61e",
    "evenly-spaced": "#e6ab02",
    "random": "#999999",
}
#: How a figure names the embedded models (an alias not listed keeps its own name).
MODEL_NAMES = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma-3-270M", "qwen2.5-coder-1.5b": "Qwen2.5-Coder-1.5B"}
#: How a figure names a layer set whose code name is not plain words.
SET_NAMES = {"eagle3-default": "EAGLE-3 default", "last-k": "last three", "evenly-spaced": "evenly spaced"}
#: The depth axis of every figure: a layer index counts the embedding output as 0.
LAYER_LABEL = "layer (0 = embeddings, N = last block)"
#: Cycle for other curves (tab10 order).
CYCLE = matplotlib.colormaps["tab10"].colors

#: Projection: a figure a class projects keeps every label at least PROJECTION_PX pixels (the font's
#: size, its em) when its page is shown PROJECTION_VIEWPORT pixels wide. There the book's text column,
#: and so an image wider than it (images shrink to the column, never grow), is CONTENT_PX wide
#: (672 px measured in Chromium on the built book, less a margin; scripts/check_book.py measures it on
#: every build).
PROJECTION_PX = 12
PROJECTION_VIEWPORT = 1280
CONTENT_PX = 660
#: The figures a class projects, by page (the teacher's page lists when): the check measures them.
PROJECTED = {
    "chapters/intro": ("fig-key",),
    "chapters/01_layer_entropy": ("fig-entropy-depth",),
    "chapters/03_cka_compartments": ("fig-cka",),
    "chapters/04_token_filtering": ("fig-sink-entropy",),
    "chapters/05_layer_selection": ("fig-selection-map",),
    "chapters/06_eagle3_speedup": ("fig-tau-sets",),
}


def _ax(ax: Axes | None = None, figsize: tuple[float, float] = FIGSIZE) -> tuple[Figure, Axes]:
    """``(figure, axes)``: the given axes and their figure, or a new single-panel figure.

    New figures come from pyplot (so ``plt.show()`` and notebook inline display
    work); callers that draw many figures should ``plt.close(fig)`` after saving.
    """
    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        return fig, ax
    return ax.get_figure(root=True) if hasattr(ax, "get_figure") else ax.figure, ax


def projection_pt(width_in: float, dpi: float = 100.0) -> float:
    """The smallest font size (points) a figure ``width_in`` inches wide, saved at ``dpi``, may use
    so that its text is :data:`PROJECTION_PX` pixels or more on a page :data:`PROJECTION_VIEWPORT`
    wide: an image wider than :data:`CONTENT_PX` is shrunk to it, so its text shrinks too.

    >>> round(projection_pt(6.4), 2), round(projection_pt(12.0), 2)
    (8.64, 15.71)
    """
    shrink = min(1.0, CONTENT_PX / (width_in * dpi))
    return PROJECTION_PX * 72.0 / (dpi * shrink)


def projected(fig: Figure) -> Figure:
    """The projection style: raise every text of ``fig`` (titles, axis labels, tick labels, legends,
    annotations, colour bars) that is smaller than :func:`projection_pt` of the figure's width to
    it, so the figure reads on a projector; returns ``fig``. Applied by the plotting functions of
    the figures a class projects (:data:`PROJECTED`)."""
    from matplotlib.text import Text

    # The book saves a figure cropped to what it draws (bbox_inches="tight", the inline backend's
    # default), so the image can be wider than the figure (a label past its edge) or narrower: the
    # smallest font follows the image's width, found by laying the figure out again until it settles.
    pad = float(matplotlib.rcParams["savefig.pad_inches"])
    width = float(fig.get_size_inches()[0])
    for _ in range(4):
        pt = projection_pt(width, float(fig.dpi))
        for ax in fig.axes:
            for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
                labels = axis.get_ticklabels(which="both")
                if labels and min(t.get_fontsize() for t in labels) < pt:
                    ax.tick_params(axis=name, which="both", labelsize=pt)
        for t in fig.findobj(Text):
            if t.get_fontsize() < pt:
                t.set_fontsize(pt)
        fig.canvas.draw()
        drawn = fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * pad
        if projection_pt(drawn, float(fig.dpi)) <= pt + 0.01:
            break
        width = drawn
    return fig


def method_color(name: str, i: int = 0) -> str | tuple:
    """Colour of a selection method (``random-3`` counts as ``random``); others from the cycle."""
    base = name.split("-")[0] if name.startswith("random") else name
    return METHOD_COLORS.get(base, CYCLE[i % len(CYCLE)])


def model_label(name: str) -> str:
    """A model as a figure names it.

    >>> model_label("gemma3-270m"), model_label("org/other")
    ('Gemma-3-270M', 'org/other')
    """
    return MODEL_NAMES.get(name, name)


def set_label(name: str) -> str:
    """A layer set as a figure names it: plain words for the code names (the default, a random
    triple, a single layer, a per-layer norm arm).

    >>> [set_label(n) for n in ("eagle3-default", "random-2", "single-7", "eagle3-default+norm", "combined")]
    ['EAGLE-3 default', 'random 2', 'layer 7', 'EAGLE-3 default + norm', 'combined']
    """
    if name.endswith("+norm"):
        return f"{set_label(name[:-5])} + norm"
    for code, words in (("random-", "random "), ("single-", "layer ")):
        if name.startswith(code) and name[len(code):].isdigit():
            return words + name[len(code):]
    return SET_NAMES.get(name, name)


def layer_axis(ax: Axes, ids: Sequence[int], axis: str = "x", label: str = "layer (hidden_states index)") -> None:
    """Label a depth axis with ``hidden_states`` indices, as many ticks as the axis's
    length holds (about 3 per inch, at most 16), so narrow panels stay legible."""
    ids = list(ids)
    box = ax.get_position()
    inches = (box.width if axis == "x" else box.height) * ax.figure.get_size_inches()[0 if axis == "x" else 1]
    most = int(min(16, max(4, 3 * inches)))
    step = max(1, -(-len(ids) // most))
    ticks = ids[::step]
    if axis == "x":
        ax.set_xlabel(label)
        ax.set_xticks(ticks)
    else:
        ax.set_ylabel(label)
        ax.set_yticks(ticks)


def plot_not_run(text: str) -> Figure:
    """A small figure holding only ``text`` (e.g. "not measured yet: ..."): what a page glues in
    place of a results figure while its study has not run, so the book builds without it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 1.2))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    return fig
