"""Chapter 7, two architectures side by side: the same statistics and selections on the
study's model and on the profile's second architecture (``cfg.cross``).

:func:`run` returns a :class:`CrossModelResult`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.select.across_models import ModelSummary, cross_config, layer_summary
from activation_wave.core.layers import span_text
from activation_wave.study.steps import run_capture


@dataclass(frozen=True)
class CrossModelResult:
    """One :class:`~activation_wave.select.across_models.ModelSummary` per model, the study's first."""

    summaries: list[ModelSummary]


def run(cfg: StudyConfig) -> CrossModelResult:
    """Capture (cached) and summarise the study's model and ``cross_config(cfg)``'s."""
    out = []
    for c in (cfg, cross_config(cfg)):
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
