"""Which token positions enter the layer statistics.

Two filters, both returning a boolean mask over tokens (``True`` = keep), to be
combined with ``&`` and applied with :func:`apply_mask` before any entropy, CKA or
selection call:

* :func:`token_entropy_mask`: keep positions whose next-token distribution (of the
  target) is flat enough. Confident positions are easy for any drafter and say
  little about which layers help; a related result (arXiv 2601.18902) found the
  flatter-distribution tokens the more valuable ones for training drafters.
* :func:`sink_mask`: drop attention-sink / massive-activation tokens. A handful of
  tokens, typically the first position, carry hidden states whose norm is orders
  of magnitude above the rest in the middle layers (Sun et al., 2024, *Massive
  activations*). Centring subtracts the mean token, and one row of norm R among n
  moves that mean by R / n: when that exceeds the typical row norm, every centred
  row is dominated by the same direction, row normalisation maps them all close
  to one point, and the layer's entropy collapses. That is an artefact of the
  estimator, not a property of what the layer encodes. Dropping those tokens, or
  centring on the coordinate-wise median (``center="median"`` in
  :mod:`activation_wave.measure.entropy`, which a few outliers cannot move), separates
  the two; the study reports both.

>>> import numpy as np
>>> token_entropy_mask(np.array([0.1, 2.0, 0.0, 3.0]), quantile=0.5).tolist()
[False, True, False, True]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from activation_wave.measure.entropy import Array, Center, layer_entropies

__all__ = [
    "apply_mask",
    "compare_conditions",
    "massive_tokens",
    "outlier_conditions",
    "response_offsets",
    "sink_mask",
    "token_entropy_mask",
    "token_ids_at",
    "token_norms",
    "token_count_stability",
]


def token_entropy_mask(entropy: Array, threshold: float | None = None, quantile: float | None = None) -> np.ndarray:
    """Keep positions whose next-token entropy is at least a threshold.

    Args:
        entropy: ``[n]`` next-token entropy (nats) of the target at each position.
        threshold: absolute cut: keep ``entropy >= threshold``.
        quantile: relative cut in ``[0, 1]``: keep ``entropy >= quantile(entropy, q)``,
            i.e. about the top ``1 - q`` fraction (ties at the cut are kept, so
            ``q = 0`` keeps everything).

    Exactly one of ``threshold`` and ``quantile`` must be given. NaN entries (no
    next token) are dropped.

    Returns:
        ``[n]`` bool mask, True = keep.
    """
    if (threshold is None) == (quantile is None):
        raise ValueError(
            "token_entropy_mask: give exactly one of threshold= (absolute, nats) or quantile= (in [0, 1]); "
            f"got threshold={threshold}, quantile={quantile}"
        )
    e = np.asarray(entropy.detach().cpu() if isinstance(entropy, torch.Tensor) else entropy, dtype=float).reshape(-1)
    finite = np.isfinite(e)
    if quantile is not None:
        if not 0.0 <= quantile <= 1.0:
            raise ValueError(f"quantile={quantile}: must lie in [0, 1] (0.5 keeps the flatter half)")
        if not finite.any():
            return np.zeros_like(finite)
        threshold = float(np.quantile(e[finite], quantile))
    return finite & (np.where(finite, e, -np.inf) >= threshold)


def token_norms(H: Array | Sequence[Array]) -> np.ndarray:
    """L2 norm of every token's hidden state in every layer: ``[L, n, d] -> [L, n]``."""
    if isinstance(H, (list, tuple)):
        return np.stack([token_norms(h[None])[0] for h in H])
    T = torch.as_tensor(np.asarray(H)) if not isinstance(H, torch.Tensor) else H.detach().cpu()
    return T.to(torch.float64).norm(dim=-1).numpy()


def massive_tokens(hidden_norms: Array, factor: float) -> np.ndarray:
    """Tokens whose norm exceeds ``factor`` x the layer's median norm in *any* layer.

    ``hidden_norms`` is ``[L, n]`` (or ``[n]`` for one layer). Returns ``[n]`` bool,
    True = massive (to drop).
    """
    N = np.atleast_2d(np.asarray(hidden_norms, dtype=float))
    if factor <= 1:
        raise ValueError(f"massive_factor={factor}: must exceed 1 (e.g. 20: twenty times the median norm)")
    med = np.median(N, axis=1, keepdims=True)
    return (N > factor * med).any(0)


