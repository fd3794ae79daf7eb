"""Chapter 7, architectures side by side: the same statistics and selections on the
study's model, the profile's second architecture (``cfg.cross``) and, when it names one,
its third (``cfg.third``).

:func:`run` returns a :class:`CrossModelResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.select.across_models import ModelSummary, extra_architectures, layer_summary
from activation_wave.core.layers import span_text
from activation_wave.study.glue import join_words
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


def models_text(result: CrossModelResult) -> str:
    """One sentence naming the models compared, with their depth and width."""
    n = len(result.summaries)
    return (f"This run compares {({2: 'two', 3: 'three'}).get(n, str(n))} models: "
            + join_words([f"{s.model} (N = {s.n_layers} blocks, width {s.hidden_size}; statistics over {s.n_tokens:,} "
                     "filtered response positions)" for s in result.summaries]) + ".")


def compartments_text(result: CrossModelResult) -> str:
    """The compartment counts and the default triple's S2 percentile, per model, as prose.

    >>> s = ModelSummary("m", 4, 8, [1, 2], [0.25, 0.5], [1.0], [[1.0]], [(1, 2)], {}, [1, 2, 3],
    ...                  {"eagle3-default": 87.5}, 10, True)
    >>> compartments_text(CrossModelResult([s, s]))
    "The CKA map splits into 1 compartment on m and 1 compartment on m. The EAGLE-3 default triple's concatenation entropy (S2) is above 88% of all triples on m and 88% on m."
    """
    ss = result.summaries
    comps = [f"{len(s.compartments)} compartment{'s' if len(s.compartments) != 1 else ''} on {s.model}" for s in ss]
    pct = [f"{s.percentile.get('eagle3-default', float('nan')):.0f}% on {s.model}" for s in ss]
    pct[0] = pct[0].replace(" on ", " of all triples on ", 1)
    return (f"The CKA map splits into {join_words(comps)}. The EAGLE-3 default triple's concatenation entropy (S2) "
            f"is above {join_words(pct)}.")


def responses_text(cfg: StudyConfig, root: str | Path | None = None) -> str:
    """Where the third architecture's responses come from, with the greedy-agreement check of
    llama.cpp against the PyTorch target (``llamacpp_agreement.json`` of the third model) when
    llama.cpp wrote them; empty when the profile names no third model."""
    from activation_wave.select.across_models import third_config
    from activation_wave.core.results import load_optional

    if not cfg.third.model:
        return ""
    if cfg.third.engine != "llamacpp":
        return f" The responses of {cfg.third.model} come from the PyTorch target, as the other models' do."
    ag = load_optional("llamacpp_agreement", third_config(cfg), root)
    if ag is None:
        return (f" The responses of {cfg.third.model} come from llama.cpp on the same GGUF; no check of its greedy "
                "tokens against the PyTorch target's is recorded.")
    a = ag["agreement"]
    return (f" The responses of {cfg.third.model} come from llama.cpp on the same GGUF (the PyTorch target generates "
            f"about one token per second here). Checked first on a sample: its greedy responses equal the PyTorch "
            f"target's on {a['identical']} of {a['compared']} prompts, and their common prefix covers "
            f"{100 * a['mean_prefix_share']:.0f}% of a response on average (`llamacpp_agreement.json`). Where they part, the text is still the model's, decoded with other "
            "rounding; the statistics below read hidden states of the PyTorch target on that text.")
