"""The landing page: the study's answer in numbers, read from the results files the
chapters wrote. Every comparison is the pre-registered one of the chapter that made it,
with its interval and n; every verdict is a word of
:data:`~activation_wave.study.hypotheses.GLANCE_WORDS` or of
:func:`~activation_wave.study.hypotheses.side_word`. The page's sentences live in
``notebooks/intro.py``; this module returns values only.

:func:`run` returns a :class:`LandingResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import load_benchmarks
from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.study.chapters.cross_drafters import evaluate_hypotheses as cross_hypotheses
from activation_wave.study.chapters.eagle3_speedup import evaluate_hypotheses
from activation_wave.study.chapters.performance import prompt_speedup
from activation_wave.study.chapters.results_summary import Chapters, load_chapters
from activation_wave.study.hypotheses import glance_word, side_word

#: The rules whose sets the key figure shows, in this order.
KEY_RULES = ("exhaustive", "entropy-greedy", "combined", "cka-diverse", "eagle3-default", "last-k")
#: benchmarks.json entries the page reads: the study's decoding loop (135M) and llama.cpp at 1.5B.
LOOP, LLAMACPP = "speculative_decoding", "llamacpp_1.5b"


@dataclass(frozen=True)
class Delta:
    """One paired comparison against the default's drafters: the other set, its layers,
    delta tau with its 95% interval over prompts, its (Holm) p, n prompts, and its verdict."""

    set: str
    layers: list[int]
    delta: float
    lo: float
    hi: float
    p: float
    n: int
    verdict: str  # a word of GLANCE_WORDS


@dataclass(frozen=True)
class Speed:
    """A speedup over plain decoding on the same prompts, its 95% interval over prompts, n,
    and which side of 1 it lies (faster / slower / within noise)."""

    ratio: float
    lo: float
    hi: float
    n: int
    side: str


@dataclass(frozen=True)
class LandingResult:
    """The numbers of the landing page (see the module docstring)."""

    model: str
    n_layers: int
    n_prompts: int
    default_layers: list[int]
    answer_layers: list[int]  # the layers to read: the best rule's set if H1 is supported, else the default
    h1: Delta  # the best selection rule's set against the default, one epoch (chapter 6's H1)
    scale: Delta  # the best rule's set against the default at 16 times the distinct prompts (H7)
    rho: float  # H2: Spearman rho(concatenation entropy S2, tau) over the triples
    rho_lo: float
    rho_hi: float
    n_triples: int
    h2: str  # its verdict (GLANCE_WORDS)
    second_model: str
    g1: Delta  # the best rule's set against the default on the second architecture
    sink_ratio: float  # the first token's norm over the median token's, at its peak layer
    cliff_layer: int
    loop: Speed  # EAGLE-3 in the study's own loop, 135M target, T = 0 (the decoding benchmark's drafter)
    loop_tau: float  # its online mean accepted length, pooled over the timed rounds
    large_model: str
    large_eagle3: Speed  # EAGLE-3 in llama.cpp, 1.5B target, 2 threads, its best drafter measured there
    large_tau: float  # that drafter's online mean accepted length in llama.cpp, pooled over the prompts
    large_ngram: Speed  # llama.cpp's n-gram lookup, same prompts and run
    ngram_tau: float


#: A comparison whose drafters or results do not exist.
_NONE = Delta("", [], float("nan"), float("nan"), float("nan"), float("nan"), 0, "not testable")


def key_sets(ch: Chapters) -> dict[str, list[int]]:
    """The sets of :data:`KEY_RULES` that chapter 5 chose."""
    return {m: ch.selection.sets[m] for m in KEY_RULES if m in ch.selection.sets}


def ranked_triples(ch: Chapters) -> list[dp.OutcomeRow]:
    """Chapter 6's three-layer drafters (main arm) on the pre-registered outcome, highest first."""
    return dp.outcome_rows(ch.paired, 3)


def _delta(row: Mapping[str, Any], layers: list[int], supported: bool | None, p_key: str) -> Delta:
    return Delta(set=row["set"], layers=list(layers), delta=row["delta"], lo=row["lo"], hi=row["hi"],
                 p=row[p_key], n=row["n"], verdict=glance_word(supported, row["lo"], row["hi"]))


def loop_speed(entry: Mapping[str, Any], method: str = "spec_chain_t0") -> Speed:
    """The decoding benchmark's speedup of ``method`` over plain decoding, with its interval over
    prompts (:func:`~activation_wave.study.chapters.performance.prompt_speedup`)."""
    d = prompt_speedup(entry["per_prompt"], method)
    return Speed(d["speedup"], d["lo"], d["hi"], d["n"], side_word(d["lo"], d["hi"], 1.0, "faster", "slower"))


def _llamacpp_speed(method: Mapping[str, Any]) -> Speed:
    lo, hi = method["speedup_ci"]
    return Speed(method["speedup"], lo, hi, method["prompts"], side_word(lo, hi, 1.0, "faster", "slower"))


def run(cfg: StudyConfig, root: str | Path | None = None) -> tuple[LandingResult, Chapters]:
    """The landing page's numbers, and the chapters' results its figure draws from."""
    ch = load_chapters(cfg, root)
    bench = load_benchmarks()
    h1, h2 = evaluate_hypotheses(ch.paired)[:2]
    rules = [c for c in ch.paired.comparisons if c.family == "rules" and c.p_holm_rules is not None]
    best = max(rules, key=lambda c: c.delta)
    h1_delta = Delta(best.set, ch.selection.sets.get(best.set, []), best.delta, best.lo, best.hi, best.p_holm_rules,
                     best.n, h1.glance)
    s2 = next(p for p in ch.paired.predictors if p.name == "renyi2" and p.units == "triples")
    scale_rows = (ch.data_scale or {}).get("sets") or []
    top = max(scale_rows, key=lambda r: r["delta"]) if scale_rows else None
    scale = _delta(top, top["layers"], top["delta"] > 0 and top["p_holm"] < 0.05, "p_holm") if top else _NONE
    g1 = cross_hypotheses(ch.cross_drafters)[0]
    c1 = ch.cross_drafters.comparison
    large = bench[LLAMACPP]["large"]["by_threads"]["2"]
    best_large = max((m for m in large if m.startswith("eagle3")), key=lambda m: large[m]["tau"])
    answer = h1_delta.layers if h1.supported else ch.selection.default_layers
    sink = ch.filtering.sink
    return LandingResult(
        model=cfg.model, n_layers=ch.data.info.n_layers, n_prompts=ch.data.summary.records,
        default_layers=list(ch.selection.default_layers or []), answer_layers=list(answer or []), h1=h1_delta,
        scale=scale, rho=s2.rho, rho_lo=s2.lo, rho_hi=s2.hi, n_triples=s2.n, h2=h2.glance,
        second_model=ch.cross_drafters.model,
        g1=(Delta(c1.set, list(c1.layers), c1.delta, c1.lo, c1.hi, c1.p_holm_rules, c1.n,
                  g1.glance) if c1 is not None else _NONE),
        sink_ratio=sink.sink_peak, cliff_layer=sink.cliff.to_layer,
        loop=loop_speed(bench[LOOP]), loop_tau=bench[LOOP]["tau_t0"],
        large_model=bench[LLAMACPP]["model"], large_eagle3=_llamacpp_speed(large[best_large]), large_tau=large[best_large]["tau"],
        large_ngram=_llamacpp_speed(large["ngram"]), ngram_tau=large["ngram"]["tau"]), ch
