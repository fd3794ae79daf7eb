"""Figures of the drafter recipe study (``recipe.json``, :mod:`activation_wave.benchmarks.recipe`).

:func:`plot_recipe_forest` draws every arm's paired delta tau against the base with its
95% interval; :func:`plot_recipe_curves` the learning curves (tau against cumulative
training CPU-minutes) of the base and the best arm; :func:`plot_recipe_confirm` stage 2's
curves (today's recipe and the combined one on the full data) with their log-linear fits
extended to the break-even lines; :func:`plot_recipe_projection` today's recipe's data curve
with its fit extrapolated to the targets and break-even lines (when stage 2 did not run);
:func:`plot_strength_deltas` the drafter-strength page's deltas against the default over budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from activation_wave.plots._style import CYCLE, _ax, set_label

__all__ = ["plot_recipe_forest", "plot_recipe_curves", "plot_recipe_confirm", "plot_recipe_projection",
           "plot_strength_deltas", "plot_strength_epochs"]


def _break_even_lines(ax: Axes, break_even: Mapping[str, float] | None) -> None:
    """A labelled dashed line at each engine's break-even tau."""
    for j, (label, tau) in enumerate((break_even or {}).items()):
        ax.axhline(tau, color=CYCLE[(j + 5) % len(CYCLE)], ls="--", lw=0.9, label=f"break-even: {label}")


def plot_recipe_forest(doc: Mapping[str, Any], *, ax: Axes | None = None, alpha: float = 0.05) -> Figure:
    """Forest plot: each arm's delta tau (arm - base) with its 95% paired bootstrap interval,
    sorted by delta (largest on top), a zero line; filled markers where the Holm-corrected
    p is below ``alpha``, a square for the post-hoc combined arm."""
    arms = sorted((a for a in doc["arms"] if None not in (a.get("delta"), a.get("delta_lo"), a.get("delta_hi"))),
                  key=lambda a: a["delta"], reverse=True)  # an arm scored on < 2 prompts has no interval
    fig, ax = _ax(ax, figsize=(6.4, 0.32 * len(arms) + 1.4))
    y = np.arange(len(arms))
    for yi, a in zip(y, arms):
        sig = a.get("p_holm") is not None and a["p_holm"] < alpha
        up = a["delta_lo"] > 0
        color = "#1b9e77" if up else ("#d95f02" if a["delta_hi"] < 0 else "#555555")
        ax.plot([a["delta_lo"], a["delta_hi"]], [yi, yi], color=color, lw=1.6)
        ax.plot(a["delta"], yi, marker="s" if a.get("post_hoc") else "o", ms=6, color=color,
                mfc=color if sig else "white", zorder=3)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(y, [a["name"] + (" (post hoc)" if a.get("post_hoc") else "") for a in arms])
    ax.invert_yaxis()
    ax.set_xlabel(r"$\Delta\tau$ = arm $-$ base, per prompt (95% paired bootstrap interval)")
    base = doc.get("base", {})
    if base.get("tau") is not None:
        ax.set_title(f"base ({base.get('name', 'base')}): tau {base['tau']:.3f}; filled: Holm p < {alpha:g}",
                     fontsize=9)
    return fig


def plot_recipe_curves(doc: Mapping[str, Any], arms: Sequence[str] | None = None, *,
                       break_even: Mapping[str, float] | None = None, ax: Axes | None = None) -> Figure:
    """Eval tau against cumulative training CPU-minutes per drafter: the base and ``arms``
    (default: the best arm, ``doc["best"]``); ``break_even`` draws labelled horizontal lines
    (e.g. ``{"PyTorch loop": 1.4, "llama.cpp": 3.6}``)."""
    fig, ax = _ax(ax)
    by_name = {a["name"]: a for a in doc["arms"]}
    names = list(arms) if arms is not None else ([doc["best"]] if doc.get("best") else [])
    missing = [n for n in names if n not in by_name]
    if missing:
        raise KeyError(f"arm(s) {missing} are not in the results; arms: {sorted(by_name)}")
    curves = [("base", doc["base"]["curve"])] + [(n, by_name[n]["curve"]) for n in names]
    for i, (name, curve) in enumerate(curves):
        if not curve:
            continue
        x = [p["cpu_s"] / 60 for p in curve]
        ax.plot(x, [p["tau_offline"] for p in curve], marker="o", ms=3, color="black" if i == 0 else CYCLE[i],
                label=name)
    _break_even_lines(ax, break_even)
    ax.set_xlabel("training CPU-minutes per drafter (cumulative)")
    ax.set_ylabel(r"eval $\tau$ (offline, online depth and threshold)")
    ax.legend(fontsize=8)
    return fig


