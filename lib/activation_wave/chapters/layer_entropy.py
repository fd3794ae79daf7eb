"""Chapter 1, layer entropy: prompt and dataset entropy of every layer with bootstrap
bands, their normalisations, and several Renyi orders.

:func:`run` returns a :class:`LayerEntropyResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from ..config import StudyConfig
from ..entropy import (EntropyBand, dataset_entropy, normalized, profile_summary, prompt_entropy, renyi_entropy,
                       spectrum)
from ..layers import profile_positions

Vector = list[float]


@dataclass(frozen=True)
class Band:
    """An entropy profile ``[L]`` with its bootstrap band (:class:`~activation_wave.entropy.EntropyBand`
    without the per-prompt values)."""

    kind: str
    mean: Vector
    lo: Vector
    hi: Vector
    alpha: float
    n_prompts: int
    n_tokens: int
    n_boot: int
    level: float

    @classmethod
    def of(cls, band: EntropyBand) -> Band:
        return cls(**{k: v for k, v in band.to_dict().items() if k != "per_prompt"})


@dataclass(frozen=True)
class LayerEntropyResult:
    """What chapter 1 reports. ``*_summary``: landmarks of a profile (last, normed,
    entry aside; see :func:`~activation_wave.entropy.profile_summary`); ``orders``:
    Renyi order (as text) -> dataset entropy ``[L]``."""

    alpha: float
    ids: list[int]
    n_layers: int
    n_tokens: int
    n_prompts: int
    hidden_size: int
    prompt: Band
    dataset: Band
    dataset_summary: dict[str, Any]
    prompt_summary: dict[str, Any]
    band_width: float
    prompt_below_dataset: int
    tokens_per_prompt: int
    normalized_max: dict[str, float]
    orders: dict[str, Vector]
    spearman_alpha1_alpha2: float
    argmax_alpha2: int
    gap_alpha1_alpha2: float


def landmarks(values: Any, ids: list[int], n_layers: int) -> dict[str, Any]:
    """:func:`~activation_wave.entropy.profile_summary` of the entries on one scale
    (the final-normed entry aside)."""
    keep = profile_positions(ids, n_layers)
    return profile_summary(np.asarray(values, dtype=float)[keep], [ids[p] for p in keep])


def renyi_orders(H: Any, alpha: float) -> dict[float, np.ndarray]:
    """Dataset entropy of every layer for the orders 1, 2, ``alpha`` and infinity."""
    orders = sorted({1.0, 2.0, float(alpha), float("inf")})
    spectra = [spectrum(H[i]) for i in range(len(H))]
    return {a: np.array([renyi_entropy(p, a) for p in spectra]) for a in orders}


def run(cfg: StudyConfig, cap: Any) -> LayerEntropyResult:
    """Chapter 1 on a capture (:class:`~activation_wave.pipeline.Captured`)."""
    m, cache = cfg.metrics, cap.cache
    N, d = cache.n_layers, cap.target.hidden_size
    sample = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first)
    H, groups, ids = sample.hidden, sample.record, list(sample.layers)
    n_tokens, n_prompts = H.shape[1], len(np.unique(groups))
    prompt = prompt_entropy(H, groups, m.alpha, n_boot=m.n_bootstrap, seed=m.seed)
    dataset = dataset_entropy(H, groups, m.alpha, n_boot=m.n_bootstrap_pooled, seed=m.seed)
    per_prompt = max(2, round(prompt.n_tokens / prompt.n_prompts))
    keep = profile_positions(ids, N)
    by_order = renyi_orders(H, m.alpha)
    return LayerEntropyResult(
        alpha=float(m.alpha), ids=ids, n_layers=N, n_tokens=int(n_tokens), n_prompts=int(n_prompts), hidden_size=int(d),
        prompt=Band.of(prompt), dataset=Band.of(dataset),
        dataset_summary=landmarks(dataset.mean, ids, N), prompt_summary=landmarks(prompt.mean, ids, N),
        band_width=float(np.mean(dataset.hi - dataset.lo)), prompt_below_dataset=int((prompt.mean < dataset.mean).sum()),
        tokens_per_prompt=int(per_prompt),
        normalized_max={"dataset": float(np.max(normalized(dataset.mean, n_tokens, d, "min")[keep])),
                        "prompt": float(np.max(normalized(prompt.mean, per_prompt, d, "min")[keep]))},
        orders={f"{a:g}": v.tolist() for a, v in by_order.items()},
        spearman_alpha1_alpha2=float(spearmanr(by_order[1.0][keep], by_order[2.0][keep]).statistic),
        argmax_alpha2=landmarks(by_order[2.0], ids, N)["argmax"],
        gap_alpha1_alpha2=float(np.mean(by_order[1.0] - by_order[2.0])))
