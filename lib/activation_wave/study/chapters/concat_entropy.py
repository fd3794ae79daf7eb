"""Chapter 2, concatenation entropy: the closed form for order 2 checked against the
eigen route, the entropy of every pair and the best pairs and triples.

:func:`run` returns a :class:`ConcatEntropyResult`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from activation_wave.measure.cka import cka_from_products
from activation_wave.core.config import StudyConfig
from activation_wave.measure.entropy import concat_entropy, pairwise_renyi2, renyi2_all_subsets
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.core.layers import candidate_ids, default_or_none
from activation_wave.select.selection import rank_among_all

Matrix = list[list[float]]


@dataclass(frozen=True)
class FormCheck:
    """Closed-form ``S_2`` of one set against the eigen route, and its ``S_1``."""

    name: str
    layers: list[int]
    s2_closed: float
    s2_eigen: float
    difference: float
    s1_eigen: float


@dataclass(frozen=True)
class TopSet:
    """One of the best sets of a size by closed-form ``S_2``: its gain over its best
    single layer and the mean cosine (``rho``) between its layers' Gram matrices."""

    rank: int
    layers: list[int]
    s2: float
    gain: float
    mean_rho: float


@dataclass(frozen=True)
class DefaultRank:
    """Where the EAGLE-3 default sits among all triples."""

    layers: list[int]
    s2: float
    rank: int
    n_sets: int
    percentile: float


@dataclass(frozen=True)
class ConcatEntropyResult:
    """What chapter 2 reports; ``M`` / ``t`` are the closed form's products, ``pair_renyi2``
    ``[L, L]`` the order-2 entropy of every pair (diagonal: single layers)."""

    ids: list[int]
    n_tokens: int
    M: Matrix
    t: list[float]
    pair_renyi2: Matrix
    rho: Matrix
    seconds_products: float
    ms_all_subsets: float
    n_pairs: int
    n_triples: int
    check: list[FormCheck]
    max_abs_diff: float
    gain_max: float
    gain_min: float
    frac_pairs_gain: float
    spearman_gain_rho: float
    spearman_gain_rho_close: float
    gap_median: float
    gain_best_pair: list[int]
    single_best: float
    single_best_layer: int
    best_pairs: list[TopSet]
    best_triples: list[TopSet]
    default: DefaultRank | None


def top_sets(ids: Sequence[int], sets: np.ndarray, scores: np.ndarray, single: np.ndarray, rho: np.ndarray,
             top: int = 8) -> list[TopSet]:
    """The ``top`` highest-scoring rows of ``sets`` (positions into ``ids``)."""
    out = []
    for r, j in enumerate(np.argsort(-scores)[:top], 1):
        P = [int(p) for p in sets[j]]
        out.append(TopSet(rank=r, layers=[int(ids[p]) for p in P], s2=float(scores[j]),
                          gain=float(scores[j] - max(single[p] for p in P)),
                          mean_rho=float(np.mean([rho[a, b] for a in P for b in P if a < b]))))
    return out


def form_checks(stats: LayerStats, H: Any, sets: dict[str, list[int]]) -> list[FormCheck]:
    """Closed form against eigen route for named sets of layer ids."""
    out = []
    for name, S in sets.items():
        blocks = [H[p] for p in stats.pos(S)]
        closed, eig2 = stats.concat_entropy(S, 2.0), concat_entropy(blocks, 2.0)
        out.append(FormCheck(name, list(S), closed, eig2, abs(closed - eig2), concat_entropy(blocks, 1.0)))
    return out


