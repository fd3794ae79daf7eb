"""Linear CKA between layers, and the "compartments" its heat map falls into.

Linear CKA (Kornblith et al., 2019) of two representations ``X`` ``[n, d1]`` and
``Y`` ``[n, d2]`` of the same n tokens, features centred over tokens:

    CKA(X, Y) = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)

which equals the HSIC form ``HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with
``K = X X^T``, ``L = Y Y^T`` (:func:`linear_cka` vs :func:`linear_cka_gram`, checked
against each other in the tests). With the L x L matrix ``M_ab = ||Z_a^T Z_b||_F^2``
of :func:`activation_wave.measure.entropy.pair_products`, the whole CKA matrix is
``M_ab / sqrt(M_aa M_bb)``.

The debiased variant replaces HSIC by the unbiased estimator of Song et al.
(2012); :class:`MinibatchCKA` averages that estimator over minibatches
(Nguyen et al., 2021), so memory stays flat however many tokens stream past.

CKA here centres but does *not* row-normalise by default (the definition);
``normalize=True`` measures similarity of exactly the rows that the entropy sees
(the cosine between the entropy's Gram matrices).

>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(50, 6))
>>> round(linear_cka(X, 2 * X @ np.linalg.qr(np.random.default_rng(1).normal(size=(6, 6)))[0]), 6)
1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from activation_wave.measure.entropy import Array, _weighted_gram_products, as_f64, prepared_stack

__all__ = [
    "MinibatchCKA",
    "cka_from_products",
    "cka_matrix",
    "compartment_costs",
    "debiased_cka",
    "hsic_unbiased",
    "linear_cka",
    "linear_cka_gram",
    "segment_compartments",
]


def _centre_cols(X: Array) -> torch.Tensor:
    T = as_f64(X)
    return T - T.mean(0, keepdim=True)


def linear_cka(X: Array, Y: Array) -> float:
    """Linear CKA, feature-space form, of ``X`` ``[n, d1]`` and ``Y`` ``[n, d2]`` (same tokens).

    Returns 0 when either side is constant over tokens (zero after centring).
    """
    Xc, Yc = _centre_cols(X), _centre_cols(Y)
    den = torch.linalg.matrix_norm(Xc.T @ Xc) * torch.linalg.matrix_norm(Yc.T @ Yc)
    return float((Yc.T @ Xc).square().sum() / den) if den > 0 else 0.0


def linear_cka_gram(X: Array, Y: Array) -> float:
    """Linear CKA, Gram/HSIC form: ``HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with ``H K H``."""
    A, B = as_f64(X), as_f64(Y)
    n = A.shape[0]
    Hc = torch.eye(n, dtype=torch.float64) - 1.0 / n
    K, L = Hc @ (A @ A.T) @ Hc, Hc @ (B @ B.T) @ Hc
    den = torch.sqrt((K * K).sum() * (L * L).sum())
    return float((K * L).sum() / den) if den > 0 else 0.0


def hsic_unbiased(K: Array, L: Array) -> float:
    """Unbiased HSIC estimator (Song et al., 2012) of two ``[n, n]`` Gram matrices, n >= 4.

    ``[tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1] / (n(n-3))``,
    where ``K~`` is ``K`` with its diagonal set to zero.
    """
    Kt, Lt = as_f64(K).clone(), as_f64(L).clone()
    n = Kt.shape[0]
    if n < 4:
        raise ValueError(f"the unbiased HSIC needs n >= 4 tokens; got n={n}")
    Kt.fill_diagonal_(0.0)
    Lt.fill_diagonal_(0.0)
    rk, rl = Kt.sum(1), Lt.sum(1)
    val = (Kt * Lt).sum() + rk.sum() * rl.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (rk @ rl)
    return float(val / (n * (n - 3)))


def debiased_cka(X: Array, Y: Array) -> float:
    """Linear CKA with unbiased HSIC in place of the biased estimator (needs n >= 4)."""
    A, B = _centre_cols(X), _centre_cols(Y)
    K, L = A @ A.T, B @ B.T
    den = hsic_unbiased(K, K) * hsic_unbiased(L, L)
    return hsic_unbiased(K, L) / np.sqrt(den) if den > 0 else 0.0


def _hsic_u_matrix(Z: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Unbiased HSIC ``[L, L]`` of the linear Grams of a stack ``Z`` ``[L, n, d]`` given ``M_ab = <K_a, K_b>``.

    The three terms need only ``M``, the Gram diagonals ``D_a = ||z_ai||^2`` and the
    row sums ``K~_a 1 = Z_a (Z_a^T 1) - D_a``, none of which needs an ``n x n`` matrix.
    """
    n = Z.shape[1]
    D = Z.square().sum(-1)  # [L, n]
    R = torch.einsum("lnd,ld->ln", Z, Z.sum(1)) - D  # row sums of the zero-diagonal Gram
    total = R.sum(1)  # 1' K~ 1
    tr = M - D @ D.T  # <K~_a, K~_b>
    return (tr + torch.outer(total, total) / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (R @ R.T)) / (n * (n - 3))


