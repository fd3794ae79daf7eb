"""The EAGLE-3-style draft head, in one file a reader can hold in their head.

The head reads ``k`` hidden states of the target (``hidden_states`` indices, see
:mod:`activation_wave.core.layers`) at position ``t`` together with the token at ``t + 1`` and
predicts the token at ``t + 2``::

    g_t   = fc([n_1(h_t^(l1)) | ... | n_k(h_t^(lk))])           k*H -> H, no bias
    x     = [input_layernorm(embed(x_{t+1})) | hidden_norm(g_t)]  2H   (q/k/v read 2H)
    a_t   = g_t + o_proj(attention(x))                          residual on the fused feature
    o_t   = a_t + mlp(post_attention_layernorm(a_t))            SwiGLU, like the target
    logit = lm_head(norm(o_t))                                  over the draft vocabulary only

``n_i`` is the identity unless the spec's ``fused_norm`` is on; then it is an RMSNorm per
captured layer (``fuse_norm.{i}.weight``, as in later EAGLE-3 variants), so deep layers,
whose hidden states have far larger norms, no longer dominate ``fc``'s input. No serving
engine applies it (:func:`activation_wave.engines.conventions.engine_report` says so).

``o_t`` (before the final norm) is what the next drafting step reads instead of ``g``:
EAGLE-3 drafts a chain by feeding its own output back as the feature of the next
position. The draft vocabulary holds the most frequent target tokens of the training
responses; ``d2t[i]`` is the offset that maps draft id ``i`` to target id ``i + d2t[i]``
and ``t2d`` is a bool mask over the target vocabulary, exactly as in EAGLE-3's released
checkpoints. Token embeddings are a frozen copy of the target's.

Checkpoints use the layout serving engines load (vLLM ``llama_eagle3.py``, SGLang,
SpecForge): one ``model.safetensors`` with ``fc.weight``, ``midlayer.*``, ``norm.weight``,
``lm_head.weight``, ``d2t``, ``t2d`` and *no* embedding (engines share the target's),
a flat Llama-style ``config.json`` naming the layer ids in both conventions engines read
(:meth:`DrafterSpec.to_hf_config`), and a ``provenance.json``.

>>> import torch
>>> from transformers import LlamaConfig, LlamaForCausalLM
>>> target = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
...     num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2)).eval()
>>> d = Eagle3Drafter.from_target(target, layers=[1, 2, 3], draft_ids=list(range(0, 64, 2)))
>>> feats = torch.randn(1, 5, 3 * 32)                       # [B, T, k*H] hidden states
>>> out = d.unroll(d.fuse(feats), torch.randint(0, 64, (1, 5)), torch.tensor([5]), n_steps=1)[0]
>>> d.logits(out).shape                                      # [B, T, draft_vocab]
torch.Size([1, 5, 32])
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from activation_wave.core.layers import text_config

SCHEMA_VERSION = 2
ARCHITECTURE = "LlamaForCausalLMEagle3"
#: Tensor names of a checkpoint (besides ``midlayer.*``), as serving engines expect them.
TOP_LEVEL_TENSORS = ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d")
MIDLAYER_TENSORS = (
    "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
    "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.mlp.gate_proj.weight", "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight",
)


#: Warm starts of :meth:`Eagle3Drafter.from_target` (``draft.head_init`` etc.), default first.
HEAD_INITS = ("random", "target", "target_frozen")
NORM_INITS = ("ones", "target")
BLOCK_INITS = ("random", "target_last")


class DrafterError(RuntimeError):
    """A drafter checkpoint or its use is wrong; the message says how to fix it."""


# ----------------------------------------------------------------------------- config


@dataclass(frozen=True)
class DrafterSpec:
    """Architecture of a draft head; written flat into ``config.json``."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # the target's vocabulary (embedding rows, t2d length)
    draft_vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    layers: tuple[int, ...]  # hidden_states indices read from the target, ascending
    target_num_layers: int  # N of the target (for the conventions of other engines)
    target_hidden_size: int
    fused_norm: bool = False  # an RMSNorm per captured layer before fc (checkpoint: activation_wave.fused_norm)
    # RoPE frequency scaling as (key, value) pairs of a ``rope_scaling`` dict; () = plain RoPE. Only
    # "llama3" is implemented (:func:`rope_inv_freq`): drafters SpecForge trains for Llama-3.1 targets
    # carry it (its draft config copies the target's). The study's own drafters use plain RoPE.
    rope_scaling: tuple[tuple[str, Any], ...] = ()

    @property
    def k(self) -> int:
        return len(self.layers)

    @classmethod
    def from_target_config(cls, config: Any, layers: Sequence[int], draft_vocab_size: int, *,
                           fused_norm: bool = False) -> DrafterSpec:
        """Copy the target's layer dimensions (as EAGLE-3 does) for a head reading ``layers``."""
        from activation_wave.core.layers import layer_ids, text_config

        config = text_config(config)
        n = int(config.num_hidden_layers)
        heads = int(config.num_attention_heads)
        hidden = int(config.hidden_size)
        rope = getattr(config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta") if isinstance(rope, dict) else None
        theta = theta or getattr(config, "rope_theta", None) or 10000.0
        return cls(
            hidden_size=hidden, intermediate_size=int(config.intermediate_size), num_attention_heads=heads,
            num_key_value_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(getattr(config, "head_dim", None) or hidden // heads),
            vocab_size=int(config.vocab_size), draft_vocab_size=int(draft_vocab_size),
            rms_norm_eps=float(getattr(config, "rms_norm_eps", 1e-6)), rope_theta=float(theta),
            max_position_embeddings=int(getattr(config, "max_position_embeddings", 4096)),
            layers=tuple(layer_ids(layers, n)), target_num_layers=n, target_hidden_size=hidden,
            fused_norm=bool(fused_norm),
        )

    def to_hf_config(self) -> dict[str, Any]:
        """The flat Llama-style ``config.json`` that vLLM, SGLang, SpecForge and llama.cpp read.

        The layer ids are written twice, once per convention the engines read
        (:mod:`activation_wave.engines.conventions`): top-level ``eagle_aux_hidden_state_layer_ids`` =
        ``hidden_states`` indices (vLLM V1/V2, llama.cpp's converter) and
        ``eagle_config.eagle_aux_hidden_state_layer_ids`` = indices - 1 (SGLang, SpecForge,
        which add 1). The nested key is left out when layer 0 (embeddings) is read, which
        has no "output of block i" name. ``activation_wave`` holds what only this package
        reads (schema, the target's N, ``fused_norm``); engines ignore it.
        """
        from activation_wave.core.layers import NESTED_KEY, TOP_LEVEL_KEY
        from activation_wave.core.layers import to_convention

        eagle: dict[str, Any] = {"use_aux_hidden_state": True}
        if min(self.layers) > 0:
            eagle[NESTED_KEY] = to_convention(self.layers, "sglang")
        return {
            "architectures": [ARCHITECTURE],
            "model_type": "llama",
            "hidden_act": "silu",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "num_hidden_layers": 1,
            "vocab_size": self.vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
            "target_hidden_size": self.target_hidden_size,
            "torch_dtype": "float32",
            **({"rope_scaling": dict(self.rope_scaling)} if self.rope_scaling else {}),
            TOP_LEVEL_KEY: list(self.layers),
            "eagle_config": eagle,
            "activation_wave": {"schema": SCHEMA_VERSION, "target_num_hidden_layers": self.target_num_layers,
                                "fused_norm": self.fused_norm},
        }

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], *, where: str = "config.json") -> DrafterSpec:
        """Inverse of :meth:`to_hf_config`; also reads schema-1 checkpoints (nested ids in
        ``hidden_states`` indices, marked ``layer_id_convention``) and checkpoints written before
        ``fused_norm`` existed (read as off). Raises :class:`DrafterError`,
        naming ``where``, when the two id keys disagree or the file is not ours."""
        from activation_wave.core.layers import read_layer_ids
        from activation_wave.core.layers import check_layers

        ours = cfg.get("activation_wave") or {}
        eagle = cfg.get("eagle_config") or {}
        if eagle.get("layer_id_convention") == "hidden_states index (vLLM)":  # schema 1
            layers, n = list(eagle["eagle_aux_hidden_state_layer_ids"]), eagle["target_num_hidden_layers"]
        elif ours.get("target_num_hidden_layers") is not None:
            try:
                layers = read_layer_ids(cfg, where=where)
            except ValueError as exc:
                raise DrafterError(str(exc)) from None
            n = ours["target_num_hidden_layers"]
        else:
            raise DrafterError(
                f"{where} has no activation_wave.target_num_hidden_layers: this loader only reads checkpoints "
                "written by activation_wave (`wave train-draft`); engines load other drafters directly")
        try:  # where a drafter's ids enter: checked against the target's N recorded with them
            layers = check_layers(layers, int(n), what=f"{where}: layer ids")
        except ValueError as exc:
            raise DrafterError(f"{exc} The file was edited or damaged: restore it or retrain the drafter with "
                               "`wave train-draft`") from None
        return cls(
            hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
            num_attention_heads=cfg["num_attention_heads"], num_key_value_heads=cfg["num_key_value_heads"],
            head_dim=cfg["head_dim"], vocab_size=cfg["vocab_size"], draft_vocab_size=cfg["draft_vocab_size"],
            rms_norm_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"],
            max_position_embeddings=cfg["max_position_embeddings"],
            layers=tuple(layers), target_num_layers=n, target_hidden_size=cfg["target_hidden_size"],
            fused_norm=bool(ours.get("fused_norm", False)), rope_scaling=_rope_scaling(cfg, where=where),
        )


