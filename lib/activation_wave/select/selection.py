"""Choosing the k layers an EAGLE-3 drafter reads, from entropy and CKA.

Everything starts from a :class:`~activation_wave.measure.layer_stats.LayerStats` (built from
hidden states ``H`` ``[L, n, d]`` after whatever token filtering the caller applied)
and ends in a
:class:`Selection` of ``hidden_states`` indices (the study's convention, see
:mod:`activation_wave.core.layers`), which :func:`activation_wave.engines.conventions.exports` turns into snippets for
vLLM, SpecForge and SGLang, each in its own convention.

Methods (``select_layers(stats, k, method)``):

* ``"entropy-greedy"``: start empty, repeatedly add the layer that maximises the
  entropy of the concatenation (Renyi order ``alpha``; 2 uses the closed form).
* ``"combined"``: the same greedy search on ``S_alpha(S) - lam * meanCKA(S)``,
  the concatenation entropy minus ``lam`` times the mean pairwise CKA of the set;
  ``lam`` trades informativeness against diversity (:func:`sweep_lambda`).
* ``"exhaustive"``: the exact maximiser of that same objective (``lam=0`` by
  default: pure concatenation entropy) over every k-subset: closed form for
  ``alpha=2``, scanned in bounded blocks (:func:`scan_plan`: memory flat in k, time
  estimated up front), one eigenproblem per subset for other orders (small pools only).
* ``"cka-diverse"``: split the candidates into k contiguous CKA compartments
  (:func:`activation_wave.measure.cka.segment_compartments` with k given) and take from
  each the layer of highest single-layer entropy: one reader per compartment.
* baselines: ``"eagle3-default"`` (``[2, N//2, N-3]``, k = 3 only), ``"last-k"``
  (the k deepest candidates), ``"evenly-spaced"`` (the centres of k equal depth
  bins) and ``"random"`` (seeded).

Candidates default to :func:`activation_wave.core.layers.candidate_ids` of the
statistics (every layer id but the embedding output). The statistics live in
:mod:`activation_wave.measure.layer_stats`, the bootstrap in :mod:`activation_wave.select.stability`
and ``wave select``'s report in :mod:`activation_wave.select.report`.

>>> import numpy as np
>>> H = np.random.default_rng(0).normal(size=(9, 64, 8))
>>> stats = LayerStats.from_hidden(H)  # ids 0..8, N = 8 decoder blocks
>>> select_layers(stats, 3, "eagle3-default").ids
(2, 4, 5)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.measure import cka as _cka
from activation_wave.core.config import SELECTION_METHODS
from activation_wave.measure.entropy import subsets
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.core.layers import candidate_ids, eagle3_default_layers

__all__ = [
    "METHODS",
    "Selection",
    "ScanPlan",
    "candidate_sets",
    "check_scan",
    "lambda_choice",
    "method_sets",
    "rank_among_all",
    "rank_many",
    "rank_sets",
    "scan_plan",
    "score_set",
    "select_layers",
    "sweep_lambda",
]

METHODS = SELECTION_METHODS  # listed in the config, which checks select.method with every other value
#: Largest number of subsets the eigen route of ``exhaustive`` (alpha != 2) will score.
MAX_EIGEN_SUBSETS = 2000
#: Rows of the table of r-subsets a scan over every k-subset reuses under each prefix
#: (:func:`scan_plan`); it bounds the scan's memory whatever k is.
SCAN_TABLE_ROWS = 1 << 21
#: Prefixes whose quantities a scan prepares at once (bounds that array's memory too).
SCAN_PREFIX_BATCH = 1 << 14
#: ``wave select`` refuses a k whose scans over every k-subset are estimated to take longer.
MAX_SCAN_SECONDS = 60.0


@dataclass(frozen=True)
class Selection:
    """A chosen layer set (``hidden_states`` indices, ascending) and how it scores."""

    ids: tuple[int, ...]
    method: str
    k: int
    scores: dict[str, float]
    params: dict[str, Any]

    def to_dict(self) -> dict:
        return {**asdict(self), "ids": list(self.ids)}


def score_set(stats: LayerStats, layer_ids: Sequence[int], *, alpha: float = 2.0, lam: float = 0.0) -> dict[str, float]:
    """Score breakdown of one set: concatenation entropy (alpha 2, and ``alpha`` if different),
    its gain over the best single layer in the set, mean / max pairwise CKA, and the objective
    ``S_alpha - lam * mean_cka``."""
    p = stats.pos(layer_ids)
    sub = stats.cka[np.ix_(p, p)]
    off = sub[~np.eye(len(p), dtype=bool)]
    s2 = stats.concat_entropy(layer_ids, 2.0)
    out = {
        "renyi2": s2,
        "renyi2_gain": s2 - float(stats.entropy2[p].max()),
        "mean_cka": stats.mean_cka(layer_ids),
        "max_cka": float(off.max()) if off.size else 0.0,
    }
    s_alpha = s2 if alpha == 2 else stats.concat_entropy(layer_ids, alpha)
    if alpha != 2:
        out[f"renyi{alpha:g}"] = s_alpha
    out["objective"] = s_alpha - lam * out["mean_cka"]
    return out


def _candidates(stats: LayerStats, candidates: Sequence[int] | None) -> list[int]:
    if candidates is None:
        return candidate_ids(stats.ids)
    stats.pos(candidates)
    return sorted({int(c) for c in candidates})


def k_bound_message(k: int, pool: Sequence[int], label: str | None = None) -> str | None:
    """Why ``k`` layers cannot be chosen from ``pool`` (None if they can): a choice needs
    ``1 <= k <= len(pool) - 1``, since taking every candidate chooses nothing. ``label``
    names k in the message (default ``k=<k>``).

    >>> k_bound_message(30, list(range(1, 31)))
    'k=30 would take all 30 candidate layers (1..30), which leaves nothing to choose: choose 1 <= k <= 29'
    """
    n, label = len(pool), label or f"k={k}"
    span = f"{pool[0]}..{pool[-1]}" if n else "none"
    if k == n:
        return (f"{label} would take all {n} candidate layers ({span}), which leaves nothing to choose: "
                f"choose 1 <= k <= {n - 1}")
    if k > n:
        return f"{label} but there are only {n} candidate layers ({span}): choose 1 <= k <= {n - 1}"
    return None


def _check_k(k: int, pool: Sequence[int]) -> None:
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r}: the number of layers to select must be an integer >= 1 (EAGLE-3 reads 3)")
    why = k_bound_message(k, pool)
    if why:
        raise ValueError(f"{why}, or widen `candidates` (ids must be in the statistics)")


def _objective(stats: LayerStats, ids: Sequence[int], alpha: float, lam: float) -> float:
    return stats.concat_entropy(ids, alpha) - (lam * stats.mean_cka(ids) if lam else 0.0)


def _greedy(stats: LayerStats, k: int, pool: list[int], alpha: float, lam: float) -> list[int]:
    chosen: list[int] = []
    for _ in range(k):
        rest = [c for c in pool if c not in chosen]
        vals = [_objective(stats, chosen + [c], alpha, lam) for c in rest]
        chosen.append(rest[int(np.argmax(vals))])  # ties: the shallower layer
    return sorted(chosen)


def _exhaustive(stats: LayerStats, k: int, pool: list[int], alpha: float, lam: float) -> list[int]:
    if alpha == 2:
        return list(_scan(stats, k, pool, lam=lam).best)
    n_sets = math.comb(len(pool), k)
    if n_sets > MAX_EIGEN_SUBSETS:
        fits = [j for j in range(1, k) if math.comb(len(pool), j) <= MAX_EIGEN_SUBSETS]
        raise ValueError(
            f"exhaustive alpha={alpha} would solve {n_sets} eigenproblems (limit {MAX_EIGEN_SUBSETS}; "
            f"{'k <= ' + str(fits[-1]) if fits else 'no k'} fits); use alpha=2 (closed form), a smaller "
            "`candidates` pool, or method='entropy-greedy'"
        )
    P = np.array(stats.pos(pool))
    S = P[subsets(len(P), k)]  # positions into M / cka, [C, k], C <= MAX_EIGEN_SUBSETS
    ent = np.array([stats.concat_entropy([stats.ids[i] for i in s], alpha) for s in S])
    score = ent
    if lam and k > 1:
        C = stats.cka
        score = ent - lam * (C[S[:, :, None], S[:, None, :]].sum((1, 2)) - k) / (k * (k - 1))
    best = S[int(np.argmax(score))]
    return sorted(stats.ids[i] for i in best)


# ------------------------------------------------ every k-subset, in blocks of bounded size
# A k-subset (positions ascending) is a prefix of p = k - r positions followed by an
# r-subset of the positions after the prefix's last one. The r-subsets are one table
# T [R, r] in lexicographic order, so those after position a are its tail T[start[a]:],
# and a set's pair sum splits as  sum_{S x S} W = sum_{Q x Q} W + 2 v_Q[T] + sum_{T x T} W
# with v_Q = sum_{a in Q} W[a, :]: the table's own sums are computed once and each
# prefix costs r gathers over the tail. Memory: the table and a few [R] arrays, whatever k.


@dataclass(frozen=True)
class ScanPlan:
    """What scoring every k-subset of ``n_pool`` candidates costs (:func:`scan_plan`)."""

    n_pool: int
    k: int
    r: int  # width of the table of r-subsets
    n_sets: int  # C(n_pool, k)
    n_prefixes: int
    peak_bytes: int  # estimated working memory of one scan
    seconds: float  # estimated time of one scan (2 busy CPU cores, measured)


#: Cost of one scan, measured on 2 CPU cores shared with other work and rounded up: per
#: table row and pair term, per prefix, per scored set (N = 30: k = 7 took 1.5 s, k = 10
#: 5.7 s, k = 14 29 s, k = 20 (before complements) 85 s).
_SECONDS_PER_TABLE_TERM = 20e-9
_SECONDS_PER_PREFIX = 75e-6
_SECONDS_PER_SET = 150e-9


def _table_width(n: int, k: int) -> int:
    return max([r for r in range(1, k + 1) if math.comb(n, r) <= SCAN_TABLE_ROWS] or [1])


def scan_plan(n_pool: int, k: int) -> ScanPlan:
    """Estimated memory and time of scoring every k-subset of ``n_pool`` candidates
    (one scan; :func:`rank_among_all`, ``"exhaustive"``).

    >>> plan = scan_plan(30, 3)
    >>> plan.n_sets, plan.peak_bytes < 2**30
    (4060, True)
    """
    m = _enumerated(n_pool, k)
    r = _table_width(n_pool, m)
    rows = math.comb(n_pool, r)
    n_prefixes = math.comb(n_pool - r, m - r)
    n_sets = math.comb(n_pool, k)
    # the table (r uint8 ids, 3 float sums) and its build (a few int/float [R] arrays); per prefix
    # ~8 float temporaries of its tail (<= R) and the pending block (<= 2R); the prefix batch's
    # [B, n] sums; the pool's matrices
    peak = (rows * (r + 3 * 8) + rows * 8 * 6 + rows * 8 * 8 + 2 * rows * 8
            + min(n_prefixes, SCAN_PREFIX_BATCH) * (n_pool + 4) * 8 * 2 + 4 * n_pool**2 * 8)
    seconds = (rows * (r * (r + 1) // 2 + r) * _SECONDS_PER_TABLE_TERM + n_prefixes * _SECONDS_PER_PREFIX
               + n_sets * _SECONDS_PER_SET)
    return ScanPlan(n_pool, k, r, n_sets, n_prefixes, int(peak), float(seconds))


def check_scan(n_pool: int, k: int, *, passes: int = 1, max_seconds: float | None = None,
               label: str | None = None) -> ScanPlan:
    """The plan of ``passes`` scans over every k-subset; a ValueError, naming the largest
    k below this one that fits, when they are estimated to take over ``max_seconds``
    (default :data:`MAX_SCAN_SECONDS`). Memory needs no check: it is flat in k."""
    max_seconds = MAX_SCAN_SECONDS if max_seconds is None else max_seconds
    plan = scan_plan(n_pool, k)
    if passes * plan.seconds <= max_seconds:
        return plan
    fits = [j for j in range(1, k) if passes * scan_plan(n_pool, j).seconds <= max_seconds]
    upper = [j for j in range(k + 1, n_pool) if passes * scan_plan(n_pool, j).seconds <= max_seconds]
    choice = f"choose k <= {fits[-1]}" if fits else "no smaller k fits"
    if upper:
        choice += f" (or k >= {upper[0]})"
    raise ValueError(
        f"{label or f'k={k}'}: scoring all {plan.n_sets:,} {k}-layer sets of {n_pool} candidates would take about "
        f"{passes * plan.seconds:.0f} s ({passes} pass(es), limit {max_seconds:.0f} s): {choice}"
    )


def _combinations(n: int, r: int, _memo: dict | None = None) -> np.ndarray:
    """Every r-subset of ``range(n)`` ``[C(n, r), r]`` (uint8, n <= 256), lexicographic:
    the subsets starting with ``a`` are ``a`` followed by those of ``range(n - a - 1)``
    shifted by ``a + 1``, built once per (n, r)."""
    if n > 256:
        raise ValueError(f"{n} candidate layers: the subset scan handles at most 256")
    memo = {} if _memo is None else _memo
    if r == 0:
        return np.zeros((1, 0), dtype=np.uint8)
    if (n, r) not in memo:
        parts = []
        for a in range(n - r + 1):
            sub = _combinations(n - a - 1, r - 1, memo)
            block = np.empty((len(sub), r), dtype=np.uint8)
            block[:, 0], block[:, 1:] = a, sub + np.uint8(a + 1)
            parts.append(block)
        memo[(n, r)] = np.concatenate(parts)
    return memo[(n, r)]


@dataclass(frozen=True)
class _ScanResult:
    best: tuple[int, ...]  # layer ids of the highest objective (first in lexicographic order)
    above: np.ndarray  # per probe: sets whose S_2 is above it (beyond a relative 1e-12)
    below: np.ndarray  # per probe: sets whose S_2 is below it
    n_sets: int


def _pair_sums(W: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``sum_{a, b in row} W_ab`` of each row of ``T`` ``[R, r]`` -> ``[R]``."""
    out = np.zeros(len(T))
    flat, n = W.ravel(), W.shape[0]
    for i in range(T.shape[1]):
        row = T[:, i].astype(np.intp) * n
        out += flat.take(row + T[:, i])
        for j in range(i + 1, T.shape[1]):
            out += 2.0 * flat.take(row + T[:, j])
    return out


