"""Chapter 8, the results in one place: reads the result objects of chapters 0-7 (the
drafters' chapter 6 and its paired analysis, ``06_predictors``) and lines the numbers up;
computes nothing new about the model.

:func:`run` returns a :class:`ResultsSummary`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.core.layers import last_blocks, span_text
from activation_wave.core.results import load_result
from activation_wave.core.stats import group_difference
from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.study.chapters import drafter_data_scale, drafter_strength
from activation_wave.core.results import load_optional
from activation_wave.study.chapters.cka_compartments import CkaCompartmentsResult
from activation_wave.study.chapters.cross_drafters import CrossDrafterResult
from activation_wave.study.chapters.cross_drafters import evaluate_hypotheses as cross_hypotheses
from activation_wave.study.chapters.cross_model import CrossModelResult
from activation_wave.study.chapters.data_and_capture import DataAndCaptureResult
from activation_wave.study.chapters.drafter_predictors import DrafterPredictors
from activation_wave.study.hypotheses import Hypothesis
from activation_wave.study.chapters.eagle3_speedup import Eagle3SpeedupResult, evaluate_hypotheses
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
    chapter 7: the side-by-side statistics and the second model's drafters), and the
    drafter-strength page's document when it has run."""

    data: DataAndCaptureResult
    entropy: LayerEntropyResult
    cka: CkaCompartmentsResult
    filtering: TokenFilteringResult
    selection: LayerSelectionResult
    drafters: Eagle3SpeedupResult
    paired: DrafterPredictors
    cross: CrossModelResult
    cross_drafters: CrossDrafterResult
    strength: dict[str, Any] | None = None  # ``06_strength`` (the page after chapter 6), None before it runs
    data_scale: dict[str, Any] | None = None  # ``data_scale`` (chapter 6c, H7), None before its design has run


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
                    cross_drafters=get("07_cross_drafters", CrossDrafterResult),
                    strength=load_optional(drafter_strength.NAME, cfg, root),
                    data_scale=load_optional(drafter_data_scale.NAME, cfg, root))


@dataclass(frozen=True)
class DepthSplit:
    """Drafters of layer triples on the pre-registered outcome, split by whether they read
    one of the last blocks: each group's mean tau and their difference per prompt, with a
    95% interval resampling the triples within each group and the prompts
    (:func:`~activation_wave.core.stats.group_difference`)."""

    late_from: int
    n_late: int
    tau_late: float | None
    tau_early: float | None
    n_early: int = 0
    delta: float | None = None  # late - early
    lo: float | None = None
    hi: float | None = None
    n_prompts: int = 0


@dataclass(frozen=True)
class ResultsSummary:
    """The tables and numbers of chapter 8."""

    findings: list[tuple[str, str]]
    selection: list[dict[str, Any]]
    hypotheses: list[Hypothesis]  # chapter 6's H1-H4, the strength page's H5/H6, chapter 7's G1-G3 (second model)
    predictors: list[dict[str, Any]]  # chapter 6's rho of each score against tau, with n and interval
    tau_spread: float  # max - min outcome tau over the main arm's triples
    tau_half_ci: float  # mean half-width of their 95% intervals over prompts
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
    """Every named set of chapter 5 with its scores, its drafters' tau on the pre-registered
    outcome (chapter 6's paired analysis: offline tau at the online depth and draft
    threshold, mean over the eval prompts of the seed-averaged per-prompt tau) with its 95%
    interval over prompts, and the paired delta tau against the default on the same
    outcome; highest outcome first (None where no drafter was trained)."""
    tau = {r.set: r for r in dp.outcome_rows(ch.paired)}
    out = []
    for method, ids in ch.selection.sets.items():
        sc, t = ch.selection.scores.get(method, {}), tau.get(method)
        out.append({"set": method, "layers": str(list(ids)), "S2 (nats)": sc.get("renyi2"),
                    "percentile of S2": sc.get("percentile"), "mean CKA": sc.get("mean_cka"),
                    "tau (outcome)": t.tau if t else None,
                    "tau 95% interval": f"[{t.lo:.3f}, {t.hi:.3f}]" if t else None,
                    "seeds": t.n_seeds if t else None,
                    "delta tau vs default": t.delta if t else None, "delta 95% low": t.delta_lo if t else None,
                    "delta 95% high": t.delta_hi if t else None, "Holm p": t.p_holm if t else None})
    return sorted(out, key=lambda r: -(r["tau (outcome)"] if r["tau (outcome)"] is not None else -np.inf))


def depth_split(paired: DrafterPredictors, n_layers: int, *, n_boot: int = 10_000, seed: int = 0) -> DepthSplit:
    """The main arm's triples on the outcome, those reading one of the last
    :data:`LATE_BLOCKS` blocks against the others (see :class:`DepthSplit`)."""
    late_from = last_blocks(n_layers, LATE_BLOCKS)[0]
    tri = [s for s in paired.sets if len(s.layers) == 3 and not s.set.endswith("+norm")]
    per_prompt = {s.set: np.array([np.nan if v is None else v for v in s.per_prompt], float) for s in tri}
    late = [s.set for s in tri if max(s.layers) >= late_from]
    early = [s.set for s in tri if max(s.layers) < late_from]
    mean = {s.set: s.tau for s in tri}
    out = DepthSplit(late_from, len(late), float(np.mean([mean[s] for s in late])) if late else None,
                     float(np.mean([mean[s] for s in early])) if early else None, len(early))
    if not late or not early:
        return out
    d = group_difference(np.stack([per_prompt[s] for s in late]), np.stack([per_prompt[s] for s in early]),
                         n_boot=n_boot, seed=seed)
    return dataclasses.replace(out, delta=d.mean, lo=d.lo, hi=d.hi, n_prompts=d.n)


def run(cfg: StudyConfig, root: str | Path | None = None, *, chapters: Chapters | None = None) -> ResultsSummary:
    """Chapter 8 from the results files of chapters 0-7 (or from ``chapters`` already loaded)."""
    ch = load_chapters(cfg, root) if chapters is None else chapters
    tri = dp.outcome_rows(ch.paired, 3)
    t3 = [r.tau for r in tri]
    return ResultsSummary(
        findings=findings(ch), selection=selection_rows(ch),
        hypotheses=(evaluate_hypotheses(ch.paired) + drafter_strength.hypotheses(ch.strength)
                    + drafter_data_scale.hypotheses(ch.data_scale)
                    + cross_hypotheses(ch.cross_drafters)),
        predictors=[vars(p) for p in ch.paired.predictors],
        tau_spread=float(max(t3) - min(t3)),
        tau_half_ci=float(np.mean([(r.hi - r.lo) / 2 for r in tri if np.isfinite(r.hi - r.lo)])),
        depth=depth_split(ch.paired, ch.data.info.n_layers))


def online_table(drafters: Eagle3SpeedupResult) -> pd.DataFrame:
    """Chapter 6's online decoding comparison, one row per drafter."""
    return pd.DataFrame({name: vars(o) for name, o in drafters.online.items()}).T[list(ONLINE_COLUMNS)]