#: RoPE scaling types :func:`rope_inv_freq` implements ("default" = none).
ROPE_TYPES = ("default", "llama3")


def _rope_scaling(cfg: dict[str, Any], *, where: str) -> tuple[tuple[str, Any], ...]:
    """The RoPE scaling a drafter config names, as :attr:`DrafterSpec.rope_scaling` pairs.

    Read from ``rope_scaling`` (transformers 4 and SpecForge's legacy mirror) or else
    ``rope_parameters`` (transformers 5), without its ``rope_theta``; () for plain RoPE.
    Raises :class:`DrafterError` for a scaling type the drafter does not implement.
    """
    raw = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(raw, dict):
        raise DrafterError(f"{where}: rope_scaling is a {type(raw).__name__}, not an object; restore the file")
    pairs = tuple(sorted((k, v) for k, v in raw.items() if k not in ("rope_theta", "type")))
    kind = raw.get("rope_type", raw.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise DrafterError(f"{where}: RoPE scaling {kind!r} is not implemented by the study's drafter (only "
                           f"{list(ROPE_TYPES)}); serve this drafter in its engine, or train it with plain RoPE")
    return () if kind == "default" else (("rope_type", kind),) + tuple(p for p in pairs if p[0] != "rope_type")


def rope_inv_freq(head_dim: int, theta: float, scaling: Sequence[tuple[str, Any]] = ()) -> Tensor:
    """RoPE inverse frequencies [head_dim / 2] for base ``theta``, with Llama 3's frequency
    scaling when ``scaling`` says ``rope_type = "llama3"`` (as transformers'
    ``_compute_llama3_parameters`` and SpecForge's ``LlamaRotaryEmbedding``): wavelengths
    longer than ``original_max_position_embeddings / low_freq_factor`` are stretched by
    ``factor``, shorter than ``... / high_freq_factor`` kept, and those between blended.

    >>> f = rope_inv_freq(8, 10000.0)
    >>> [round(x, 4) for x in f.tolist()]
    [1.0, 0.1, 0.01, 0.001]
    >>> s = (("rope_type", "llama3"), ("factor", 8.0), ("low_freq_factor", 1.0), ("high_freq_factor", 4.0),
    ...      ("original_max_position_embeddings", 64))
    >>> [round(x, 6) for x in rope_inv_freq(8, 10000.0, s).tolist()]
    [1.0, 0.013042, 0.00125, 0.000125]
    """
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    s = dict(scaling)
    if s.get("rope_type", "default") == "default":
        return inv
    factor, low, high = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - low) / (high - low) if high != low else torch.zeros_like(inv)
    blended = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelen < old / high, inv, torch.where(wavelen > old / low, inv / factor, blended))


# ----------------------------------------------------------------------------- modules


class RMSNorm(nn.Module):
    """Llama RMSNorm, computed in fp32 (``weight`` [H])."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Attention(nn.Module):
    """Grouped-query attention whose q/k/v read 2H (embedding | feature)."""

    def __init__(self, s: DrafterSpec):
        super().__init__()
        self.nh, self.nkv, self.hd = s.num_attention_heads, s.num_key_value_heads, s.head_dim
        self.q_proj = nn.Linear(2 * s.hidden_size, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(2 * s.hidden_size, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(2 * s.hidden_size, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, s.hidden_size, bias=False)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, s: DrafterSpec):
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    """The single decoder layer (names match EAGLE-3 checkpoints: ``midlayer.*``)."""

    def __init__(self, s: DrafterSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)  # on the token embedding
        self.hidden_norm = RMSNorm(s.hidden_size, s.rms_norm_eps)  # on the fused feature
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.mlp = MLP(s)


def _rotate_half(x: Tensor) -> Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class DraftKV:
    """Key/value cache of the draft layer, preallocated so appends do not copy.

    ``k``, ``v``: [1, n_kv_heads, capacity, head_dim] (keys already rotated); the first
    ``length`` slots are filled. Cropping is setting ``length``.
    """

    def __init__(self, spec: DrafterSpec, capacity: int = 1024, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        shape = (1, spec.num_key_value_heads, capacity, spec.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    def reserve(self, extra: int) -> None:
        need = self.length + extra
        if need > self.k.shape[2]:
            cap = max(need, 2 * self.k.shape[2])
            grow = (*self.k.shape[:2], cap - self.k.shape[2], self.k.shape[3])
            self.k = torch.cat([self.k, self.k.new_zeros(grow)], dim=2)
            self.v = torch.cat([self.v, self.v.new_zeros(grow)], dim=2)

    def crop(self, length: int) -> None:
        """Forget every slot from ``length`` on."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot crop a draft cache of length {self.length} to {length}")
        self.length = length