def _scan(stats: LayerStats, k: int, pool: Sequence[int], *, lam: float = 0.0,
          probes: Sequence[float] = ()) -> _ScanResult:
    """Every k-subset of ``pool`` (layer ids) scored by ``S_2 - lam * meanCKA`` in bounded blocks:
    the best set, and for each ``probes`` value how many sets' ``S_2`` lie above and below it."""
    P = np.array(stats.pos(sorted(int(i) for i in pool)))
    n = len(P)
    M, t = stats.M[np.ix_(P, P)], stats.t[P]
    C = stats.cka[np.ix_(P, P)] if lam and k > 1 else None
    m = _enumerated(n, k)
    if m != k:  # enumerate the complements U (|U| = m): with W' = _complemented(W), sum_{S x S} W = sum_{U x U} W'
        M, C = _complemented(M, m), (_complemented(C, m) if C is not None else None)
        t = t.sum() / m - t  # sum_{a in U} t'_a = sum_{a in S} t_a
    probe = np.asarray(probes, dtype=float)
    tol = 1e-12 * np.maximum(1.0, np.abs(probe))
    hi, lo = probe + tol, probe - tol
    above, below = np.zeros(len(probe), dtype=np.int64), np.zeros(len(probe), dtype=np.int64)
    r = _table_width(n, m)
    T = _combinations(n, r)
    start = np.searchsorted(T[:, 0].astype(np.int64), np.arange(n), side="right")
    numT, tT = _pair_sums(M, T), t[T].sum(1)
    cT = _pair_sums(C, T) if C is not None else None
    best, best_score = (), -np.inf
    prefixes = itertools.combinations(range(n - r), m - r)
    while batch := list(itertools.islice(prefixes, SCAN_PREFIX_BATCH)):
        Q = np.array(batch, dtype=np.int64).reshape(len(batch), m - r)
        vM, numQ, tQ = M[Q].sum(1), _pair_sums(M, Q), t[Q].sum(1)  # [B, n], [B], [B]
        vC, cQ = (C[Q].sum(1), _pair_sums(C, Q)) if C is not None else (None, None)
        pending: list[np.ndarray] = []
        size = 0
        for b in range(len(Q)):
            s = int(start[Q[b, -1]]) if m > r else 0
            tail = T[s:]
            cross = vM[b].take(tail[:, 0])
            for j in range(1, r):
                cross += vM[b].take(tail[:, j])
            ent = -np.log((numQ[b] + 2.0 * cross + numT[s:]) / (tQ[b] + tT[s:]) ** 2)
            score = ent
            if vC is not None:
                cc = vC[b].take(tail[:, 0])
                for j in range(1, r):
                    cc += vC[b].take(tail[:, j])
                score = ent - lam * (cQ[b] + 2.0 * cc + cT[s:] - k) / (k * (k - 1))
            i = int(np.argmax(score))
            if score[i] > best_score:  # strict: the first maximiser in enumeration order
                best_score, best = score[i], tuple(Q[b].tolist()) + tuple(int(x) for x in tail[i])
            if len(probe):  # counted in large blocks: a few calls per block, not per prefix
                pending.append(ent)
                size += len(ent)
                if size >= SCAN_TABLE_ROWS or b == len(Q) - 1:
                    block, pending, size = np.concatenate(pending), [], 0
                    for q in range(len(probe)):
                        above[q] += int(np.count_nonzero(block > hi[q]))
                        below[q] += int(np.count_nonzero(block < lo[q]))
    if not best:
        raise ValueError(f"no {k}-layer set of {n} candidates has a finite S_2 (layers with zero trace?): "
                         "check the statistics' token sample")
    if m != k:
        best = tuple(sorted(set(range(n)) - set(best)))
    return _ScanResult(tuple(sorted(stats.ids[P[i]] for i in best)), above, below, math.comb(n, k))