def _normalise_hsic(S: torch.Tensor) -> np.ndarray:
    d = torch.sqrt(torch.clamp(torch.diag(S), min=0.0))
    den = torch.outer(d, d)
    return torch.where(den > 0, S / torch.where(den > 0, den, 1.0), torch.zeros_like(S)).numpy()


class MinibatchCKA:
    """Minibatch CKA (Nguyen et al., 2021): unbiased HSIC averaged over minibatches.

    ``update`` takes a batch ``[L, b, d]`` (b >= 4 tokens; each layer may have its own
    width if a list is passed); ``result`` returns ``[L, L]``
    ``mean_b HSIC_u(a, b) / sqrt(mean_b HSIC_u(a, a) mean_b HSIC_u(b, b))``.
    Memory is ``O(L b d + L^2)`` whatever the number of batches. With a single
    batch it equals ``cka_matrix(batch, debiased=True)``.

    >>> H = np.random.default_rng(0).normal(size=(3, 64, 5))
    >>> mb = MinibatchCKA(3)
    >>> for s in range(0, 64, 16): mb.update(H[:, s:s + 16])
    >>> mb.result().shape
    (3, 3)
    """

    def __init__(self, n_layers: int, *, normalize: bool = False) -> None:
        self.L = n_layers
        self.normalize = normalize
        self.total = torch.zeros(n_layers, n_layers, dtype=torch.float64)
        self.batches = 0

    def update(self, batch: Array | Sequence[Array]) -> None:
        """Add one minibatch of the same tokens at every layer, ``[L, b, d]``."""
        Z = prepared_stack(batch, center=True, normalize=self.normalize)
        if Z.shape[0] != self.L:
            raise ValueError(f"batch has {Z.shape[0]} layers; this MinibatchCKA was made for {self.L}")
        if Z.shape[1] < 4:
            raise ValueError(f"minibatch of {Z.shape[1]} tokens: the unbiased HSIC needs at least 4")
        (M,) = _weighted_gram_products(Z, [None])
        self.total += _hsic_u_matrix(Z, M)
        self.batches += 1

    def result(self) -> np.ndarray:
        """CKA matrix ``[L, L]`` from the batches so far."""
        if self.batches == 0:
            raise ValueError("MinibatchCKA has seen no batch: call update() first")
        return _normalise_hsic(self.total / self.batches)


def cka_from_products(M: Array) -> np.ndarray:
    """CKA matrix ``M_ab / sqrt(M_aa M_bb)`` from centred pairwise products ``M`` ``[L, L]``."""
    return _normalise_hsic(as_f64(M))


