"""Figures of chapters 1-5: entropy over depth, pair concatenations, CKA and compartments,
token filtering, stability, and the layer sets each selection method picks.

Each function takes data (arrays, :class:`~activation_wave.measure.entropy.EntropyBand`,
selections as layer-id lists), an optional ``ax``, and returns the Figure. Layer
axes are labelled with ``hidden_states`` indices.

>>> import numpy as np, matplotlib
>>> matplotlib.use("Agg")
>>> fig = plot_cka(range(4), np.eye(4), compartments=[(0, 1), (2, 3)])
>>> fig.axes[0].get_title()
'Linear CKA between layers'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from activation_wave.measure.entropy import EntropyBand, normalized
from activation_wave.plots._style import (CMAP_DIV, CMAP_SEQ, CYCLE, FIGSIZE_SQUARE, _ax, layer_axis, method_color,
                                          projected)

__all__ = [
    "plot_cka",
    "plot_cka_grid",
    "plot_compartment_elbow",
    "plot_entropy_depth",
    "plot_entropy_normalisations",
    "plot_filter_comparison",
    "plot_lambda_sweep",
    "plot_layer_frequency",
    "plot_norm_ratio",
    "plot_pair_entropy",
    "plot_selection_map",
    "plot_stability_tokens",
    "plot_token_entropy_hist",
]

Curve = EntropyBand | Sequence[float] | np.ndarray


def _curve(c: Curve) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    if isinstance(c, EntropyBand):
        return np.asarray(c.mean), np.asarray(c.lo), np.asarray(c.hi)
    return np.asarray(c, dtype=float), None, None


def _norm_scale(c: Curve, how: str, d: int | None, n: int | None) -> float:
    """Divisor turning a raw entropy curve into the ``how`` normalisation."""
    if how == "raw":
        return 1.0
    if n is None and isinstance(c, EntropyBand):
        # prompt entropy averages prompts of different lengths: use the mean prompt length
        n = c.n_tokens if c.kind == "dataset" else max(2, round(c.n_tokens / max(c.n_prompts, 1)))
    if (how in ("log_n", "min") and n is None) or (how in ("log_d", "min") and d is None):
        raise ValueError(f"normalisation {how!r} needs n (tokens) and/or d (width); pass n=/d= or EntropyBand curves")
    return 1.0 / float(normalized(1.0, n or 2, d or 2, how))


def plot_entropy_depth(
    ids: Sequence[int],
    curves: Mapping[str, Curve],
    *,
    how: str = "raw",
    d: int | None = None,
    n: int | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Entropy against depth: one line per curve (e.g. prompt / dataset), bootstrap bands shaded.

    Args:
        ids: layer ids of the x axis (``[L]``).
        curves: label -> :class:`EntropyBand` or ``[L]`` values (nats).
        how: ``"raw"`` or a normalisation of :func:`~activation_wave.measure.entropy.normalized`
            (``"log_n"``, ``"log_d"``, ``"min"``); ``n`` defaults to the band's token count
            (mean prompt length for prompt entropy), ``d`` must be given for ``log_d``/``min``.
    """
    own = ax is None
    fig, ax = _ax(ax)
    x = np.asarray(list(ids))
    for i, (label, c) in enumerate(curves.items()):
        m, lo, hi = _curve(c)
        s = _norm_scale(c, how, d, n)
        ax.plot(x, m / s, marker="o", ms=3, color=CYCLE[i % len(CYCLE)], label=label)
        if lo is not None:
            ax.fill_between(x, lo / s, hi / s, color=CYCLE[i % len(CYCLE)], alpha=0.2, lw=0)
    layer_axis(ax, x)
    names = {"log_n": "log n", "log_d": "log d", "min": "min(log n, log d)"}
    ax.set_ylabel("matrix entropy (nats)" if how == "raw" else f"entropy / {names.get(how, how)}")
    ax.set_title(title or "Matrix entropy over depth")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(frameon=False, fontsize="small")
    return projected(fig) if own else fig  # the projection style, on a figure of its own