class Eagle3Drafter(nn.Module):
    """EAGLE-3 draft head: ``fc``, one ``midlayer``, ``norm``, ``lm_head`` over a draft vocab.

    With ``spec.fused_norm``, ``fuse_norm`` holds k RMSNorms [target H] applied to the
    captured layers before ``fc``; otherwise it is None.

    Buffers: ``d2t`` [Vd] long (target id = draft id + d2t), ``t2d`` [V] bool,
    ``draft_to_target`` [Vd] long and ``target_to_draft`` [V] long (-1 outside) for lookups.
    ``embed_tokens`` [V, H] is frozen and not saved (engines share the target's).
    """

    def __init__(self, spec: DrafterSpec, draft_ids: Sequence[int] | Tensor):
        super().__init__()
        self.spec = spec
        H = spec.hidden_size
        self.embed_tokens = nn.Embedding(spec.vocab_size, H)
        self.embed_tokens.weight.requires_grad_(False)
        self.fuse_norm: nn.ModuleList | None = nn.ModuleList(
            RMSNorm(spec.target_hidden_size, spec.rms_norm_eps) for _ in range(spec.k)) if spec.fused_norm else None
        self.fc = nn.Linear(spec.k * spec.target_hidden_size, H, bias=False)
        self.midlayer = MidLayer(spec)
        self.norm = RMSNorm(H, spec.rms_norm_eps)
        self.lm_head = nn.Linear(H, spec.draft_vocab_size, bias=False)
        ids = torch.as_tensor(list(draft_ids) if not isinstance(draft_ids, Tensor) else draft_ids, dtype=torch.long)
        if ids.numel() != spec.draft_vocab_size or not bool((ids[1:] > ids[:-1]).all()):
            raise DrafterError(f"draft_ids must be {spec.draft_vocab_size} strictly increasing target ids")
        t2d = torch.zeros(spec.vocab_size, dtype=torch.bool)
        t2d[ids] = True
        target_to_draft = torch.full((spec.vocab_size,), -1, dtype=torch.long)
        target_to_draft[ids] = torch.arange(len(ids))
        self.register_buffer("d2t", ids - torch.arange(len(ids)))
        self.register_buffer("t2d", t2d)
        self.register_buffer("draft_to_target", ids, persistent=False)
        self.register_buffer("target_to_draft", target_to_draft, persistent=False)
        inv_freq = rope_inv_freq(spec.head_dim, spec.rope_theta, spec.rope_scaling)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.scale = 1.0 / math.sqrt(spec.head_dim)
        self._has_embeddings = False
        self.provenance: dict[str, Any] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_target(cls, model: Any, layers: Sequence[int], draft_ids: Sequence[int] | Tensor,
                    *, seed: int = 0, fused_norm: bool = False, head_init: str = "random",
                    norm_init: str = "ones", block_init: str = "random") -> Eagle3Drafter:
        """A freshly initialised head for a transformers causal LM ``model``.

        ``fused_norm`` adds an RMSNorm per captured layer before ``fc`` (weights start at one;
        the other weights are the same as without it for the same ``seed``).

        Embeddings are copied from the target (frozen); everything else gets seeded default
        initialisation (norms at one), then the warm starts asked for overwrite parts of it
        (the seeded draws do not change, so every other weight is the same with or without them):

        * ``head_init="target"``: ``lm_head`` [Vd, H] = the target's output-embedding rows of
          ``draft_ids`` (a copy, also when the target ties them to its input embeddings, as
          SmolLM2 does); ``"target_frozen"``: the same, then excluded from
          :meth:`trainable_parameters` (``requires_grad`` False); saved like any other weight.
        * ``norm_init="target"``: ``norm`` [H] = the target's final norm as a Llama RMSNorm
          weight (:func:`_effective_norm_weight`, so a Gemma norm's ``1 + w`` is taken whole).
          With both, the untrained head on the target's pre-norm last hidden state ``h_N``
          gives the target's own logits over the draft vocabulary.
        * ``block_init="target_last"``: ``midlayer`` from the target's last decoder block
          (index N-1) by :func:`copy_block`; see there for exactly what is copied.

        The recipe screen (``wave bench --only recipe``, chapter 10) measures the head and
        norm starts as its arms head-target, head-frozen and norm-target, paired against a
        random start (``recipe.json``); block-target was dropped from it by the budget.
        """
        for name, value, choices in (("head_init", head_init, HEAD_INITS), ("norm_init", norm_init, NORM_INITS),
                                     ("block_init", block_init, BLOCK_INITS)):
            if value not in choices:
                raise DrafterError(f"{name} = {value!r} is not one of {list(choices)}; e.g. --set draft.{name}="
                                   f"{choices[0]}")
        spec = DrafterSpec.from_target_config(model.config, layers, len(draft_ids), fused_norm=fused_norm)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            d = cls(spec, draft_ids)
        d.attach_target(model)
        with torch.no_grad():
            if head_init != "random":
                head = model.get_output_embeddings()
                if head is None or tuple(head.weight.shape) != (spec.vocab_size, spec.hidden_size):
                    raise DrafterError(f"head_init = {head_init!r} needs the target's LM head of shape "
                                       f"({spec.vocab_size}, {spec.hidden_size}), found "
                                       f"{None if head is None else tuple(head.weight.shape)}; use head_init=random")
                if getattr(head, "bias", None) is not None:
                    raise DrafterError("head_init: the target's LM head has a bias, which the drafter's head lacks; "
                                       "use --set draft.head_init=random")
                d.lm_head.weight.copy_(head.weight.detach().float()[d.draft_to_target.to(head.weight.device)].cpu())
            if norm_init == "target":
                from activation_wave.models.capture import final_norm

                d.norm.weight.copy_(_effective_norm_weight(final_norm(model), spec.hidden_size, spec.rms_norm_eps))
            if block_init == "target_last":
                copy_block(d, _decoder_blocks(model)[-1], model.config)
        if head_init == "target_frozen":
            d.lm_head.weight.requires_grad_(False)
        return d

    def attach_target(self, model: Any) -> None:
        """Copy (and freeze) the target's input embeddings, which checkpoints do not store."""
        emb = model.get_input_embeddings().weight
        width = getattr(text_config(model.config), "hidden_size", None) if hasattr(model, "config") else None
        if width is not None and int(width) != self.spec.target_hidden_size:  # fc reads k x the target's width
            raise DrafterError(f"this drafter reads hidden states of width target_hidden_size = "
                               f"{self.spec.target_hidden_size}, but the given target's hidden_size is {width}: load "
                               "the target it was trained for (--model), or give a drafter trained on this one")
        if tuple(emb.shape) != (self.spec.vocab_size, self.spec.hidden_size):
            raise DrafterError(f"target embedding {tuple(emb.shape)} does not match the drafter "
                               f"({self.spec.vocab_size}, {self.spec.hidden_size}): wrong target model?")
        with torch.no_grad():
            self.embed_tokens.weight.copy_(emb.detach().float())
        self._has_embeddings = True

    def ensure_target(self, target: Any) -> None:
        """Check that ``target`` (a Target) is the one this head was trained on; attach its embeddings.

        Raises :class:`DrafterError` when the fingerprint recorded at training time differs.
        """
        want = self.provenance.get("target_fingerprint")
        have = getattr(target, "fingerprint", None)
        if want and have and want != have:
            raise DrafterError(f"this drafter was trained on target {want}, but the given target is {have}; "
                               "load the matching target or retrain the drafter")
        if not self._has_embeddings:
            self.attach_target(getattr(target, "model", target))

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Every parameter but the frozen embeddings (and a ``target_frozen`` lm_head)."""
        return [p for n, p in self.named_parameters() if p.requires_grad and not n.startswith("embed_tokens")]

    # ------------------------------------------------------------------ building blocks

    def fuse(self, hidden: Tensor) -> Tensor:
        """[..., k*H] concatenated target hidden states (ascending layer order) -> [..., H]."""
        if self.fuse_norm is not None:
            H, k = self.spec.target_hidden_size, self.spec.k
            if hidden.shape[-1] != k * H:
                raise DrafterError(f"fuse got {hidden.shape[-1]} features, not k*H = {k}*{H}: pass the hidden "
                                   f"states of the drafter's layers {list(self.spec.layers)}, concatenated")
            chunks = hidden.split(H, dim=-1)  # k x [..., H], one per captured layer
            hidden = torch.cat([norm(c) for norm, c in zip(self.fuse_norm, chunks)], dim=-1)
        return self.fc(hidden)

    def logits(self, out: Tensor) -> Tensor:
        """[..., H] layer output -> [..., Vd] logits over the draft vocabulary."""
        return self.lm_head(self.norm(out))

    def _rope(self, x: Tensor, pos: Tensor) -> Tensor:
        """Rotate x [B, heads, T, hd] by positions pos [B, T] (Llama / NeoX layout)."""
        freqs = pos.to(torch.float32)[..., None] * self.inv_freq  # [B, T, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]  # [B, 1, T, hd]
        return (x * emb.cos().to(x.dtype)) + (_rotate_half(x) * emb.sin().to(x.dtype))

    def _qkv(self, feature: Tensor, tokens: Tensor, pos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """feature [B,T,H], tokens [B,T], pos [B,T] -> q [B,nh,T,hd], k, v [B,nkv,T,hd] (rotated)."""
        if not self._has_embeddings:
            raise DrafterError("the drafter has no token embeddings: call drafter.attach_target(target.model) "
                               "or load_drafter(path, target)")
        m = self.midlayer
        a = m.self_attn
        x = torch.cat([m.input_layernorm(self.embed_tokens(tokens)), m.hidden_norm(feature)], dim=-1)
        B, T, _ = x.shape
        q = a.q_proj(x).view(B, T, a.nh, a.hd).transpose(1, 2)
        k = a.k_proj(x).view(B, T, a.nkv, a.hd).transpose(1, 2)
        v = a.v_proj(x).view(B, T, a.nkv, a.hd).transpose(1, 2)
        return self._rope(q, pos), self._rope(k, pos), v

    def _finish(self, attn: Tensor, residual: Tensor) -> Tensor:
        """attn [B,nh,T,hd], residual (fused feature) [B,T,H] -> layer output o [B,T,H]."""
        m = self.midlayer
        B, _, T, _ = attn.shape
        h = residual + m.self_attn.o_proj(attn.transpose(1, 2).reshape(B, T, -1))
        return h + m.mlp(m.post_attention_layernorm(h))

    def _expand_kv(self, x: Tensor) -> Tensor:
        """[B, nkv, T, hd] -> [B, nh, T, hd] (grouped-query attention)."""
        rep = self.spec.num_attention_heads // self.spec.num_key_value_heads
        return x if rep == 1 else x.repeat_interleave(rep, dim=1)

    # ------------------------------------------------------------------ training-time test

    def unroll(self, fused: Tensor, input_ids: Tensor, lengths: Tensor, n_steps: int,
               sub: Tensor | None = None) -> list[Tensor]:
        """Training-time test: ``n_steps`` chained drafting steps at every position at once.

        Args:
            fused: [B, T, H] ``fuse(h_t)`` of the target hidden states, right padded.
            input_ids: [B, T] tokens of the records (prompt + response), right padded.
            lengths: [B] real lengths.
            n_steps: steps to unroll (EAGLE-3: 7).
            sub: [B, S] positions at which steps >= 1 (and the returned outputs) are
                computed; all positions when None. Step 0 always runs on every position,
                because its keys are the context every later step attends to.

        Returns a list of ``n_steps`` layer outputs [B, S, H]. Step ``j`` at position ``t``
        stands for the drafter at position ``t + j`` of a chain anchored at ``t``: it reads
        token ``input_ids[t + j + 1]`` and the step-(j-1) output at ``t`` (``fused`` for
        j = 0) and predicts token ``t + j + 2``. Its query sees step-0 keys at positions
        ``<= t`` and its own chain's keys of steps 1..j (the "diagonal"), exactly the keys
        a chain drafted at inference time sees. At T = 0 and with every earlier draft
        accepted, step ``j`` equals the ``j+1``-th draft of an online chain.
        """
        B, T, _ = fused.shape
        dev = fused.device
        ar = torch.arange(T, device=dev)
        key_ok = ar[None, :] < lengths[:, None]  # [B, T]
        nxt = torch.cat([input_ids[:, 1:], input_ids[:, -1:]], dim=1)  # token t+1 at t (last is padding)
        q, k0, v0 = self._qkv(fused, nxt, ar.expand(B, T))
        k0, v0 = self._expand_kv(k0), self._expand_kv(v0)
        neg = torch.finfo(torch.float32).min
        causal = (ar[None, :] <= ar[:, None])[None] & key_ok[:, None, :]  # [B, T, T]
        scores = (q @ k0.transpose(-1, -2)).float() * self.scale
        scores = scores.masked_fill(~causal[:, None], neg)
        out = self._finish(torch.softmax(scores, -1).to(v0.dtype) @ v0, fused)  # [B, T, H]
        if sub is None:
            sub = ar.expand(B, T)
        S = sub.shape[1]
        prev = out.gather(1, sub[..., None].expand(B, S, out.shape[-1]))
        outs = [prev]
        mask0 = (ar[None, None, :] <= sub[..., None]) & key_ok[:, None, :]  # [B, S, T]
        diag_k: list[Tensor] = []
        diag_v: list[Tensor] = []
        for j in range(1, n_steps):
            tok = input_ids.gather(1, (sub + j + 1).clamp(max=T - 1))
            q, k, v = self._qkv(prev, tok, sub + j)
            diag_k.append(self._expand_kv(k))
            diag_v.append(self._expand_kv(v))
            s0 = ((q @ k0.transpose(-1, -2)).float() * self.scale).masked_fill(~mask0[:, None], neg)
            sd = torch.stack([(q * dk).sum(-1) for dk in diag_k], -1).float() * self.scale  # [B, nh, S, j]
            p = torch.softmax(torch.cat([s0, sd], -1), -1)
            attn = p[..., :T].to(v0.dtype) @ v0 + (p[..., T:, None].to(v0.dtype) * torch.stack(diag_v, -2)).sum(-2)
            prev = self._finish(attn, prev)
            outs.append(prev)
        return outs

    # ------------------------------------------------------------------ inference

    def new_cache(self, capacity: int = 1024) -> DraftKV:
        return DraftKV(self.spec, capacity, dtype=self.fc.weight.dtype, device=self.fc.weight.device)

    def step(self, feature: Tensor, tokens: Tensor, pos: Tensor, cache: DraftKV,
             mask: Tensor | None = None) -> Tensor:
        """Run ``m`` new entries through the head, appending their keys to ``cache``.

        Args:
            feature: [1, m, H] fused target feature (``fuse``) or a previous output.
            tokens: [1, m] the token following each entry's position.
            pos: [m] rotary positions.
            cache: the draft KV cache; its ``length`` grows by ``m``.
            mask: [m, length + m] bool (True = may attend), or None for "whole cache plus
                causal within the new entries". Trees pass their ancestor masks here.

        Returns the layer outputs [1, m, H] (feed ``logits`` or the next step).
        """
        dev = self.fc.weight.device
        tokens, pos = tokens.to(dev), pos.to(dev)
        mask = None if mask is None else mask.to(dev)
        m = tokens.shape[1]
        q, k, v = self._qkv(feature, tokens, pos[None])
        cache.reserve(m)
        L = cache.length
        cache.k[:, :, L:L + m] = k.to(cache.k.dtype)
        cache.v[:, :, L:L + m] = v.to(cache.v.dtype)
        cache.length = L + m
        K, V = cache.k[:, :, :L + m], cache.v[:, :, :L + m]
        if mask is None and m > 1:
            ar = torch.arange(m, device=q.device)
            mask = torch.cat([torch.ones(m, L, dtype=torch.bool, device=q.device), ar[None, :] <= ar[:, None]], 1)
        rep = self.spec.num_attention_heads // self.spec.num_key_value_heads
        if rep > 1:
            K, V = K.repeat_interleave(rep, dim=1), V.repeat_interleave(rep, dim=1)
        attn = F.scaled_dot_product_attention(q, K, V, attn_mask=None if mask is None else mask[None, None])
        return self._finish(attn, feature)


# ----------------------------------------------------------------------------- warm starts


def _decoder_blocks(model: Any) -> Sequence[nn.Module]:
    """The decoder blocks of a transformers causal LM (``model.base_model.layers`` for Llama,
    Qwen2, Mistral, Gemma). Raises :class:`DrafterError` when there is no such list."""
    base = getattr(model, "base_model", model)
    blocks = getattr(base, "layers", None)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
        raise DrafterError(f"{type(model).__name__}: no decoder blocks at model.base_model.layers, so block_init "
                           "cannot copy one; use --set draft.block_init=random")
    return blocks


def _effective_norm_weight(norm: nn.Module, size: int, eps: float) -> Tensor:
    """The Llama RMSNorm weight [size] equivalent to the target's norm module ``norm``.

    Read by applying the norm to a row of ones (RMS 1): a Llama norm returns
    ``w / sqrt(1 + eps)``, a Gemma norm ``(1 + w) / sqrt(1 + eps)``, so the same read gives
    the weight our :class:`RMSNorm` (``w * x / rms``) needs for either family.
    """
    p = next(norm.parameters(), None)
    ones = torch.ones(1, size, dtype=p.dtype if p is not None else torch.float32,
                      device=p.device if p is not None else "cpu")
    with torch.no_grad():
        out = norm(ones).detach().float().reshape(-1).cpu()
    if out.numel() != size:
        raise DrafterError(f"the target's norm {type(norm).__name__} maps {size} features to {out.numel()}; "
                           "it cannot start the drafter's norm (use ones)")
    return out * math.sqrt(1.0 + eps)


def copy_block(drafter: Eagle3Drafter, block: nn.Module, config: Any) -> None:
    """Start the drafter's ``midlayer`` from a target decoder block (in place, no grad).

    Copied, for a Llama-style block (Llama, Mistral, SmolLM2):

    * ``self_attn.q_proj/k_proj/v_proj``: the target's [heads*hd, H] matrices go to the
      *feature* half of the drafter's input columns, ``[:, H:2H]`` (the drafter's attention
      reads ``[input_layernorm(embed) | hidden_norm(feature)]``, embedding first); the
      embedding half ``[:, :H]`` keeps its seeded random init;
    * ``self_attn.o_proj`` and ``mlp.gate_proj/up_proj/down_proj``: whole;
    * norms, by role: the block's ``input_layernorm`` (on its residual stream) goes to the
      drafter's ``hidden_norm`` (on the fused feature, which plays the residual's part);
      ``post_attention_layernorm`` to ``post_attention_layernorm``. The drafter's
      ``input_layernorm`` (on the token embedding) has no counterpart and stays at one.

    Raises :class:`DrafterError` naming what differs when the block does not have this
    layout: other shapes (heads, KV heads, head dim, hidden or intermediate size), biases
    (Qwen2's q/k/v), an activation other than SiLU, or extra norms (Gemma 3's q/k norms
    and pre/post feed-forward norms), any of which would make the copy compute something
    else than the target's block.
    """
    from activation_wave.core.layers import text_config

    m, s = drafter.midlayer, drafter.spec
    H = s.hidden_size
    problems = []
    act = getattr(text_config(config), "hidden_act", "silu")
    if act != "silu":
        problems.append(f"activation {act!r} (the drafter's MLP uses silu)")
    extra = sorted(n for n, _ in block.named_modules() if n.rsplit(".", 1)[-1] in
                   ("q_norm", "k_norm", "pre_feedforward_layernorm", "post_feedforward_layernorm"))
    if extra:
        problems.append(f"norms the drafter's block lacks: {extra}")
    names = {
        "self_attn.q_proj": (m.self_attn.q_proj, True), "self_attn.k_proj": (m.self_attn.k_proj, True),
        "self_attn.v_proj": (m.self_attn.v_proj, True), "self_attn.o_proj": (m.self_attn.o_proj, False),
        "mlp.gate_proj": (m.mlp.gate_proj, False), "mlp.up_proj": (m.mlp.up_proj, False),
        "mlp.down_proj": (m.mlp.down_proj, False)}
    found = dict(block.named_modules())
    pairs = []
    for name, (mine, feature_half) in names.items():
        theirs = found.get(name)  # an nn.Linear, or a decoding kernel's stand-in with the same weight
        if not isinstance(getattr(theirs, "weight", None), Tensor) or theirs.weight.ndim != 2:
            problems.append(f"no linear layer {name}")
            continue
        want = (mine.weight.shape[0], H) if feature_half else tuple(mine.weight.shape)
        if tuple(theirs.weight.shape) != tuple(want):
            problems.append(f"{name} is {list(theirs.weight.shape)}, the drafter needs {list(want)}")
        if getattr(theirs, "bias", None) is not None:
            problems.append(f"{name} has a bias")
        pairs.append((mine, theirs, feature_half))
    norms = [(m.hidden_norm, found.get("input_layernorm")), (m.post_attention_layernorm,
                                                             found.get("post_attention_layernorm"))]
    for mine, theirs in norms:
        if theirs is None:
            problems.append("no input_layernorm / post_attention_layernorm")
    if problems:
        raise DrafterError(f"block_init = target_last: the target's last block ({type(block).__name__}) does not "
                           f"match the drafter's Llama-style block: {'; '.join(problems)}; use "
                           "--set draft.block_init=random")
    with torch.no_grad():
        for mine, theirs, feature_half in pairs:
            w = theirs.weight.detach().float().to(mine.weight.device)
            if feature_half:
                mine.weight[:, H:].copy_(w)
            else:
                mine.weight.copy_(w)
        for mine, theirs in norms:
            mine.weight.copy_(_effective_norm_weight(theirs, H, s.rms_norm_eps))


# ----------------------------------------------------------------------------- draft vocabulary


def select_draft_vocab(counts: Tensor, size: int, *, secondary: Tensor | None = None,
                       always: Sequence[int] = ()) -> Tensor:
    """The ``size`` most frequent target ids, ascending (ties: ``secondary`` count, then id).

    counts, secondary: [V] token counts (e.g. response tokens, top-k appearances).
    ``always`` ids (end-of-sequence tokens) are included whatever their count.
    """
    V = counts.numel()
    size = min(int(size), V)
    order = torch.arange(V)  # stable sorts below: id ascending is the last tie-break
    if secondary is not None:
        order = order[torch.argsort(secondary[order].double(), descending=True, stable=True)]
    primary = counts.double().clone()
    primary[torch.as_tensor(list(always), dtype=torch.long)] = float("inf")
    order = order[torch.argsort(primary[order], descending=True, stable=True)]
    ids = order[:size]
    return ids.sort().values


# ----------------------------------------------------------------------------- save / load


def save_drafter(drafter: Eagle3Drafter, out_dir: str | Path, provenance: dict[str, Any] | None = None) -> Path:
    """Write ``model.safetensors``, ``config.json`` and ``provenance.json`` into ``out_dir``.

    Files are written to temporary names and renamed, ``provenance.json`` last; it records
    the sha256 of ``model.safetensors`` (``weights_sha256``) and the digest of those weights
    with the layer ids and shapes they were trained with (``drafter_sha256``,
    :func:`drafter_digest`), which :func:`load_drafter` checks.
    """
    from safetensors.torch import save_file

    out = Path(out_dir)
    state = {k: v.detach().float().contiguous() if v.is_floating_point() else v.detach().contiguous()
             for k, v in drafter.state_dict().items() if not k.startswith("embed_tokens")}
    bad = non_finite_tensors(state)
    if bad:
        raise DrafterError(f"refusing to save a drafter with non-finite weights ({bad_text(bad)}): its training "
                           "diverged; retrain with a lower learning rate, e.g. --set draft.lr=3e-4")
    from activation_wave.core import files
    from activation_wave.core.hashing import file_sha256

    with files.atomic_path(out / "model.safetensors") as tmp:
        save_file(state, str(tmp), metadata={"format": "pt", "producer": "activation_wave"})
        weights_sha256 = file_sha256(tmp)
    files.write_json(out / "config.json", drafter.spec.to_hf_config(), indent=1)
    from activation_wave.core.results import git_commit

    prov = {"schema_version": SCHEMA_VERSION, "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "git_commit": git_commit(), "spec": asdict(drafter.spec), **(provenance or {}),
            "weights_sha256": weights_sha256, "drafter_sha256": drafter_digest(weights_sha256, drafter.spec)}
    files.write_json(out / "provenance.json", prov, indent=1, sort_keys=True, default=str)  # last: marks it complete
    return out


def non_finite_tensors(state: dict[str, Tensor]) -> dict[str, int]:
    """Tensor name -> number of NaN / inf entries, for the floating-point tensors that have any."""
    out = {}
    for name, t in state.items():
        if t.is_floating_point():
            n = int((~torch.isfinite(t)).sum())
            if n:
                out[name] = n
    return out


def bad_text(bad: dict[str, int]) -> str:
    """``{"fc.weight": 3}`` -> ``"fc.weight: 3 values"`` (at most three tensors named)."""
    names = sorted(bad, key=lambda k: -bad[k])
    more = f" and {len(names) - 3} more tensors" if len(names) > 3 else ""
    return ", ".join(f"{k}: {bad[k]} NaN/inf values" for k in names[:3]) + more


#: The sizes a drafter config may give (whole numbers in these ranges; a larger one is a typo or
#: an edit, and would be allocated before anything else could refuse it) and whether null
#: stands for "absent" (the reader then derives the value, as transformers does).
CONFIG_SIZES: dict[str, tuple[int, int, bool]] = {
    "hidden_size": (1, 1 << 16, False), "intermediate_size": (1, 1 << 20, False),
    "num_attention_heads": (1, 1024, False), "num_key_value_heads": (1, 1024, True), "head_dim": (1, 4096, True),
    "vocab_size": (1, 1 << 22, False), "draft_vocab_size": (1, 1 << 22, True),
    "target_hidden_size": (1, 1 << 16, True), "max_position_embeddings": (1, 1 << 24, True),
    "num_hidden_layers": (1, 1024, False)}
#: The real-valued fields of a drafter config: finite and > 0.
CONFIG_REALS = ("rms_norm_eps", "rope_theta")


#: The sizes the study's own config.json always holds (:meth:`DrafterSpec.to_hf_config`).
STUDY_CONFIG_SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                      "vocab_size", "draft_vocab_size", "target_hidden_size", "max_position_embeddings")


def study_name(name: str) -> str:
    """A tensor's name in the study's drafter: engines' per-layer norms before fc (``fc_norm.{i}``,
    SpecForge and vLLM) are its ``fuse_norm.{i}``; every other name is the same."""
    return "fuse_norm." + name[len("fc_norm."):] if name.startswith("fc_norm.") else name


def check_config_values(cfg: dict[str, Any], *, where: str, required: Sequence[str] = (),
                        fix: str = "restore the file or export the checkpoint again") -> None:
    """The one check of a drafter config's sizes before any of them is used: each of
    :data:`CONFIG_SIZES` present is a whole number (not a string, a float, a bool or, unless
    the key allows it, null) in its range, each of :data:`CONFIG_REALS` a finite positive
    number, and every key of ``required`` is there. Raises :class:`DrafterError` naming the
    file, the key, the value and ``fix``."""
    for key in required:
        if cfg.get(key) is None:
            raise DrafterError(f'{where} has no "{key}" (a whole number); {fix}')
    for key, (lo, hi, nullable) in CONFIG_SIZES.items():
        if key not in cfg or (cfg[key] is None and nullable):
            continue
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise DrafterError(f'{where}: "{key}" is {json.dumps(v)[:40]}, not a whole number (e.g. "{key}": '
                               f"{min(max(lo, 4), hi)}, no quotes, no decimal point); {fix}")
        if not lo <= v <= hi:
            raise DrafterError(f'{where}: "{key}" is {v}, outside {lo}..{hi}; {fix}')
    for key in CONFIG_REALS:
        if key in cfg and cfg[key] is not None:
            v = cfg[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise DrafterError(f'{where}: "{key}" is {json.dumps(v)[:40]}, not a finite number > 0; {fix}')


def weight_shapes(files: Sequence[Path]) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in safetensors ``files``, from their headers alone (no
    tensor is read or allocated). Raises :class:`DrafterError` for a file that cannot be read."""
    from safetensors import SafetensorError, safe_open

    out: dict[str, tuple[int, ...]] = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                for name in fh.keys():
                    out[name] = tuple(fh.get_slice(name).get_shape())
        except (SafetensorError, OSError) as exc:
            raise DrafterError(f"{f} cannot be read ({_first_line(exc)}): the file is truncated or corrupted; "
                               "restore it, or export or train the drafter again") from None
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _check_state_shapes(spec: DrafterSpec, have: Mapping[str, Sequence[int]], cfg_path: Path, weights: Path) -> None:
    """Raise :class:`DrafterError` when the weights' tensors (``have``: name -> shape, from the
    files' headers) do not have the shapes ``config.json`` implies (:func:`expected_state_shapes`):
    checked before the drafter is built, so a size edited to a huge value allocates nothing."""
    want = expected_state_shapes(spec)
    have = {k: tuple(v) for k, v in have.items() if not k.startswith("embed_tokens")}
    missing, unexpected = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    wrong = [f"{k} is {list(have[k])} in the weights but {list(want[k])} for the config" for k in sorted(want)
             if k in have and have[k] != want[k]]
    if missing or unexpected or wrong:
        s = spec
        what = "; ".join(wrong[:2] + ([f"missing {missing[:3]}"] if missing else [])
                         + ([f"unexpected {unexpected[:3]}"] if unexpected else []))
        raise DrafterError(f"{cfg_path} does not match {weights} ({what}; the config says hidden_size "
                           f"{s.hidden_size}, {s.k} layers {list(s.layers)}, draft vocab {s.draft_vocab_size}): the "
                           "config was edited or belongs to another drafter; restore it or retrain with `wave train-draft`")