def _enumerated(n: int, k: int) -> int:
    """Size of the subsets a scan enumerates: k, or n - k when the complements are fewer-wide."""
    return n - k if 0 < n - k < k else k


def _complemented(W: np.ndarray, m: int) -> np.ndarray:
    """``W'`` with ``sum_{U x U} W' = sum_{S x S} W`` for every S whose complement U has m
    elements: ``sum_{S x S} W = total - 2 sum_{a in U} rowsum_a + sum_{U x U} W``, and over
    m-subsets the linear and constant terms are pair sums too."""
    rs = W.sum(1)
    return W - (rs[:, None] + rs[None, :]) / m + W.sum() / m**2


def _cka_diverse(stats: LayerStats, k: int, pool: list[int], alpha: float) -> list[int]:
    p = stats.pos(pool)
    blocks = _cka.segment_compartments(stats.cka[np.ix_(p, p)], k, ids=list(range(len(p))))
    ent = stats.single_entropy(alpha)[p]
    return sorted(pool[s + int(np.argmax(ent[s : e + 1]))] for s, e in blocks)


def select_layers(
    stats: LayerStats,
    k: int = 3,
    method: str = "combined",
    *,
    lam: float | None = None,
    alpha: float = 2.0,
    seed: int = 0,
    candidates: Sequence[int] | None = None,
) -> Selection:
    """Select ``k`` layer ids with ``method`` (one of :data:`METHODS`).

    Args:
        lam: CKA weight of the objective ``S_alpha - lam * meanCKA``: default 1 for
            ``"combined"``, 0 for ``"exhaustive"`` (pure concatenation entropy);
            ignored by the other methods.
        alpha: Renyi order of the entropies (2: closed form, fast).
        seed: for ``"random"``.
        candidates: layer ids to choose from (default: all but 0).

    >>> import numpy as np
    >>> stats = LayerStats.from_hidden(np.random.default_rng(0).normal(size=(9, 64, 8)))
    >>> sel = select_layers(stats, 2, "exhaustive")
    >>> len(sel.ids), sorted(sel.scores)[:2]
    (2, ['max_cka', 'mean_cka'])
    """
    if method not in METHODS:
        raise ValueError(f"unknown selection method {method!r}; choose one of {', '.join(METHODS)}")
    pool = _candidates(stats, candidates)
    _check_k(k, pool)
    used_lam = {"combined": 1.0 if lam is None else lam, "exhaustive": 0.0 if lam is None else lam}.get(method, 0.0)
    if method == "entropy-greedy":
        ids = _greedy(stats, k, pool, alpha, 0.0)
    elif method == "combined":
        ids = _greedy(stats, k, pool, alpha, used_lam)
    elif method == "exhaustive":
        ids = _exhaustive(stats, k, pool, alpha, used_lam)
    elif method == "cka-diverse":
        ids = _cka_diverse(stats, k, pool, alpha)
    elif method == "eagle3-default":
        if k != 3:
            raise ValueError(f"eagle3-default is the fixed triple [2, N//2, N-3]; got k={k}: use k=3 or another method")
        ids = eagle3_default_layers(stats.n_blocks)
        stats.pos(ids)
    elif method == "last-k":
        ids = pool[-k:]
    elif method == "evenly-spaced":
        ids = sorted({pool[int(math.floor((j + 0.5) * len(pool) / k))] for j in range(k)})
    else:  # random
        ids = sorted(int(i) for i in np.random.default_rng(seed).choice(pool, size=k, replace=False))
    params = {"alpha": alpha, "lam": used_lam, "seed": seed, "candidates": pool}
    return Selection(tuple(int(i) for i in ids), method, k, score_set(stats, ids, alpha=alpha, lam=used_lam), params)


