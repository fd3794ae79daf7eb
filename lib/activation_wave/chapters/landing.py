"""The landing page: the study's key numbers, read from the chapters' result objects
(the cliff, the default's standing, the drafters' tau and the speedups), each defined
in the chapter that computes it.

:func:`run` returns a :class:`LandingResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import StudyConfig
from ..results import load_benchmarks
from .results_summary import Chapters, load_chapters, predictors, triples

#: The rules whose sets the key figure shows, in this order.
KEY_RULES = ("exhaustive", "entropy-greedy", "combined", "cka-diverse", "eagle3-default", "last-k")


@dataclass(frozen=True)
class LandingResult:
    """The numbers of the landing page (see the module docstring)."""

    model: str
    n_layers: int
    n_prompts: int
    n_positions: int
    sink_ratio: float
    cliff_layer: int
    cliff_entropy: float
    cliff_entropy_without_first: float
    default_layers: list[int] | None
    default_percentile: float | None
    exhaustive_layers: list[int]
    tau_default: float
    tau_best: float
    best_set: str
    rho_renyi2: float
    rho_deepest: float
    n_drafters: int
    n_seeds: int
    speedup_default: float | None
    speedup_best: float
    lossless: bool
    bench_speedup: float | None  # the decoding benchmark (chapter 9), pooled over its rounds, T = 0
    bench_tau: float | None


def key_sets(ch: Chapters) -> dict[str, list[int]]:
    """The sets of :data:`KEY_RULES` that chapter 5 chose."""
    return {m: ch.selection.sets[m] for m in KEY_RULES if m in ch.selection.sets}


def ranked_triples(ch: Chapters) -> list[dict[str, Any]]:
    """Chapter 6's three-layer drafters, best tau first."""
    return sorted(triples(ch), key=lambda r: -r["tau"])


def run(cfg: StudyConfig, root: str | Path | None = None) -> tuple[LandingResult, Chapters]:
    """The landing page's numbers, and the chapters' results its figure draws from."""
    ch = load_chapters(cfg, root)
    sink, sel, d6 = ch.filtering.sink, ch.selection, ch.drafters
    best, dflt, online = d6["best"], d6["default"], d6["online"]
    default_row = sel.default_row
    bench = load_benchmarks().get("speculative_decoding", {})
    return LandingResult(
        model=cfg.model, n_layers=ch.data.info.n_layers, n_prompts=ch.data.summary.records,
        n_positions=ch.data.summary.response_positions, sink_ratio=sink.sink_peak, cliff_layer=sink.cliff.to_layer,
        cliff_entropy=sink.cliff.after, cliff_entropy_without_first=sink.at_cliff["no_first"],
        default_layers=sel.default_layers, default_percentile=None if default_row is None else default_row.percentile,
        exhaustive_layers=sel.sets["exhaustive"], tau_default=dflt["tau"], tau_best=best["tau"],
        best_set=f"{best['set']} {best['layers']}", rho_renyi2=predictors(triples(ch))["concatenation entropy S2"][0],
        rho_deepest=predictors(triples(ch))["deepest layer of the triple"][0], n_drafters=len(d6["runs"]),
        n_seeds=max(r["n_seeds"] for r in d6["summary"]),
        speedup_default=online.get("eagle3-default", {}).get("speedup_vs_plain_t0"),
        speedup_best=max(v["speedup_vs_plain_t0"] for v in online.values()),
        lossless=all(v["lossless_prompts"] == v["n_prompts"] for v in online.values()),
        bench_speedup=bench.get("speedup_vs_plain_t0"), bench_tau=bench.get("tau_t0")), ch