def _read_json(path: Path, fix: str) -> dict[str, Any]:
    """A checkpoint's JSON file as a dict, or a :class:`DrafterError` naming the file and ``fix``."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DrafterError(f"{path} is not valid JSON ({exc}); {fix}") from None
    if not isinstance(doc, dict):
        raise DrafterError(f"{path} holds a {type(doc).__name__}, not a JSON object; {fix}")
    return doc


#: What :func:`drafter_digest` covers besides the weights: the layer ids and every size the
#: weights were trained with (version 1 of ``drafter_sha256``; a field added to the spec later
#: is not in it, so digests stay valid across versions).
DIGEST_FIELDS = ("layers", "target_num_layers", "target_hidden_size", "hidden_size", "intermediate_size",
                 "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "draft_vocab_size",
                 "rms_norm_eps", "rope_theta", "max_position_embeddings", "fused_norm")


def drafter_digest(weights_sha256: str, spec: DrafterSpec | dict[str, Any]) -> str:
    """sha256 over a drafter's weights (their file's sha256) and the layer ids and shapes they
    were trained with (:data:`DIGEST_FIELDS` of its spec): ``provenance.json``'s
    ``drafter_sha256``. A hand edit of the ids in ``config.json`` (and ``provenance.json``'s
    ``layers``) leaves the weights' sha256 valid but not this digest, so :func:`load_drafter`
    refuses such a drafter instead of feeding it other layers than it learned from.

    >>> from dataclasses import replace
    >>> s = DrafterSpec(32, 64, 4, 2, 8, 128, 16, 1e-6, 1e4, 256, (1, 2, 3), 4, 32)
    >>> drafter_digest("0" * 64, s) == drafter_digest("0" * 64, replace(s, layers=(0, 2, 3)))
    False
    """
    import hashlib

    doc = {"weights_sha256": weights_sha256, **_digest_fields(spec)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _digest_fields(spec: DrafterSpec | dict[str, Any]) -> dict[str, Any]:
    """The :data:`DIGEST_FIELDS` of a spec (or of the spec ``provenance.json`` records), layer ids as a list."""
    fields = asdict(spec) if isinstance(spec, DrafterSpec) else dict(spec)
    out = {k: fields.get(k) for k in DIGEST_FIELDS}
    out["layers"] = [int(i) for i in out["layers"] or []]
    return out


def check_provenance(prov: dict[str, Any], path: Path) -> dict[str, Any]:
    """``provenance.json``'s fields that loading reads, checked for their types: raises
    :class:`DrafterError` naming the file, the field, the value and the fix (a ``"layers":
    "2,15,27"`` string is named as such, not read character by character)."""
    import re

    fix = "the file was edited or damaged: restore it, or retrain the drafter with `wave train-draft`"

    def bad(name: str, want: str) -> DrafterError:
        return DrafterError(f'{path}: field "{name}" is {json.dumps(prov[name])[:60]}, not {want}; {fix}')

    for name in ("weights_sha256", "drafter_sha256"):
        if name in prov and not (isinstance(prov[name], str) and re.fullmatch(r"[0-9a-f]{64}", prov[name])):
            raise bad(name, "a sha256 (64 hex digits)")
    layers = prov.get("layers")
    if "layers" in prov and not (isinstance(layers, list) and layers and all(
            isinstance(i, int) and not isinstance(i, bool) for i in layers)):
        raise bad("layers", "a list of layer ids like [2, 15, 27]")
    for name, typ, want in (("spec", dict, "an object"), ("draft_config", dict, "an object"),
                            ("target_fingerprint", str, "a string"), ("capture_schema", int, "a whole number")):
        if name in prov and (not isinstance(prov[name], typ) or isinstance(prov[name], bool)):
            raise bad(name, want)
    spec_layers = (prov.get("spec") or {}).get("layers")
    if spec_layers is not None and not (isinstance(spec_layers, list) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in spec_layers)):
        raise DrafterError(f'{path}: field "spec.layers" is {json.dumps(spec_layers)[:60]}, not a list of layer ids; '
                           f"{fix}")
    return prov


def _check_trained_on(spec: DrafterSpec, provenance: dict[str, Any], have_sha256: str | None, cfg_path: Path,
                      prov_path: Path) -> None:
    """Refuse a drafter whose ``config.json`` names other layer ids (or shapes) than its weights
    were trained with: against the digest recorded with the weights (``drafter_sha256``), or,
    for a checkpoint written before it, against the spec ``provenance.json`` recorded."""
    ids = list(spec.layers)
    fix = "restore both files from the run that wrote the drafter, or retrain it with `wave train-draft`"
    recorded = provenance.get("spec") if isinstance(provenance.get("spec"), dict) else None
    want = provenance.get("drafter_sha256")
    if want and have_sha256:
        if drafter_digest(have_sha256, spec) == want:
            return
        if recorded is not None and drafter_digest(have_sha256, recorded) == want:
            trained = [int(i) for i in recorded.get("layers") or []]
            if trained != ids:
                raise DrafterError(f"{cfg_path} names layer ids {ids}, but this drafter's weights were trained on "
                                   f"{trained} (the digest recorded with them, drafter_sha256 in {prov_path}, says so): "
                                   f"it would be fed other layers than it learned from; {fix}")
            now, then = _digest_fields(spec), _digest_fields(recorded)
            changed = ", ".join(f"{k} {now[k]}, trained with {then[k]}" for k in DIGEST_FIELDS if now[k] != then[k])
            raise DrafterError(f"{cfg_path} has other values than this drafter's weights were trained with ({changed}: "
                               f"the digest recorded with them, drafter_sha256 in {prov_path}, says so); {fix}")
        raise DrafterError(f"{cfg_path} names layer ids {ids}, but the digest recorded when the weights were trained "
                           f"(drafter_sha256 in {prov_path}) does not match them with these weights: the ids, a size beside "
                           f"them, or the weights with their sha256 were edited; {fix}")
    if recorded is not None and recorded.get("layers") is not None and list(recorded["layers"]) != ids:
        raise DrafterError(f"{cfg_path} names layer ids {ids}, but {prov_path} records (spec.layers) that this drafter "
                           f"was trained on {list(recorded['layers'])}; its weights read those: {fix}")


def load_drafter(path: str | Path, target: Any = None) -> Eagle3Drafter:
    """Load a checkpoint written by :func:`save_drafter`.

    ``target`` (a :class:`~activation_wave.models.targets.Target` or a transformers model) supplies
    the frozen token embeddings, which the checkpoint does not store; without it the
    drafter can be inspected, and :func:`~activation_wave.decode.speculative.speculate` attaches
    the target it is given. A target whose fingerprint differs from the one recorded at
    training time raises, and so does a ``config.json`` whose layer ids or sizes are not those
    the weights were trained with (:func:`drafter_digest`), and weights whose sha256 differs from the one recorded in
    ``provenance.json`` (checkpoints written before the hash was recorded load unchecked),
    and a drafter trained on a schema-1 capture (``provenance["capture_schema"]`` absent or
    1) that reads index N, whose meaning changed with capture schema 2.
    """
    from safetensors.torch import load_file

    from safetensors import SafetensorError

    path = Path(path)
    if specforge_layout(path) is not None:  # saved by SpecForge (a run of `wave export --engine specforge`)
        return load_specforge_drafter(path, target)
    for name in ("model.safetensors", "config.json"):
        if not (path / name).exists():
            raise DrafterError(f"{path} has no {name}: not a drafter checkpoint (train one with `wave train-draft`)")
    prov_path = path / "provenance.json"
    provenance = _read_json(prov_path, "rewrite it by retraining with `wave train-draft`") if prov_path.exists() else {}
    weights = path / "model.safetensors"
    want = provenance.get("weights_sha256")
    from activation_wave.core.hashing import file_sha256

    check_provenance(provenance, prov_path)  # each field's type, before any is used
    have = file_sha256(weights) if want or provenance.get("drafter_sha256") else None
    if want and have != want:
        raise DrafterError(f"{weights} does not match the sha256 recorded in {prov_path} (corrupted, truncated or "
                           "modified); retrain the drafter with `wave train-draft` or restore the file")
    cfg = _read_json(path / "config.json", "restore it or retrain the drafter with `wave train-draft`")
    check_config_values(cfg, where=str(path / "config.json"), required=STUDY_CONFIG_SIZES,
                        fix="restore it or retrain the drafter with `wave train-draft`")
    try:
        spec = DrafterSpec.from_hf_config(cfg, where=str(path / "config.json"))
    except (KeyError, TypeError, ValueError) as exc:
        raise DrafterError(f"{path / 'config.json'} is not a drafter config ({type(exc).__name__}: {exc}); "
                           "restore it or retrain the drafter with `wave train-draft`") from None
    trained = provenance.get("layers")
    if trained is not None and trained != list(spec.layers):
        raise DrafterError(f"{path / 'config.json'} names layer ids {list(spec.layers)}, but {prov_path} records "
                           f"that this drafter was trained on {trained}; its weights read those: "
                           f"restore config.json (ids {trained}) or retrain with `wave train-draft`")
    if ("draft_config" in provenance and provenance.get("capture_schema", 1) < 2
            and spec.target_num_layers in spec.layers):
        raise DrafterError(f"{path} reads layer {spec.target_num_layers} = N and was trained on a capture of schema 1, "
                           "where index N held transformers' normed last hidden state; captures and the decoding loop "
                           "now use the last block's output before the final norm there (schema 2), so this drafter "
                           "would be fed other features than it learned: retrain it with `wave train-draft`")
    # The weights' header before any tensor: names (a vLLM export's fc_norm.{i} read back as the
    # study's fuse_norm.{i}) and shapes against config.json, so an edited size allocates nothing.
    shapes = {study_name(k): v for k, v in weight_shapes([weights]).items()}
    whole = spec.draft_vocab_size == spec.vocab_size
    if whole and "d2t" not in shapes and "t2d" not in shapes:  # a vLLM export of a whole-vocabulary drafter
        shapes.update({"d2t": (spec.vocab_size,), "t2d": (spec.vocab_size,)})
    if "d2t" not in shapes:
        raise DrafterError(f"{weights} has no d2t tensor: not an EAGLE-3 drafter written by `wave train-draft`")
    _check_state_shapes(spec, shapes, path / "config.json", weights)
    try:
        state = {study_name(k): v for k, v in load_file(str(weights)).items()}
    except SafetensorError as exc:
        raise DrafterError(f"{weights} cannot be read ({exc}): the file is truncated or corrupted; retrain the "
                           "drafter with `wave train-draft` or restore the file") from None
    if "d2t" not in state:  # whole vocabulary (checked above): the identity mapping vLLM assumes
        state.update(d2t=torch.zeros(spec.vocab_size, dtype=torch.long),
                     t2d=torch.ones(spec.vocab_size, dtype=torch.bool))
    bad = non_finite_tensors(state)
    if bad:
        raise DrafterError(f"{weights} holds non-finite weights ({bad_text(bad)}): its training diverged; retrain "
                           "with a lower learning rate, e.g. wave train-draft --set draft.lr=3e-4")
    d2t = state["d2t"].long()
    try:
        drafter = Eagle3Drafter(spec, d2t + torch.arange(len(d2t)))
    except (DrafterError, RuntimeError, IndexError) as exc:
        raise DrafterError(f"{path / 'config.json'} does not match {weights} (d2t of {len(d2t)} tokens: {exc}); "
                           "restore config.json or retrain with `wave train-draft`") from None
    # last, after the weights' own checks named what they can: ids or sizes that fit the weights' shapes
    _check_trained_on(spec, provenance, have, path / "config.json", prov_path)
    drafter.load_state_dict(state, strict=False)
    if "embed_tokens.weight" in state:
        drafter._has_embeddings = True
    drafter.provenance = provenance
    if target is not None:
        model = getattr(target, "model", target)
        n = getattr(text_config(model.config), "num_hidden_layers", None)
        if n is not None and int(n) != spec.target_num_layers:
            raise DrafterError(f"{path / 'config.json'} is for a target with N = {spec.target_num_layers} decoder "
                               f"blocks, but the given target has N = {n}: load the matching target (--model) or "
                               "retrain the drafter on this one")
        drafter.ensure_target(target)
        drafter.attach_target(getattr(target, "model", target))
    return drafter.eval()


def expected_state_shapes(spec: DrafterSpec) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor a checkpoint of a head with ``spec`` holds (no embedding),
    from the spec alone (no weights built: an 8B target's head is checked without allocating it).

    >>> s = DrafterSpec(32, 64, 4, 2, 8, 128, 16, 1e-6, 1e4, 256, (1, 2, 3), 4, 32)
    >>> expected_state_shapes(s)["fc.weight"], expected_state_shapes(s)["midlayer.self_attn.k_proj.weight"]
    ((32, 96), (16, 64))
    """
    H, T, I = spec.hidden_size, spec.target_hidden_size, spec.intermediate_size
    q, kv = spec.num_attention_heads * spec.head_dim, spec.num_key_value_heads * spec.head_dim
    out = {"fc.weight": (H, spec.k * T), "norm.weight": (H,), "lm_head.weight": (spec.draft_vocab_size, H),
           "d2t": (spec.draft_vocab_size,), "t2d": (spec.vocab_size,),
           "midlayer.input_layernorm.weight": (H,), "midlayer.hidden_norm.weight": (H,),
           "midlayer.self_attn.q_proj.weight": (q, 2 * H), "midlayer.self_attn.k_proj.weight": (kv, 2 * H),
           "midlayer.self_attn.v_proj.weight": (kv, 2 * H), "midlayer.self_attn.o_proj.weight": (H, q),
           "midlayer.post_attention_layernorm.weight": (H,), "midlayer.mlp.gate_proj.weight": (I, H),
           "midlayer.mlp.up_proj.weight": (I, H), "midlayer.mlp.down_proj.weight": (H, I)}
    if spec.fused_norm:
        out.update({f"fuse_norm.{i}.weight": (T,) for i in range(spec.k)})
    return out


