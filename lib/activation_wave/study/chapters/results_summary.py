"""Chapter 8, the results in one place: reads the result objects of chapters 0-7 (the
drafters' chapter 6 and its paired analysis, ``06_predictors``) and lines the numbers up;
computes nothing new about the model.

:func:`run` returns a :class:`ResultsSummary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.core.layers import last_blocks, span_text
from activation_wave.core.results import load_result
from activation_wave.study.chapters.cka_compartments import CkaCompartmentsResult
from activation_wave.study.chapters.cross_drafters import CrossDrafterResult
from activation_wave.study.chapters.cross_drafters import evaluate_hypotheses as cross_hypotheses
from activation_wave.study.chapters.cross_model import CrossModelResult
from activation_wave.study.chapters.data_and_capture import DataAndCaptureResult
from activation_wave.study.chapters.drafter_predictors import DrafterPredictors
from activation_wave.study.chapters.eagle3_speedup import Eagle3SpeedupResult, evaluate_hypotheses
from activation_wave.study.hypotheses import Hypothesis
from activation_wave.study.chapters.layer_entropy import LayerEntropyResult
from activation_wave.study.chapters.layer_selection import LayerSelectionResult
from activation_wave.study.chapters.token_filtering import TokenFilteringResult

#: How many of the last blocks count as "late" when the drafters are split by depth.
LATE_BLOCKS = 3
#: Columns of chapter 6's online comparison shown here.
ONLINE_COLUMNS = ("layers", "tau_t0", "tau_t1", "lossless_prompts", "n_prompts", "speedup_vs_plain_t0",
                  "speedup_vs_plain_t1", "speedup_vs_prompt_lookup_t0")


@dataclass(frozen=True)
class Chapters:
    """The result objects of chapters 0-7 (chapter 6: its result and its paired analysis;
    chapter 7: the side-by-side statistics and the second model's drafters)."""

    data: DataAndCaptureResult
    entropy: LayerEntropyResult
    cka: CkaCompartmentsResult
    filtering: TokenFilteringResult
    selection: LayerSelectionResult
    drafters: Eagle3SpeedupResult
    paired: DrafterPredictors
    cross: CrossModelResult
    cross_drafters: CrossDrafterResult


def load_chapters(cfg: StudyConfig, root: str | Path | None = None) -> Chapters:
    """Read every chapter's results file (a missing one names the chapter to run)."""
    def get(name: str, cls: Any = None) -> Any:
        return load_result(name, cfg, root, cls=cls)

    return Chapters(data=get("00_data_and_capture", DataAndCaptureResult), entropy=get("01_layer_entropy", LayerEntropyResult),
                    cka=get("03_cka_compartments", CkaCompartmentsResult),
                    filtering=get("04_token_filtering", TokenFilteringResult),
                    selection=get("05_layer_selection", LayerSelectionResult),
                    drafters=get("06_eagle3_speedup", Eagle3SpeedupResult), paired=get("06_predictors", DrafterPredictors),
                    cross=get("07_cross_model", CrossModelResult),
                    cross_drafters=get("07_cross_drafters", CrossDrafterResult))


@dataclass(frozen=True)
class DepthSplit:
    """Drafters of layer triples, split by whether they read one of the last blocks."""

    late_from: int
    n_late: int
    tau_late: float | None
    tau_early: float | None


@dataclass(frozen=True)
class ResultsSummary:
    """The tables and numbers of chapter 8."""

    findings: list[tuple[str, str]]
    selection: list[dict[str, Any]]
    hypotheses: list[Hypothesis]  # chapter 6's H1-H4, then chapter 7's G1-G3 (second model)
    predictors: list[dict[str, Any]]  # chapter 6's rho of each score against tau, with n and interval
    tau_spread: float  # max - min tau over the main arm's triples
    tau_half_ci: float  # mean half-width of their 95% intervals
    depth: DepthSplit


def _min_at(values: list[float], ids: list[int]) -> str:
    j = int(np.argmin(values))
    return f"{values[j]:.2f} nats at layer {ids[j]}"


def findings(ch: Chapters) -> list[tuple[str, str]]:
    """(quantity, value) rows of the metric chapters."""
    s1, sink, ids = ch.entropy.dataset_summary, ch.filtering.sink, ch.filtering.ids
    rows = [
        ("dataset entropy, response positions (nats)",
         f"{s1['min']:.2f} (layer {s1['argmin']}) to {s1['max']:.2f} (layer {s1['argmax']})"),
        ("largest fall between adjacent layers (response positions)",
         f"{s1['drop']:.2f} nats, layer {s1['drop_from']} to {s1['drop_to']}"),
        ("CKA compartments (response positions)", span_text(ch.cka.compartments)),
        ("largest norm ratio of the first sequence token", f"{sink.sink_peak:.0f}x the median"),
        ("entropy with all positions (sink included): min over layers", _min_at(sink.conditions["all"].entropy, ids)),
    ]
    rows += [(f"... {c.label}: min over layers", _min_at(c.entropy, ids)) for k, c in sink.conditions.items() if k != "all"]
    return rows


def selection_rows(ch: Chapters) -> list[dict[str, Any]]:
    """Every named set of chapter 5 with its scores, its drafters' tau and the paired
    delta tau against the default (chapter 6; None where no drafter was trained)."""
    tau = {r.set: r for r in ch.drafters.summary}
    delta = {c.set: c for c in ch.paired.comparisons}
    out = []
    for method, ids in ch.selection.sets.items():
        sc, t, d = ch.selection.scores.get(method, {}), tau.get(method), delta.get(method)
        out.append({"set": method, "layers": str(list(ids)), "S2 (nats)": sc.get("renyi2"),
                    "percentile of S2": sc.get("percentile"), "mean CKA": sc.get("mean_cka"),
                    "drafter tau": t.tau if t else None, "seeds": t.n_seeds if t else None,
                    "delta tau vs default": d.delta if d else None, "delta 95% low": d.lo if d else None,
                    "delta 95% high": d.hi if d else None, "Holm p": (d.p_holm_rules if d and d.p_holm_rules is not None
                                                                      else d.p_holm_all if d else None)})
    return sorted(out, key=lambda r: -(r["drafter tau"] if r["drafter tau"] is not None else -np.inf))


def depth_split(tri: list[Any], n_layers: int) -> DepthSplit:
    """Mean tau of the triples reading one of the last :data:`LATE_BLOCKS` blocks, and of the others."""
    late_from = last_blocks(n_layers, LATE_BLOCKS)[0]
    late = [r.tau for r in tri if max(r.layers) >= late_from]
    early = [r.tau for r in tri if max(r.layers) < late_from]
    return DepthSplit(late_from, len(late), float(np.mean(late)) if late else None,
                      float(np.mean(early)) if early else None)


def run(cfg: StudyConfig, root: str | Path | None = None, *, chapters: Chapters | None = None) -> ResultsSummary:
    """Chapter 8 from the results files of chapters 0-7 (or from ``chapters`` already loaded)."""
    ch = load_chapters(cfg, root) if chapters is None else chapters
    tri = ch.drafters.sets_of_size(3)
    t3 = [r.tau for r in tri]
    return ResultsSummary(
        findings=findings(ch), selection=selection_rows(ch),
        hypotheses=evaluate_hypotheses(ch.paired) + cross_hypotheses(ch.cross_drafters),
        predictors=[vars(p) for p in ch.paired.predictors],
        tau_spread=float(max(t3) - min(t3)),
        tau_half_ci=float(np.mean([(r.tau_hi - r.tau_lo) / 2 for r in tri if r.tau_hi is not None])),
        depth=depth_split(tri, ch.data.info.n_layers))


def online_table(drafters: Eagle3SpeedupResult) -> pd.DataFrame:
    """Chapter 6's online decoding comparison, one row per drafter."""
    return pd.DataFrame({name: vars(o) for name, o in drafters.online.items()}).T[list(ONLINE_COLUMNS)]