def sweep_lambda(
    stats: LayerStats,
    k: int,
    lams: Sequence[float] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
    *,
    alpha: float = 2.0,
    search: str = "greedy",
    candidates: Sequence[int] | None = None,
) -> pd.DataFrame:
    """The ``"combined"`` selection for each ``lam``: one row per value with the set and its scores.

    ``search="exhaustive"`` maximises the same objective exactly (alpha = 2 is fast).
    """
    if search not in ("greedy", "exhaustive"):
        raise ValueError(f"search={search!r}: choose 'greedy' or 'exhaustive'")
    pool = _candidates(stats, candidates)
    _check_k(k, pool)
    rows = []
    for lam in lams:
        ids = _greedy(stats, k, pool, alpha, lam) if search == "greedy" else _exhaustive(stats, k, pool, alpha, lam)
        rows.append({"lam": float(lam), "ids": tuple(ids), **score_set(stats, ids, alpha=alpha, lam=lam)})
    return pd.DataFrame(rows)


def candidate_sets(
    stats: LayerStats,
    k: int = 3,
    *,
    methods: Sequence[str] = METHODS,
    lam: float | None = None,
    alpha: float = 2.0,
    n_random: int = 6,
    seed: int = 0,
    candidates: Sequence[int] | None = None,
) -> dict[str, tuple[int, ...]]:
    """Named layer sets for a comparison: one per method, ``random`` drawn ``n_random`` times
    (``random-0``, ``random-1``, ...). ``eagle3-default`` is skipped when k != 3 or N is too small.
    ``lam`` follows :func:`select_layers` (None: 1 for combined, 0 for exhaustive)."""
    out: dict[str, tuple[int, ...]] = {}
    for m in methods:
        if m == "random":
            for r in range(n_random):
                out[f"random-{r}"] = select_layers(stats, k, m, seed=seed + r, candidates=candidates).ids
            continue
        try:
            out[m] = select_layers(stats, k, m, lam=lam, alpha=alpha, seed=seed, candidates=candidates).ids
        except ValueError:
            if m != "eagle3-default":
                raise
    return out