# ----------------------------------------------------------------------------- SpecForge's layout
#
# SpecForge 0.2.0 (read from its wheel) saves a training run as ``{output_dir}/{run_id}-step{N}/
# training_state.pt`` (specforge/training/checkpoint.py: a torch pickle whose ``draft_state_dict``
# holds the draft weights without the ``draft_model.`` prefix and without the frozen embedding,
# specforge/training/strategies/base.py), with a ``{run_id}-latest`` link beside them; the draft
# config is not in it (its exporters take ``--draft-config``). ``specforge export --to sglang|hf``
# writes a draft directory: ``config.json`` (the draft config through transformers'
# ``save_pretrained``) and ``model.safetensors`` (bf16; ``--to hf`` adds ``embed_tokens.weight``).
# The weight names are the study's (specforge/export/to_sglang.py: the map is the identity for
# LlamaForCausalLMEagle3) except the per-layer norms before fc, ``fc_norm.{i}`` for the study's
# ``fuse_norm.{i}``; the module computes what :class:`Eagle3Drafter` computes
# (specforge/modeling/draft/llama3_eagle.py; tests/test_specforge.py runs both on one input).

#: SpecForge's training-checkpoint file.
SPECFORGE_STATE_FILE = "training_state.pt"
#: The manifest of a run folder written by `wave export --engine specforge` (engines/specforge.py).
SPECFORGE_RUN_MANIFEST = "specforge_run.json"
#: The block the study adds to the draft config it writes for SpecForge (the target's N, the ids);
#: transformers keeps unknown keys, so ``specforge export`` carries it into the exported config.json.
SPECFORGE_EXPORT_KEY = "activation_wave_export"


