"""The other architectures' pages of Part II: the same statistics and selections on the
study's model and one other, the profile's second architecture (``cfg.cross``, its page
``07_gemma``, results ``07_cross_model``) or its third (``cfg.third``, page ``07b_qwen``,
results ``07b_third_model``).

:func:`run` returns a :class:`CrossModelResult`; :func:`model_values`,
:func:`outlier_values` and :func:`responses_values` return the values the pages glue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.select.across_models import ModelSummary, cross_config, layer_summary, third_config
from activation_wave.core.layers import span_text
from activation_wave.plots._style import model_label, set_label
from activation_wave.study.chapters.token_filtering import REMOVED_BY
from activation_wave.study.steps import run_capture

#: The results file of each architecture's page, by the profile section that names the model.
NAMES = {"cross": "07_cross_model", "third": "07b_third_model"}
#: What a page says where an outlier analysis has not run for a model.
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class CrossModelResult:
    """One :class:`~activation_wave.select.across_models.ModelSummary` per model, the study's first."""

    summaries: list[ModelSummary]


def other_config(cfg: StudyConfig, arch: str) -> StudyConfig | None:
    """The config of the profile's ``arch`` architecture ("cross" or "third"); None when the
    profile names no third."""
    if arch == "cross":
        return cross_config(cfg)
    if arch == "third":
        return third_config(cfg) if cfg.third.model else None
    raise ValueError(f"unknown architecture {arch!r}: give one of {sorted(NAMES)}")


def run(cfg: StudyConfig, arch: str = "cross") -> CrossModelResult:
    """Capture (cached) and summarise the study's model and the profile's ``arch``
    architecture (:func:`other_config`; the study's model alone when there is none)."""
    other = other_config(cfg, arch)
    out = []
    for c in (cfg, *([other] if other is not None else [])):
        cap = run_capture(c, progress=False)
        print(cap.cache.summary())
        out.append(layer_summary(cap.cache, c))
    return CrossModelResult(out)


def percentile_table(result: CrossModelResult) -> pd.DataFrame:
    """Every method's set on each model with its ``S_2`` percentile among all sets."""
    return pd.DataFrame([{"model": model_label(s.model), "rule": set_label(m), "layers": str(ids),
                          "S2 percentile among all sets": s.percentile[m]}
                         for s in result.summaries for m, ids in s.sets.items()])


def overview_table(result: CrossModelResult) -> pd.DataFrame:
    """One row per model: size, compartments, the default and the exhaustive set."""
    return pd.DataFrame([{"model": model_label(s.model), "N": s.n_layers, "width": s.hidden_size, "compartments": span_text(s.compartments),
                          "EAGLE-3 default": str(s.default), "exhaustive (S2)": str(s.sets.get("exhaustive")),
                          "default's S2 percentile": s.percentile.get("eagle3-default", float("nan"))}
                         for s in result.summaries])


def responses_values(cfg: StudyConfig, root: str | Path | None = None) -> dict[str, Any]:
    """Where the third architecture's responses come from (``cross_engine``: "llama.cpp" or
    "PyTorch") and, when llama.cpp wrote them, its greedy agreement with the PyTorch target on a
    checked sample (``llamacpp_agreement.json`` of the third model): prompts compared, identical,
    and the mean share of a response their common prefix covers (percent; NaN when unchecked)."""
    from activation_wave.core.results import load_optional
    from activation_wave.select.across_models import third_config

    nan = float("nan")
    out: dict[str, Any] = {"cross_third": cfg.third.model or "none", "cross_engine": "PyTorch",
                           "cross_agree_n": 0, "cross_agree_same": 0, "cross_agree_prefix": nan}
    if not cfg.third.model or cfg.third.engine != "llamacpp":
        return out
    out["cross_engine"] = "llama.cpp"
    ag = load_optional("llamacpp_agreement", third_config(cfg), root)
    if ag is not None:
        a = ag["agreement"]
        out.update(cross_agree_n=a["compared"], cross_agree_same=a["identical"],
                   cross_agree_prefix=100 * a["mean_prefix_share"])
    return out


def model_values(result: CrossModelResult, n_models: int = 2) -> dict[str, Any]:
    """Per model (``cross_<i>_*``, 0 = the study's model, for ``i < n_models``): alias, name as
    the figures give it, blocks, width, filtered positions, compartments, the default triple's
    S2 percentile among all triples, and the default and the combined rule's sets. A model the
    result lacks (a profile with no third architecture) gets "none" and NaN, so a page renders."""
    nan = float("nan")
    out: dict[str, Any] = {"cross_n_models": len(result.summaries)}
    for i in range(n_models):
        s = result.summaries[i] if i < len(result.summaries) else None
        out.update({f"cross_{i}_model": s.model if s else "none", f"cross_{i}_name": model_label(s.model) if s else "none",
                    f"cross_{i}_n_layers": s.n_layers if s else 0, f"cross_{i}_width": s.hidden_size if s else 0,
                    f"cross_{i}_tokens": s.n_tokens if s else 0, f"cross_{i}_compartments": len(s.compartments) if s else 0,
                    f"cross_{i}_default_pct": s.percentile.get("eagle3-default", nan) if s else nan,
                    f"cross_{i}_default": str(s.default) if s and s.default else "none",
                    f"cross_{i}_combined": str(s.sets.get("combined", "none")) if s else "none",
                    f"cross_{i}_combined_pct": s.percentile.get("combined", nan) if s else nan})
    return out


def outlier_values(first: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> dict[str, Any]:
    """The entropy fall of each model and how many outlier treatments remove it, from the
    models' token-filtering results files (``04_token_filtering``; None where that page has not
    run for the model): ``tf_<first|other>_*``: the layers the largest fall runs from and into,
    its size in nats, and :data:`~activation_wave.study.chapters.token_filtering.REMOVED_BY`'s
    words ("all three", "some, not all", "none"), or :data:`NOT_MEASURED`."""
    nan = float("nan")
    out: dict[str, Any] = {}
    for key, doc in (("first", first), ("other", other)):
        sink = (doc or {}).get("sink") or {}
        cliff = sink.get("cliff") or {}
        out.update({f"tf_{key}_from": cliff.get("from_layer", -1), f"tf_{key}_to": cliff.get("to_layer", -1),
                    f"tf_{key}_drop": cliff.get("drop", nan),
                    f"tf_{key}_removed": REMOVED_BY[sink["removed"]] if sink.get("removed") in REMOVED_BY else NOT_MEASURED})
    return out
