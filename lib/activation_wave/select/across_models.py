"""Two architectures side by side: the same statistics and selections for each model.

``cross_config(cfg)`` turns a study config into the config of the second model
(``cfg.cross``: model, a smaller prompt set); ``layer_summary`` computes what the
other architectures' pages compare, with the functions the single-model chapters use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from activation_wave.models.capture import CaptureCache
from activation_wave.core.config import StudyConfig
from activation_wave.core.layers import eagle3_default_layers
from activation_wave.measure.layer_stats import stats_from_cache
from activation_wave.select.selection import method_sets, rank_among_all


def cross_config(cfg: StudyConfig) -> StudyConfig:
    """The config of the cross-model run: ``cfg.cross.model`` on a smaller prompt set."""
    data = dataclasses.replace(cfg.data, max_prompts_per_source=cfg.cross.max_prompts_per_source,
                               max_new_tokens=cfg.cross.max_new_tokens, batch_size=cfg.cross.batch_size)
    capture = dataclasses.replace(cfg.capture, batch_size=min(cfg.capture.batch_size, 4))
    return dataclasses.replace(cfg, model=cfg.cross.model, data=data, capture=capture)


def cross_overrides(cfg: StudyConfig) -> dict[str, Any]:
    """:func:`cross_config`'s changes as dotted overrides (for papermill runs of single
    chapters on the second architecture, which then share the cross-model chapter's capture)."""
    c = cross_config(cfg)
    return {"data.max_prompts_per_source": c.data.max_prompts_per_source, "data.max_new_tokens": c.data.max_new_tokens,
            "data.batch_size": c.data.batch_size, "capture.batch_size": c.capture.batch_size}


def third_config(cfg: StudyConfig) -> StudyConfig:
    """The config of the third architecture's run (``cfg.third``; raises if it names none)."""
    t = cfg.third
    if not t.model:
        raise ValueError(f"the {cfg.profile} profile names no third architecture (third.model); "
                         "e.g. --set third.model=qwen2.5-coder-1.5b")
    data = dataclasses.replace(cfg.data, max_prompts_per_source=t.max_prompts_per_source,
                               max_new_tokens=t.max_new_tokens, engine=t.engine)
    capture = dataclasses.replace(cfg.capture, batch_size=min(cfg.capture.batch_size, t.capture_batch_size))
    # one drafter at a time: a larger target's drafter step does not fit twice in the memory limit
    draft = dataclasses.replace(cfg.draft, workers=1)
    return dataclasses.replace(cfg, model=t.model, data=data, capture=capture, draft=draft)


def third_drafter_config(cfg: StudyConfig) -> StudyConfig:
    """The config of the third architecture's drafters (chapter 11): :func:`third_config` on
    the study's prompt sources with the ``third.drafter_*`` prompt count, length, engine
    slots and epochs, greedy responses only. Its drafters train one at a time
    (:func:`third_config`) on the threads the study's ``draft.workers`` would have used."""
    c, t = third_config(cfg), cfg.third
    data = dataclasses.replace(c.data, max_prompts_per_source=t.drafter_prompts_per_source,
                               max_new_tokens=t.drafter_max_new_tokens, samples_per_prompt=0,
                               engine_slots=t.drafter_engine_slots)
    draft = dataclasses.replace(c.draft, samples_per_prompt=0, epochs=t.drafter_epochs,
                                threads=cfg.draft.threads * max(1, cfg.draft.workers))
    return dataclasses.replace(c, data=data, draft=draft)


def third_overrides(cfg: StudyConfig) -> dict[str, Any]:
    """:func:`third_config`'s changes as dotted overrides (the third architecture's pages)."""
    c = third_config(cfg)
    return {"data.max_prompts_per_source": c.data.max_prompts_per_source, "data.max_new_tokens": c.data.max_new_tokens,
            "data.engine": c.data.engine, "capture.batch_size": c.capture.batch_size, "draft.workers": 1}


def extra_architectures(cfg: StudyConfig) -> list[StudyConfig]:
    """The configs of the architectures compared with the study's model: ``cross`` (the
    second) and, when the profile names one, ``third``."""
    return [cross_config(cfg), *([third_config(cfg)] if cfg.third.model else [])]


@dataclass(frozen=True)
class ModelSummary:
    """One model's statistics for the side-by-side comparison: entropy ``[L]`` (order 1),
    CKA ``[L, L]``, compartments, every method's k-layer set and its ``S_2`` percentile
    among all sets of that size."""

    model: str
    n_layers: int
    hidden_size: int
    ids: list[int]
    relative_depth: list[float]
    entropy: list[float]
    cka: list[list[float]]
    compartments: list[tuple[int, int]]
    sets: dict[str, list[int]]
    default: list[int] | None
    percentile: dict[str, float]
    n_tokens: int
    filtered: bool


def layer_summary(cache: CaptureCache, cfg: StudyConfig, *, filtered: bool = True) -> ModelSummary:
    """Entropy per layer, CKA, compartments and every method's k-layer set for one model."""
    cs = stats_from_cache(cache, cfg, filtered=filtered)
    st = cs.stats
    N = cache.n_layers
    sets = {m: list(ids) for m, ids in method_sets(st, cfg.select.k, lam=cfg.select.lam, alpha=cfg.select.alpha,
                                                    n_random=0, seed=cfg.select.seed).items()}
    return ModelSummary(model=cfg.model, n_layers=N, hidden_size=cache.manifest["model"]["hidden_size"],
                        ids=list(st.ids), relative_depth=(np.array(st.ids) / N).tolist(), entropy=st.entropy1.tolist(),
                        cka=st.cka.tolist(), compartments=[tuple(c) for c in st.compartments], sets=sets,
                        default=eagle3_default_layers(N) if cfg.select.k == 3 else None,
                        percentile={m: rank_among_all(st, ids)["percentile"] for m, ids in sets.items()},
                        n_tokens=int(cs.keep.sum()), filtered=filtered)
