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
  default: pure concatenation entropy) over every k-subset: vectorised closed
  form for ``alpha=2``, one eigenproblem per subset for other orders (small
  pools only).
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

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.measure import cka as _cka
from activation_wave.measure.entropy import renyi2_of_sets, subsets
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.core.layers import candidate_ids, eagle3_default_layers

__all__ = [
    "METHODS",
    "Selection",
    "candidate_sets",
    "lambda_choice",
    "method_sets",
    "rank_among_all",
    "rank_sets",
    "score_set",
    "select_layers",
    "sweep_lambda",
]

METHODS = (
    "entropy-greedy",
    "combined",
    "exhaustive",
    "cka-diverse",
    "eagle3-default",
    "last-k",
    "evenly-spaced",
    "random",
)
#: Largest number of subsets the eigen route of ``exhaustive`` (alpha != 2) will score.
MAX_EIGEN_SUBSETS = 2000


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


def _check_k(k: int, pool: Sequence[int]) -> None:
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r}: the number of layers to select must be an integer >= 1 (EAGLE-3 reads 3)")
    if k >= len(pool):
        raise ValueError(
            f"k={k} but only {len(pool)} candidate layers ({pool[0]}..{pool[-1]}): choose k <= {len(pool) - 1}, "
            "or widen `candidates` (ids must be in the statistics)"
        )


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
    P = np.array(stats.pos(pool))
    sets = subsets(len(P), k)
    S = P[sets]  # positions into M / cka, [C, k]
    if alpha == 2:
        ent = renyi2_of_sets(stats.M, stats.t, S)
    else:
        if len(S) > MAX_EIGEN_SUBSETS:
            raise ValueError(
                f"exhaustive alpha={alpha} would solve {len(S)} eigenproblems (limit {MAX_EIGEN_SUBSETS}); "
                "use alpha=2 (closed form), a smaller `candidates` pool, or method='entropy-greedy'"
            )
        ent = np.array([stats.concat_entropy([stats.ids[i] for i in s], alpha) for s in S])
    score = ent
    if lam and k > 1:
        C = stats.cka
        score = ent - lam * (C[S[:, :, None], S[:, None, :]].sum((1, 2)) - k) / (k * (k - 1))
    best = S[int(np.argmax(score))]
    return sorted(stats.ids[i] for i in best)


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
    strictly lower, in %). Exact and vectorised: all 4060 triples of 30 layers at once.
    """
    pool = _candidates(stats, candidates)
    k = len(layer_ids)
    P = np.array(stats.pos(pool))
    S = P[subsets(len(P), k)]
    ent = renyi2_of_sets(stats.M, stats.t, S)
    mine = stats.concat_entropy(layer_ids, 2.0)
    tol = 1e-12 * max(1.0, abs(mine))
    return {"rank": int((ent > mine + tol).sum()) + 1, "n_sets": int(len(ent)),
            "percentile": float(100.0 * (ent < mine - tol).mean())}


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