def rank_sets(
    stats: LayerStats,
    sets: Mapping[str, Sequence[int]] | Sequence[Sequence[int]],
    *,
    by: str = "renyi2",
    alpha: float = 2.0,
    lam: float = 0.0,
) -> pd.DataFrame:
    """Ranking table of layer sets: one row per set with :func:`score_set` columns and ``rank``.

    ``sets`` is a mapping name -> ids (or a list, named by their ids). Sorted by
    ``by``: descending for entropy-like columns, ascending for CKA columns.
    """
    named = dict(sets) if isinstance(sets, Mapping) else {str(list(s)): s for s in sets}
    rows = [{"name": n, "ids": tuple(sorted(int(i) for i in s)), "k": len(s), **score_set(stats, s, alpha=alpha, lam=lam)}
            for n, s in named.items()]
    df = pd.DataFrame(rows)
    if by not in df.columns:
        raise ValueError(f"by={by!r}: choose one of {[c for c in df.columns if c not in ('name', 'ids', 'k')]}")
    ascending = "cka" in by
    df = df.sort_values(by, ascending=ascending, kind="stable").reset_index(drop=True)
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df


def method_sets(
    stats: LayerStats,
    k: int,
    *,
    lam: float = 1.0,
    alpha: float = 2.0,
    n_random: int = 6,
    seed: int = 0,
    methods: Sequence[str] = METHODS,
) -> dict[str, tuple[int, ...]]:
    """:func:`candidate_sets` with ``lam`` applied to ``"combined"`` only.

    ``"exhaustive"`` stays the exact maximiser of pure concatenation entropy (its
    default ``lam = 0``), so the two answer different questions; the default triple
    is left out when k != 3 or N is too small for it.
    """
    out = candidate_sets(stats, k, methods=[m for m in methods if m != "combined"], alpha=alpha,
                         n_random=n_random, seed=seed)
    if "combined" in methods:
        out["combined"] = select_layers(stats, k, "combined", lam=lam, alpha=alpha).ids
    order = {m: i for i, m in enumerate(METHODS)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0].split("-")[0] if kv[0].startswith("random") else kv[0], 99), kv[0])))


