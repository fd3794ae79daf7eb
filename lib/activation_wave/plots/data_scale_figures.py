"""Figures of the data-scale page: the default triple's outcome tau against distinct prompts
and against training CPU-minutes (beside the recipe screen's resampled-data drafters), and
H7's deltas against the default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from activation_wave.plots._style import CYCLE, FIGSIZE, METHOD_COLORS, plot_not_run

__all__ = ["plot_data_scale_curve", "plot_data_scale_sets", "plot_not_run"]


def plot_data_scale_curve(doc: Mapping[str, Any], recipe: Mapping[str, Any] | None = None) -> Figure:
    """Two panels: outcome tau (95% interval over prompts) of the default triple's drafters
    against distinct train prompts (left, log scale; one marker per token budget) and
    against training CPU-minutes per drafter (right), with the recipe screen's base and its
    samples-1 arm (the same prompts, one more sampled response each) as resampling points, the
    target tau (dashed) and the projection's fit over the largest data size's budgets (dotted)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(FIGSIZE[0] * 1.6, FIGSIZE[1]), sharey=True)
    budgets = sorted({p["budget"] for p in doc["points"]})
    for i, budget in enumerate(budgets):
        pts = sorted((p for p in doc["points"] if p["budget"] == budget), key=lambda p: p["n_prompts"])
        for ax, key, scale in ((left, "n_prompts", 1.0), (right, "cpu_s", 1 / 60)):
            x = [p[key] * scale for p in pts]
            y = [p["tau"] for p in pts]
            err = [[p["tau"] - p["lo"] for p in pts], [p["hi"] - p["tau"] for p in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, color=CYCLE[i], label=f"distinct prompts, {budget}")
    if recipe:
        base = recipe["base"]
        arms = {a["name"]: a for a in recipe.get("arms", [])}
        resampled = [("screen base (1x, greedy)", base.get("cpu_s"), base)]
        if "samples-1" in arms:
            a = arms["samples-1"]
            resampled.append(("samples-1 (1x, + 1 sampled response)", a["cpu_s"] + (a.get("cpu_s_data") or 0.0), a))
        for j, (name, cpu, a) in enumerate(resampled):
            if cpu:
                right.errorbar([cpu / 60], [a["tau"]], yerr=[[a["tau"] - a["lo"]], [a["hi"] - a["tau"]]], marker="s",
                               ms=5, capsize=3, color="0.35" if j else "0.6", ls="none", label=f"resampled: {name}")
    proj = (doc.get("target") or {}).get("projection")
    if proj:  # the fit over the largest data size's budgets, drawn over the range it was fitted on
        f, pts = proj["fit"], [p for p in doc["points"] if p["label"] in proj["points"]]
        xs = np.linspace(min(p["cpu_s"] for p in pts) / 60, max(p["cpu_s"] for p in pts) / 60, 50)
        right.plot(xs, f["a"] + f["b"] * np.log2(xs), ls=":", color="0.2", lw=1,
                   label=rf"fit: $\tau$ = a + {f['b']:.3f} log$_2$(CPU-min)")
    if doc.get("target"):
        for ax in (left, right):
            ax.axhline(doc["target"]["tau"], ls="--", lw=0.9, color="tab:red",
                       label=rf"target $\tau$ {doc['target']['tau']:.1f} (issue 41)" if ax is right else None)
    left.set_xscale("log", base=2)
    sizes = sorted({p["n_prompts"] for p in doc["points"]})
    left.set_xticks(sizes, [f"{n:,}" for n in sizes])
    left.minorticks_off()
    left.set_xlabel("distinct train prompts (log scale)")
    right.set_xlabel("training CPU-minutes per drafter")
    left.set_ylabel(rf"outcome $\tau$ (offline, {len(doc['prompt_ids'])} eval prompts)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.legend(*right.get_legend_handles_labels(), fontsize=7, loc="lower center", ncol=4, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))  # the legend below both panels, clear of every point
    return fig


def plot_data_scale_sets(doc: Mapping[str, Any]) -> Figure:
    """H7: each set's delta tau against the default at the largest data size, with its 95%
    paired-bootstrap interval (seeds averaged per prompt); the dashed band is the design's
    smallest detectable effect either side of 0."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    rows = doc["sets"]
    for y, r in enumerate(rows):
        ax.errorbar([r["delta"]], [y], xerr=[[r["delta"] - r["lo"]], [r["hi"] - r["delta"]]], marker="o", capsize=4,
                    color=METHOD_COLORS.get(r["set"], "0.3"))
    mde = max((r["mde"] for r in rows if r.get("mde")), default=None)
    if mde:
        ax.axvspan(-mde, mde, color="0.85", zorder=0, label=f"smallest detectable effect (±{mde:.3f})")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [f"{r['set']} {r['layers']}" for r in rows])
    ax.set_xlabel(rf"$\Delta\tau$ against the default at {doc['h7_point']} (Holm across sets)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig

