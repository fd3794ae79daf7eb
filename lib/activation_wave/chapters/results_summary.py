"""Chapter 8, the results in one place: reads the result objects of chapters 0-7 (the
drafters' chapter 6 as its raw mapping) and lines the numbers up; computes nothing new
about the model.

:func:`run` returns a :class:`ResultsSummary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from ..config import StudyConfig
from ..layers import last_blocks, span_text
from ..results import load_result
from .cka_compartments import CkaCompartmentsResult
from .cross_model import CrossModelResult
from .data_and_capture import DataAndCaptureResult
from .layer_entropy import LayerEntropyResult
from .layer_selection import LayerSelectionResult
from .token_filtering import TokenFilteringResult

#: How many of the last blocks count as "late" when the drafters are split by depth.
LATE_BLOCKS = 3
#: Columns of chapter 6's online comparison shown here.
ONLINE_COLUMNS = ("layers", "tau_t0", "tau_t1", "lossless_prompts", "n_prompts", "speedup_vs_plain_t0",
                  "speedup_vs_plain_t1", "speedup_vs_prompt_lookup_t0")


@dataclass(frozen=True)
class Chapters:
    """The result objects of chapters 0-7 (chapter 6: the raw mapping of its file)."""

    data: DataAndCaptureResult
    entropy: LayerEntropyResult
    cka: CkaCompartmentsResult
    filtering: TokenFilteringResult
    selection: LayerSelectionResult
    drafters: dict[str, Any]
    cross: CrossModelResult


def load_chapters(cfg: StudyConfig, root: str | Path | None = None) -> Chapters:
    """Read every chapter's results file (a missing one names the chapter to run)."""
    def get(name: str, cls: Any = None) -> Any:
        return load_result(name, cfg, root, cls=cls)

    return Chapters(data=get("00_data_and_capture", DataAndCaptureResult), entropy=get("01_layer_entropy", LayerEntropyResult),
                    cka=get("03_cka_compartments", CkaCompartmentsResult),
                    filtering=get("04_token_filtering", TokenFilteringResult),
                    selection=get("05_layer_selection", LayerSelectionResult), drafters=get("06_eagle3_speedup"),
                    cross=get("07_cross_model", CrossModelResult))


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
    predictors: dict[str, tuple[float, float]]
    tau_spread: float
    tau_half_ci: float
    depth: DepthSplit
    n_pairs: int
    n_pairs_gain: int
    pairs_max_gain: float | None


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
    """Every named set of chapter 5 with its scores and its drafter's tau (chapter 6)."""
    tau = {r["set"]: r for r in ch.drafters["summary"]}
    out = []
    for method, ids in ch.selection.sets.items():
        sc, t = ch.selection.scores.get(method, {}), tau.get(method, {})
        out.append({"set": method, "layers": str(ids), "S2 (nats)": sc.get("renyi2"), "percentile of S2": sc.get("percentile"),
                    "mean CKA": sc.get("mean_cka"), "drafter tau": t.get("tau"), "tau 95% low": t.get("tau_lo"),
                    "tau 95% high": t.get("tau_hi")})
    return sorted(out, key=lambda r: -(r["drafter tau"] if r["drafter tau"] is not None else -np.inf))


def triples(ch: Chapters) -> list[dict[str, Any]]:
    """Chapter 6's summary rows of the three-layer drafters."""
    return [r for r in ch.drafters["summary"] if r["k"] == 3]