def _json_object(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object, or None when it is absent, unreadable or not an object (a detector's read)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def specforge_layout(path: str | Path) -> str | None:
    """Which of SpecForge's layouts ``path`` is: ``"state"`` (a training checkpoint: a
    ``training_state.pt``, a ``{run_id}-step{N}`` folder, SpecForge's ``output_dir``, or a run
    folder written by `wave export --engine specforge`), ``"export"`` (a ``specforge export``
    folder: an EAGLE-3 ``config.json`` without the study's ``activation_wave`` block), or None
    (the study's own layout, or no checkpoint at all). Reads names and JSON only; never raises."""
    path = Path(path)
    if path.is_file():
        return "state" if path.name == SPECFORGE_STATE_FILE else None
    if not path.is_dir():
        return None
    if (path / SPECFORGE_STATE_FILE).is_file():
        return "state"
    cfg = _json_object(path / "config.json")
    if cfg is not None:  # the study's own checkpoints name it in config.json and carry provenance.json
        ours = "activation_wave" in cfg or (path / "provenance.json").exists()
        eagle = cfg.get("architectures") == [ARCHITECTURE]
        weights = (path / "model.safetensors").is_file() or (path / "model.safetensors.index.json").is_file()
        return "export" if eagle and not ours and weights else None
    if (path / SPECFORGE_RUN_MANIFEST).is_file():
        return "state"
    try:
        return "state" if any((c / SPECFORGE_STATE_FILE).is_file() for c in path.iterdir()
                              if re.search(r"-(latest|step\d+)$", c.name)) else None
    except OSError:
        return None


def _specforge_weights(folder: Path) -> list[Path]:
    """The safetensors files of an exported draft folder: ``model.safetensors``, or the shards
    its ``model.safetensors.index.json`` names, each a plain file name inside ``folder`` (an
    index naming ``../other/model.safetensors``, or a value that is not a file name, is
    refused). Raises :class:`DrafterError` naming the index and the fix."""
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    index_path = folder / "model.safetensors.index.json"
    fix = "export the checkpoint again (specforge export --to sglang)"
    index = _read_json(index_path, fix)
    wmap = index.get("weight_map")
    if not isinstance(wmap, dict) or not wmap:
        raise DrafterError(f'{index_path} has no "weight_map" object of tensor names and files; {fix}')
    for key, name in wmap.items():
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise DrafterError(f'{index_path}: weight_map["{key}"] is {json.dumps(name)[:80]}, not the name of a file '
                               f"in {folder} (shards are read from the checkpoint's own folder only); {fix}")
    out = []
    for name in sorted(set(wmap.values())):
        f = folder / name  # a plain name: in the folder (a link there is the user's own, as in the HF cache)
        if not f.is_file():
            raise DrafterError(f"{index_path} names {name}, which is missing from {folder}; {fix}")
        out.append(f)
    return out


def _run_manifest(start: Path, levels: int = 4) -> tuple[Path, dict[str, Any]] | None:
    """The run folder (and its manifest) holding ``start``: ``start`` or one of its parents."""
    for folder in [start, *start.parents][:levels + 1]:
        doc = _json_object(folder / SPECFORGE_RUN_MANIFEST)
        if doc is not None:
            return folder, doc
    return None


def specforge_state_file(path: str | Path) -> Path:
    """The ``training_state.pt`` that ``path`` names, resolved as SpecForge's exporter does
    (specforge/export/checkpoint_io.py ``resolve_training_state``): the file itself, a
    ``{run_id}-step{N}`` folder, or an ``output_dir`` through its one ``{run_id}-latest`` link,
    else its highest step; a run folder of `wave export --engine specforge` through its
    manifest's ``output_dir``. Raises :class:`DrafterError` naming the fix."""
    path = Path(path)
    if path.is_file():
        return path
    if (path / SPECFORGE_STATE_FILE).is_file():
        return path / SPECFORGE_STATE_FILE
    manifest = _json_object(path / SPECFORGE_RUN_MANIFEST)
    if manifest is not None:
        out = path / str((manifest.get("run") or {}).get("output_dir", "outputs"))
        if not out.is_dir():
            raise DrafterError(f"{path} is a SpecForge run folder with no checkpoint yet ({out} does not exist): run "
                               f"its launch.sh (training writes {out}), then pass --draft {path}")
        path = out
    latest = sorted({_resolve(c) for c in path.glob("*-latest") if (_resolve(c) / SPECFORGE_STATE_FILE).is_file()})
    if len(latest) > 1:
        raise DrafterError(f"{path} holds several SpecForge runs ({[p.name for p in latest]}); pass one "
                           "{run_id}-step{N} folder as --draft")
    if latest:
        return latest[0] / SPECFORGE_STATE_FILE
    steps: dict[str, list[tuple[int, Path]]] = {}
    for c in path.glob("*-step*"):
        m = re.fullmatch(r"(.+)-step(\d+)", c.name)
        if m and (c / SPECFORGE_STATE_FILE).is_file():
            steps.setdefault(m.group(1), []).append((int(m.group(2)), c))
    if len(steps) > 1:
        raise DrafterError(f"{path} holds checkpoints of several SpecForge runs ({sorted(steps)}); pass one "
                           "{run_id}-step{N} folder as --draft")
    if not steps:
        raise DrafterError(f"{path} holds no SpecForge checkpoint ({{run_id}}-step{{N}}/{SPECFORGE_STATE_FILE}); "
                           "pass the run's output_dir or one of its step folders")
    return max(next(iter(steps.values())))[1] / SPECFORGE_STATE_FILE


def _resolve(link: Path) -> Path:
    """``link`` resolved, or :class:`DrafterError` naming a loop of links and the fix."""
    try:
        return link.resolve()
    except (OSError, RuntimeError) as exc:
        raise DrafterError(f"{link} is a loop of symbolic links ({_first_line(exc)}); remove it or point it at one "
                           "{run_id}-step{N} folder (ln -sfn <step folder> " + f"{link})") from None


def specforge_draft_config(state_file: Path) -> Path:
    """The draft config of a SpecForge training checkpoint, which the checkpoint does not
    store: ``config.json`` beside it (where SpecForge would put one), else the draft config
    named by the manifest of the run folder it sits in (`wave export --engine specforge`)."""
    if (state_file.parent / "config.json").is_file():
        return state_file.parent / "config.json"
    found = _run_manifest(state_file.parent)
    if found is not None:
        folder, manifest = found
        name = (manifest.get("files") or {}).get("draft_config") or "draft_config.json"
        if (folder / name).is_file():
            return folder / name
    raise DrafterError(f"{state_file} has no draft config beside it and is not inside a run folder of `wave export "
                       "--engine specforge`: export it with SpecForge first (specforge export --to sglang --checkpoint "
                       f"{state_file.parent} --draft-config <its draft config .json> --output-dir <new folder>) and "
                       "pass that folder as --draft")


def specforge_spec(cfg: dict[str, Any], *, where: str, n_layers: int | None = None) -> DrafterSpec:
    """The :class:`DrafterSpec` of a SpecForge EAGLE-3 draft config (``LlamaForCausalLMEagle3``).

    Layer ids: the top-level ``eagle_aux_hidden_state_layer_ids`` (hidden_states indices) and/or
    the nested ``eagle_config`` ids SpecForge reads (index - 1), checked to agree. The target's N:
    ``n_layers`` (the given target's), else the study's ``activation_wave_export`` block, else
    the smallest N the ids allow (a drafter inspected without its target). Raises
    :class:`DrafterError` for what the study's drafter does not compute: another architecture,
    more than one decoder layer, an activation other than SiLU, ``norm_output`` off, or a RoPE
    scaling other than Llama 3's."""
    from activation_wave.core.layers import check_layers, read_layer_ids

    fix = "give a SpecForge EAGLE-3 draft (LlamaForCausalLMEagle3, one decoder layer)"
    if cfg.get("architectures") != [ARCHITECTURE]:
        raise DrafterError(f"{where}: architectures {cfg.get('architectures')!r} is not [{ARCHITECTURE!r}]; {fix}")
    check_config_values(cfg, where=where, required=("hidden_size", "intermediate_size", "num_attention_heads",
                                                    "vocab_size"),
                        fix="fix that field, or export the checkpoint again (specforge export --to sglang)")
    ours = cfg.get(SPECFORGE_EXPORT_KEY) or {}
    recorded = ours.get("target_num_hidden_layers") if isinstance(ours, dict) else None
    if recorded is not None and (isinstance(recorded, bool) or not isinstance(recorded, int) or recorded < 1):
        raise DrafterError(f'{where}: "{SPECFORGE_EXPORT_KEY}.target_num_hidden_layers" is {json.dumps(recorded)[:40]}, '
                           "not a whole number >= 1; restore the run's draft config (wave export --engine specforge "
                           "writes it)")
    problems = []
    if cfg.get("num_hidden_layers", 1) != 1:
        problems.append(f"{cfg.get('num_hidden_layers')} decoder layers (the study's drafter has one)")
    if cfg.get("hidden_act", "silu") != "silu":
        problems.append(f"activation {cfg.get('hidden_act')!r} (the study's drafter uses silu)")
    if cfg.get("norm_output", True) is not True:
        problems.append("norm_output off (the study's drafter norms before lm_head)")
    if problems:
        raise DrafterError(f"{where}: this SpecForge draft is not the study's EAGLE-3 head: {'; '.join(problems)}; "
                           "serve it in SpecForge's engine (SGLang) instead")
    try:  # the layer ids' own messages name the file, the value and the fix: raised as they are
        layers = read_layer_ids(cfg, where=where)
        n = int(n_layers or recorded or max(layers) + 1)
        layers = check_layers(layers, n, what=f"{where}: layer ids")
    except ValueError as exc:
        raise DrafterError(str(exc)) from None
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
        theta = float(cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0)
        return DrafterSpec(
            hidden_size=hidden, intermediate_size=int(cfg["intermediate_size"]), num_attention_heads=heads,
            num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads), vocab_size=int(cfg["vocab_size"]),
            draft_vocab_size=int(cfg.get("draft_vocab_size") or cfg["vocab_size"]),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)), rope_theta=theta,
            max_position_embeddings=int(cfg.get("max_position_embeddings", 4096)), layers=tuple(layers),
            target_num_layers=n, target_hidden_size=int(cfg.get("target_hidden_size") or hidden),
            fused_norm=bool(cfg.get("fc_norm", False)), rope_scaling=_rope_scaling(cfg, where=where))
    except (KeyError, TypeError, ValueError) as exc:
        raise DrafterError(f"{where} is not a SpecForge draft config the study can read ({type(exc).__name__}: "
                           f"{exc}); {fix}") from None


