"""Two architectures side by side: the same statistics and selections for each model.

``cross_config(cfg)`` turns a study config into the config of the second model
(``cfg.cross``: model, a smaller prompt set); ``layer_summary`` computes what the
cross-model chapter compares, with the functions the single-model chapters use.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .capture import CaptureCache
from .config import StudyConfig
from .layers import eagle3_default_layers
from .selection import method_sets, rank_among_all, stats_from_cache


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


def layer_summary(cache: CaptureCache, cfg: StudyConfig, *, filtered: bool = True) -> dict[str, Any]:
    """Entropy per layer, CKA, compartments and every method's k-layer set for one model."""
    cs = stats_from_cache(cache, cfg, filtered=filtered)
    st = cs.stats
    N = cache.n_layers
    sets = {m: list(ids) for m, ids in method_sets(st, cfg.select.k, lam=cfg.select.lam, alpha=cfg.select.alpha,
                                                    n_random=0, seed=cfg.select.seed).items()}
    default = eagle3_default_layers(N) if cfg.select.k == 3 else None
    ranks = {m: rank_among_all(st, ids)["percentile"] for m, ids in sets.items()}
    return {"model": cfg.model, "n_layers": N, "hidden_size": cache.manifest["model"]["hidden_size"],
            "ids": list(st.ids), "relative_depth": (np.array(st.ids) / N).tolist(),
            "entropy": st.entropy1.tolist(), "cka": st.cka.tolist(), "compartments": [list(c) for c in st.compartments],
            "sets": sets, "default": default, "percentile": ranks, "n_tokens": int(cs.keep.sum()),
            "filtered": filtered}
