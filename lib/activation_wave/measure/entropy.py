"""Matrix entropy of hidden states: one layer, a concatenation of layers, a band over prompts.

Definitions (DESIGN.md section 5, after Skean et al., *Layer by Layer*, ICML 2025):
for a layer's hidden states ``Z`` (n tokens x d), :func:`prepare` centres every
feature over the tokens and scales every token row to unit L2 norm; the Gram
matrix ``K = Z Z^T`` divided by its trace has eigenvalues ``p_i`` that sum to one,
and the matrix entropy of Renyi order ``alpha`` is

    S_alpha = 1 / (1 - alpha) * log(sum_i p_i ** alpha)      (nats)

with ``alpha -> 1`` the von Neumann entropy ``-sum p log p`` and ``alpha = inf``
the min-entropy ``-log max p``. ``K`` (n x n) and the covariance ``Z^T Z``
(d x d) share their non-zero spectrum, so the smaller one is diagonalised, in
float64. Matrix entries are never clamped; eigenvalues within rounding of zero
(``|lambda| <= size * eps * lambda_max``, the usual numerical-rank rule; this
includes the slightly negative ones) are set to zero.

The concatenation ``[Z_a | Z_b | ...]`` of prepared layers has Gram matrix
``K_a + K_b + ...``. For ``alpha = 2`` its entropy needs only the pairwise
products ``M_ab = ||Z_a^T Z_b||_F^2 = tr(K_a K_b)`` and the traces
``t_a = tr(K_a)``:

    S_2(S) = -log( sum_{a,b in S} M_ab / (sum_{a in S} t_a) ** 2 )

so every subset of layers is scored from one L x L matrix
(:func:`pair_products`, :func:`renyi2_all_subsets`).

Inputs are numpy arrays or torch tensors of any float dtype; hidden states of
several layers come as ``H`` with shape ``[L, n, d]`` (or a sequence of ``[n, d]``).

>>> import numpy as np
>>> Z = np.random.default_rng(0).normal(size=(64, 8))
>>> bool(matrix_entropy(Z) <= np.log(8))
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, Union

import numpy as np
import torch

Array = Union[np.ndarray, torch.Tensor]
#: How a layer is centred over tokens before the entropy: ``True``/``"mean"`` (the
#: definition), ``"median"`` (coordinate-wise median, robust to a few huge
#: attention-sink rows; see :mod:`activation_wave.measure.filtering`), ``False``/``None`` (none).
Center = Union[bool, None, Literal["mean", "median"]]
Normalization = Literal["raw", "log_n", "log_d", "min"]

__all__ = [
    "EntropyBand",
    "PairAccumulator",
    "concat_entropy",
    "dataset_entropy",
    "layer_entropies",
    "layer_means",
    "matrix_entropy",
    "normalized",
    "pair_products",
    "pairwise_concat_entropy",
    "pairwise_renyi2",
    "prepare",
    "profile_summary",
    "prepared_stack",
    "prompt_entropy",
    "renyi2_all_subsets",
    "renyi2_from_products",
    "renyi2_subset",
    "renyi_entropy",
    "set_compute_threads",
    "spectrum",
    "subsets",
    "trace_vector",
]


# --------------------------------------------------------------------------- basics
def as_f64(x: Array) -> torch.Tensor:
    """A float64 CPU tensor view/copy of ``x`` (numpy or torch, any float or int dtype)."""
    t = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
    return t.detach().to(device="cpu", dtype=torch.float64)


def _stack(H: Array | Sequence[Array]) -> torch.Tensor:
    """``H`` as a float64 tensor ``[L, n, d]``; a single ``[n, d]`` layer becomes ``[1, n, d]``."""
    if isinstance(H, (list, tuple)):
        H = torch.stack([as_f64(z) for z in H])
    T = as_f64(H)
    if T.ndim == 2:
        T = T[None]
    if T.ndim != 3:
        raise ValueError(f"hidden states must have shape [L, n, d] (or [n, d]); got {tuple(T.shape)}")
    return T


def _n_layers(H: Array | Sequence[Array]) -> int:
    shape = (len(H),) if isinstance(H, (list, tuple)) else tuple(H.shape)
    if not isinstance(H, (list, tuple)) and len(shape) != 3:
        raise ValueError(f"hidden states must have shape [L, n, d]; got {shape}")
    return shape[0]


def prepared_stack(H: Array | Sequence[Array], center: Center = True, normalize: bool = True) -> torch.Tensor:
    """:func:`prepare` applied to every layer of ``H`` ``[L, n, d]``, one float64 copy in all.

    Layers are converted one at a time, so a float16/32 ``H`` never exists twice in float64.
    """
    L = _n_layers(H)
    first = prepare(H[0], center, normalize)
    out = torch.empty((L, *first.shape), dtype=torch.float64)
    out[0] = first
    for i in range(1, L):
        out[i] = prepare(H[i], center, normalize)
    return out


def _centre_of(Z: torch.Tensor, center: Center) -> torch.Tensor | None:
    """The per-feature centre ``[d]`` (``[..., 1, d]`` for stacks) or None for no centring."""
    if center is False or center is None:
        return None
    if center is True or center == "mean":
        return Z.mean(dim=-2, keepdim=True)
    if center == "median":
        # torch.median returns the lower of the two middle values; the mean of both is
        # the usual definition and keeps the result symmetric under token permutation.
        return torch.from_numpy(np.median(Z.numpy(), axis=-2, keepdims=True))
    raise ValueError(f"center={center!r}: choose True/'mean', 'median' or False")


def prepare(Z: Array, center: Center = True, normalize: bool = True) -> torch.Tensor:
    """Centre a layer over tokens and scale each token row to unit L2 norm.

    Args:
        Z: hidden states ``[n, d]`` (or a stack ``[L, n, d]``, prepared per layer).
        center: ``True``/``"mean"`` subtracts the mean token, ``"median"`` the
            coordinate-wise median, ``False`` nothing.
        normalize: divide every row by its L2 norm. Rows of zero norm (e.g. a token
            equal to the centre) stay zero: they add nothing to the Gram matrix
            instead of producing NaNs.

    Returns:
        float64 tensor of the same shape.

    >>> Z = prepare(np.array([[3.0, 0.0], [1.0, 0.0], [2.0, 5.0]]))
    >>> [round(float(v), 6) for v in Z.norm(dim=1)]
    [1.0, 1.0, 1.0]
    """
    T = as_f64(Z)
    c = _centre_of(T, center)
    if c is not None:
        T = T - c
    if normalize:
        norms = T.norm(dim=-1, keepdim=True)
        T = torch.where(norms > 0, T / torch.where(norms > 0, norms, 1.0), torch.zeros_like(T))
    return T


def _eig_prepared(P: torch.Tensor, via: str = "auto") -> torch.Tensor:
    """Eigenvalues ``p`` (sum 1) of ``P P^T / tr``, from the smaller of Gram and covariance."""
    n, d = P.shape
    if via not in ("auto", "gram", "cov"):
        raise ValueError(f"via={via!r}: choose 'auto', 'gram' (n x n) or 'cov' (d x d)")
    use_gram = via == "gram" or (via == "auto" and n <= d)
    A = P @ P.T if use_gram else P.T @ P
    lam = torch.linalg.eigvalsh(A)
    # Eigenvalues within rounding of zero (|lam| <= size * eps * lam_max, numpy's matrix_rank
    # rule) are zeros: negative ones cannot enter a log, and positive noise of ~1e-16 would
    # otherwise count as rank for alpha < 1 (p ** 0.5 ~ 1e-8 each). The matrix is untouched.
    tol = A.shape[0] * torch.finfo(torch.float64).eps * lam.abs().max() if lam.numel() else 0.0
    lam = torch.where(lam > tol, lam, torch.zeros_like(lam))
    total = lam.sum()
    if total <= 0:
        return torch.zeros(0, dtype=torch.float64)
    return lam / total


def spectrum(Z: Array, center: Center = True, normalize: bool = True, via: str = "auto") -> np.ndarray:
    """Eigenvalues of ``K / tr(K)`` for a prepared layer, ascending, summing to one.

    ``via`` forces the ``"gram"`` (n x n) or ``"cov"`` (d x d) route (for tests);
    ``"auto"`` takes the smaller. An all-zero layer has an empty spectrum.
    """
    return _eig_prepared(prepare(Z, center, normalize), via).numpy()


def renyi_entropy(p: Array, alpha: float = 1.0) -> float:
    """Renyi entropy (nats) of a probability vector ``p`` (zeros allowed).

    ``alpha=1`` is Shannon. Within 1e-4 of 1 the ratio, whose numerator and
    denominator both vanish, is replaced by its expansion in ``u = alpha - 1``,
    ``S_1 - u k2 / 2 - u^2 k3 / 6`` (``k2``, ``k3``: variance and third central moment
    of ``log p`` under ``p``), so the entropy is smooth in ``alpha`` (error < 1e-10).
    ``alpha=inf`` is ``-log max p``; ``alpha=0`` is ``log`` of the support size.

    >>> round(renyi_entropy([0.5, 0.5], 2.0), 6) == round(math.log(2), 6)
    True
    """
    q = as_f64(p).flatten()
    q = q[q > 0]
    if q.numel() == 0:
        return 0.0
    q = q / q.sum()
    logq = q.log()
    if alpha < 0:
        raise ValueError(f"alpha={alpha}: the Renyi order must be >= 0")
    if math.isinf(alpha):
        return float(-logq.max())
    if alpha == 0:
        return math.log(q.numel())
    shannon = -(q * logq).sum()
    u = alpha - 1.0
    if abs(u) < 1e-4:
        dev = logq + shannon  # log p minus its mean under p
        k2, k3 = (q * dev.square()).sum(), (q * dev**3).sum()
        return float(shannon - u * k2 / 2.0 - u * u * k3 / 6.0)
    return float(torch.logsumexp(alpha * logq, 0) / (1.0 - alpha))


def matrix_entropy(
    Z: Array, alpha: float = 1.0, center: Center = True, normalize: bool = True, via: str = "auto"
) -> float:
    """Matrix entropy (nats) of one layer's hidden states ``Z`` ``[n, d]``.

    ``0 <= S <= log(rank)``; a layer whose prepared rows span one direction has
    entropy 0, as has an all-zero layer (nothing to spread: 0 by convention).

    >>> matrix_entropy(np.eye(4), center=False)  # four orthonormal tokens
    1.3862943611198906
    """
    return renyi_entropy(_eig_prepared(prepare(Z, center, normalize), via), alpha)


def normalized(S: float | Array, n: int, d: int, how: Normalization = "raw") -> float | np.ndarray:
    """Entropy divided by the normalisers Skean et al. report.

    ``how``: ``"raw"`` (unchanged), ``"log_n"`` (tokens), ``"log_d"`` (width),
    ``"min"`` (``min(log n, log d)``, the largest attainable value).

    >>> normalized(math.log(8), n=8, d=64, how="min")
    1.0
    """
    S = S if np.isscalar(S) else np.asarray(S, dtype=float)
    if how == "raw":
        return S
    scale = {"log_n": math.log(n), "log_d": math.log(d), "min": min(math.log(n), math.log(d))}
    if how not in scale:
        raise ValueError(f"how={how!r}: choose one of 'raw', 'log_n', 'log_d', 'min'")
    if scale[how] <= 0:
        raise ValueError(f"cannot normalise by {how} with n={n}, d={d}: the log is 0; need n, d >= 2")
    return S / scale[how]


def layer_entropies(
    H: Array | Sequence[Array], alpha: float = 1.0, center: Center = True, normalize: bool = True
) -> np.ndarray:
    """Entropy of every layer of ``H`` ``[L, n, d]`` -> ``[L]`` (nats)."""
    return np.array([matrix_entropy(H[i], alpha, center, normalize) for i in range(_n_layers(H))])


def concat_entropy(
    Zs: Sequence[Array], alpha: float = 1.0, center: Center = True, normalize: bool = True
) -> float:
    """Entropy of the concatenation ``[Z_a | Z_b | ...]``, each block prepared on its own.

    Equals the entropy of ``K_a + K_b + ...``; for ``alpha=2`` the closed form
    :func:`renyi2_subset` gives the same number without an eigenproblem.

    >>> Z = np.random.default_rng(0).normal(size=(32, 4))
    >>> abs(concat_entropy([Z, Z]) - matrix_entropy(Z)) < 1e-9  # a repeated layer adds nothing
    True
    """
    if len(Zs) == 0:
        raise ValueError("concat_entropy needs at least one layer")
    P = torch.cat([prepare(z, center, normalize) for z in Zs], dim=1)
    return renyi_entropy(_eig_prepared(P), alpha)


# ------------------------------------------------------------ bands over prompts
@dataclass(frozen=True)
class EntropyBand:
    """Entropy per layer with a bootstrap band (prompts resampled with replacement).

    ``mean`` is the point estimate on all prompts (prompt entropy: the mean over
    prompts; dataset entropy: the pooled value); ``lo``/``hi`` the percentile
    interval of the bootstrap at ``level``. All arrays are ``[L]``;
    ``per_prompt`` is ``[P, L]`` for prompt entropy, else None.
    """

    kind: Literal["prompt", "dataset"]
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    alpha: float
    n_prompts: int
    n_tokens: int
    n_boot: int
    level: float
    per_prompt: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready dict (lists instead of arrays)."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}


def _prompt_index(groups: Array, n: int) -> list[np.ndarray]:
    g = np.asarray(groups).reshape(-1)
    if g.shape[0] != n:
        raise ValueError(f"groups has {g.shape[0]} entries but H has {n} tokens; pass one prompt id per token")
    return [np.flatnonzero(g == u) for u in np.unique(g)]


def _band(boot: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    if not 0 < level < 1:
        raise ValueError(f"level={level}: a confidence level in (0, 1), e.g. 0.95")
    q = (1 - level) / 2
    return np.quantile(boot, q, axis=0), np.quantile(boot, 1 - q, axis=0)


def prompt_entropy(
    H: Array | Sequence[Array],
    groups: Array,
    alpha: float = 1.0,
    *,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    center: Center = True,
    normalize: bool = True,
) -> EntropyBand:
    """Prompt entropy: per layer, the mean over prompts of the entropy of each prompt's tokens.

    Args:
        H: ``[L, n, d]`` hidden states of all tokens.
        groups: ``[n]`` prompt id of every token. Prompts with fewer than two
            tokens are skipped (one centred token is zero: no entropy to measure).
        n_boot: bootstrap replicates (prompts resampled with replacement; cheap,
            the per-prompt entropies are computed once).

    Returns:
        :class:`EntropyBand` with ``per_prompt`` ``[P, L]``.
    """
    L = _n_layers(H)
    idx = [i for i in _prompt_index(groups, len(H[0])) if i.size >= 2]
    if not idx:
        raise ValueError("no prompt has two or more tokens; prompt entropy needs them (check `groups`)")
    E = np.empty((len(idx), L))
    for l in range(L):
        X = as_f64(H[l])
        E[:, l] = [matrix_entropy(X[torch.as_tensor(i)], alpha, center, normalize) for i in idx]
    rng = np.random.default_rng(seed)
    boot = np.array([E[rng.integers(0, len(idx), len(idx))].mean(0) for _ in range(n_boot)])
    lo, hi = _band(boot, level) if n_boot else (E.mean(0), E.mean(0))
    return EntropyBand("prompt", E.mean(0), lo, hi, alpha, len(idx), int(sum(i.size for i in idx)), n_boot, level, E)


def dataset_entropy(
    H: Array | Sequence[Array],
    groups: Array,
    alpha: float = 1.0,
    *,
    over: Literal["tokens", "means"] = "tokens",
    n_boot: int = 50,
    seed: int = 0,
    level: float = 0.95,
    center: Center = True,
    normalize: bool = True,
) -> EntropyBand:
    """Dataset entropy: per layer, the entropy of all tokens pooled across prompts.

    ``over="means"`` instead pools one mean hidden state per prompt. The bootstrap
    resamples prompts and pools their tokens (a prompt drawn twice contributes its
    tokens twice), so every replicate costs ``L`` eigenproblems: keep ``n_boot``
    modest for large ``n`` (``31 x 4096 x 576`` takes 5-7 s per replicate on 2 CPU cores).

    Repeated tokens lower a pooled entropy, so the replicates sit systematically
    *below* the estimate and their plain percentile interval can miss it. The band
    shows the replicates' spread around the estimate instead: their quantiles
    shifted by ``S - mean(replicates)`` (the bootstrap's own bias removed). Note
    that a pooled entropy also grows with the number of tokens: compare curves at
    equal ``n_tokens``.
    """
    L, n = _n_layers(H), len(H[0])
    idx = _prompt_index(groups, n)
    if over not in ("tokens", "means"):
        raise ValueError(f"over={over!r}: choose 'tokens' or 'means'")

    def pooled(sel: Sequence[int]) -> np.ndarray:
        out = np.empty(L)
        for l in range(L):
            X = as_f64(H[l])
            if over == "tokens":
                X = X[torch.as_tensor(np.concatenate([idx[s] for s in sel]))]
            else:
                X = torch.stack([X[torch.as_tensor(idx[s])].mean(0) for s in sel])
            out[l] = matrix_entropy(X, alpha, center, normalize)
        return out

    point = pooled(range(len(idx)))
    rng = np.random.default_rng(seed)
    boot = np.array([pooled(rng.integers(0, len(idx), len(idx))) for _ in range(n_boot)])
    shift = point - boot.mean(0) if n_boot else 0.0
    lo, hi = _band(boot, level) if n_boot else (point, point)
    lo, hi = lo + shift, hi + shift
    return EntropyBand("dataset", point, lo, hi, alpha, len(idx), n, n_boot, level)


# ------------------------------------------------------- alpha = 2 closed form
def _weighted_gram_products(
    Z: torch.Tensor, weights: Sequence[torch.Tensor | None], block: int = 512
) -> list[torch.Tensor]:
    """``M^w_ab = sum_ij (w_ai w_aj K_a,ij)(w_bi w_bj K_b,ij)`` for each row weighting ``w`` ``[L, n]``.

    ``K_a = Z_a Z_a^T`` is built one ``block x block`` tile at a time (upper
    triangle only, off-diagonal tiles counted twice), so memory is
    ``O(L block^2)`` on top of ``Z`` and the cost is about ``L n^2 d`` flops.
    """
    L, n, _ = Z.shape
    out = [torch.zeros(L, L, dtype=torch.float64) for _ in weights]
    for i0 in range(0, n, block):
        Zi = Z[:, i0 : i0 + block]
        for j0 in range(i0, n, block):
            G = torch.bmm(Zi, Z[:, j0 : j0 + block].transpose(1, 2))  # [L, bi, bj]
            f = 1.0 if j0 == i0 else 2.0
            for m, w in zip(out, weights):
                Gw = G if w is None else G * w[:, i0 : i0 + block, None] * w[:, None, j0 : j0 + block]
                F = Gw.reshape(L, -1)
                m += f * (F @ F.T)
    return out


def _row_weights(C: torch.Tensor) -> torch.Tensor:
    """``1 / ||row||`` for each token row of a stack ``[L, n, d]``, 0 for zero rows."""
    r = C.norm(dim=-1)
    return torch.where(r > 0, 1.0 / torch.where(r > 0, r, 1.0), torch.zeros_like(r))


def pair_products(
    H: Array | Sequence[Array], center: Center = True, normalize: bool = True, *, block: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise products ``M`` ``[L, L]`` and traces ``t`` ``[L]`` of prepared layers.

    ``M_ab = ||Z_a^T Z_b||_F^2 = tr(K_a K_b)`` and ``t_a = ||Z_a||_F^2 = tr(K_a)``,
    with each ``Z_a`` prepared by :func:`prepare`. Computed in float64 from
    ``block``-sized tiles of the Gram matrices (cost ``~L n^2 d``, memory
    ``O(L block^2)`` beyond the data). For data that do not fit in memory use
    :class:`PairAccumulator`.

    >>> H = np.random.default_rng(0).normal(size=(3, 20, 5))
    >>> M, t = pair_products(H)
    >>> bool(np.allclose(M, M.T)), t.tolist() == [20.0, 20.0, 20.0]
    (True, True)
    """
    C = prepared_stack(H, center, normalize=False)
    w = _row_weights(C) if normalize else None
    (M,) = _weighted_gram_products(C, [w], block)
    t = (C.square().sum(-1) * (w.square() if w is not None else 1.0)).sum(-1)
    return M.numpy(), t.numpy()


def trace_vector(H: Array | Sequence[Array], center: Center = True, normalize: bool = True) -> np.ndarray:
    """``t_a = tr(K_a) = ||Z_a||_F^2`` of every prepared layer ``[L]`` (n minus zero rows if normalised)."""
    return np.array([float(prepare(H[i], center, normalize).square().sum()) for i in range(_n_layers(H))])


def layer_means(chunks: Iterable[Array]) -> np.ndarray:
    """Mean hidden state ``[L, d]`` over a stream of token chunks ``[L, c, d]`` (first pass)."""
    total, count = None, 0
    for ch in chunks:
        X = _stack(ch)
        total = X.sum(1) if total is None else total + X.sum(1)
        count += X.shape[1]
    if total is None or count == 0:
        raise ValueError("layer_means got no tokens")
    return (total / count).numpy()


class PairAccumulator:
    """Streaming ``M`` and ``t`` over token chunks ``[L, c, d]``: memory does not grow with n.

    Keeps one ``d x d`` cross product per layer pair (``L (L+1) / 2 * d^2`` float64
    values: 1.3 GB for 31 layers of width 576, so use it for few layers or small
    d; :func:`pair_products` is cheaper in memory when all tokens fit).

    Centring, two cases:

    * ``normalize=False`` (CKA): one pass. Uncentred sums ``S_ab = sum x_a x_b^T`` and
      ``s_a = sum x_a`` are accumulated and corrected at the end,
      ``C_ab = S_ab - s_a s_b^T / n``; exact up to rounding.
    * ``normalize=True`` (entropy): each row is scaled *after* centring, so the
      centre must be known before the first chunk. Pass ``mean`` ``[L, d]`` from a
      first pass (:func:`layer_means`, or a median for robust centring): two passes.

    >>> H = np.random.default_rng(0).normal(size=(2, 30, 4))
    >>> acc = PairAccumulator(2, 4, mean=layer_means([H]))
    >>> acc.add(H[:, :10]); acc.add(H[:, 10:])
    >>> bool(np.allclose(acc.result()[0], pair_products(H)[0]))
    True
    """

    def __init__(
        self,
        n_layers: int,
        dim: int,
        *,
        center: bool = True,
        normalize: bool = True,
        mean: Array | None = None,
    ) -> None:
        if normalize and center and mean is None:
            raise ValueError(
                "PairAccumulator(normalize=True, center=True) needs the centre before the first chunk "
                "(rows are normalised after centring): run a first pass, mean=layer_means(chunks), "
                "or use normalize=False for a one-pass uncentred-sum correction"
            )
        self.L, self.d = n_layers, dim
        self.center, self.normalize = bool(center), normalize
        self.mean = None if mean is None else as_f64(mean).reshape(n_layers, 1, dim)
        self.n = 0
        pairs = [(a, b) for a in range(n_layers) for b in range(a, n_layers)]
        self.cross = {p: torch.zeros(dim, dim, dtype=torch.float64) for p in pairs}
        self.sums = torch.zeros(n_layers, dim, dtype=torch.float64)
        self.sq = torch.zeros(n_layers, dtype=torch.float64)

    def add(self, chunk: Array) -> None:
        """Add a chunk of tokens ``[L, c, d]``."""
        X = _stack(chunk)
        if X.shape[0] != self.L or X.shape[2] != self.d:
            raise ValueError(f"chunk shape {tuple(X.shape)} does not match [L={self.L}, c, d={self.d}]")
        if self.mean is not None and self.center:
            X = X - self.mean
        if self.normalize:
            X = X * _row_weights(X)[..., None]
        for a, b in self.cross:
            self.cross[a, b] += X[a].T @ X[b]
        self.sums += X.sum(1)
        self.sq += X.square().sum((1, 2))
        self.n += X.shape[1]

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(M [L, L], t [L])`` of everything added so far."""
        if self.n == 0:
            raise ValueError("PairAccumulator is empty: add() at least one chunk")
        correct = self.center and self.mean is None  # one-pass mode
        mu = self.sums / self.n
        M = torch.zeros(self.L, self.L, dtype=torch.float64)
        for (a, b), S in self.cross.items():
            C = S - self.n * torch.outer(mu[a], mu[b]) if correct else S
            M[a, b] = M[b, a] = C.square().sum()
        t = self.sq - self.n * mu.square().sum(1) if correct else self.sq.clone()
        return M.numpy(), t.numpy()


def renyi2_of_sets(M: Array, t: Array, sets: Array) -> np.ndarray:
    """Closed-form ``S_2`` of the concatenation of each set of layers: THE formula.

    ``S_2(S) = -log( sum_{a,b in S} M_ab / (sum_{a in S} t_a)^2 )`` with ``M [L, L]``,
    ``t [L]`` from :func:`pair_products`; ``sets`` ``[C, k]`` holds positions into ``M``
    (not layer ids), one set per row. Returns ``[C]`` (nats).

    **Zero trace.** A set whose prepared hidden states are all zero (every token the same
    vector, so nothing is left after centring; ``sum t_a = 0``) has an empty spectrum, and
    its entropy is 0 nats, the value :func:`matrix_entropy` gives it too: such layers carry
    no information about the token. The ratio would be 0 / 0 (NaN); it is never computed.

    >>> M, t = np.eye(2), np.ones(2)  # two orthogonal layers, each of rank one
    >>> np.round(renyi2_of_sets(M, t, [[0, 1]]), 6).tolist()  # log 2
    [0.693147]
    >>> renyi2_of_sets(np.zeros((2, 2)), np.zeros(2), [[0, 1]]).tolist()  # constant layers: 0, not NaN
    [0.0]
    """
    M, t = np.asarray(M, dtype=float), np.asarray(t, dtype=float)
    S = np.asarray(sets, dtype=np.int64)
    if S.ndim != 2:
        raise ValueError(f"sets must be a [C, k] array of positions, got shape {S.shape}")
    num, den = M[S[:, :, None], S[:, None, :]].sum((1, 2)), t[S].sum(1) ** 2
    out = np.zeros(len(S))
    ok = den > 0  # zero trace: entropy 0 (see above)
    out[ok] = -np.log(num[ok] / den[ok])
    return out


def renyi2_subset(M: Array, t: Array, subset: Sequence[int]) -> float:
    """Closed-form ``S_2`` of one set of positions (:func:`renyi2_of_sets`)."""
    return float(renyi2_of_sets(M, t, [list(subset)])[0])


def renyi2_from_products(M: Array, t: Array) -> np.ndarray:
    """Single-layer ``S_2`` ``[L]`` (:func:`renyi2_of_sets` of each layer alone)."""
    return renyi2_of_sets(M, t, np.arange(np.shape(M)[0])[:, None])


def pairwise_renyi2(M: Array, t: Array) -> np.ndarray:
    """Closed-form ``S_2`` of every pair concatenation ``[Z_a | Z_b]`` -> ``[L, L]``.

    The diagonal is the single-layer ``S_2`` (a layer concatenated with itself
    has the same spectrum).
    """
    L = np.shape(M)[0]
    out = np.diag(renyi2_from_products(M, t))
    if L > 1:
        pairs = subsets(L, 2)
        out[pairs[:, 0], pairs[:, 1]] = out[pairs[:, 1], pairs[:, 0]] = renyi2_of_sets(M, t, pairs)
    return out


def pairwise_concat_entropy(
    H: Array | Sequence[Array], alpha: float = 1.0, center: Center = True, normalize: bool = True
) -> np.ndarray:
    """Entropy of every pair concatenation ``[Z_a | Z_b]`` -> ``[L, L]`` (diagonal: single layers).

    ``alpha=2`` uses the closed form; other orders solve ``L (L - 1) / 2``
    eigenproblems of size ``min(n, 2d)``.
    """
    if alpha == 2:
        return pairwise_renyi2(*pair_products(H, center, normalize))
    L = _n_layers(H)
    P = [prepare(H[i], center, normalize) for i in range(L)]
    out = np.empty((L, L))
    for a in range(L):
        out[a, a] = renyi_entropy(_eig_prepared(P[a]), alpha)
        for b in range(a + 1, L):
            out[a, b] = out[b, a] = renyi_entropy(_eig_prepared(torch.cat([P[a], P[b]], 1)), alpha)
    return out


def subsets(n_items: int, k: int, pool: Sequence[int] | None = None) -> np.ndarray:
    """All k-subsets of ``pool`` (default ``range(n_items)``) as an int array ``[C, k]``, rows sorted."""
    pool = list(range(n_items)) if pool is None else [int(p) for p in pool]
    if not 1 <= k <= len(pool):
        raise ValueError(f"k={k}: need 1 <= k <= {len(pool)} (the number of candidate layers)")
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(pool, k)), dtype=np.int64)
    return flat.reshape(-1, k)


def renyi2_all_subsets(
    M: Array, t: Array, k: int, pool: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Score every k-subset of positions by closed-form ``S_2``, vectorised.

    Returns ``(sets [C, k], scores [C])``; all 4060 triples of 30 layers take a
    few milliseconds.

    >>> H = np.random.default_rng(0).normal(size=(5, 40, 6))
    >>> sets, s2 = renyi2_all_subsets(*pair_products(H), k=2)
    >>> sets.shape, s2.shape
    ((10, 2), (10,))
    """
    sets = subsets(np.shape(M)[0], k, pool)
    return sets, renyi2_of_sets(M, t, sets)


# ------------------------------------------------------------ chapter helpers
def set_compute_threads(n: int = 1) -> int:
    """Set torch's intra-op thread count for the eigen-heavy statistics; returns the previous one.

    On a small shared CPU, torch's symmetric eigensolver runs much slower with two
    threads under load than with one (31 layers x 4096 tokens x 576 dims: 4 s with one
    thread, 12 s with two on the study's 2-core machine), so the chapters call this first.
    """
    if int(n) < 1:
        raise ValueError(f"n={n}: the number of threads must be >= 1")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    return old


def profile_summary(values: Array, ids: Sequence[int] | None = None) -> dict:
    """Landmarks of a per-layer profile ``[L]`` (e.g. entropy over depth), for prose.

    Returns ``first`` / ``last`` values, ``max`` / ``min`` with their layer ids, and the
    largest fall between consecutive layers (``drop``: size > 0 for a fall, ``drop_to``:
    the layer id after it, ``drop_from``: the one before). Plain Python numbers, ready
    for ``glue`` and JSON. Chapters pass the entries on one scale
    (:func:`activation_wave.core.layers.profile_positions`).

    >>> profile_summary([4.0, 4.5, 1.2, 3.9], [0, 1, 2, 3])["drop_to"]
    2
    """
    v = np.asarray(values, dtype=float).reshape(-1)
    ids = list(range(len(v))) if ids is None else [int(i) for i in ids]
    if len(ids) != len(v):
        raise ValueError(f"ids has {len(ids)} entries for {len(v)} values")
    if len(v) == 0:
        raise ValueError("profile_summary needs at least one value")
    steps = v[:-1] - v[1:] if len(v) > 1 else np.zeros(1)
    j = int(np.argmax(steps))
    return {
        "first": float(v[0]), "last": float(v[-1]),
        "max": float(v.max()), "argmax": ids[int(np.argmax(v))],
        "min": float(v.min()), "argmin": ids[int(np.argmin(v))],
        "drop": float(steps[j]), "drop_from": ids[j], "drop_to": ids[min(j + 1, len(ids) - 1)],
    }


def depth_landmarks(values: Array, ids: Sequence[int], n_layers: int) -> dict:
    """:func:`profile_summary` of the entries of a depth profile on one scale
    (:func:`activation_wave.core.layers.profile_positions`): every layer id, N included, since
    index N is the last block before the final norm (capture schema 2).

    >>> depth_landmarks([4.0, 4.5, 1.2, 3.9, 0.5], [0, 1, 2, 3, 4], 4)["min"]
    0.5
    """
    from activation_wave.core.layers import profile_positions

    keep = profile_positions(ids, n_layers)
    return profile_summary(np.asarray(values, dtype=float)[keep], [int(ids[p]) for p in keep])