def plot_recipe_confirm(confirm: Mapping[str, Any], *, break_even: Mapping[str, float] | None = None,
                        ax: Axes | None = None) -> Figure:
    """Stage 2 (``doc["confirm"]``): each recipe's learning curve (eval tau at the online
    depth, no draft threshold, against cumulative training CPU-minutes per drafter, log
    scale), its fit tau = a + b log2(minutes) drawn dashed out to where it reaches the
    highest ``break_even`` line (labelled as an extrapolation), and the R3 mark."""
    fig, ax = _ax(ax)
    top = max([confirm["r3"]["mark"], *(break_even or {}).values()])
    for i, (name, arm) in enumerate(confirm["arms"].items()):
        curve, color = arm["curve"], "black" if i == 0 else CYCLE[i]
        x = [p["cpu_s"] / 60 for p in curve]
        ax.plot(x, [p["tau_offline"] for p in curve], marker="o", ms=3, color=color, label=f"{name} (measured)")
        fit = arm.get("fit")
        if fit and fit["b"] > 0 and x:
            end = min(2 ** ((top - fit["a"]) / fit["b"]), x[-1] * 2 ** 12)  # at most 12 more doublings drawn
            xs = np.geomspace(x[-1], max(end, x[-1] * 1.01), 50)
            ax.plot(xs, fit["a"] + fit["b"] * np.log2(xs), ls="--", lw=1.0, color=color,
                    label=f"{name}: fit {fit['a']:.2f} + {fit['b']:.3f} log2(min), extrapolated")
    ax.axhline(confirm["r3"]["mark"], color="#777777", ls=":", lw=1.0, label=f"R3 mark: tau {confirm['r3']['mark']}")
    _break_even_lines(ax, break_even)
    ax.set_xscale("log")
    ax.set_xlabel("training CPU-minutes per drafter (cumulative, log scale)")
    ax.set_ylabel(r"eval $\tau$ (offline, online depth, no threshold)")
    ax.legend(fontsize=7)
    return fig


