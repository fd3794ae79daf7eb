"""Figures of the performance chapter: benchmark ratios against targets, memory curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from activation_wave.plots._style import _ax

__all__ = ["plot_ratios", "plot_memory_curve", "plot_scaling", "plot_data_scaling", "plot_decoding_costs",
           "plot_metric_scaling", "plot_round_costs", "plot_break_even_by_size", "plot_ceiling", "plot_where_it_pays",
           "plot_drafter_stages"]


def plot_ratios(names: Sequence[str], ratios: Sequence[float], targets: Sequence[float | None] | None = None, *,
                ax: Axes | None = None, xlabel: str = "ratio to the baseline measured in the same run") -> Figure:
    """Horizontal bars: each benchmark's ratio on a log scale (above 1: faster than its baseline),
    with its target as a black tick where ``targets`` gives one. Draw ratios of one range on one
    axis (``performance.figure_rows``): a ratio of a million beside ratios near 1 hides them."""
    targets = list(targets) if targets is not None else [None] * len(names)
    fig, ax = _ax(ax, figsize=(9.0, 0.45 * len(names) + 1.2))
    y = np.arange(len(names))
    ok = [(t is None and r >= 1.0) or (t is not None and r >= t) for r, t in zip(ratios, targets)]
    ax.barh(y, ratios, color=["#1b9e77" if o else "#d95f02" for o in ok])
    for yi, t in zip(y, targets):
        if t is not None:
            ax.plot([t, t], [yi - 0.4, yi + 0.4], color="black", lw=2)
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel(xlabel + (" (black tick: target)" if any(t is not None for t in targets) else ""))
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


def _panels(n: int, axes: Sequence[Axes] | None, figsize: tuple[float, float]) -> tuple[Figure, Sequence[Axes]]:
    """``n`` panels side by side: the given ``axes`` (their figure), or a new figure."""
    import matplotlib.pyplot as plt

    if axes is not None:
        if len(axes) != n:
            raise ValueError(f"this figure has {n} panels; got {len(axes)} axes")
        return axes[0].figure, axes
    fig, new = plt.subplots(1, n, figsize=figsize, layout="constrained")
    return fig, list(np.atleast_1d(new))


def plot_decoding_costs(spec: Mapping[str, Any] | None, *, axes: Sequence[Axes] | None = None) -> Figure:
    """Chapter 9's speculative-decoding figure from the ``speculative_decoding`` benchmark entry:
    left, the speedup the measured round costs predict for each tau, with the measured runs
    (chain, tree where it ran, and the adopted drafter's chain where the entry has one) on top;
    right, a verify's cost against the tokens it checks.
    ``spec`` None (not measured yet) gives two panels that say so."""
    from activation_wave.plots.drafters import plot_cost_model, plot_verify_cost

    fig, (left, right) = _panels(2, axes, (12, 4))
    if not spec:
        for ax in (left, right):
            ax.text(0.5, 0.5, "not measured yet: wave bench --only speculative_decoding", ha="center", va="center",
                    transform=ax.transAxes)
        return fig
    costs = spec["cost_model"]["components_ms"]
    measured = [(spec["tau_t0"], spec["speedup_vs_plain_t0"], "chain, T=0")]
    if spec.get("tau_tree_t0") is not None:
        measured.append((spec["tau_tree_t0"], spec["speedup_tree_vs_plain_t0"], "tree, T=0"))
    if spec.get("adopted"):  # issue 41's drafter, decoded in the same rounds
        a = spec["adopted"]
        measured.append((a["tau_t0"], a["speedup_vs_plain_t0"], "data-scale drafter, chain, T=0"))
    plot_cost_model(costs, measured, depth=spec["spec"]["depth"], ax=left, title=None)
    plot_verify_cost(costs, ax=right, title=None)
    right.legend(loc="center right", fontsize="small")  # off the draft-step line at the bottom
    return fig


#: The problem sizes of the metrics benchmark's scaling runs, one panel each.
SCALING_AXES = (("n", "tokens n"), ("L", "layers L"), ("d", "width d"))


def plot_metric_scaling(scaling: Mapping[str, Any] | None, *, axes: Sequence[Axes] | None = None,
                        measures: Sequence[str] = ("pair_products", "layer_entropies")) -> Figure:
    """Chapter 9's scaling figure from the ``metrics`` benchmark's ``scaling`` entry (keys
    ``<measure>_vs_<axis>`` with ``values`` and ``seconds``): one log-log panel per problem
    size (tokens, layers, width), one line per measure."""
    fig, axs = _panels(len(SCALING_AXES), axes, (13, 3.6))
    for ax, (axis, label) in zip(axs, SCALING_AXES):
        curves = {m: (scaling[f"{m}_vs_{axis}"]["values"], scaling[f"{m}_vs_{axis}"]["seconds"])
                  for m in measures if f"{m}_vs_{axis}" in (scaling or {})}
        if curves:
            plot_scaling(curves, xlabel=label, ax=ax)
        else:
            ax.text(0.5, 0.5, "not measured yet: wave bench --only metrics", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_xlabel(label)
    return fig


def plot_round_costs(rows: Sequence[Mapping[str, Any]], *, ax: Axes | None = None) -> Figure:
    """One stacked bar per (target size, threads): an EAGLE-3 round in plain decoding steps,
    split into verify-and-rest and drafting (its height is the break-even tau), with the
    measured tau as a black diamond. ``rows``: chapter 11's ``round_frame`` records."""
    fig, ax = _ax(ax, figsize=(6.4, 3.6))
    labels = [f"{r['target']}, {r['threads']} thr." for r in rows]
    x = np.arange(len(rows))
    verify = np.array([r["verify and rest (steps)"] or 0.0 for r in rows], float)
    draft = np.array([r["drafting (steps)"] or 0.0 for r in rows], float)
    ax.bar(x, verify, color="#7570b3", label="verify and the rest")
    ax.bar(x, draft, bottom=verify, color="#e7298a", label="drafting")
    tau = [r["measured tau"] for r in rows]
    ax.scatter([xi for xi, t in zip(x, tau) if t], [t for t in tau if t], marker="D", color="black", zorder=3,
               label="measured tau (tokens per round)")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xticks(x, labels)
    ax.set_ylabel("plain decoding steps per round")
    ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_break_even_by_size(model: Any, *, ax: Axes | None = None) -> Figure:
    """Break-even tau against the target's weight size (log x): the two measured sizes, the
    cost model's curve through them (dashed where it extrapolates), each measured drafter
    tau as a horizontal line and, where the curve meets it, a dotted vertical line.
    ``model``: chapter 11's ``CostModel`` (None: a panel that says it was not measured)."""
    fig, ax = _ax(ax, figsize=(6.4, 3.8))
    if model is None:
        ax.text(0.5, 0.5, "not measured: both target sizes are needed\n(wave bench --only llamacpp_1.5b)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    s0, s1 = model.sizes_mib
    b0, b1 = model.break_even
    ax.scatter([s0, s1], [b0, b1], color="#d95f02", zorder=3, label="measured (llama.cpp round costs)")
    crossings = [c for c in (model.size_for(t) for t in model.taus.values()) if c]
    right = min(max([s1 * 10, *crossings]) * 1.5, s1 * 100)  # beyond 100x the larger size the line says nothing
    xs = np.geomspace(s0, right, 80)
    ys = np.array([model.break_even_at(x) for x in xs])
    inside = xs <= s1
    ax.plot(xs[inside], ys[inside], color="#d95f02")
    ax.plot(xs[~inside], ys[~inside], color="#d95f02", ls="--", label="overhead line through both (extrapolated)")
    for (label, t), color in zip(model.taus.items(), ("black", "#1b9e77")):
        ax.axhline(t, color=color, lw=1, label=f"tau of the {label} in llama.cpp")
        c = model.size_for(t)
        if c and c <= right:
            ax.axvline(c, color=color, ls=":", lw=1)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")  # a round never costs less than the step it replaces
    ax.set_ylim(bottom=min([1.0, *model.taus.values()]) - 0.05)
    ax.set_xscale("log")
    ax.set_xlabel("target GGUF size (MiB, 4-bit weights)")
    ax.set_ylabel("break-even tau (round cost in plain steps)")
    ax.legend(fontsize=8)
    return fig


#: Line colour per draft depth and style per drafter GGUF variant, in the ceiling figures.
DEPTH_COLORS = {1: "#1b9e77", 2: "#d95f02", 3: "#7570b3", 4: "#e7298a"}
VARIANT_STYLES = {"f16": "-", "q8_0": "--"}


def plot_ceiling(rows: Sequence[Mapping[str, Any]], measured: Sequence[Mapping[str, Any]] = (), *,
                 axes: Sequence[Axes] | None = None) -> Figure:
    """Chapter 11's ceiling: one panel per target and thread count, the speedup ``tau / round``
    against tau = 1 .. depth + 1 for each draft depth (colour) and drafter variant (line style),
    from the measured round with every draft accepted; a dot marks each depth's ceiling
    (tau = depth + 1). Above the dotted line at 1 a drafter of that tau pays. ``rows``: the
    records of ``cpu_payoff.ceiling_frame`` (empty: a figure that says it was not measured);
    ``measured``: real drafters' runs (``cpu_payoff.measured_points``: target, threads, label,
    tau, speedup), marked on their panel as crosses."""
    from activation_wave.plots._style import plot_not_run

    if not rows:
        return plot_not_run("not measured yet: wave bench --only llamacpp_ceiling")
    panels = list(dict.fromkeys((r["target"], r["threads"]) for r in rows))
    fig, axs = _panels(len(panels), axes, (3.6 * len(panels), 3.6))
    for ax, (target, threads) in zip(axs, panels):
        for r in (r for r in rows if (r["target"], r["threads"]) == (target, threads)):
            n, rnd = int(r["depth"]), float(r["round measured"])
            taus = np.arange(1, n + 2)
            ax.plot(taus, taus / rnd, color=DEPTH_COLORS.get(n, "black"), ls=VARIANT_STYLES.get(r["variant"], ":"),
                    label=f"depth {n}, {r['variant']}")
            ax.scatter([n + 1], [(n + 1) / rnd], color=DEPTH_COLORS.get(n, "black"), s=18, zorder=3)
        for p, marker in zip((p for p in measured if (p["target"], p["threads"]) == (target, threads)), "XPs^"):
            ax.scatter([p["tau"]], [p["speedup"]], color="black", marker=marker, s=36, zorder=4,
                       label=f"measured: {p['label']}")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_title(f"{target}, {threads} thread{'s' if threads != 1 else ''}", fontsize=10)
        ax.set_xlabel("tau (tokens per round)")
    axs[0].set_ylabel("speedup over plain llama.cpp")
    handles = {h.get_label(): h for a in axs for h in [*a.get_lines(), *a.collections]
               if not h.get_label().startswith("_")}
    # beside the last panel, not over its lines (the book's figures are saved with a tight bounding box)
    axs[-1].legend(list(handles.values()), list(handles), fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def plot_where_it_pays(points: Sequence[Mapping[str, Any]], taus: Mapping[str, float] | None = None, *,
                       ax: Axes | None = None) -> Figure:
    """Break-even tau against threads per target (log x): measured thread counts as filled dots on
    a solid line, the roofline model's extrapolation as a dashed line with open circles, and the
    taus today's drafters reach as horizontal lines. ``points``: ``cpu_payoff.where_points``."""
    from activation_wave.plots._style import plot_not_run

    if not points:
        return plot_not_run("not measured yet: wave bench --only llamacpp_ceiling")
    fig, ax = _ax(ax, figsize=(6.4, 3.8))
    colors = ("#d95f02", "#7570b3", "#1b9e77")
    for target, color in zip(dict.fromkeys(p["target"] for p in points), colors):
        meas = sorted((p["threads"], p["break_even"]) for p in points if p["target"] == target and p["measured"])
        model = sorted((p["threads"], p["break_even"]) for p in points if p["target"] == target and not p["measured"])
        if model:
            ax.plot(*zip(*model), color=color, ls="--", marker="o", mfc="none", label=f"{target}: model (extrapolated)")
        if meas:
            ax.plot(*zip(*meas), color=color, marker="o", label=f"{target}: measured")
    for (label, t), color in zip((taus or {}).items(), ("black", "#666666", "#a6761d")):
        ax.axhline(t, color=color, lw=1, ls=":", label=f"tau of the {label} in llama.cpp")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("threads")
    ax.set_ylabel("break-even tau, depth 3 (plain steps per round)")
    ax.legend(fontsize=7)
    return fig


def plot_drafter_stages(stages: Sequence[Mapping[str, Any]], toy_tau: float | None, target: float,
                        fit: Mapping[str, Any] | None = None, *, ax: Axes | None = None) -> Figure:
    """Outcome tau (95% interval) of each training stage against its training tokens summed along
    its parents (log2 x; a line joins a stage to the one it continued, ``from``; a stage with
    ``on_line`` False, off the last stage's line, is hollow), the toy drafter's tau and the
    target as horizontal lines; ``fit`` (chapter 11's ``stage_fit``: ``a``, ``b`` of
    ``tau = a + b log2(tokens / 1e6)`` and ``reach``, where it meets the target) drawn dashed
    up to ``reach`` (an extrapolation). No stages: a panel that says so."""
    fig, ax = _ax(ax, figsize=(6.4, 3.6))
    if not stages:
        ax.text(0.5, 0.5, "not trained yet (wave bench --only large_drafter)", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    x = np.array([r["tokens"] / 1e6 for r in stages])
    y = np.array([r["tau"] for r in stages])
    err = np.maximum(0.0, np.array([[t - r["tau_ci"][0], r["tau_ci"][1] - t] for r, t in zip(stages, y)]).T)
    on = np.array([r.get("on_line", True) for r in stages])
    ax.errorbar(x[on], y[on], yerr=err[:, on], fmt="o", color="#7570b3", capsize=3,
                label="corpus drafter: the last stage's line (95% CI)")
    if (~on).any():
        ax.errorbar(x[~on], y[~on], yerr=err[:, ~on], fmt="o", mfc="white", color="#7570b3", capsize=3,
                    label="a stage off that line (spent)")
    at = {r["stage"]: (xi, yi) for r, xi, yi in zip(stages, x, y)}
    above: list[tuple[float, float]] = []  # labels set above their point so far
    for r, xi, yi in zip(stages, x, y):
        if r.get("from") in at:  # a line from the stage it continued
            ax.plot([at[r["from"]][0], xi], [at[r["from"]][1], yi], color="#7570b3", lw=1)
        # a label that would run into an earlier one (close in log2 tokens and in tau) goes below its point
        crowded = any(abs(np.log2(xi / px)) < 0.8 and abs(yi - py) < 0.03 for px, py in above)
        if not crowded:
            above.append((xi, yi))
        ax.annotate(f"stage {r['stage']}: {r['train_cpu_min']:.0f} CPU-min", (xi, yi), textcoords="offset points",
                    xytext=(7, -12 if crowded else 4), fontsize=8)
    right = x.max()
    if fit is not None and fit["reach"]:
        xs = np.geomspace(x.min(), max(right, min(fit["reach"], right * 64)), 60)
        ax.plot(xs, fit["a"] + fit["b"] * np.log2(xs), color="#7570b3", ls="--", lw=1,
                label="extended through that line (extrapolated)")
        right = xs.max()
    ax.axhline(target, color="#d95f02", ls="--", lw=1, label=f"target tau {target:g}")
    if toy_tau is not None:
        ax.axhline(toy_tau, color="grey", ls=":", lw=1, label="toy drafter (128 prompts)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(x.min() / 1.3, right * 1.3)
    ax.set_xlabel("training tokens (millions, summed along each stage's parents)")
    ax.set_ylabel("outcome tau (offline, 32 eval prompts)")
    ax.legend(fontsize=8, loc="lower right")
    return fig