def predictors(tri: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Spearman (rho, p) of each candidate explanation of tau across the triples."""
    t3 = [r["tau"] for r in tri]
    xs = {"concatenation entropy S2": [r["renyi2"] for r in tri], "mean pairwise CKA": [r["mean_cka"] for r in tri],
          "deepest layer of the triple": [max(r["layers"]) for r in tri],
          "mean layer index": [float(np.mean(r["layers"])) for r in tri],
          "shallowest layer of the triple": [min(r["layers"]) for r in tri]}
    return {name: tuple(float(v) for v in spearmanr(x, t3)) for name, x in xs.items()}


def depth_split(tri: list[dict[str, Any]], n_layers: int) -> DepthSplit:
    """Mean tau of the triples reading one of the last :data:`LATE_BLOCKS` blocks, and of the others."""
    late_from = last_blocks(n_layers, LATE_BLOCKS)[0]
    late = [r["tau"] for r in tri if max(r["layers"]) >= late_from]
    early = [r["tau"] for r in tri if max(r["layers"]) < late_from]
    return DepthSplit(late_from, len(late), float(np.mean(late)) if late else None,
                      float(np.mean(early)) if early else None)


def run(cfg: StudyConfig, root: str | Path | None = None, *, chapters: Chapters | None = None) -> ResultsSummary:
    """Chapter 8 from the results files of chapters 0-7 (or from ``chapters`` already loaded)."""
    ch = load_chapters(cfg, root) if chapters is None else chapters
    tri = triples(ch)
    t3 = [r["tau"] for r in tri]
    summary = ch.drafters["summary"]
    singles = {r["layers"][0]: r["tau"] for r in summary if r["k"] == 1}
    pairs = [r for r in summary if r["k"] == 2]
    gain = [r["tau"] - max(singles.get(a, float("nan")) for a in r["layers"]) for r in pairs]
    return ResultsSummary(
        findings=findings(ch), selection=selection_rows(ch), predictors=predictors(tri),
        tau_spread=float(max(t3) - min(t3)), tau_half_ci=float(np.mean([(r["tau_hi"] - r["tau_lo"]) / 2 for r in tri])),
        depth=depth_split(tri, ch.data.info.n_layers), n_pairs=len(pairs), n_pairs_gain=sum(g > 0 for g in gain),
        pairs_max_gain=max(gain) if gain else None)


def online_table(drafters: dict[str, Any]) -> pd.DataFrame:
    """Chapter 6's online decoding comparison, one row per drafter."""
    return pd.DataFrame(drafters["online"]).T[list(ONLINE_COLUMNS)]


#: Results file of the exploratory, set-level predictor analysis of chapter 6's drafters
#: (``python -m activation_wave.chapters.drafter_predictors --taus-from ...``).
SETLEVEL_PREDICTORS = "06_predictors_setlevel"


def exploratory_predictors(cfg: StudyConfig, root: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                    dict[str, Any]]:
    """The set-level predictor analysis, if it was run for this profile: (predictors table,
    filtering table, prose values). Empty tables and "-" values when the file is absent."""
    from .drafter_predictors import SetLevelPredictors

    try:
        res = load_result(SETLEVEL_PREDICTORS, cfg, root, cls=SetLevelPredictors)
    except FileNotFoundError:
        return pd.DataFrame(), pd.DataFrame(), {"xp_n": 0, "xp_deepest": "-", "xp_s2": "-", "xp_probe": "-",
                                                "xp_filter": "-", "xp_status": "was not run for this profile"}
    preds = pd.DataFrame([vars(p) for p in res.predictors])
    filt = pd.DataFrame([vars(f) for f in res.filtering])
    tri = {p.name: p for p in res.predictors if p.units == "triples"}

    def rho(name: str) -> str:
        p = tri.get(name)
        return "-" if p is None or p.rho is None else f"{p.rho:+.2f} (95% interval {p.lo:+.2f} to {p.hi:+.2f})"

    half = next((f for f in res.filtering if f.quantile == 0.5), None)
    filt_text = ("-" if half is None or half.delta_vs_unfiltered is None else
                 f"{half.delta_vs_unfiltered:+.2f} (95% interval {half.delta_lo:+.2f} to {half.delta_hi:+.2f})")
    return preds, filt, {"xp_n": next(iter(tri.values())).n if tri else 0, "xp_deepest": rho("deepest"),
                         "xp_s2": rho("renyi2"), "xp_probe": rho("probe"), "xp_filter": filt_text,
                         "xp_status": f"was run on {Path(res.capture).name} with tau from {res.tau_source}"}
