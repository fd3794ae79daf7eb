"""The landing page: the study's answer in numbers. Registered tests are quoted from the
findings record (:func:`activation_wave.study.findings.headline`); the rest are
measurements read from the results files, each labelled as one, with its interval, n and
side (:func:`~activation_wave.study.hypotheses.side_word`). The page's sentences live in
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
from activation_wave.core.stats import prompt_speedup
from activation_wave.study.chapters.results_summary import Chapters, load_chapters
from activation_wave.study.hypotheses import side_word

#: The rules whose sets the key figure shows, in this order.
KEY_RULES = ("exhaustive", "entropy-greedy", "combined", "cka-diverse", "eagle3-default", "last-k")
#: benchmarks.json entries the page reads: the study's decoding loop (135M) and llama.cpp at 1.5B.
LOOP, LLAMACPP = "speculative_decoding", "llamacpp_1.5b"


@dataclass(frozen=True)
class Speed:
    """A speedup over plain decoding on the same prompts, its 95% interval over prompts, n,
    and which side of 1 it lies (faster / slower / within noise). A measurement, not a
    registered test: the page labels it so."""

    ratio: float
    lo: float
    hi: float
    n: int
    side: str


@dataclass(frozen=True)
class LandingResult:
    """The numbers of the landing page that are not registered tests (those it quotes from the
    findings record; see the module docstring)."""

    model: str
    n_layers: int
    n_prompts: int
    default_layers: list[int]
    answer_layers: list[int]  # the layers to read: the best rule's set if H1 is supported, else the default
    n_triples: int  # the triples H2's rho ranges over
    second_model: str
    sink_ratio: float  # the first token's norm over the median token's, at its peak layer
    cliff_layer: int
    loop: Speed  # EAGLE-3 in the study's own loop, 135M target, T = 0 (the decoding benchmark's drafter)
    loop_tau: float  # its online mean accepted length, pooled over the timed rounds
    large_model: str
    large_ngram: Speed  # llama.cpp's n-gram lookup against the default plain run (weights repacked), same prompts
    ngram_tau: float


def key_sets(ch: Chapters) -> dict[str, list[int]]:
    """The sets of :data:`KEY_RULES` that chapter 5 chose."""
    return {m: ch.selection.sets[m] for m in KEY_RULES if m in ch.selection.sets}


def ranked_triples(ch: Chapters) -> list[dp.OutcomeRow]:
    """Chapter 6's three-layer drafters (main arm) on the pre-registered outcome, highest first."""
    return dp.outcome_rows(ch.paired, 3)


def loop_speed(entry: Mapping[str, Any], method: str = "spec_chain_t0") -> Speed:
    """The decoding benchmark's speedup of ``method`` over plain decoding, with its interval over
    prompts (:func:`~activation_wave.study.chapters.performance.prompt_speedup`)."""
    d = prompt_speedup(entry["per_prompt"], method)
    return Speed(d["speedup"], d["lo"], d["hi"], d["n"], side_word(d["lo"], d["hi"], 1.0, "faster", "slower"))


def llamacpp_speed(run: Mapping[str, Any], method: str) -> Speed:
    """``method`` against the plain llama.cpp server with its default flags in one run
    (:func:`~activation_wave.study.chapters.cpu_payoff.against_default_plain`)."""
    from activation_wave.study.chapters.cpu_payoff import against_default_plain

    d = against_default_plain(run, method)
    return Speed(d["speedup"], d["lo"], d["hi"], d["n"], side_word(d["lo"], d["hi"], 1.0, "faster", "slower"))


def run(cfg: StudyConfig, root: str | Path | None = None) -> tuple[LandingResult, Chapters]:
    """The landing page's numbers, and the chapters' results its figure draws from."""
    from activation_wave.study import findings

    ch = load_chapters(cfg, root)
    f = findings.load(cfg, root)
    bench = load_benchmarks()
    h1 = f.get("H1")
    answer = ch.selection.sets.get(h1.compared, []) if h1.word == "supported" else ch.selection.default_layers
    large = bench[LLAMACPP]["large"]["by_threads"]
    top = large[max(large, key=int)]
    sink = ch.filtering.sink
    return LandingResult(
        model=cfg.model, n_layers=ch.data.info.n_layers, n_prompts=ch.data.summary.records,
        default_layers=list(ch.selection.default_layers or []), answer_layers=list(answer or []),
        n_triples=f.get("H2").n or 0, second_model=ch.cross_drafters.model,
        sink_ratio=sink.sink_peak, cliff_layer=sink.cliff.to_layer,
        loop=loop_speed(bench[LOOP]), loop_tau=bench[LOOP]["tau_t0"],
        large_model=bench[LLAMACPP]["model"], large_ngram=llamacpp_speed(top, "ngram"),
        ngram_tau=top["ngram"]["tau"]), ch