def _specforge_state(kind: str, path: Path) -> tuple[dict[str, Tensor], Path, dict[str, Any]]:
    """(draft weights, draft config path, training metadata) of a SpecForge checkpoint or export."""
    if kind == "export":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        state: dict[str, Tensor] = {}
        shards = _specforge_weights(path)
        weight_shapes(shards)  # every header readable before any tensor is read
        for f in shards:  # what is on disk, no more: the config's sizes are checked before the drafter is built
            try:
                state.update(load_file(str(f)))
            except (SafetensorError, OSError) as exc:
                raise DrafterError(f"{f} cannot be read ({_first_line(exc)}): truncated or corrupted; export the "
                                   "checkpoint again (specforge export --to sglang)") from None
        return state, path / "config.json", {}
    state_file = specforge_state_file(path)
    try:  # weights_only: tensors and plain values, never arbitrary pickled objects
        payload = torch.load(state_file, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a bad or hostile pickle
        raise DrafterError(f"{state_file} cannot be read as a SpecForge checkpoint of tensors and plain values "
                           f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); export it with SpecForge "
                           "(specforge export --to sglang) and pass that folder as --draft") from None
    weights = payload.get("draft_state_dict") if isinstance(payload, dict) else None
    if not isinstance(weights, dict):
        raise DrafterError(f"{state_file} has no draft_state_dict: not a SpecForge 0.2.0 training checkpoint")
    meta = {k: payload.get(k) for k in ("run_id", "strategy", "global_step", "epoch", "world_size")}
    return weights, specforge_draft_config(state_file), {**meta, "state_file": str(state_file)}