def cka_matrix(
    H: Array | Sequence[Array], *, debiased: bool = False, normalize: bool = False, block: int = 512
) -> np.ndarray:
    """Linear CKA between every pair of layers of ``H`` ``[L, n, d]`` -> ``[L, L]``.

    Args:
        debiased: unbiased HSIC (Song et al., 2012) instead of the plug-in estimator.
        normalize: L2-normalise each centred token row first (the entropy's view of
            the data) and take the cosine between those Gram matrices,
            ``M_ab / sqrt(M_aa M_bb)`` with exactly the ``M`` of the closed-form
            entropy. The rows are not re-centred after normalising, so this is close
            to, not equal to, CKA of the normalised rows. The default is the standard
            CKA of centred features.

    Cost ``~L n^2 d`` flops in tiles; no ``n x n`` matrix is held for all layers.
    """
    Z = prepared_stack(H, center=True, normalize=normalize)
    (M,) = _weighted_gram_products(Z, [None], block)
    if not debiased:
        return cka_from_products(M)
    if Z.shape[1] < 4:
        raise ValueError(f"debiased CKA needs n >= 4 tokens; got {Z.shape[1]}")
    return _normalise_hsic(_hsic_u_matrix(Z, M))


# ----------------------------------------------------------------- compartments
def _block_costs(C: np.ndarray) -> np.ndarray:
    """``cost[i, j]`` for the contiguous block ``i..j``: ``|B| - sum_{a,b in B} C_ab / |B|``.

    A CKA matrix is a Gram matrix of unit vectors (cosines between centred Gram
    matrices), so this is the block's scatter around its centroid in that
    embedding: the within-cluster sum of squares of kernel k-means.
    """
    L = C.shape[0]
    P = np.zeros((L + 1, L + 1))
    P[1:, 1:] = C.cumsum(0).cumsum(1)  # 2-D prefix sums: block sums in O(1)
    i, j = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
    size = (j - i + 1).astype(float)
    s = P[j + 1, j + 1] - P[i, j + 1] - P[j + 1, i] + P[i, i]
    cost = np.where(j >= i, size - s / np.maximum(size, 1), np.inf)
    return cost


def _segment(cost: np.ndarray, k: int) -> tuple[float, list[tuple[int, int]]]:
    """Optimal split of ``0..L-1`` into k contiguous blocks (dynamic programming, O(k L^2))."""
    L = cost.shape[0]
    best = np.full((k + 1, L + 1), np.inf)
    arg = np.zeros((k + 1, L + 1), dtype=int)
    best[0, 0] = 0.0
    for m in range(1, k + 1):
        for e in range(m, L + 1):  # first e positions split into m blocks; last block s..e-1
            cand = best[m - 1, m - 1 : e] + cost[m - 1 : e, e - 1]
            s = int(np.argmin(cand))
            best[m, e], arg[m, e] = cand[s], s + m - 1
    blocks, e = [], L
    for m in range(k, 0, -1):
        s = arg[m, e]
        blocks.append((s, e - 1))
        e = s
    return float(best[k, L]), blocks[::-1]


def compartment_costs(C: Array, k_max: int | None = None) -> np.ndarray:
    """Total within-block scatter ``W(k)`` of the best k-block segmentation, ``k = 1..k_max``.

    ``W`` decreases to 0 at ``k = L``; its elbow is the automatic choice of
    :func:`segment_compartments`. Returns ``[k_max]`` (entry ``k-1`` for k blocks).
    """
    Cn = _check_similarity(C)
    k_max = Cn.shape[0] if k_max is None else min(int(k_max), Cn.shape[0])
    cost = _block_costs(Cn)
    return np.array([_segment(cost, k)[0] for k in range(1, k_max + 1)])


def _check_similarity(C: Array) -> np.ndarray:
    Cn = np.asarray(as_f64(C))
    if Cn.ndim != 2 or Cn.shape[0] != Cn.shape[1]:
        raise ValueError(f"a similarity matrix must be square [L, L]; got shape {Cn.shape}")
    return (Cn + Cn.T) / 2