def plot_recipe_projection(proj: Mapping[str, Any], *, max_doublings: int = 24, ax: Axes | None = None) -> Figure:
    """What more data would take (``data_projection`` of the recipe page's helpers):
    the measured drafters (offline tau against training CPU-minutes, log scale, labelled by
    sampled responses per prompt), the fit tau = a + b log2(minutes) dashed from the last point
    on (at most ``max_doublings`` further doublings), one line per mark, and a cross where the
    extrapolated fit meets a mark, labelled with the time it predicts."""
    fig, ax = _ax(ax, figsize=(7.2, 4.2))
    curve, fit = proj["curve"], proj["fit"]
    x = np.array([p["cpu_s"] / 60 for p in curve])
    ax.plot(x, [p["tau_offline"] for p in curve], marker="o", ms=4, color="black", label="today's recipe (measured)")
    for p, xi in zip(curve, x):
        ax.annotate(f"+{p['samples_per_prompt']}", (xi, p["tau_offline"]), textcoords="offset points",
                    xytext=(-4, 6), fontsize=7)
    marks = [m for m in proj["marks"] if m.get("reachable", True) and m["tau"] is not None]  # none above tau_max
    top = max((m["tau"] for m in marks), default=float(curve[-1]["tau_offline"]))
    if fit and fit["b"] > 0:
        end = min(2 ** ((top - fit["a"]) / fit["b"]), x[-1] * 2.0 ** max_doublings)
        xs = np.geomspace(x[-1], max(end, x[-1] * 1.01), 100)
        ax.plot(xs, fit["a"] + fit["b"] * np.log2(xs), ls="--", lw=1.0, color="black",
                label=f"fit {fit['a']:.2f} + {fit['b']:.3f} log2(min), extrapolated")
    for j, m in enumerate(marks):
        color = CYCLE[(j + 1) % len(CYCLE)]
        ax.axhline(m["tau"], color=color, ls=":", lw=1.0,
                   label=f"{m['label']}: online tau {m.get('online_tau', m['tau']):.2f}, offline {m['tau']:.2f}")
        if m.get("reached"):  # today's drafter is already there: no crossing to mark (the table says "reached")
            continue
        if m["cpu_min"] is not None and m["cpu_min"] <= x[-1] * 2.0 ** max_doublings:
            ax.plot(m["cpu_min"], m["tau"], marker="x", ms=7, color=color)
            ax.annotate(m["time_text"], (m["cpu_min"], m["tau"]), textcoords="offset points",
                        xytext=(-10, 5), ha="right", fontsize=7, color=color)
        else:
            ax.annotate(f"fit meets it after {m['time_text']}, beyond the chart", (x[-1] * 2.0 ** max_doublings,
                        m["tau"]), textcoords="offset points", xytext=(0, -10), ha="right", fontsize=7, color=color)
    ax.set_xscale("log")
    ax.set_xlabel("training CPU-minutes per drafter, at today's measured cost per position (log scale)")
    ax.set_ylabel(r"eval $\tau$ (offline, depth 3, no threshold)")
    ax.set_title("+k: sampled responses per train prompt; crosses: where the extrapolated fit meets a mark",
                 fontsize=8)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def plot_strength_deltas(doc: Mapping[str, Any], *, ax: Axes | None = None) -> Figure:
    """The drafter-strength page (``06_strength``): each set's delta against the default
    with its 95% paired interval at every budget, x = the default's tau at that budget, a
    line per set across its budgets, and a zero line (the default)."""
    fig, ax = _ax(ax)
    budgets = doc["budgets"]
    names = list(dict.fromkeys(c["set"] for b in budgets for c in b["comparison"]))
    span = max(b["tau_default"]["tau"] for b in budgets) - min(b["tau_default"]["tau"] for b in budgets)
    offset = 0.012 * max(span, 0.05)
    for i, name in enumerate(names):
        pts = [(b["tau_default"]["tau"] + (i - (len(names) - 1) / 2) * offset, c, b["name"]) for b in budgets
               for c in b["comparison"] if c["set"] == name]
        color = CYCLE[i % len(CYCLE)]
        ax.plot([x for x, _, _ in pts], [c["delta"] for _, c, _ in pts], marker="o", ms=5, color=color,
                label=set_label(name))
        for x, c, _ in pts:
            ax.plot([x, x], [c["lo"], c["hi"]], color=color, lw=1.4)
    for b in budgets:
        ax.annotate(f"{b['name']} budget", (b["tau_default"]["tau"], 1.0), xycoords=("data", "axes fraction"),
                    textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8, color="#555555")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel(r"the default triple's $\tau$ at that budget (offline; the registered outcome)")
    ax.set_ylabel(r"$\Delta\tau$ = set $-$ default (95% paired interval)")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    return fig


def plot_strength_epochs(deltas: Mapping[str, Sequence[tuple[int, float]]], *, ax: Axes | None = None) -> Figure:
    """Secondary view of the drafter-strength page: each set's pooled eval tau minus the
    default's after every epoch at the top budget (``drafter_strength.epoch_deltas``); sets
    with the per-layer norm dashed."""
    fig, ax = _ax(ax)
    for i, (name, pts) in enumerate(deltas.items()):
        ax.plot([e for e, _ in pts], [d for _, d in pts], marker="o", ms=3, color=CYCLE[i % len(CYCLE)],
                ls="--" if name.endswith("+norm") else "-", label=set_label(name))
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("epoch of the top budget's training")
    ax.set_ylabel(r"eval $\tau$ $-$ the default's (pooled over records)")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    return fig