def rank_among_all(
    stats: LayerStats, layer_ids: Sequence[int], *, candidates: Sequence[int] | None = None
) -> dict[str, float]:
    """Where a set's closed-form ``S_2`` sits among *every* set of its size from ``candidates``.

    Returns ``rank`` (1 = best), ``n_sets`` and ``percentile`` (share of sets scoring
    strictly lower, in %). Exact, in blocks of bounded size (:func:`scan_plan`): all 4060
    triples of 30 layers in milliseconds.
    """
    return rank_many(stats, [layer_ids], candidates=candidates)[0]


def rank_many(
    stats: LayerStats, sets: Sequence[Sequence[int]], *, candidates: Sequence[int] | None = None
) -> list[dict[str, float]]:
    """:func:`rank_among_all` of several sets of one size k, in one scan over every k-subset."""
    if not sets:
        return []
    ks = {len(s) for s in sets}
    if len(ks) != 1:
        raise ValueError(f"rank_many needs sets of one size, got sizes {sorted(ks)}")
    pool = _candidates(stats, candidates)
    mine = [stats.concat_entropy(s, 2.0) for s in sets]
    res = _scan(stats, ks.pop(), pool, probes=mine)
    return [{"rank": int(a) + 1, "n_sets": res.n_sets, "percentile": float(100.0 * (b / res.n_sets))}
            for a, b in zip(res.above, res.below, strict=True)]


