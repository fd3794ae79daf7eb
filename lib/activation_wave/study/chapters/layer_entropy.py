"""Chapter 1, layer entropy: prompt and dataset entropy of every layer with bootstrap
bands, their normalisations, and several Renyi orders.

:func:`run` returns a :class:`LayerEntropyResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from activation_wave.models.capture import NORMED
from activation_wave.core.config import StudyConfig
from activation_wave.measure.entropy import (EntropyBand, dataset_entropy, depth_landmarks, layer_entropies, normalized, prompt_entropy,
                       renyi_entropy, spectrum)
from activation_wave.core.layers import profile_positions

Vector = list[float]


@dataclass(frozen=True)
class Band:
    """An entropy profile ``[L]`` with its bootstrap band (:class:`~activation_wave.measure.entropy.EntropyBand`
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

    def curve(self) -> EntropyBand:
        """The band as the plotting functions draw it (mean line and shaded interval)."""
        return EntropyBand(kind=self.kind, mean=np.asarray(self.mean), lo=np.asarray(self.lo), hi=np.asarray(self.hi),
                           alpha=self.alpha, n_prompts=self.n_prompts, n_tokens=self.n_tokens, n_boot=self.n_boot,
                           level=self.level)


@dataclass(frozen=True)
class LayerEntropyResult:
    """What chapter 1 reports. ``*_summary``: landmarks of a profile (see
    :func:`~activation_wave.measure.entropy.profile_summary`); ``orders``:
    Renyi order (as text) -> dataset entropy ``[L]``. ``normed_entropy``: dataset entropy
    of transformers' normed last entry (``h.normed``, not a layer index: index N is the
    last block before the final norm) on the same tokens; NaN in results written before it."""

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
    normed_entropy: float = float("nan")


def renyi_orders(H: Any, alpha: float) -> dict[float, np.ndarray]:
    """Dataset entropy of every layer for the orders 1, 2, ``alpha`` and infinity."""
    orders = sorted({1.0, 2.0, float(alpha), float("inf")})
    spectra = [spectrum(H[i]) for i in range(len(H))]
    return {a: np.array([renyi_entropy(p, a) for p in spectra]) for a in orders}


def run(cfg: StudyConfig, cap: Any) -> LayerEntropyResult:
    """Chapter 1 on a capture (:class:`~activation_wave.study.steps.Captured`)."""
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
    # the same tokens (the sample's keys depend on seed, record and position only), normed entry
    normed = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first, layers=[NORMED]).hidden
    return LayerEntropyResult(
        alpha=float(m.alpha), ids=ids, n_layers=N, n_tokens=int(n_tokens), n_prompts=int(n_prompts), hidden_size=int(d),
        prompt=Band.of(prompt), dataset=Band.of(dataset),
        dataset_summary=depth_landmarks(dataset.mean, ids, N), prompt_summary=depth_landmarks(prompt.mean, ids, N),
        band_width=float(np.mean(dataset.hi - dataset.lo)), prompt_below_dataset=int((prompt.mean < dataset.mean).sum()),
        tokens_per_prompt=int(per_prompt),
        normalized_max={"dataset": float(np.max(normalized(dataset.mean, n_tokens, d, "min")[keep])),
                        "prompt": float(np.max(normalized(prompt.mean, per_prompt, d, "min")[keep]))},
        orders={f"{a:g}": v.tolist() for a, v in by_order.items()},
        spearman_alpha1_alpha2=float(spearmanr(by_order[1.0][keep], by_order[2.0][keep]).statistic),
        argmax_alpha2=depth_landmarks(by_order[2.0], ids, N)["argmax"],
        gap_alpha1_alpha2=float(np.mean(by_order[1.0] - by_order[2.0])),
        normed_entropy=float(layer_entropies(normed, m.alpha)[0]))


#: How dataset entropy goes from the embeddings to the last block's output, against the
#: bootstrap band: the page's "A nats at the embeddings and B at the last block's output (___)".
TREND = {"up": "a rise", "down": "a fall", "flat": "no change beyond the bootstrap band"}
#: How the final norm's shift of entropy compares with the last block's (the band decides "about").
NORM_VS_BLOCK = {"more": "more than", "less": "less than", "same": "about as much as"}


def trend_word(first: float, last: float, band: float) -> str:
    """:data:`TREND`'s phrase for a profile from ``first`` to ``last`` with a band of width ``band``.

    >>> trend_word(4.3, 4.7, 0.1), trend_word(4.3, 2.2, 0.1), trend_word(4.3, 4.35, 0.1)
    ('a rise', 'a fall', 'no change beyond the bootstrap band')
    """
    return TREND["up" if last - first > band else "down" if first - last > band else "flat"]


def prose_values(r: LayerEntropyResult) -> dict[str, Any]:
    """The values the chapter's prose quotes, by the names it quotes them; every direction
    word and comparison comes from the numbers, so the sentences hold on any model."""
    ds, ps = r.dataset_summary, r.prompt_summary
    out = {f"ds_{k}": ds[k] for k in ("first", "max", "argmax", "min", "argmin", "drop_from", "drop_to")}
    out["ds_drop"] = max(0.0, float(ds["drop"]))  # a profile that never falls has a largest fall of 0
    last, before, normed = float(r.dataset.mean[-1]), float(r.dataset.mean[-2]), float(r.normed_entropy)
    block_shift, norm_shift = abs(last - before), abs(normed - last)
    out.update(ds_trend=trend_word(ds["first"], last, r.band_width), block_shift=block_shift, norm_shift=norm_shift,
               norm_vs_block=NORM_VS_BLOCK["same" if abs(norm_shift - block_shift) <= r.band_width
                                           else "more" if norm_shift > block_shift else "less"])
    out.update(n_tokens=r.n_tokens, n_prompts=r.n_prompts, alpha=r.alpha, hidden_size=r.hidden_size, N=r.n_layers,
               ds_last=float(r.dataset.mean[-1]), ds_last_normed=r.normed_entropy,
               ds_before_last=float(r.dataset.mean[-2]),
               ps_first=ps["first"], ps_max=ps["max"], ps_argmax=ps["argmax"], ps_below=r.prompt_below_dataset,
               n_ids=len(r.ids), ds_band=r.band_width, drop_vs_band="larger" if ds["drop"] > r.band_width else "smaller",
               mean_prompt_tokens=r.n_tokens / r.n_prompts, n_boot_prompt=r.prompt.n_boot,
               n_boot_dataset=r.dataset.n_boot, ds_min_max=r.normalized_max["dataset"],
               ps_min_max=r.normalized_max["prompt"], log_n_dataset=float(np.log(r.n_tokens)),
               log_d=float(np.log(r.hidden_size)), n_per_prompt=r.tokens_per_prompt, rho_1_2=r.spearman_alpha1_alpha2,
               argmax_alpha2=r.argmax_alpha2, gap_1_2=r.gap_alpha1_alpha2)
    return out