def _heat(ax: Axes, ids: Sequence[int], A: np.ndarray, cmap: str, label: str, **kw) -> None:
    ids = list(ids)
    im = ax.imshow(A, cmap=cmap, origin="upper", interpolation="nearest", **kw)
    step = max(1, -(-len(ids) // 12))
    ticks = np.arange(0, len(ids), step)
    ax.set_xticks(ticks, [ids[t] for t in ticks])
    ax.set_yticks(ticks, [ids[t] for t in ticks])
    ax.set_xlabel("layer (hidden_states index)")
    ax.set_ylabel("layer (hidden_states index)")
    ax.figure.colorbar(im, ax=ax, label=label, shrink=0.85)


def plot_pair_entropy(
    ids: Sequence[int],
    pair: np.ndarray,
    *,
    kind: str = "entropy",
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Heat map of pair concatenation entropy ``S([Z_a | Z_b])`` (``[L, L]``, diagonal = single layers).

    ``kind="gain"`` shows ``S(a, b) - max(S(a), S(b))``, the gain over the better of
    the two layers alone, on a diverging scale centred at 0.
    """
    fig, ax = _ax(ax, FIGSIZE_SQUARE)
    P = np.asarray(pair, dtype=float)
    if kind == "entropy":
        _heat(ax, ids, P, CMAP_SEQ, "concatenation entropy (nats)")
        ax.set_title(title or "Entropy of pair concatenations")
    elif kind == "gain":
        s = np.diag(P)
        G = P - np.maximum(s[:, None], s[None, :])
        v = float(np.nanmax(np.abs(G))) or 1.0
        _heat(ax, ids, G, CMAP_DIV, "gain over better single layer (nats)", vmin=-v, vmax=v)
        ax.set_title(title or "Gain of a pair over its better layer")
    else:
        raise ValueError(f"kind={kind!r}: choose 'entropy' or 'gain'")
    return fig


def _positions(ids: Sequence[int], a: int, b: int) -> tuple[int, int]:
    where = {int(i): p for p, i in enumerate(ids)}
    return where[int(a)], where[int(b)]


def plot_cka(
    ids: Sequence[int],
    C: np.ndarray,
    *,
    compartments: Sequence[tuple[int, int]] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """CKA heat map ``[L, L]`` with compartment boundaries (inclusive id ranges) outlined."""
    own = ax is None
    fig, ax = _ax(ax, FIGSIZE_SQUARE)
    ids = list(ids)
    _heat(ax, ids, np.asarray(C, dtype=float), CMAP_SEQ, "linear CKA", vmin=0.0, vmax=1.0)
    for a, b in compartments or []:
        s, e = _positions(ids, a, b)
        ax.add_patch(Rectangle((s - 0.5, s - 0.5), e - s + 1, e - s + 1, fill=False, ec="white", lw=1.6))
    ax.set_title(title or "Linear CKA between layers")
    return projected(fig) if own else fig  # the projection style, on a figure of its own


def plot_compartment_elbow(W: Sequence[float], k: int | None = None, *, ax: Axes | None = None) -> Figure:
    """Within-compartment scatter ``W(k)`` against the number of compartments, chosen k marked."""
    fig, ax = _ax(ax)
    W = np.asarray(W, dtype=float)
    ks = np.arange(1, len(W) + 1)
    ax.plot(ks, W, marker="o", color=CYCLE[0])
    ax.plot([1, len(W)], [W[0], W[-1]], ls=":", color="grey", label="chord")
    if k is not None:
        ax.axvline(k, color=CYCLE[3], ls="--", label=f"chosen k = {k}")
    ax.set_xlabel("number of compartments k")
    ax.set_ylabel("within-compartment scatter W(k)")
    ax.set_title("Choosing the number of compartments")
    ax.legend(frameon=False, fontsize="small")
    ax.grid(alpha=0.3)
    return fig


def plot_filter_comparison(
    ids: Sequence[int],
    curves: Mapping[str, Curve],
    *,
    delta: bool = False,
    ylabel: str = "matrix entropy (nats)",
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """The same statistic under several token filters (first curve = the unfiltered reference).

    ``delta=True`` plots each curve minus the first instead, which shows where a
    filter (entropy threshold, dropping the first position, median centring) moves
    the profile.
    """
    own = ax is None
    fig, ax = _ax(ax)
    x = np.asarray(list(ids))
    items = list(curves.items())
    ref = _curve(items[0][1])[0] if items else None
    styles = ["-", "--", "-.", ":"]
    for i, (label, c) in enumerate(items):
        m, lo, hi = _curve(c)
        off = ref if delta else 0.0
        if delta and i == 0:
            ax.axhline(0.0, color=CYCLE[0], lw=1, label=f"{label} (reference)")
            continue
        ax.plot(x, m - off, ls=styles[i % len(styles)], marker="o", ms=3, color=CYCLE[i % len(CYCLE)], label=label)
        if lo is not None and not delta:
            ax.fill_between(x, lo, hi, color=CYCLE[i % len(CYCLE)], alpha=0.15, lw=0)
    layer_axis(ax, x)
    ax.set_ylabel(f"difference in {ylabel}" if delta else ylabel)
    ax.set_title(title or ("Effect of token filtering" if not delta else "Change from unfiltered"))
    ax.grid(alpha=0.3)
    if items:
        ax.legend(frameon=False, fontsize="small")
    return projected(fig) if own else fig  # the projection style, on a figure of its own


def plot_stability_tokens(
    n_tokens: Sequence[int],
    values: Mapping[str, np.ndarray | Sequence[float]],
    *,
    ylabel: str = "value",
    logx: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """A statistic against the number of tokens it was computed from.

    ``values``: label -> ``[T]`` (one value per token count) or ``[T, R]`` (R seeded
    replicates: mean line and min-max band), e.g. a layer's entropy, the CKA of two
    layers, or the fraction of replicates that pick the full-data layer set.
    """
    fig, ax = _ax(ax)
    x = np.asarray(list(n_tokens), dtype=float)
    for i, (label, v) in enumerate(values.items()):
        V = np.asarray(v, dtype=float)
        col = CYCLE[i % len(CYCLE)]
        if V.ndim == 2:
            ax.plot(x, V.mean(1), marker="o", ms=3, color=col, label=label)
            ax.fill_between(x, V.min(1), V.max(1), color=col, alpha=0.2, lw=0)
        else:
            ax.plot(x, V, marker="o", ms=3, color=col, label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("number of tokens")
    ax.set_ylabel(ylabel)
    ax.set_title(title or "Stability against the number of tokens")
    ax.grid(alpha=0.3, which="both")
    if values:
        ax.legend(frameon=False, fontsize="small")
    return fig


def plot_selection_map(
    ids: Sequence[int],
    selections: Mapping[str, Sequence[int]],
    *,
    compartments: Sequence[tuple[int, int]] | None = None,
    entropy: Sequence[float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Which layers each method picks: one row per method, markers at the chosen depths.

    Compartments (inclusive id ranges) are shaded in alternating tones; an optional
    single-layer entropy profile ``[L]`` is drawn faintly on a right-hand axis.
    """
    own = ax is None
    fig, ax = _ax(ax, (6.4, 0.45 * max(len(selections), 3) + 1.4))
    ids = list(ids)
    for j, (a, b) in enumerate(compartments or []):
        ax.axvspan(a - 0.5, b + 0.5, color="0.85" if j % 2 == 0 else "0.94", zorder=0, lw=0)
    names = list(selections)
    for r, name in enumerate(names):
        sel = list(selections[name])
        ax.scatter(sel, [r] * len(sel), s=60, color=method_color(name, r), edgecolor="black", lw=0.5, zorder=3)
        ax.plot([min(ids), max(ids)], [r, r], color="0.7", lw=0.5, zorder=1)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(min(ids) - 0.5, max(ids) + 0.5)
    layer_axis(ax, ids)
    if entropy is not None:
        tw = ax.twinx()
        tw.plot(ids, np.asarray(entropy, dtype=float), color=CYCLE[0], alpha=0.4, lw=1.2)
        tw.set_ylabel("single-layer entropy (nats)", color=CYCLE[0])
    ax.set_title(title or "Selected layers per method")
    return projected(fig) if own else fig  # the projection style, on a figure of its own


def plot_lambda_sweep(sweep, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Concatenation entropy and mean CKA of the ``combined`` selection against ``lam``.

    ``sweep`` is the DataFrame of :func:`~activation_wave.select.selection.sweep_lambda`; each
    layer set is annotated where it first appears.
    """
    fig, ax = _ax(ax)
    lam = np.asarray(sweep["lam"], dtype=float)
    ax.plot(lam, sweep["renyi2"], marker="o", color=CYCLE[0], label="concat. entropy S2")
    ax.set_xlabel("CKA weight lambda")
    ax.set_ylabel("concatenation entropy S2 (nats)", color=CYCLE[0])
    tw = ax.twinx()
    tw.plot(lam, sweep["mean_cka"], marker="s", color=CYCLE[1], label="mean pairwise CKA")
    tw.set_ylabel("mean pairwise CKA", color=CYCLE[1])
    prev = None
    for x, y, s in zip(lam, sweep["renyi2"], sweep["ids"]):
        if tuple(s) != prev:  # label each set once, where it first appears
            ax.annotate(str(list(s)), (x, y), textcoords="offset points", xytext=(4, 6), fontsize="x-small")
        prev = tuple(s)
    ax.margins(x=0.08, y=0.2)
    ax.set_title(title or "Trading entropy against diversity")
    ax.grid(alpha=0.3)
    return fig


# ------------------------------------------------------------- multi-panel helpers
def _grid(n: int, ncols: int, panel: tuple[float, float]):
    import matplotlib.pyplot as plt

    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained",
                             squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def plot_entropy_normalisations(
    ids: Sequence[int],
    curves: Mapping[str, Curve],
    *,
    d: int,
    n: int | None = None,
    hows: Sequence[str] = ("raw", "log_n", "log_d", "min"),
) -> Figure:
    """The same entropy curves under each normalisation of Skean et al., one panel each (2 x 2).

    ``n`` defaults per curve as in :func:`plot_entropy_depth` (mean prompt length for
    prompt entropy, pooled token count for dataset entropy); ``d`` is the hidden size.
    """
    fig, axes = _grid(len(hows), 2, (4.6, 3.2))
    titles = {"raw": "raw (nats)", "log_n": "divided by log n", "log_d": "divided by log d",
              "min": "divided by min(log n, log d)"}
    for ax, how in zip(axes, hows):
        plot_entropy_depth(ids, curves, how=how, d=d, n=n, ax=ax, title=titles.get(how, how))
    return fig


def plot_cka_grid(
    ids: Sequence[int],
    mats: Mapping[str, np.ndarray],
    *,
    compartments: Mapping[str, Sequence[tuple[int, int]]] | None = None,
    ncols: int = 2,
) -> Figure:
    """Several CKA heat maps side by side (label -> ``[L, L]``), each with its compartments outlined."""
    fig, axes = _grid(len(mats), min(ncols, max(len(mats), 1)), FIGSIZE_SQUARE)
    for ax, (label, C) in zip(axes, mats.items()):
        plot_cka(ids, C, compartments=(compartments or {}).get(label), ax=ax, title=label)
    return fig


def plot_token_entropy_hist(
    entropy: Sequence[float] | np.ndarray,
    threshold: float | None = None,
    *,
    bins: int = 40,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Histogram of the target's next-token entropy over positions, with the filter's cut marked."""
    fig, ax = _ax(ax)
    e = np.asarray(entropy, dtype=float)
    e = e[np.isfinite(e)]
    ax.hist(e, bins=bins, color=CYCLE[0], alpha=0.8)
    if threshold is not None:
        kept = float((e >= threshold).mean()) if e.size else 0.0
        ax.axvline(threshold, color=CYCLE[3], ls="--", label=f"cut {threshold:.2f} nats (keeps {kept:.0%})")
        ax.legend(frameon=False, fontsize="small")
    ax.set_xlabel("next-token entropy of the target (nats)")
    ax.set_ylabel("number of positions")
    ax.set_title(title or "How uncertain is the target?")
    return fig


def plot_norm_ratio(
    ids: Sequence[int],
    curves: Mapping[str, Sequence[float] | np.ndarray],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Token norm divided by the layer's median token norm, per layer (log scale), one line per group."""
    fig, ax = _ax(ax)
    x = np.asarray(list(ids))
    for i, (label, v) in enumerate(curves.items()):
        ax.plot(x, np.asarray(v, dtype=float), marker="o", ms=3, color=CYCLE[i % len(CYCLE)], label=label)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_yscale("log")
    layer_axis(ax, x)
    ax.set_ylabel("token norm / median token norm")
    ax.set_title(title or "How far outlier tokens stick out")
    ax.grid(alpha=0.3, which="both")
    if curves:
        ax.legend(frameon=False, fontsize="small")
    return fig


def plot_layer_frequency(
    ids: Sequence[int],
    freqs: Mapping[str, Mapping[int, float]],
    *,
    selected: Mapping[str, Sequence[int]] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """How often each layer is chosen across bootstrap replicates: one row per method.

    ``freqs``: method -> {layer id: fraction of replicates choosing it}; ``selected``
    (optional): method -> the set chosen on all the data, outlined.
    """
    ids = list(ids)
    names = list(freqs)
    fig, ax = _ax(ax, (6.4, 0.42 * max(len(names), 3) + 1.5))
    A = np.array([[float(freqs[m].get(i, 0.0)) for i in ids] for m in names]) if names else np.zeros((0, len(ids)))
    im = ax.imshow(A, cmap=CMAP_SEQ, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    for r, m in enumerate(names):
        for i in (selected or {}).get(m, []):
            if int(i) in ids:
                c = ids.index(int(i))
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="red", lw=1.4))
    step = max(1, -(-len(ids) // 16))
    ax.set_xticks(range(0, len(ids), step), [ids[t] for t in range(0, len(ids), step)])
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("layer (hidden_states index)")
    ax.figure.colorbar(im, ax=ax, label="fraction of bootstrap replicates", shrink=0.9)
    ax.set_title(title or "How often each layer is chosen")
    return fig