def load_specforge_drafter(path: str | Path, target: Any = None, *, n_layers: int | None = None) -> Eagle3Drafter:
    """Load an EAGLE-3 draft that SpecForge saved (:func:`specforge_layout`) as the study's
    :class:`Eagle3Drafter`: the config checked (:func:`check_config_values`) and mapped by
    :func:`specforge_spec`, the tensors' shapes checked against it before the drafter is built,
    ``fc_norm.{i}`` renamed ``fuse_norm.{i}``, weights in fp32, the draft vocabulary from ``d2t``
    (checked against ``t2d``), the frozen embedding from ``target`` as for the study's own
    checkpoints (an exported one is used only while no target is given). The target's N is the
    given target's, else ``n_layers``, else the one the draft config records, else guessed as
    max id + 1 (``provenance["target_num_layers_from"]`` says which: "target", "n_layers",
    "draft config", "guessed"). ``provenance["format"]`` is ``"specforge"``."""
    path = Path(path)
    kind = specforge_layout(path)
    if kind is None:
        raise DrafterError(f"{path} is not a checkpoint in SpecForge's layout (training_state.pt or a `specforge "
                           "export` folder)")
    raw, cfg_path, meta = _specforge_state(kind, path)
    cfg = _read_json(cfg_path, "restore the run's draft config (wave export --engine specforge writes it)")
    model = getattr(target, "model", target)
    n = getattr(text_config(model.config), "num_hidden_layers", None) if model is not None else n_layers
    ours = (cfg.get(SPECFORGE_EXPORT_KEY) or {}).get("target_num_hidden_layers") \
        if isinstance(cfg.get(SPECFORGE_EXPORT_KEY), dict) else None
    if n is not None and isinstance(ours, int) and not isinstance(ours, bool) and ours != int(n):
        raise DrafterError(f"{cfg_path} is for a target with N = {ours} decoder blocks, but the given target has "
                           f"N = {n}: load the matching target (--model)")
    spec = specforge_spec(cfg, where=str(cfg_path), n_layers=None if n is None else int(n))
    n_from = "target" if model is not None else "n_layers" if n_layers is not None else \
        "draft config" if ours is not None else "guessed"
    state = {study_name(k): v for k, v in raw.items()}
    if "d2t" not in state or "t2d" not in state:
        raise DrafterError(f"{path}: the SpecForge checkpoint has no d2t/t2d vocabulary mapping; export it with "
                           "--vocab-mapping <the run's vocab_mapping.pt>")
    # the shapes against the config before anything is built or converted: an edited size allocates nothing
    _check_state_shapes(spec, {k: tuple(v.shape) for k, v in state.items()}, cfg_path, path)
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    d2t, t2d = state["d2t"].long(), state["t2d"].bool()
    ids = d2t + torch.arange(len(d2t))
    if t2d.numel() != spec.vocab_size or len(ids) != spec.draft_vocab_size or int(t2d.sum()) != len(ids) \
            or not bool(t2d[ids.clamp(0, max(t2d.numel() - 1, 0))].all()):
        raise DrafterError(f"{path}: d2t ({len(ids)} draft tokens) and t2d ({int(t2d.sum())} of {t2d.numel()} target "
                           f"tokens) do not describe one draft vocabulary of {spec.draft_vocab_size} tokens (a run "
                           "whose vocabulary mapping was never installed?); export it with --vocab-mapping")
    try:
        drafter = Eagle3Drafter(spec, ids)
    except (DrafterError, RuntimeError, IndexError) as exc:
        raise DrafterError(f"{cfg_path} does not match {path} (d2t of {len(ids)} tokens: {exc})") from None
    bad = non_finite_tensors(state)
    if bad:
        raise DrafterError(f"{path} holds non-finite weights ({bad_text(bad)}): its training diverged")
    drafter.load_state_dict({k: v for k, v in state.items() if not k.startswith("embed_tokens")}, strict=False)
    emb = state.get("embed_tokens.weight")
    if emb is not None and tuple(emb.shape) == tuple(drafter.embed_tokens.weight.shape):
        with torch.no_grad():
            drafter.embed_tokens.weight.copy_(emb)
        drafter._has_embeddings = True
    run = _run_manifest(cfg_path.parent)
    drafter.provenance = {"format": "specforge", "source": str(path), "layout": kind, "draft_config": str(cfg_path),
                          "layers": list(spec.layers), "specforge": meta, "target_num_layers_from": n_from,
                          "run": None if run is None else {k: run[1].get(k) for k in ("target", "layers", "created")}}
    if model is not None:
        drafter.attach_target(model)
    return drafter.eval()