def lambda_choice(sweep: pd.DataFrame, lam: float) -> dict[str, Any]:
    """What the CKA weight ``lam`` buys, read off a :func:`sweep_lambda` table.

    Returns the set chosen at ``lam`` (the row with the nearest ``lam``), the range of
    swept values that choose the same set (``lam_lo``, ``lam_hi``), and its cost and
    gain against ``lam = 0`` (the first row): ``entropy_cost`` (nats of ``S_2`` given up)
    and ``cka_drop`` (fall in mean pairwise CKA).
    """
    df = sweep.reset_index(drop=True)
    if df.empty:
        raise ValueError("lambda_choice needs a non-empty sweep_lambda table")
    i = int(np.argmin(np.abs(df["lam"].to_numpy(float) - lam)))
    ids = tuple(df.loc[i, "ids"])
    same = df.index[[tuple(x) == ids for x in df["ids"]]]
    base = df.iloc[int(np.argmin(df["lam"].to_numpy(float)))]
    return {"lam": float(df.loc[i, "lam"]), "ids": list(ids), "lam_lo": float(df.loc[same, "lam"].min()),
            "lam_hi": float(df.loc[same, "lam"].max()), "ids_at_zero": list(base["ids"]),
            "entropy_cost": float(base["renyi2"] - df.loc[i, "renyi2"]),
            "cka_drop": float(base["mean_cka"] - df.loc[i, "mean_cka"])}


#: Chapter-5 set names that are baselines or controls, not selection rules.
NOT_RULES = ("eagle3-default", "last-k", "evenly-spaced")


def is_rule(name: str) -> bool:
    """Whether ``name`` is a chapter-5 selection rule (not a baseline or control set)."""
    return name in METHODS and name not in NOT_RULES
