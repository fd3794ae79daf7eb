"""Chapter 7, architectures side by side: the same statistics and selections on the
study's model, the profile's second architecture (``cfg.cross``) and, when it names one,
its third (``cfg.third``).

:func:`run` returns a :class:`CrossModelResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.select.across_models import ModelSummary, extra_architectures, layer_summary
from activation_wave.core.layers import span_text
from activation_wave.study.steps import run_capture


@dataclass(frozen=True)
class CrossModelResult:
    """One :class:`~activation_wave.select.across_models.ModelSummary` per model, the study's first."""

    summaries: list[ModelSummary]


def run(cfg: StudyConfig) -> CrossModelResult:
    """Capture (cached) and summarise the study's model and each of :func:`extra_architectures`."""
    out = []
    for c in (cfg, *extra_architectures(cfg)):
        cap = run_capture(c, progress=False)
        print(cap.cache.summary())
        out.append(layer_summary(cap.cache, c))
    return CrossModelResult(out)


def percentile_table(result: CrossModelResult) -> pd.DataFrame:
    """Every method's set on each model with its ``S_2`` percentile among all sets."""
    return pd.DataFrame([{"model": s.model, "method": m, "layers": str(ids), "S2 percentile among all sets": s.percentile[m]}
                         for s in result.summaries for m, ids in s.sets.items()])


def overview_table(result: CrossModelResult) -> pd.DataFrame:
    """One row per model: size, compartments, the default and the exhaustive set."""
    return pd.DataFrame([{"model": s.model, "N": s.n_layers, "width": s.hidden_size, "compartments": span_text(s.compartments),
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


def model_values(result: CrossModelResult) -> dict[str, Any]:
    """Per model (``cross_<i>_*``, 0 = the study's model): name, blocks, width, filtered
    positions, compartments, and the default triple's S2 percentile among all triples."""
    out: dict[str, Any] = {"cross_n_models": len(result.summaries)}
    for i, s in enumerate(result.summaries):
        out.update({f"cross_{i}_model": s.model, f"cross_{i}_n_layers": s.n_layers, f"cross_{i}_width": s.hidden_size,
                    f"cross_{i}_tokens": s.n_tokens, f"cross_{i}_compartments": len(s.compartments),
                    f"cross_{i}_default_pct": s.percentile.get("eagle3-default", float("nan"))})
    return out