def _elbow(W: np.ndarray) -> int:
    """k (1-based) farthest below the chord from ``(1, W_1)`` to ``(K, W_K)`` (the "kneedle" rule)."""
    K = len(W)
    if K <= 2 or W[0] <= W[-1]:
        return 1
    x = np.arange(K) / (K - 1)
    y = (W - W[-1]) / (W[0] - W[-1])
    return int(np.argmax((1 - x) - y)) + 1


def _gain_ratio(W: np.ndarray, min_ratio: float = 2.0) -> int:
    """k after which the gain of one more compartment collapses.

    With gains ``g_k = W(k-1) - W(k)``, the k in ``2..K-1`` maximising ``g_k / g_{k+1}``,
    or 1 when no ratio reaches ``min_ratio`` (no clear block structure). Unlike the
    chord elbow it keeps a small but distinct block, e.g. a last layer on
    its own, because it compares each gain with the next rather than with the first.
    """
    if len(W) < 3:
        return 1
    g = -np.diff(W)  # g[i] = gain of going from i+1 to i+2 blocks
    floor = 1e-9 * max(abs(W[0]), 1e-300)
    ratio = np.where(g[:-1] > floor, g[:-1] / np.maximum(g[1:], floor), 0.0)
    best = int(np.argmax(ratio))
    return best + 2 if ratio[best] >= min_ratio else 1


def segment_compartments(
    C: Array,
    k: int | None = None,
    *,
    ids: Sequence[int] | None = None,
    k_max: int | None = None,
    penalty: float | None = None,
    rule: str = "gain-ratio",
) -> list[tuple[int, int]]:
    """Split layers into contiguous compartments of high mutual similarity.

    The objective is that of kernel k-means with the similarity ``C`` (e.g. CKA)
    as kernel, restricted to contiguous blocks: minimise the total scatter
    ``sum_B (|B| - sum_{a,b in B} C_ab / |B|)``, i.e. maximise the size-weighted
    within-block mean similarity. Solved exactly by dynamic programming.

    Args:
        C: ``[L, L]`` symmetric similarity with unit diagonal.
        k: number of compartments; if None it is chosen from the best scatter
            ``W(k)``, ``k = 1..k_max`` (default ``min(L, 12)``): with ``penalty`` the k
            minimising ``W(k) + penalty * k``; otherwise by ``rule``:
            ``"gain-ratio"`` (default) the k after which the gain of one more block
            drops most, relative to the next gain (1 if no drop reaches 2x);
            ``"elbow"`` the k farthest below the chord from ``W(1)`` to ``W(k_max)``,
            which tends to merge small late blocks.
        ids: layer ids of the rows of ``C`` (default ``0..L-1``).

    Returns:
        inclusive ``(start_id, end_id)`` per compartment, in depth order.

    >>> C = np.kron(np.eye(2), np.ones((3, 3))) * 0.8 + 0.2
    >>> segment_compartments(C, 2, ids=[1, 2, 3, 4, 5, 6])
    [(1, 3), (4, 6)]
    """
    Cn = _check_similarity(C)
    L = Cn.shape[0]
    ids = list(range(L)) if ids is None else [int(i) for i in ids]
    if len(ids) != L:
        raise ValueError(f"ids has {len(ids)} entries for a {L} x {L} similarity matrix")
    cost = _block_costs(Cn)
    if k is None:
        W = compartment_costs(Cn, min(L, 12) if k_max is None else k_max)
        if penalty is not None:
            k = int(np.argmin(W + penalty * np.arange(1, len(W) + 1))) + 1
        elif rule in ("gain-ratio", "elbow"):
            k = _gain_ratio(W) if rule == "gain-ratio" else _elbow(W)
        else:
            raise ValueError(f"rule={rule!r}: choose 'gain-ratio' or 'elbow'")
    if not 1 <= k <= L:
        raise ValueError(f"k={k} compartments for {L} layers: choose 1 <= k <= {L}")
    _, blocks = _segment(cost, int(k))
    return [(ids[s], ids[e]) for s, e in blocks]
