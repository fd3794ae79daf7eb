"""The landing page: the study's key numbers, read from the chapters' result objects
(the cliff, the default's standing, the drafters' tau and the speedups), each defined
in the chapter that computes it. Drafters are ranked on chapter 6's pre-registered
outcome only, and every rho and delta comes with its interval and n.

:func:`run` returns a :class:`LandingResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import load_benchmarks
from activation_wave.study.chapters import cpu_payoff
from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.study.chapters.cross_drafters import evaluate_hypotheses as cross_hypotheses
from activation_wave.study.chapters.eagle3_speedup import evaluate_hypotheses
from activation_wave.study.chapters.results_summary import Chapters, load_chapters

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
    tau_default: float  # the pre-registered outcome of the default's drafters, with its interval over prompts
    tau_default_lo: float
    tau_default_hi: float
    ranking: str  # which triple is highest on the outcome, its paired delta, and whether that is within noise
    rho_renyi2: str  # rho(S2, tau) over the triples with its interval and n (chapter 6's paired analysis)
    rho_deepest: str  # rho(deepest layer, tau) over the triples, likewise
    n_triples: int
    h1: str  # H1's primary statistic, and whether it was supported
    h1_supported: bool | None
    second_model: str  # chapter 7's second architecture, and its tests G1 (H1 there) and G2 (depth)
    g1: str
    g1_supported: bool | None
    g2: str
    g2_supported: bool | None
    n_drafters: int
    n_seeds: int
    speedup_default: float | None
    speedup_best: float
    lossless: bool
    bench_speedup: float | None  # the decoding benchmark (chapter 9), pooled over its rounds, T = 0
    bench_tau: float | None
    cpu_text: str = ""  # chapter 11: EAGLE-3 against plain llama.cpp at 1.5B (and 135M), from benchmarks.json


def key_sets(ch: Chapters) -> dict[str, list[int]]:
    """The sets of :data:`KEY_RULES` that chapter 5 chose."""
    return {m: ch.selection.sets[m] for m in KEY_RULES if m in ch.selection.sets}


def ranked_triples(ch: Chapters) -> list[dp.OutcomeRow]:
    """Chapter 6's three-layer drafters (main arm) on the pre-registered outcome, highest first."""
    return dp.outcome_rows(ch.paired, 3)


def run(cfg: StudyConfig, root: str | Path | None = None) -> tuple[LandingResult, Chapters]:
    """The landing page's numbers, and the chapters' results its figure draws from."""
    ch = load_chapters(cfg, root)
    sink, sel, d6 = ch.filtering.sink, ch.selection, ch.drafters
    online = d6.online
    default_row = sel.default_row
    benchmarks = load_benchmarks()
    bench = benchmarks.get("speculative_decoding", {})
    rho = {p.name: p for p in ch.paired.predictors if p.units == "triples"}
    h1 = evaluate_hypotheses(ch.paired)[0]
    default = next((r for r in ranked_triples(ch) if r.set == ch.paired.reference), None)
    nan = float("nan")
    g1, g2, _ = cross_hypotheses(ch.cross_drafters)
    return LandingResult(
        model=cfg.model, n_layers=ch.data.info.n_layers, n_prompts=ch.data.summary.records,
        n_positions=ch.data.summary.response_positions, sink_ratio=sink.sink_peak, cliff_layer=sink.cliff.to_layer,
        cliff_entropy=sink.cliff.after, cliff_entropy_without_first=sink.at_cliff["no_first"],
        default_layers=sel.default_layers, default_percentile=None if default_row is None else default_row.percentile,
        exhaustive_layers=sel.sets["exhaustive"], tau_default=default.tau if default else nan,
        tau_default_lo=default.lo if default else nan, tau_default_hi=default.hi if default else nan,
        ranking=dp.ranking_text(ch.paired, 3),
        rho_renyi2=dp.predictor_text(rho.get("renyi2")), rho_deepest=dp.predictor_text(rho.get("deepest")),
        n_triples=rho["renyi2"].n if "renyi2" in rho else 0, h1=h1.statistic, h1_supported=h1.supported,
        second_model=ch.cross_drafters.model, g1=g1.statistic, g1_supported=g1.supported, g2=g2.statistic,
        g2_supported=g2.supported,
        n_drafters=len(d6.runs), n_seeds=max(r.n_seeds for r in d6.summary),
        speedup_default=online["eagle3-default"].speedup_vs_plain_t0 if "eagle3-default" in online else None,
        speedup_best=max(v.speedup_vs_plain_t0 for v in online.values()),
        lossless=all(v.lossless_prompts == v.n_prompts for v in online.values()),
        bench_speedup=bench.get("speedup_vs_plain_t0"), bench_tau=bench.get("tau_t0"),
        cpu_text=cpu_payoff.landing_text(benchmarks.get(cpu_payoff.BENCH), benchmarks.get(cpu_payoff.CEILING),
                                          benchmarks.get(cpu_payoff.LARGE), cpu_payoff.own_drafters(benchmarks))), ch