def run(cfg: StudyConfig, cap: Any) -> ConcatEntropyResult:
    """Chapter 2 on a capture (:class:`~activation_wave.study.steps.Captured`)."""
    m, cache = cfg.metrics, cap.cache
    N = cache.n_layers
    sample = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first)
    H, ids = sample.hidden, list(sample.layers)
    t0 = time.perf_counter()
    stats = LayerStats.from_hidden(H, ids, N)
    M, t = stats.M, stats.t
    seconds_products = time.perf_counter() - t0
    candidates = candidate_ids(ids)
    cand_pos = stats.pos(candidates)
    t1 = time.perf_counter()
    sets2, s2_pairs = renyi2_all_subsets(M, t, 2, pool=cand_pos)
    sets3, s2_triples = renyi2_all_subsets(M, t, 3, pool=cand_pos)
    ms_all = 1e3 * (time.perf_counter() - t1)
    rng = np.random.default_rng(m.seed)
    checks = {"best pair": [ids[p] for p in sets2[int(np.argmax(s2_pairs))]],
              "lowest pair": [ids[p] for p in sets2[int(np.argmin(s2_pairs))]],
              "best triple": [ids[p] for p in sets3[int(np.argmax(s2_triples))]],
              "random triple": sorted(int(i) for i in rng.choice(candidates, 3, replace=False)),
              "random 4 layers": sorted(int(i) for i in rng.choice(candidates, 4, replace=False))}
    default = default_or_none(N, 3)
    if default is not None:
        checks["EAGLE-3 default"] = default
    check = form_checks(stats, H, checks)
    pair = pairwise_renyi2(M, t)
    single = np.diag(pair)
    gain = pair - np.maximum(single[:, None], single[None, :])
    iu = np.triu_indices(len(ids), 1)
    rho = cka_from_products(M)  # cosine between the layers' prepared Gram matrices
    gap = np.abs(single[:, None] - single[None, :])[iu]
    close = gap <= np.median(gap)  # pairs whose layers are about equally informative alone
    best = int(np.argmax(gain[iu]))
    best_single = cand_pos[int(np.argmax(single[cand_pos]))]
    dr = rank_among_all(stats, default) if default is not None else None
    return ConcatEntropyResult(
        ids=ids, n_tokens=int(H.shape[1]), M=np.asarray(M).tolist(), t=np.asarray(t).tolist(), pair_renyi2=pair.tolist(),
        rho=rho.tolist(), seconds_products=seconds_products, ms_all_subsets=ms_all, n_pairs=len(sets2),
        n_triples=len(sets3), check=check, max_abs_diff=max(c.difference for c in check),
        gain_max=float(gain[iu].max()), gain_min=float(gain[iu].min()), frac_pairs_gain=float((gain[iu] > 0).mean()),
        spearman_gain_rho=float(spearmanr(gain[iu], rho[iu]).statistic),
        spearman_gain_rho_close=float(spearmanr(gain[iu][close], rho[iu][close]).statistic),
        gap_median=float(np.median(gap)), gain_best_pair=[int(ids[iu[0][best]]), int(ids[iu[1][best]])],
        single_best=float(single[best_single]), single_best_layer=int(ids[best_single]),
        best_pairs=top_sets(ids, sets2, s2_pairs, single, rho), best_triples=top_sets(ids, sets3, s2_triples, single, rho),
        default=None if dr is None else DefaultRank(layers=default, s2=stats.concat_entropy(default, 2.0), rank=dr["rank"],
                                                    n_sets=dr["n_sets"], percentile=dr["percentile"]))


def prose_values(r: ConcatEntropyResult) -> dict[str, Any]:
    """The values the chapter's prose quotes, by the names it quotes them."""
    out: dict[str, Any] = dict(
        t_products=r.seconds_products, n_tokens=r.n_tokens, n_layers_total=len(r.ids), t_all_subsets_ms=r.ms_all_subsets,
        n_pairs=r.n_pairs, n_triples=r.n_triples, max_abs_diff=r.max_abs_diff, gain_max=r.gain_max, gain_min=r.gain_min,
        frac_pairs_gain=r.frac_pairs_gain, spearman_gain_rho=r.spearman_gain_rho,
        spearman_gain_rho_close=r.spearman_gain_rho_close, gap_median=r.gap_median,
        gain_best_pair=str(r.gain_best_pair), single_best=r.single_best, single_best_layer=r.single_best_layer,
        best_pair=str(r.best_pairs[0].layers), best_triple=str(r.best_triples[0].layers),
        best_triple_s2=r.best_triples[0].s2)
    if r.default is not None:
        out.update(default_layers=str(r.default.layers), default_s2=r.default.s2, default_rank=r.default.rank,
                   default_pct=r.default.percentile)
    return out


def check_table(r: ConcatEntropyResult) -> pd.DataFrame:
    """Closed form against eigen route, one row per set."""
    return pd.DataFrame([{"set": c.name, "layers": str(c.layers), "S2 closed form": c.s2_closed, "S2 eigen": c.s2_eigen,
                          "|difference|": c.difference, "S1 eigen": c.s1_eigen} for c in r.check])


def top_table(sets: list[TopSet]) -> pd.DataFrame:
    """The best sets of one size as a table."""
    return pd.DataFrame([{"rank": s.rank, "layers": str(s.layers), "S2 (nats)": s.s2, "gain over best layer": s.gain,
                          "mean rho": s.mean_rho} for s in sets])
