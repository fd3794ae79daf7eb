"""Figures of the data-scale page: the default triple's outcome tau against distinct prompts
and against training CPU-minutes (beside the recipe screen's resampled-data drafters), and
H7's deltas against the default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from activation_wave.plots._style import CYCLE, FIGSIZE, METHOD_COLORS, plot_not_run, set_label

__all__ = ["plot_data_scale_curve", "plot_data_scale_sets", "plot_not_run", "budget_words", "point_words"]


def budget_words(code: str) -> str:
    """A token budget's code name (``B1``, ``B2``, ``B4``: k times the base training tokens) in words.

    >>> budget_words("B1"), budget_words("B4"), budget_words("other")
    ('base tokens', '4x the base tokens', 'other')
    """
    if len(code) > 1 and code[0] == "B" and code[1:].isdigit():
        k = int(code[1:])
        return "base tokens" if k == 1 else f"{k}x the base tokens"
    return code


def point_words(code: str) -> str:
    """A design point's code name (``16x@B2``: 16 times the base prompts at budget B2) in words.

    >>> point_words("16x@B2"), point_words("1x@B1")
    ('16x the prompts, 2x the base tokens', 'the base prompts, base tokens')
    """
    if "@" not in code:
        return code
    size, budget = code.split("@", 1)
    return f"{'the base prompts' if size == '1x' else size + ' the prompts'}, {budget_words(budget)}"


def plot_data_scale_curve(doc: Mapping[str, Any], recipe: Mapping[str, Any] | None = None) -> Figure:
    """Two panels: outcome tau (95% interval over prompts) of the default triple's drafters
    against distinct train prompts (left, log scale; one marker per token budget) and
    against training CPU-minutes per drafter (right), with the recipe screen's base and its
    samples-1 arm (the same prompts, one more sampled response each) as resampling points, the
    projection's fit over the largest data size's budgets (dotted). Budgets are named in words
    (:func:`budget_words`); the legend sits below both panels, off the data."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(FIGSIZE[0] * 1.6, FIGSIZE[1]), sharey=True)
    budgets = sorted({p["budget"] for p in doc["points"]})
    for i, budget in enumerate(budgets):
        pts = sorted((p for p in doc["points"] if p["budget"] == budget), key=lambda p: p["n_prompts"])
        for ax, key, scale in ((left, "n_prompts", 1.0), (right, "cpu_s", 1 / 60)):
            x = [p[key] * scale for p in pts]
            y = [p["tau"] for p in pts]
            err = [[p["tau"] - p["lo"] for p in pts], [p["hi"] - p["tau"] for p in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, color=CYCLE[i], label=f"distinct prompts, {budget_words(budget)}")
    if recipe:
        base = recipe["base"]
        arms = {a["name"]: a for a in recipe.get("arms", [])}
        resampled = [("base prompts, 10 epochs", base.get("cpu_s"), base)]
        if "samples-1" in arms:
            a = arms["samples-1"]
            resampled.append(("base prompts + 1 sampled answer each", a["cpu_s"] + (a.get("cpu_s_data") or 0.0), a))
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
    left.set_xscale("log", base=2)
    sizes = sorted({p["n_prompts"] for p in doc["points"]})
    left.set_xticks(sizes, [f"{n:,}" for n in sizes])
    left.minorticks_off()
    left.set_xlabel("distinct train prompts (log scale)")
    right.set_xlabel("training CPU-minutes per drafter")
    left.set_ylabel(rf"outcome $\tau$ (offline, {len(doc['prompt_ids'])} eval prompts)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.legend(*right.get_legend_handles_labels(), fontsize=7, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))  # the legend below both panels, clear of every point
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
    ax.set_yticks(range(len(rows)), [f"{set_label(r['set'])} {r['layers']}" for r in rows])
    ax.set_xlabel(rf"$\Delta\tau$ against the default" "\n" rf"({point_words(doc['h7_point'])}; Holm across sets)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig

