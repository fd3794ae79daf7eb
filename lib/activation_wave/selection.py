"""Choosing the k layers an EAGLE-3 drafter reads, from entropy and CKA.

Everything starts from a :class:`LayerStats` (built from hidden states ``H``
``[L, n, d]`` after whatever token filtering the caller applied) and ends in a
:class:`Selection` of ``hidden_states`` indices (the study's convention, see
:mod:`activation_wave.layers`), which :func:`activation_wave.engines.exports` turns
into snippets for vLLM, SpecForge, SGLang and llama.cpp, each in its own convention.

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
  (:func:`activation_wave.cka.segment_compartments` with k given) and take from
  each the layer of highest single-layer entropy: one reader per compartment.
* baselines: ``"eagle3-default"`` (``[2, N//2, N-3]``, k = 3 only), ``"last-k"``
  (the k deepest candidates), ``"evenly-spaced"`` (the centres of k equal depth
  bins) and ``"random"`` (seeded).

Candidates default to every layer id but 0: the embedding output is already
an input of the drafter (its token embedding), and SpecForge / SGLang cannot name
it ("output of block -1").

>>> import numpy as np
>>> H = np.random.default_rng(0).normal(size=(9, 64, 8))
>>> stats = LayerStats.from_hidden(H)  # ids 0..8, N = 8 decoder blocks
>>> select_layers(stats, 3, "eagle3-default").ids
(2, 4, 5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from . import cka as _cka
from .entropy import (
    Array,
    Center,
    _row_weights,
    _weighted_gram_products,
    concat_entropy,
    layer_entropies,
    prepared_stack,
    renyi2_from_products,
    subsets,
)
from .engines import export_warnings, exports
from .layers import check_layers, eagle3_default_layers

__all__ = [
    "METHODS",
    "CacheStats",
    "LayerStats",
    "Selection",
    "Stability",
    "bootstrap_methods",
    "bootstrap_stability",
    "candidate_sets",
    "compartment_of",
    "compartment_table",
    "lambda_choice",
    "method_sets",
    "paired_difference",
    "rank_among_all",
    "rank_sets",
    "score_set",
    "select_for_cli",
    "select_layers",
    "stats_from_cache",
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


# ------------------------------------------------------------------ statistics
@dataclass(eq=False)
class LayerStats:
    """Entropy and CKA statistics of a set of layers, computed lazily and cached.

    Attributes:
        ids: ``hidden_states`` index of each row of ``H`` (``[L]``).
        n_blocks: N, the model's number of decoder blocks (ids run 0..N).
        data: the hidden states ``[L, n, d]``, kept for eigen-based (alpha != 2)
            concatenation entropies; None when built from streamed products.
        center, normalize: the entropy's preparation of each layer.
        cka_normalize: row-normalise before CKA (default: plain centred CKA).
        n_compartments: k for the CKA segmentation (None: elbow rule).

    Lazy properties: ``entropy1`` / ``entropy2`` ``[L]`` (nats), ``M`` ``[L, L]`` and
    ``t`` ``[L]`` (closed form for alpha = 2), ``cka`` ``[L, L]``, ``compartments``
    (inclusive id ranges). ``M`` and the CKA products come from one pass over the
    Gram tiles when the entropy centres on the mean.
    """

    ids: tuple[int, ...]
    n_blocks: int
    data: Any = field(default=None, repr=False)
    center: Center = True
    normalize: bool = True
    cka_normalize: bool = False
    n_compartments: int | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_hidden(
        cls,
        H: Array,
        ids: Sequence[int] | None = None,
        n_blocks: int | None = None,
        *,
        center: Center = True,
        normalize: bool = True,
        cka_normalize: bool = False,
        n_compartments: int | None = None,
    ) -> LayerStats:
        """Statistics of hidden states ``H`` ``[L, n, d]`` (already token-filtered).

        ``ids`` default to ``0..L-1`` and ``n_blocks`` to ``max(ids)``, i.e. the
        capture is assumed to end at the last ``hidden_states`` entry N.
        """
        L = len(H)
        ids = tuple(range(L)) if ids is None else tuple(int(i) for i in ids)
        if len(ids) != L:
            raise ValueError(f"ids has {len(ids)} entries but H has {L} layers")
        if list(ids) != sorted(set(ids)):
            raise ValueError(f"ids {list(ids)} must be distinct and increasing (layer order of H)")
        N = max(ids) if n_blocks is None else int(n_blocks)
        check_layers(ids, N, what="LayerStats ids")
        return cls(ids, N, H, center, normalize, cka_normalize, n_compartments)

    @classmethod
    def from_products(
        cls,
        ids: Sequence[int],
        M: Array,
        t: Array,
        cka: Array,
        n_blocks: int | None = None,
        *,
        entropy1: Array | None = None,
        n_compartments: int | None = None,
    ) -> LayerStats:
        """Statistics from streamed accumulators (:class:`~activation_wave.entropy.PairAccumulator`,
        :class:`~activation_wave.cka.MinibatchCKA`); alpha != 2 concatenations are then unavailable."""
        ids = tuple(int(i) for i in ids)
        N = max(ids) if n_blocks is None else int(n_blocks)
        check_layers(ids, N, what="LayerStats ids")
        s = cls(ids, N, None, n_compartments=n_compartments)
        s._cache.update(M=np.asarray(M, float), t=np.asarray(t, float), cka=np.asarray(cka, float))
        if entropy1 is not None:
            s._cache["entropy1"] = np.asarray(entropy1, float)
        return s

    # -- lazily computed pieces
    def _products(self) -> None:
        Hd = self._need_data("the pairwise products")
        if self.center in (True, "mean"):
            C = prepared_stack(Hd, center=True, normalize=False)
            w = _row_weights(C)
            M, Mc = _weighted_gram_products(C, [w if self.normalize else None, w if self.cka_normalize else None])
            t = (C.square().sum(-1) * (w.square() if self.normalize else 1.0)).sum(-1)
            self._cache.update(M=M.numpy(), t=t.numpy(), cka=_cka.cka_from_products(Mc))
        else:  # robust centring for the entropy; CKA keeps its definition (mean centring)
            Z = prepared_stack(Hd, self.center, self.normalize)
            (M,) = _weighted_gram_products(Z, [None])
            self._cache.update(M=M.numpy(), t=Z.square().sum((1, 2)).numpy())
            self._cache["cka"] = _cka.cka_matrix(Hd, normalize=self.cka_normalize)

    def _need_data(self, what: str) -> Any:
        if self.data is None:
            raise ValueError(
                f"{what} need the hidden states, but these LayerStats were built from products; "
                "use alpha=2 (closed form) or LayerStats.from_hidden(H)"
            )
        return self.data

    def _get(self, key: str) -> Any:
        if key not in self._cache:
            if key in ("M", "t", "cka"):
                self._products()
            elif key == "entropy1":
                self._cache[key] = layer_entropies(self._need_data("alpha=1 entropies"), 1.0, self.center, self.normalize)
            elif key == "compartments":
                self._cache[key] = _cka.segment_compartments(self.cka, self.n_compartments, ids=self.ids)
        return self._cache[key]

    @property
    def M(self) -> np.ndarray:
        return self._get("M")

    @property
    def t(self) -> np.ndarray:
        return self._get("t")

    @property
    def cka(self) -> np.ndarray:
        return self._get("cka")

    @property
    def entropy1(self) -> np.ndarray:
        return self._get("entropy1")

    @property
    def entropy2(self) -> np.ndarray:
        return renyi2_from_products(self.M, self.t)

    @property
    def compartments(self) -> list[tuple[int, int]]:
        return self._get("compartments")

    # -- scores of layer sets (given as layer ids)
    def pos(self, layer_ids: Sequence[int]) -> list[int]:
        """Row positions of ``layer_ids`` in ``H``; a ValueError names unknown ids."""
        where = {i: p for p, i in enumerate(self.ids)}
        missing = [int(i) for i in layer_ids if int(i) not in where]
        if missing:
            raise ValueError(f"layer ids {missing} are not in these statistics (ids: {list(self.ids)})")
        return [where[int(i)] for i in layer_ids]

    def single_entropy(self, alpha: float) -> np.ndarray:
        """Single-layer entropies ``[L]`` of order ``alpha`` (1 and 2 cached)."""
        if alpha == 2:
            return self.entropy2
        if alpha == 1:
            return self.entropy1
        return layer_entropies(self._need_data(f"alpha={alpha} entropies"), alpha, self.center, self.normalize)

    def concat_entropy(self, layer_ids: Sequence[int], alpha: float = 2.0) -> float:
        """Entropy of the concatenation of ``layer_ids``: closed form at alpha = 2, else eigen (cached)."""
        p = sorted(self.pos(layer_ids))
        if alpha == 2:
            M, t = self.M, self.t
            return float(-np.log(M[np.ix_(p, p)].sum() / t[p].sum() ** 2))
        key = ("concat", alpha, tuple(p))
        if key not in self._cache:
            Hd = self._need_data(f"alpha={alpha} concatenation entropies")
            self._cache[key] = concat_entropy([Hd[i] for i in p], alpha, self.center, self.normalize)
        return self._cache[key]

    def mean_cka(self, layer_ids: Sequence[int]) -> float:
        """Mean CKA over the pairs of ``layer_ids`` (0 for a single layer)."""
        p = self.pos(layer_ids)
        k = len(p)
        return float((self.cka[np.ix_(p, p)].sum() - k) / (k * (k - 1))) if k > 1 else 0.0

    def to_dict(self) -> dict:
        """JSON-ready summary (computes whatever is still lazy, except alpha = 1 without data)."""
        out: dict[str, Any] = {"ids": list(self.ids), "n_blocks": self.n_blocks, "center": self.center,
                               "normalize": self.normalize, "cka_normalize": self.cka_normalize}
        out.update(entropy2=self.entropy2.tolist(), M=self.M.tolist(), t=self.t.tolist(), cka=self.cka.tolist(),
                   compartments=[list(c) for c in self.compartments])
        if self.data is not None or "entropy1" in self._cache:
            out["entropy1"] = self.entropy1.tolist()
        return out


# ------------------------------------------------------------------- selection
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
        return [i for i in stats.ids if i != 0]
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
        M, t = stats.M, stats.t
        ent = -np.log(M[S[:, :, None], S[:, None, :]].sum((1, 2)) / t[S].sum(1) ** 2)
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


# ------------------------------------------------------------------- stability
@dataclass(frozen=True)
class Stability:
    """How often each set and each layer is chosen when prompts are resampled.

    ``sets``: DataFrame (ids, count, freq) sorted by frequency; ``layers``: Series
    layer id -> fraction of replicates that chose it; ``full``: the selection on all data.
    """

    sets: pd.DataFrame
    layers: pd.Series
    full: Selection
    n_boot: int

    def to_dict(self) -> dict:
        return {
            "sets": [{"ids": list(r.ids), "count": int(r.count), "freq": float(r.freq)} for r in self.sets.itertuples()],
            "layers": {int(k): float(v) for k, v in self.layers.items()},
            "full": self.full.to_dict(),
            "n_boot": self.n_boot,
        }


def bootstrap_stability(
    H: Array,
    groups: Array,
    method: str = "combined",
    k: int = 3,
    n_boot: int = 20,
    seed: int = 0,
    *,
    ids: Sequence[int] | None = None,
    n_blocks: int | None = None,
    stats_kwargs: Mapping[str, Any] | None = None,
    **select_kwargs: Any,
) -> Stability:
    """Rerun a selection on ``n_boot`` resamples of the prompts (with replacement).

    Each replicate pools the tokens of the drawn prompts (``groups`` ``[n]`` gives
    every token's prompt id) and recomputes the statistics, so the cost is
    ``n_boot`` times that of :class:`LayerStats` for the chosen method.
    """
    g = np.asarray(groups).reshape(-1)
    if g.shape[0] != len(H[0]):
        raise ValueError(f"groups has {g.shape[0]} entries but H has {len(H[0])} tokens")
    prompts = [np.flatnonzero(g == u) for u in np.unique(g)]
    kw = dict(stats_kwargs or {})
    full = select_layers(LayerStats.from_hidden(H, ids, n_blocks, **kw), k, method, **select_kwargs)
    rng = np.random.default_rng(seed)
    chosen = []
    for _ in range(n_boot):
        rows = np.concatenate([prompts[j] for j in rng.integers(0, len(prompts), len(prompts))])
        Hb = H[:, torch.as_tensor(rows)] if isinstance(H, torch.Tensor) else np.asarray(H)[:, rows]
        chosen.append(select_layers(LayerStats.from_hidden(Hb, ids, n_blocks, **kw), k, method, **select_kwargs).ids)
    counts = pd.Series(chosen, dtype=object).value_counts()
    sets = pd.DataFrame({"ids": list(counts.index), "count": counts.values, "freq": counts.values / max(n_boot, 1)})
    all_ids = full.params["candidates"]
    layers = pd.Series({i: sum(i in c for c in chosen) / max(n_boot, 1) for i in all_ids}, name="freq")
    return Stability(sets, layers, full, n_boot)


# --------------------------------------------------------------------- exports
# ----------------------------------------------------- from a capture to a choice
@dataclass(eq=False)
class CacheStats:
    """The statistics a selection reads, with the tokens they came from.

    ``sample`` is the seeded token sample (response positions), ``keep`` ``[n]`` the
    tokens that entered ``stats`` (all of them, or those above the next-token-entropy
    cut ``threshold`` when ``filtered``).
    """

    stats: LayerStats
    sample: Any
    keep: np.ndarray
    filtered: bool
    threshold: float | None

    @property
    def n_tokens(self) -> int:
        return int(self.keep.sum())

    @property
    def hidden(self) -> np.ndarray:
        """Hidden states of the kept tokens ``[L, n_kept, d]``."""
        return self.sample.hidden[:, self.keep]

    @property
    def groups(self) -> np.ndarray:
        """Record (prompt) index of every kept token ``[n_kept]``, for bootstraps over prompts."""
        return np.asarray(self.sample.record)[self.keep]


def stats_from_cache(cache: Any, cfg: Any, *, filtered: bool | None = None, sample: Any = None) -> CacheStats:
    """Layer statistics of a capture as a study config asks for them.

    Draws ``cfg.metrics.token_budget`` response positions with seed ``cfg.metrics.seed``
    (dropping the first ``cfg.metrics.drop_first`` of each response), keeps those whose
    next-token entropy is at least the ``cfg.metrics.filter_quantile`` quantile when
    ``filtered`` (default ``cfg.select.filtered``), and builds :class:`LayerStats` over
    every layer id ``0..N``. Pass ``sample`` to reuse a sample already drawn.
    """
    from .filtering import token_entropy_mask

    filtered = cfg.select.filtered if filtered is None else bool(filtered)
    if sample is None:
        sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed, min_position=cfg.metrics.drop_first)
    n = len(sample.record)
    if n < 4:
        raise ValueError(f"only {n} response positions in the capture at {cache.path}: the statistics need at least 4; "
                         "capture more prompts or longer responses (data.max_new_tokens)")
    if filtered:
        keep = token_entropy_mask(sample.next_entropy, quantile=cfg.metrics.filter_quantile)
        threshold = float(np.quantile(sample.next_entropy, cfg.metrics.filter_quantile))
    else:
        keep, threshold = np.ones(n, dtype=bool), None
    stats = LayerStats.from_hidden(sample.hidden[:, keep], sample.layers, cache.n_layers)
    return CacheStats(stats, sample, keep, filtered, threshold)


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
    M, t = stats.M, stats.t
    ent = -np.log(M[S[:, :, None], S[:, None, :]].sum((1, 2)) / t[S].sum(1) ** 2)
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


def bootstrap_methods(
    H: Array,
    groups: Array,
    methods: Sequence[str],
    k: int = 3,
    n_boot: int = 20,
    seed: int = 0,
    *,
    ids: Sequence[int] | None = None,
    n_blocks: int | None = None,
    lam: float = 1.0,
    alpha: float = 2.0,
    max_tokens: int | None = None,
    track: Mapping[str, Sequence[int]] | None = None,
    scores_out: list | None = None,
) -> dict[str, Stability]:
    """:func:`bootstrap_stability` for several methods at once, sharing each replicate's statistics.

    Each replicate resamples prompts with replacement and computes one
    :class:`LayerStats` that every method reads (``lam`` goes to ``"combined"`` only),
    so the cost is ``n_boot`` statistics, not ``n_boot x len(methods)``. With
    ``max_tokens`` the tokens are first subsampled (seeded) to at most that many: the
    statistics cost grows as ``n^2``.

    ``track``: name -> layer ids of fixed sets (e.g. the EAGLE-3 default, or each
    method's choice on all the data) whose closed-form ``S_2`` is recorded in every
    replicate; pass a list as ``scores_out`` to receive one dict per replicate
    (``{name: S_2}``, plus ``"chosen:<method>"`` for the replicate's own choice), for
    paired comparisons between sets on the same resamples.
    """
    g = np.asarray(groups).reshape(-1)
    if g.shape[0] != len(H[0]):
        raise ValueError(f"groups has {g.shape[0]} entries but H has {len(H[0])} tokens")
    Hn = np.asarray(H)
    rng = np.random.default_rng(seed)
    if max_tokens is not None and Hn.shape[1] > max_tokens:
        rows = np.sort(rng.choice(Hn.shape[1], size=int(max_tokens), replace=False))
        Hn, g = Hn[:, rows], g[rows]
    prompts = [np.flatnonzero(g == u) for u in np.unique(g)]

    def pick(stats: LayerStats) -> dict[str, tuple[int, ...]]:
        return {m: select_layers(stats, k, m, lam=lam if m == "combined" else None, alpha=alpha, seed=seed).ids
                for m in methods}

    full_stats = LayerStats.from_hidden(Hn, ids, n_blocks)
    full = {m: select_layers(full_stats, k, m, lam=lam if m == "combined" else None, alpha=alpha, seed=seed)
            for m in methods}
    chosen: dict[str, list[tuple[int, ...]]] = {m: [] for m in methods}
    for _ in range(n_boot):
        rows = np.concatenate([prompts[j] for j in rng.integers(0, len(prompts), len(prompts))])
        st = LayerStats.from_hidden(Hn[:, rows], ids, n_blocks)
        picked = pick(st)
        for m, sel in picked.items():
            chosen[m].append(sel)
        if scores_out is not None:
            rec = {name: st.concat_entropy(lay, 2.0) for name, lay in (track or {}).items()}
            rec.update({f"chosen:{m}": st.concat_entropy(sel, 2.0) for m, sel in picked.items()})
            scores_out.append(rec)
    out = {}
    for m in methods:
        counts = pd.Series(chosen[m], dtype=object).value_counts()
        sets = pd.DataFrame({"ids": list(counts.index), "count": counts.values, "freq": counts.values / max(n_boot, 1)})
        pool = full[m].params["candidates"]
        layers = pd.Series({i: sum(i in c for c in chosen[m]) / max(n_boot, 1) for i in pool}, name="freq")
        out[m] = Stability(sets, layers, full[m], n_boot)
    return out


def _format_table(df: pd.DataFrame) -> str:
    cols = ["rank", "name", "ids", "renyi2", "renyi2_gain", "mean_cka", "max_cka", "percentile"]
    cols = [c for c in cols if c in df.columns]
    view = df[cols].copy()
    view["ids"] = [str(list(x)) for x in view["ids"]]
    return view.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def select_for_cli(cap: Any, cfg: Any) -> dict[str, Any]:
    """``wave select``: which layers should an EAGLE-3 drafter read? One JSON-ready dict.

    Computes the statistics of ``cap.cache`` as ``cfg`` asks (:func:`stats_from_cache`:
    ``cfg.metrics.token_budget`` tokens, next-token-entropy filtered when
    ``cfg.select.filtered``), selects ``cfg.select.k`` layers with ``cfg.select.method``
    (``cfg.select.lam`` for ``"combined"``) and compares them with the EAGLE-3 default
    and the other methods.

    Returns keys ``model``, ``n_layers``, ``method``, ``k``, ``lam``, ``alpha``,
    ``selected`` (``hidden_states`` indices), ``default`` (the EAGLE-3 default, None
    when undefined for this N or when k != 3, with ``default_note`` saying why),
    ``scores`` (``selected`` / ``default``: :func:`score_set` plus ``rank`` /
    ``percentile`` among every k-subset), ``exports`` (engine -> snippet naming its
    convention), ``exports_detail`` (:func:`~activation_wave.engines.exports`),
    ``engine_warnings`` (:func:`~activation_wave.engines.export_warnings`: engines that
    cannot load a drafter on ``selected``), ``table`` (ranking of every
    method's set, as text), ``ranking`` (the same as records), ``filtered``,
    ``filter_threshold``, ``n_tokens``, ``capture``.

    Raises ValueError, naming the fix, for an unknown method, ``k < 1``, ``k`` not
    below the number of candidate layers (N), and for ``eagle3-default`` when N is
    too small for ``[2, N//2, N-3]`` or k != 3; all before any statistic is computed.
    """
    sc = cfg.select
    N = int(cap.cache.n_layers)
    method, k = sc.method, sc.k
    if method not in METHODS:
        raise ValueError(f"unknown selection method {method!r} (--method); choose one of {', '.join(METHODS)}")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r} (--k): the number of layers to read must be an integer >= 1 (EAGLE-3 reads 3)")
    if k >= N:
        raise ValueError(f"k={k} (--k) but this model has only N={N} candidate layers (hidden_states 1..{N}; "
                         f"0, the embeddings, is not a candidate): choose 1 <= k <= {N - 1}")
    try:
        default: list[int] | None = eagle3_default_layers(N)
        note = None
    except ValueError as exc:
        default, note = None, str(exc)
    if method == "eagle3-default":
        if default is None:
            raise ValueError(f"--method eagle3-default: {note}")
        if k != 3:
            raise ValueError(f"--method eagle3-default is the fixed triple {default}; got k={k}: use --k 3 or another method")
    if default is not None and k != 3:
        default, note = None, f"the EAGLE-3 default {eagle3_default_layers(N)} has 3 layers; k={k}"

    cs = stats_from_cache(cap.cache, cfg)
    stats = cs.stats
    lam = float(sc.lam) if method == "combined" else None
    sel = select_layers(stats, k, method, lam=lam, alpha=sc.alpha, seed=sc.seed)
    scores = {"selected": {**sel.scores, **rank_among_all(stats, sel.ids)}, "default": None}
    if default is not None:
        scores["default"] = {**score_set(stats, default, alpha=sc.alpha), **rank_among_all(stats, default)}
    named = method_sets(stats, k, lam=float(sc.lam), alpha=sc.alpha, n_random=sc.n_random, seed=sc.seed)
    if f"{method}" not in named:
        named[method] = sel.ids
    table = rank_sets(stats, named, alpha=sc.alpha)
    table["percentile"] = [rank_among_all(stats, ids)["percentile"] for ids in table["ids"]]
    ex = exports(sel.ids, N)
    out = {
        "model": cfg.model,
        "n_layers": N,
        "method": method,
        "k": int(k),
        "lam": lam,
        "alpha": float(sc.alpha),
        "selected": [int(i) for i in sel.ids],
        "default": default,
        "default_note": note,
        "scores": scores,
        "exports": {e: f"{v['snippet']}   [convention: {v['convention']}]" for e, v in ex.items() if e != "hidden_states"},
        "exports_detail": ex,
        "engine_warnings": export_warnings(sel.ids, N, model_type=_model_type(cap)),
        "table": (f"{cfg.model}: N={N}, {cs.n_tokens} tokens"
                  + (f" with next-token entropy >= {cs.threshold:.3f} nats (quantile {cfg.metrics.filter_quantile:g})"
                     if cs.filtered else " (unfiltered)")
                  + f"; S2 = closed-form concatenation entropy (nats), percentile among all {scores['selected']['n_sets']} "
                  f"{k}-layer sets\n" + _format_table(table)),
        "ranking": [{**r, "ids": list(r["ids"])} for r in table.to_dict("records")],
        "filtered": cs.filtered,
        "filter_threshold": cs.threshold,
        "n_tokens": cs.n_tokens,
        "capture": str(cap.cache.path),
    }
    return _json_ready(out)


def _model_type(cap: Any) -> str:
    """The target's ``config.model_type`` (text config for multimodal wrappers), "llama" if unknown."""
    model = getattr(getattr(cap, "target", None), "model", None)
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    return str(getattr(config, "model_type", "llama"))


def _json_ready(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_ready(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def compartment_table(
    stats: LayerStats, compartments: Sequence[tuple[int, int]], *, mark: Mapping[str, Sequence[int]] | None = None
) -> pd.DataFrame:
    """One row per compartment (inclusive id range): size, mean CKA inside and to its
    neighbours, mean and best single-layer ``S_2``, and which marked layers fall in it.

    ``mark``: name -> layer ids (e.g. ``{"EAGLE-3 default": [2, 15, 27]}``); each gets a
    column listing its ids inside the compartment.
    """
    C, ent = stats.cka, stats.entropy2
    rows = []
    for j, (a, b) in enumerate(compartments):
        p = stats.pos([i for i in stats.ids if a <= i <= b])
        inside = C[np.ix_(p, p)]
        k = len(p)
        row: dict[str, Any] = {
            "compartment": j + 1, "layers": f"{a}-{b}" if b > a else f"{a}", "size": k,
            "mean CKA inside": float((inside.sum() - k) / (k * (k - 1))) if k > 1 else 1.0,
        }
        nb = [q for q in range(len(stats.ids)) if q not in p and (
            (j > 0 and compartments[j - 1][0] <= stats.ids[q] <= compartments[j - 1][1])
            or (j + 1 < len(compartments) and compartments[j + 1][0] <= stats.ids[q] <= compartments[j + 1][1]))]
        row["mean CKA to neighbours"] = float(C[np.ix_(p, nb)].mean()) if nb else float("nan")
        row["mean S2"] = float(ent[p].mean())
        best = int(np.argmax(ent[p]))
        row["best layer (S2)"] = stats.ids[p[best]]
        for name, lay in (mark or {}).items():
            row[name] = ", ".join(str(i) for i in lay if a <= i <= b)
        rows.append(row)
    return pd.DataFrame(rows)


def compartment_of(layer_ids: Sequence[int], compartments: Sequence[tuple[int, int]]) -> list[int]:
    """1-based index of the compartment (inclusive id range) each layer id falls in.

    >>> compartment_of([2, 15, 27], [(0, 2), (3, 10), (11, 21), (22, 30)])
    [1, 3, 4]
    """
    out = []
    for i in layer_ids:
        hit = [j + 1 for j, (a, b) in enumerate(compartments) if a <= int(i) <= b]
        if not hit:
            raise ValueError(f"layer {i} is in none of the compartments {list(compartments)}")
        out.append(hit[0])
    return out


def paired_difference(records: Sequence[Mapping[str, float]], a: str, b: str, *, level: float = 0.9) -> dict[str, float]:
    """Bootstrap comparison of two tracked sets scored on the same replicates.

    ``records`` is the ``scores_out`` list of :func:`bootstrap_methods`. Returns the mean
    of ``S_2(a) - S_2(b)`` over replicates, its ``level`` percentile interval
    (``lo``, ``hi``), and ``frac_b_at_least_a``: the share of replicates in which ``b``
    scores at least as high as ``a``.
    """
    if not records:
        raise ValueError("paired_difference needs bootstrap records (scores_out of bootstrap_methods)")
    missing = [x for x in (a, b) if x not in records[0]]
    if missing:
        raise ValueError(f"{missing} not tracked; tracked: {sorted(records[0])}")
    d = np.array([r[a] - r[b] for r in records])
    q = (1 - level) / 2
    return {"mean": float(d.mean()), "lo": float(np.quantile(d, q)), "hi": float(np.quantile(d, 1 - q)),
            "frac_b_at_least_a": float((d <= 0).mean()), "n_boot": int(len(d))}
