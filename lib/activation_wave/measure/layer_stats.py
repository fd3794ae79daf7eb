"""The statistics a layer selection reads: entropy, closed-form products and CKA of
every layer of a capture, computed lazily and cached (:class:`LayerStats`), and the
token sample they come from (:class:`CacheStats`, :func:`stats_from_cache`).

>>> import numpy as np
>>> stats = LayerStats.from_hidden(np.random.default_rng(0).normal(size=(4, 32, 6)))
>>> stats.ids, stats.n_blocks, stats.cka.shape
((0, 1, 2, 3), 3, (4, 4))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from activation_wave.measure import cka as _cka
from activation_wave.measure.entropy import (
    Array,
    Center,
    _row_weights,
    _weighted_gram_products,
    concat_entropy,
    layer_entropies,
    prepared_stack,
    renyi2_from_products,
    renyi2_subset,
)
from activation_wave.core.layers import check_layers

__all__ = ["CacheStats", "LayerStats", "stats_from_cache"]


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
        """Statistics from streamed accumulators (:class:`~activation_wave.measure.entropy.PairAccumulator`,
        :class:`~activation_wave.measure.cka.MinibatchCKA`); alpha != 2 concatenations are then unavailable."""
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
            return renyi2_subset(self.M, self.t, p)
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
    from activation_wave.measure.filtering import token_entropy_mask

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