def sink_mask(
    positions: Array,
    hidden_norms: Array | None = None,
    drop_first: int = 0,
    massive_factor: float | None = None,
) -> np.ndarray:
    """Tokens to KEEP once attention-sink positions and massive activations are removed.

    Args:
        positions: ``[n]`` position of each token in its own sequence, 0 = the first
            token the model saw (where the attention sink sits).
        hidden_norms: ``[L, n]`` token norms per layer (:func:`token_norms`); needed
            with ``massive_factor``.
        drop_first: drop tokens at positions ``< drop_first``.
        massive_factor: drop tokens whose norm in any layer exceeds this multiple
            of that layer's median token norm.

    Returns:
        ``[n]`` bool mask, True = keep.

    >>> sink_mask(np.array([0, 1, 2, 0, 1]), drop_first=1).tolist()
    [False, True, True, False, True]
    """
    pos = np.asarray(positions).reshape(-1)
    keep = pos >= int(drop_first)
    if massive_factor is not None:
        if hidden_norms is None:
            raise ValueError("sink_mask(massive_factor=...) needs hidden_norms [L, n]; compute them with token_norms(H)")
        norms = np.atleast_2d(np.asarray(hidden_norms, dtype=float))
        if norms.shape[-1] != pos.shape[0]:
            raise ValueError(f"hidden_norms covers {norms.shape[-1]} tokens but positions has {pos.shape[0]}")
        keep &= ~massive_tokens(norms, massive_factor)
    return keep


def apply_mask(H: Array, mask: Array, *per_token: Array | None) -> tuple:
    """Keep the masked tokens of ``H`` ``[L, n, d]`` and of any ``[n]`` companions (e.g. groups).

    Returns ``(H[:, mask], *(x[mask] for x in per_token))``; ``None`` companions stay None.

    >>> H2, g2 = apply_mask(np.zeros((2, 3, 4)), np.array([True, False, True]), np.array([7, 7, 8]))
    >>> H2.shape, g2.tolist()
    ((2, 2, 4), [7, 8])
    """
    m = np.asarray(mask, dtype=bool).reshape(-1)
    if m.shape[0] != H.shape[1]:
        raise ValueError(f"mask has {m.shape[0]} entries but H has {H.shape[1]} tokens")
    if not m.any():
        raise ValueError("the mask keeps no token; loosen the filter (lower threshold / quantile)")
    idx = torch.as_tensor(np.flatnonzero(m)) if isinstance(H, torch.Tensor) else np.flatnonzero(m)
    out = [H[:, idx]]
    for x in per_token:
        out.append(None if x is None else x[torch.as_tensor(np.flatnonzero(m)) if isinstance(x, torch.Tensor) else m])
    return tuple(out)


# ------------------------------------------------------------ the sink question
def response_offsets(position: Array, record: Array, records: Sequence[dict]) -> np.ndarray:
    """Offset of each token from the start of its response: ``position - (prompt_len - 1)``.

    ``position`` and ``record`` come from a :class:`~activation_wave.models.capture.TokenSample`,
    ``records`` from ``cache.records``. The first response position (the last prompt
    token, whose hidden state predicts the first response token) has offset 0; prompt
    positions are negative.
    """
    pos = np.asarray(position, dtype=np.int64).reshape(-1)
    rec = np.asarray(record, dtype=np.int64).reshape(-1)
    plen = np.array([int(records[r]["prompt_len"]) for r in rec], dtype=np.int64)
    return pos - (plen - 1)


def token_ids_at(cache, record: Array, position: Array) -> np.ndarray:
    """Input token id at each ``(record, position)`` of a capture cache ``[n]`` (one pass, ids only)."""
    rec = np.asarray(record, dtype=np.int64).reshape(-1)
    pos = np.asarray(position, dtype=np.int64).reshape(-1)
    want = {(int(r), int(p)): i for i, (r, p) in enumerate(zip(rec, pos))}
    out = np.full(len(rec), -1, dtype=np.int64)
    for shard in cache.iter_shards([], fields=("input_ids", "record", "position")):
        for tid, r, p in zip(shard["input_ids"].tolist(), shard["record"].tolist(), shard["position"].tolist()):
            i = want.get((r, p))
            if i is not None:
                out[i] = tid
    if (out < 0).any():
        raise ValueError(f"{int((out < 0).sum())} (record, position) pairs are not in this cache")
    return out


def outlier_conditions(
    positions: Array,
    hidden_norms: Array,
    *,
    drop_first: int = 1,
    massive_factor: float = 20.0,
) -> dict[str, tuple[np.ndarray, Center]]:
    """The four ways of treating outlier tokens that the sink question compares.

    Returns label -> ``(keep mask [n], centring)``: all tokens with mean centring (the
    definition, first), without positions ``< drop_first``, without massive tokens
    (norm above ``massive_factor`` x the layer's median in any layer), and all tokens
    with coordinate-wise median centring. ``positions`` are those :func:`sink_mask`
    expects (0 = the first token of the sequence, or of the response when given
    :func:`response_offsets`).
    """
    pos = np.asarray(positions).reshape(-1)
    every = np.ones(len(pos), dtype=bool)
    return {
        "all tokens (mean centring)": (every, True),
        ("without the first position" if drop_first == 1 else f"without the first {drop_first} positions"): (
            sink_mask(pos, drop_first=drop_first), True),
        f"without massive tokens (>{massive_factor:g}x median norm)": (
            sink_mask(pos, hidden_norms, massive_factor=massive_factor), True),
        "all tokens (median centring)": (every, "median"),
    }


