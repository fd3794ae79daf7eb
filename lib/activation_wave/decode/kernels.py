"""Faster CPU kernels for a target that verifies a few tokens at once, and a thread switch.

On a CPU a verify of a few tokens is not free. With transformers' own kernels MKL's
small-batch fp32 GEMM is slow for 2-8 rows, and the ``sdpa`` path copies K/V to every
query head whenever a mask is given. :func:`set_kernels` (``SpecConfig.kernels``)
``"fast"`` packs the weights for MKL's small-batch kernel (:class:`PackedLinear`) and
folds grouped query heads instead of copying K/V; outputs are unchanged (attention bit
for bit, linears to ~1e-6), and plain decoding runs on the same switched model. bf16
would make a multi-token forward cost about one step, but it is not usable for a
lossless claim: bf16 multi-token forwards round differently from one-token steps (the
``speculative_decoding_bf16`` benchmark measures how often greedy outputs diverge).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from activation_wave.core.config import SpecConfig
from activation_wave.models.targets import Target

__all__ = ["PackedLinear", "set_kernels", "prepare_kernels", "threads", "FAST_ATTENTION"]


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Temporarily use ``n`` intra-op threads (0 = leave torch's setting)."""
    old = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


class PackedLinear(torch.nn.Module):
    """``y = x W^T`` through MKL's packed GEMM: same result as ``nn.Linear`` to ~1e-6.

    A verify forward multiplies a handful of rows (``depth + 1``) by every weight matrix,
    where MKL's default fp32 GEMM is slow; weights packed once for its small-batch kernel
    make that product cheaper relative to a one-token step (``measure_costs`` times it).
    Keeps the original ``weight`` so the swap can be undone.
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = linear.weight  # shared, not copied
        self.out_features = linear.out_features
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(linear.weight.detach(), 8)
        object.__setattr__(self, "original", linear)  # not a submodule: swaps stay idempotent

    def forward(self, x: Tensor) -> Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.ops.mkl._mkl_linear(x2, self.packed, self.weight, None, x2.shape[0])
        return y.view(*x.shape[:-1], self.out_features)


def _packing_available() -> bool:
    return bool(torch.backends.mkl.is_available()) and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")


_LAST_TILED: list[Any] = [None, None]  # (mask, its tiling) of the last call


def _tiled_mask(mask: Tensor, g: int) -> Tensor:
    """``mask`` [B, 1, q, k] repeated ``g`` times along the query axis, reused while the
    same mask object comes back (every layer of one forward gets the same mask, so it is
    tiled once per forward instead of once per layer)."""
    if _LAST_TILED[0] is not mask or _LAST_TILED[1].shape[2] != g * mask.shape[2]:
        _LAST_TILED[:] = [mask, mask.repeat(1, 1, g, 1)]
    return _LAST_TILED[1]


def _gqa_packed_sdpa(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                     dropout: float = 0.0, scaling: float | None = None, is_causal: bool | None = None,
                     **kwargs: Any) -> tuple[Tensor, None]:
    """SDPA for grouped-query attention with a mask, without copying keys and values.

    transformers' ``sdpa`` path repeats K/V to every query head as soon as a mask is
    given (any forward of more than one token with a cache): one ``[B, H, ctx, d]`` copy
    of K and V per layer and forward. Folding each group's query heads onto the query
    axis ([B, H, q, d] -> [B, H_kv, g*q, d], mask tiled g times) gives the same numbers
    (checked bit for bit) from the shared K/V. Other cases go to transformers' function.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    g = int(getattr(module, "num_key_value_groups", 1))
    if attention_mask is None or g == 1 or not torch.is_tensor(attention_mask) or dropout > 0 \
            or kwargs.get("position_bias") is not None or attention_mask.shape[2] != query.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    B, H, q, d = query.shape
    out = F.scaled_dot_product_attention(query.reshape(B, H // g, g * q, d), key, value,
                                         attn_mask=_tiled_mask(attention_mask, g), scale=scaling)
    return out.reshape(B, H, q, d).transpose(1, 2).contiguous(), None


FAST_ATTENTION = "aw_gqa_packed_sdpa"


def _register_fast_attention() -> bool:
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:  # older transformers: keep its own attention
        return False
    AttentionInterface.register(FAST_ATTENTION, _gqa_packed_sdpa)
    AttentionMaskInterface.register(FAST_ATTENTION, sdpa_mask)
    return True


def set_kernels(model: Any, mode: str) -> dict[str, Any]:
    """Switch the target's decoding kernels in place: ``"fast"`` or ``"hf"`` (as loaded).

    ``"fast"`` swaps bias-free fp32 CPU linears for :class:`PackedLinear` and an ``sdpa``
    attention for :func:`_gqa_packed_sdpa`; both give the same outputs as transformers'
    kernels (linears to ~1e-6, attention bit for bit) and make a forward of a few tokens
    cheaper relative to a one-token step, which is what a verify is. Plain and
    speculative decoding both run on the switched model, so comparisons stay like for
    like. Returns what is in effect.
    """
    if mode not in ("fast", "hf"):
        raise ValueError(f"spec.kernels must be 'fast' or 'hf', got {mode!r}")
    cpu_fp32 = lambda w: w.device.type == "cpu" and w.dtype == torch.float32  # noqa: E731
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if mode == "fast" and type(child) is torch.nn.Linear and child.bias is None \
                    and cpu_fp32(child.weight) and _packing_available():
                setattr(module, name, PackedLinear(child))
            elif mode == "hf" and isinstance(child, PackedLinear):
                setattr(module, name, child.original)
    impl = getattr(model.config, "_attn_implementation", None)
    if mode == "fast" and impl == "sdpa" and hasattr(model, "set_attn_implementation") and _register_fast_attention():
        model.set_attn_implementation(FAST_ATTENTION)
    elif mode == "hf" and impl == FAST_ATTENTION:
        model.set_attn_implementation("sdpa")
    return {"linear": "packed" if any(isinstance(m, PackedLinear) for m in model.modules()) else "hf",
            "attention": getattr(model.config, "_attn_implementation", None)}


def prepare_kernels(target: Target, cfg: SpecConfig) -> str:
    """Apply ``cfg.kernels`` to the target (idempotent); describe what is in effect."""
    k = set_kernels(target.model, cfg.kernels)
    return f"linear={k['linear']}, attention={k['attention']}"