def compare_conditions(
    H: Array,
    conditions: dict[str, tuple[np.ndarray, Center]],
    *,
    alpha: float = 1.0,
    cka: bool = True,
) -> dict[str, dict]:
    """Entropy over depth (and CKA) of ``H`` ``[L, n, d]`` under each ``(mask, centring)`` condition.

    Returns label -> ``{"n_tokens", "center", "entropy" [L], "cka" [L, L] or None}``. CKA is
    defined with mean centring, so it is computed for the mean-centred conditions only.
    """
    from activation_wave.measure.cka import cka_matrix  # cka imports entropy; imported here to keep this module light

    out: dict[str, dict] = {}
    for label, (mask, center) in conditions.items():
        (Hm,) = apply_mask(H, mask)
        out[label] = {
            "n_tokens": int(np.asarray(mask).sum()),
            "center": center if isinstance(center, str) else ("mean" if center else "none"),
            "entropy": layer_entropies(Hm, alpha, center),
            "cka": cka_matrix(Hm) if cka and center in (True, "mean") else None,
        }
    return out


# ------------------------------------------------------------ how many tokens?
def token_count_stability(
    H: Array,
    sizes: Sequence[int],
    *,
    n_rep: int = 3,
    seed: int = 0,
    alpha: float = 1.0,
    k_max: int = 12,
    profile: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """How far entropy-over-depth and CKA computed on fewer tokens stray from all of ``H``.

    For every size in ``sizes`` and each of ``n_rep`` seeded random subsets of that many
    tokens of ``H`` ``[L, n, d]``, compares with the statistics of all ``n`` tokens:

    * ``profile_corr`` ``[T, R]``: Spearman correlation over the layers at positions
      ``profile`` (default: all; chapters pass
      :func:`activation_wave.core.layers.profile_positions`) of the entropy profile with the
      full one (does it rank layers alike?);
    * ``entropy_shift`` ``[T, R]``: mean over layers of the entropy difference (pooled
      entropy grows with the number of tokens);
    * ``cka_mad`` ``[T, R]``: mean absolute difference of the CKA matrices;
    * ``same_compartments`` ``[T, R]``: 1 where the automatic compartments equal the full ones.

    Also returns ``sizes`` and the full-data ``entropy`` ``[L]``, ``cka`` ``[L, L]`` and
    ``compartments``. Cost per subset: L eigenproblems and one CKA matrix.
    """
    from scipy.stats import spearmanr

    from activation_wave.measure.cka import cka_matrix, segment_compartments

    n = int(H.shape[1])
    sizes = [int(s) for s in sizes if 4 <= int(s) <= n]
    if not sizes:
        raise ValueError(f"token_count_stability: no size in 4..{n} (the number of tokens of H)")
    L = int(H.shape[0])
    km = min(L, k_max)
    ref_e = layer_entropies(H, alpha)
    ref_c = cka_matrix(H)
    ref_comp = segment_compartments(ref_c, k_max=km)
    out = {k: np.zeros((len(sizes), n_rep)) for k in ("profile_corr", "entropy_shift", "cka_mad", "same_compartments")}
    rng = np.random.default_rng(seed)
    off = ~np.eye(L, dtype=bool)
    keep = list(range(L)) if profile is None else [int(p) for p in profile]
    for i, size in enumerate(sizes):
        for r in range(n_rep):
            rows = np.sort(rng.choice(n, size=size, replace=False))
            Hs = H[:, rows]
            e = layer_entropies(Hs, alpha)
            c = cka_matrix(Hs)
            out["profile_corr"][i, r] = spearmanr(e[keep], ref_e[keep]).statistic if len(keep) > 1 else 1.0
            out["entropy_shift"][i, r] = float(np.mean(e - ref_e))
            out["cka_mad"][i, r] = float(np.abs(c - ref_c)[off].mean()) if L > 1 else 0.0
            out["same_compartments"][i, r] = float(segment_compartments(c, k_max=km) == ref_comp)
    out.update(sizes=np.array(sizes), entropy=ref_e, cka=ref_c)
    out["compartments"] = ref_comp
    return out
