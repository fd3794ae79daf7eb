"""Speculative decoding with an EAGLE-3 head, its baselines, and its offline twin.

**Online** (:func:`speculate`), one prompt at a time (batch 1, as in the EAGLE papers):

* prefill: one target forward over the prompt gives the first token and the hidden
  states of every prompt position; the head reads them into its own KV cache;
* each round: the head drafts ``depth`` tokens (a chain), or an EAGLE-2-style dynamic
  tree of ``tree_size`` tokens (top-``tree_topk`` expansion per level, reranked by
  cumulative draft log-probability); the target checks the last committed token plus the
  whole draft in **one** forward with its KV cache (a tree uses a 4-D ancestor mask and
  depth positions); rejected positions are cut from both caches; the hidden states the
  target computed for accepted tokens become the head's next features.

Lossless: at T = 0 a draft token is accepted iff it equals the target's argmax, and the
bonus token is the target's argmax after the accepted prefix, so the output is plain
greedy decoding token for token (up to floating-point ties: a multi-token verify runs
different matmul shapes than one-token steps). At T > 0 chains use the standard rule:
accept draft ``d ~ q`` with probability ``min(1, p(d)/q(d))``, otherwise resample from
``norm(max(0, p - q))``; a full accept adds a bonus token from ``p``. This samples
exactly from the target's ``p`` (softmax of logits / T, no top-k/top-p). Trees at T > 0
would need the multi-candidate recursive rejection rule; this module falls back to a
chain at T > 0 and says so in ``SpecResult.notes``.

**tau** = generated tokens per target verify forward (accepted drafts + the bonus
token; the prefill token is not counted), the "mean accepted length" of the EAGLE papers.
``acceptance_by_position[i]`` = share of rounds that drafted position ``i + 1`` and
accepted it (with all earlier ones).

**Offline** (:func:`offline_acceptance`): at T = 0 the target's continuation is its
cached greedy response, so the rounds of an online run can be replayed with head
forwards only (:meth:`Eagle3Drafter.unroll` gives every chain at once), comparing drafts
to the cached ``top1``. The same stop and depth rules are applied, so ``tau_offline``
should match the online tau on the same prompts up to rare numerical ties.

**Baselines** (:func:`plain_generate`, :func:`prompt_lookup_generate`): transformers'
``generate`` (greedy or pure-temperature sampling) and prompt-lookup decoding, same
prompts, ``max_new_tokens`` and stop rule, timed the same way.

**Cost model** (:func:`measure_costs`, :func:`cost_model`): a round costs one verify of
``depth + 1`` tokens plus ``depth`` head steps; with a plain step costing ``t1`` the
predicted speedup is ``tau * t1 / t_round`` and its ceiling ``(depth + 1) * t1 / t_round``.

**Kernels** (:func:`set_kernels`, ``SpecConfig.kernels``): on a CPU a verify of a few
tokens is not free. With transformers' own kernels a 5-token forward of SmolLM2-135M
cost ~1.7x a one-token step here: MKL's small-batch fp32 GEMM is slow for 2-8 rows, and
the ``sdpa`` path copies K/V to every query head whenever a mask is given. ``"fast"``
packs the weights for MKL's small-batch kernel and folds grouped query heads instead of
copying K/V; outputs are unchanged (attention bit for bit, linears to ~1e-6), and plain
decoding runs on the same switched model. bf16 would make a 16-token forward cost about
one step, but it is not usable for a lossless claim: bf16 multi-token forwards round
differently from one-token steps and greedy outputs diverged on 4 of 8 prompts.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .capture import CaptureCache
from .config import SpecConfig
from .data import eos_ids
from .drafter import DraftKV, Eagle3Drafter
from .models import Target
from .training import collate, load_records, make_batches, threads

__all__ = ["SpecResult", "speculate", "plain_generate", "prompt_lookup_generate", "offline_acceptance",
           "measure_costs", "cost_model", "speculative_sample", "eos_ids", "set_kernels", "PackedLinear"]


# ----------------------------------------------------------------------------- results


@dataclass
class SpecResult:
    """Outcome of one decoding method over a list of prompts."""

    method: str  # eagle3-chain | eagle3-tree | plain-hf | plain-loop | prompt-lookup
    temperature: float
    depth: int
    n_prompts: int
    new_tokens: int  # generated tokens, all prompts
    target_forwards: int  # verify forwards (prefill not counted); 0 where unknown
    tau: float  # tokens per verify forward (nan where unknown)
    acceptance_by_position: list[float]  # P(draft i+1 accepted | drafted), i = 0..depth-1
    accept_hist: list[int]  # rounds with 0..depth accepted drafts
    tokens_per_s: float
    wall_s: float
    per_prompt: list[dict[str, Any]] = field(default_factory=list)  # id, token_ids, wall_s, rounds, accepted/drafted per round
    layers: list[int] | None = None
    tree_size: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A strict-JSON-able dict (NaN -> None); ``json.dumps(res.to_json())`` writes it."""
        return _jsonable(asdict(self))

    def dumps(self, **kw: Any) -> str:
        return json.dumps(self.to_json(), **kw)

    @property
    def token_ids(self) -> list[list[int]]:
        return [p["token_ids"] for p in self.per_prompt]


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _summarise(method: str, temperature: float, depth: int, per_prompt: list[dict[str, Any]],
               hist: list[int], drafted: list[int], accepted: list[int], **extra: Any) -> SpecResult:
    new = sum(len(p["token_ids"]) for p in per_prompt)
    wall = sum(p["wall_s"] for p in per_prompt)
    rounds = sum(p.get("rounds", 0) for p in per_prompt)
    tau = (new - len(per_prompt)) / rounds if rounds else float("nan")
    acc = [a / d if d else float("nan") for a, d in zip(accepted, drafted)]
    return SpecResult(method=method, temperature=temperature, depth=depth, n_prompts=len(per_prompt),
                      new_tokens=new, target_forwards=rounds, tau=tau, acceptance_by_position=acc,
                      accept_hist=hist, tokens_per_s=new / wall if wall else float("nan"), wall_s=wall,
                      per_prompt=per_prompt, **extra)


# ----------------------------------------------------------------------------- target plumbing


def _cache_kw(model: Any) -> str:
    """transformers >= 5 names the KV-cache argument ``cache``; older ones ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()


def _forward(model: Any, ids: Tensor, cache: Any, kw: str, *, position_ids: Tensor | None = None,
             mask: Tensor | None = None, logits_to_keep: int = 0) -> Any:
    """One target forward over ids [1, m] appended to ``cache``, with all hidden states
    (index N before the final norm, as in the capture: :func:`~activation_wave.capture.last_block_output`)."""
    from .capture import engine_hidden_states, last_block_output

    args: dict[str, Any] = {"input_ids": ids, kw: cache, "use_cache": True, "output_hidden_states": True}
    if position_ids is not None:
        args["position_ids"] = position_ids
    if mask is not None:
        args["attention_mask"] = mask
    if logits_to_keep:
        args["logits_to_keep"] = logits_to_keep
    with last_block_output(model) as box:
        out = model(**args)
    out.hidden_states = engine_hidden_states(out.hidden_states, box)
    return out


def _cache_len(cache: Any) -> int:
    return int(cache.get_seq_length())


def _crop(cache: Any, length: int) -> None:
    """Drop every cached position from ``length`` on (negative crop works in old and new APIs)."""
    extra = _cache_len(cache) - length
    if extra > 0:
        cache.crop(-extra)


def _keep_rows(cache: Any, start: int, rows: Sequence[int]) -> None:
    """Keep positions ``[0, start)`` and ``start + rows`` of a dynamic cache (tree acceptance)."""
    if list(rows) == list(range(len(rows))):
        _crop(cache, start + len(rows))
        return
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise NotImplementedError("tree verification needs a transformers DynamicCache with .layers "
                                  "(transformers >= 4.56); use chain drafting (spec.tree_topk=0)")
    idx = torch.cat([torch.arange(start), start + torch.as_tensor(list(rows))])
    for layer in layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        i = idx.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, i)
        layer.values = layer.values.index_select(-2, i)


def _features(drafter: Eagle3Drafter, hidden_states: Sequence[Tensor], rows: Tensor | slice | None = None) -> Tensor:
    """Fused head features [1, m, H] from the target's hidden-state tuple (rows of the last forward)."""
    h = torch.cat([hidden_states[i] for i in drafter.spec.layers], dim=-1)
    if rows is not None:
        h = h[:, rows]
    return drafter.fuse(h.to(device=drafter.fc.weight.device, dtype=drafter.fc.weight.dtype))


# ----------------------------------------------------------------------------- faster small-batch linears


class PackedLinear(torch.nn.Module):
    """``y = x W^T`` through MKL's packed GEMM: same result as ``nn.Linear`` to ~1e-6.

    A verify forward multiplies a handful of rows (``depth + 1``) by every weight matrix.
    On this CPU (1 thread) ``F.linear`` took 1.7x a one-token step for 5 rows; with
    weights packed once for MKL's small-batch kernel, 1.35x (``measure_costs``). Keeps
    the original ``weight`` so the swap can be undone.
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
    same mask object comes back (every layer of one forward gets the same mask; tiling
    it once instead of 30 times saves ~2 ms of a verify here)."""
    if _LAST_TILED[0] is not mask or _LAST_TILED[1].shape[2] != g * mask.shape[2]:
        _LAST_TILED[:] = [mask, mask.repeat(1, 1, g, 1)]
    return _LAST_TILED[1]


def _gqa_packed_sdpa(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                     dropout: float = 0.0, scaling: float | None = None, is_causal: bool | None = None,
                     **kwargs: Any) -> tuple[Tensor, None]:
    """SDPA for grouped-query attention with a mask, without copying keys and values.

    transformers' ``sdpa`` path repeats K/V to every query head as soon as a mask is
    given (any forward of more than one token with a cache): 30 layers x [1, 9, ctx, 64]
    copies, ~16 ms of a ~60 ms step here. Folding each group's query heads onto the query
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


def _prepare(target: Target, cfg: SpecConfig) -> str:
    """Apply ``cfg.kernels`` to the target (idempotent); describe what is in effect."""
    k = set_kernels(target.model, cfg.kernels)
    return f"linear={k['linear']}, attention={k['attention']}"


# ----------------------------------------------------------------------------- the accept rule


def speculative_sample(p_logits: Tensor, q: Tensor, drafts: Sequence[int], temperature: float,
                       gen: torch.Generator | None = None) -> tuple[int, int]:
    """Standard speculative sampling for a chain (Leviathan et al. 2023; Chen et al. 2023).

    Args:
        p_logits: [D+1, V] target logits at the last committed token and each draft.
        q: [D, V] draft probabilities over the target vocabulary (0 outside the draft
            vocabulary) from which ``drafts`` were sampled.
        drafts: D draft token ids.
        temperature: > 0; ``p = softmax(p_logits / temperature)``.

    Returns ``(n_accepted, next_token)``; the emitted tokens ``drafts[:n] + [next]`` are
    distributed exactly as ``n + 1`` tokens sampled from ``p`` one by one.
    """
    p = torch.softmax(p_logits.float() / temperature, dim=-1)
    for i, d in enumerate(drafts):
        pd, qd = float(p[i, d]), float(q[i, d])
        u = float(torch.rand((), generator=gen))
        if qd > 0 and u * qd < pd:  # u < min(1, p/q) without dividing
            continue
        resid = (p[i] - q[i]).clamp(min=0)
        total = float(resid.sum())
        if total <= 0:  # p == q: rejection has probability 0; guard rounding
            resid, total = p[i], 1.0
        return i, int(torch.multinomial(resid / total, 1, generator=gen))
    return len(drafts), int(torch.multinomial(p[len(drafts)], 1, generator=gen))


def _pick(logits: Tensor, temperature: float, gen: torch.Generator | None) -> int:
    """Target token from logits [V]: argmax at T = 0, else a sample of softmax(logits / T)."""
    if temperature <= 0:
        return int(logits.argmax())
    return int(torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1, generator=gen))


# ----------------------------------------------------------------------------- online decoding


@dataclass
class _Stats:
    depth: int
    hist: list[int] = field(init=False)
    drafted: list[int] = field(init=False)
    accepted: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.hist = [0] * (self.depth + 1)
        self.drafted = [0] * self.depth
        self.accepted = [0] * self.depth

    def add(self, n_drafted: int, n_accepted: int) -> None:
        self.hist[n_accepted] += 1
        for i in range(n_drafted):
            self.drafted[i] += 1
            self.accepted[i] += int(i < n_accepted)


def _finish(tokens: list[int], new: Sequence[int], stop: set[int], max_new: int) -> bool:
    """Append ``new`` to ``tokens`` up to the first stop token / the limit; True when done."""
    for t in new:
        tokens.append(int(t))
        if t in stop or len(tokens) >= max_new:
            return True
    return False


def _draft_chain(drafter: Eagle3Drafter, o_last: Tensor, c: int, depth: int, dc: DraftKV, temperature: float,
                 gen: torch.Generator | None, threshold: float = 0.0) -> tuple[list[int], Tensor | None]:
    """Draft up to ``depth`` tokens from the head output o_last [1, 1, H] at position c - 1.

    Drafting stops early when the product of the head's probabilities of the drafted
    tokens falls below ``threshold`` (a dynamic draft length: a draft whose chain is
    unlikely to be accepted costs verify time and rarely pays). Returns target ids and,
    at T > 0, their proposal distributions q [n, V].
    """
    drafts: list[int] = []
    qs: list[Tensor] = []
    V = drafter.spec.vocab_size
    cum = 1.0
    for i in range(depth):
        lg = drafter.logits(o_last)[0, 0].float()  # [Vd]
        if temperature <= 0:
            d = int(lg.argmax())
            if threshold > 0:
                cum *= float(torch.softmax(lg, -1)[d])
        else:
            qd = torch.softmax(lg / temperature, -1)
            d = int(torch.multinomial(qd, 1, generator=gen))
            cum *= float(qd[d])
        if cum < threshold:
            break
        if temperature > 0:
            q = torch.zeros(V)
            q[drafter.draft_to_target.cpu()] = qd.cpu()
            qs.append(q)
        tid = int(drafter.draft_to_target[d])
        drafts.append(tid)
        if i + 1 < depth:  # entry (o_{c-1+i}, d_{i+1}) at position c + i predicts the next draft
            o_last = drafter.step(o_last, torch.tensor([[tid]]), torch.tensor([c + i]), dc)
    return drafts, (torch.stack(qs) if qs else None)


def _draft_tree(drafter: Eagle3Drafter, o_root: Tensor, c: int, depth: int, topk: int, size: int,
                dc: DraftKV) -> tuple[list[int], list[int], list[int]]:
    """EAGLE-2-style dynamic tree from the head output o_root [1, 1, H] at position c - 1.

    Level 1 holds the top-``topk`` tokens; each next level expands the ``topk`` best nodes
    (cumulative draft log-prob) of the previous one, each into its top-``topk`` children.
    The ``size`` best nodes overall are kept (ancestors first, since a child never scores
    above its parent). Returns (target tokens, parent index or -1, depth) of the kept
    nodes in breadth-first order.
    """
    tok: list[int] = []
    parent: list[int] = []
    level: list[int] = []
    score: list[float] = []
    slot: dict[int, int] = {}  # node -> draft-cache slot of the entry that expanded it
    out_of: dict[int, Tensor] = {}  # node -> head output that scored its children
    lp = torch.log_softmax(drafter.logits(o_root)[0, 0].float(), -1)
    v, i = lp.topk(min(topk, lp.numel()))
    for s, d in zip(v.tolist(), i.tolist()):
        tok.append(int(drafter.draft_to_target[d])); parent.append(-1); level.append(1); score.append(s)
    frontier = list(range(len(tok)))
    for lev in range(2, depth + 1):
        L = dc.length
        K = len(frontier)
        mask = torch.zeros(K, L + K, dtype=torch.bool)
        mask[:, :c] = True  # committed context
        for r, n in enumerate(frontier):
            mask[r, L + r] = True
            a = parent[n]
            while a >= 0:
                mask[r, slot[a]] = True
                a = parent[a]
        feats = torch.cat([out_of.get(parent[n], o_root) for n in frontier], dim=1)  # [1, K, H]
        o = drafter.step(feats, torch.tensor([[tok[n] for n in frontier]]),
                         torch.full((K,), c - 2 + lev), dc, mask)
        lp = torch.log_softmax(drafter.logits(o)[0].float(), -1)  # [K, Vd]
        cand: list[tuple[float, int, int]] = []
        for r, n in enumerate(frontier):
            slot[n] = L + r
            out_of[n] = o[:, r:r + 1]
            v, i = lp[r].topk(min(topk, lp.shape[1]))
            cand += [(score[n] + s, n, d) for s, d in zip(v.tolist(), i.tolist())]
        new = []
        for s, n, d in cand:
            tok.append(int(drafter.draft_to_target[d])); parent.append(n); level.append(lev); score.append(s)
            new.append(len(tok) - 1)
        frontier = sorted(new, key=lambda n: -score[n])[:topk]
    keep = set(sorted(range(len(tok)), key=lambda n: (-score[n], level[n], n))[:size])
    for n in list(keep):  # ancestors (a tie could have left one out)
        a = parent[n]
        while a >= 0 and a not in keep:
            keep.add(a)
            a = parent[a]
    order = sorted(keep, key=lambda n: (level[n], n))
    pos = {n: r for r, n in enumerate(order)}
    return [tok[n] for n in order], [pos[parent[n]] if parent[n] >= 0 else -1 for n in order], \
        [level[n] for n in order]


def _tree_mask(c: int, parents: Sequence[int], dtype: torch.dtype) -> Tensor:
    """4-D additive mask [1, 1, 1+M, c+1+M] for verifying root + M tree nodes after c cached tokens."""
    M = len(parents)
    allow = torch.zeros(1 + M, c + 1 + M, dtype=torch.bool)
    allow[:, : c + 1] = True  # context and the root (last committed token)
    for r, p in enumerate(parents):
        allow[1 + r, c + 1 + r] = True
        while p >= 0:
            allow[1 + r, c + 1 + p] = True
            p = parents[p]
    mask = torch.zeros(allow.shape, dtype=dtype)
    mask.masked_fill_(~allow, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def _speculate_one(target: Target, drafter: Eagle3Drafter, prompt: Sequence[int], cfg: SpecConfig,
                   stop: set[int], gen: torch.Generator | None, tree: bool, stats: _Stats) -> dict[str, Any]:
    model = target.model
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    T = cfg.temperature
    t0 = time.perf_counter()
    tc = _new_cache(model)
    n = len(prompt)
    out = _forward(model, torch.tensor([list(prompt)], device=dev), tc, kw, logits_to_keep=1)
    x = _pick(out.logits[0, -1], T, gen)
    tokens: list[int] = []
    done = _finish(tokens, [x], stop, cfg.max_new_tokens)
    dc = drafter.new_cache(n + cfg.max_new_tokens + 2 * max(cfg.depth, 1) * max(cfg.tree_topk, 1) + 8)
    pend_feat = _features(drafter, out.hidden_states)  # entries t = 0..n-1: (h_t, x_{t+1})
    pend_tok = list(prompt[1:]) + [x]
    start, accepts, drafted = 0, [], []
    while not done:
        o = drafter.step(pend_feat, torch.tensor([pend_tok]), torch.arange(start, start + len(pend_tok)), dc)
        c = start + len(pend_tok)  # target cache length; x (position c) is not in it yet
        depth = min(cfg.depth, cfg.max_new_tokens - len(tokens) - 1)  # no drafts past the limit
        use_tree = tree and depth > 1
        if use_tree:
            drafts, parents, levels = _draft_tree(drafter, o[:, -1:], c, depth, cfg.tree_topk, cfg.tree_size, dc)
            lev = torch.tensor([0] + levels)
            ver = _forward(model, torch.tensor([[x] + drafts], device=dev), tc, kw,
                           position_ids=(c + lev)[None].to(dev),
                           mask=_tree_mask(c, parents, next(model.parameters()).dtype).to(dev))
            g = ver.logits[0].argmax(-1).tolist()
            path, cur = [0], -1  # rows of the verify input; cur = accepted node (-1: root)
            while True:
                want = g[path[-1]]
                nxt = next((r for r, p in enumerate(parents) if p == cur and drafts[r] == want), None)
                if nxt is None:
                    break
                path.append(1 + nxt)
                cur = nxt
            a, bonus = len(path) - 1, g[path[-1]]
            accepted = [drafts[r - 1] for r in path[1:]]
            stats.add(max(levels), a)
            drafted.append(max(levels))
            _keep_rows(tc, c, path)
            rows: Tensor | slice = torch.tensor(path)
        else:
            drafts, q = _draft_chain(drafter, o[:, -1:], c, depth, dc, T, gen, cfg.draft_threshold) \
                if depth > 0 else ([], None)
            ver = _forward(model, torch.tensor([[x] + drafts], device=dev), tc, kw)
            if T <= 0:
                g = ver.logits[0].argmax(-1).tolist()
                a = 0
                while a < len(drafts) and drafts[a] == g[a]:
                    a += 1
                bonus = g[a]
            else:
                a, bonus = speculative_sample(ver.logits[0].cpu(), q if q is not None else torch.zeros(0),
                                              drafts, T, gen)
            accepted = drafts[:a]
            stats.add(len(drafts), a)
            drafted.append(len(drafts))
            _crop(tc, c + a + 1)
            rows = slice(0, a + 1)
        accepts.append(a)
        dc.crop(c)
        new = accepted + [bonus]
        done = _finish(tokens, new, stop, cfg.max_new_tokens)
        pend_feat = _features(drafter, ver.hidden_states, rows)
        pend_tok, start, x = new, c, bonus
    return {"token_ids": tokens, "wall_s": time.perf_counter() - t0, "rounds": len(accepts), "accepted": accepts,
            "drafted": drafted}


def speculate(target: Target, drafter: Eagle3Drafter, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig,
              ids: Sequence[str] | None = None, *, tree: bool | None = None) -> SpecResult:
    """Speculative decoding of each prompt (token ids, chat template applied) with ``drafter``.

    ``tree`` (default: ``cfg.tree_topk > 0``) drafts an EAGLE-2-style dynamic tree of
    ``cfg.tree_size`` tokens, depth ``cfg.depth``, instead of a chain; at T > 0 it falls
    back to a chain (noted in the result). Random draws use a generator seeded with
    ``cfg.seed + prompt index``, so results do not depend on the other prompts.
    """
    tree = cfg.tree_topk > 0 if tree is None else tree
    notes = []
    if tree and cfg.temperature > 0:
        notes.append("tree drafting at T > 0 is not implemented (needs recursive rejection over siblings); "
                     "ran chain drafting instead")
        tree = False
    if tree and (cfg.tree_topk < 1 or cfg.tree_size < 1):
        raise ValueError(f"tree drafting needs spec.tree_topk >= 1 and spec.tree_size >= 1, got "
                         f"{cfg.tree_topk} and {cfg.tree_size}")
    ids = list(ids) if ids is not None else [str(i) for i in range(len(prompts_ids))]
    stop = eos_ids(target)
    stats = _Stats(cfg.depth)
    per = []
    drafter.ensure_target(target)
    drafter.eval()
    notes.append(f"target kernels: {_prepare(target, cfg)}")
    with threads(cfg.threads):
        for i, (pid, prompt) in enumerate(zip(ids, prompts_ids)):
            gen = torch.Generator().manual_seed(cfg.seed + i)
            r = _speculate_one(target, drafter, prompt, cfg, stop, gen, tree, stats)
            per.append({"id": pid, **r})
    return _summarise("eagle3-tree" if tree else "eagle3-chain", cfg.temperature, cfg.depth, per, stats.hist,
                      stats.drafted, stats.accepted, layers=list(drafter.spec.layers),
                      tree_size=cfg.tree_size if tree else 0, notes=notes)


# ----------------------------------------------------------------------------- baselines


@torch.inference_mode()
def _plain_loop_one(target: Target, prompt: Sequence[int], cfg: SpecConfig, stop: set[int],
                    gen: torch.Generator | None) -> dict[str, Any]:
    model = target.model
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    t0 = time.perf_counter()
    cache = _new_cache(model)
    ids = torch.tensor([list(prompt)], device=dev)
    tokens: list[int] = []
    while True:
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{kw: cache})
        x = _pick(out.logits[0, -1], cfg.temperature, gen)
        if _finish(tokens, [x], stop, cfg.max_new_tokens):
            break
        ids = torch.tensor([[x]], device=dev)
    return {"token_ids": tokens, "wall_s": time.perf_counter() - t0, "rounds": len(tokens) - 1}


@torch.inference_mode()
def _generate_one(target: Target, prompt: Sequence[int], cfg: SpecConfig, stop: set[int], seed: int,
                  **extra: Any) -> dict[str, Any]:
    model = target.model
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt)], device=dev)
    sample = cfg.temperature > 0
    kwargs: dict[str, Any] = {"do_sample": sample, "max_new_tokens": cfg.max_new_tokens,
                              "pad_token_id": target.tokenizer.pad_token_id, "eos_token_id": sorted(stop),
                              "attention_mask": torch.ones_like(ids)}
    if sample:  # pure temperature sampling, as the speculative rule targets
        kwargs.update(temperature=cfg.temperature, top_k=0, top_p=1.0)
    else:
        kwargs.update(temperature=None, top_k=None, top_p=None)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    out = model.generate(ids, **kwargs, **extra)
    wall = time.perf_counter() - t0
    tokens: list[int] = []
    _finish(tokens, out[0, ids.shape[1]:].tolist() or [], stop, cfg.max_new_tokens)
    return {"token_ids": tokens, "wall_s": wall}


def plain_generate(target: Target, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig,
                   ids: Sequence[str] | None = None, *, impl: str = "hf") -> SpecResult:
    """Plain decoding of each prompt: ``impl="hf"`` is transformers' ``generate``; ``"loop"``
    is this module's own KV-cached loop (the speculative code path without drafts)."""
    if impl not in ("hf", "loop"):
        raise ValueError(f"impl must be 'hf' or 'loop', got {impl!r}")
    ids = list(ids) if ids is not None else [str(i) for i in range(len(prompts_ids))]
    stop = eos_ids(target)
    per = []
    linear = _prepare(target, cfg)
    with threads(cfg.threads):
        for i, (pid, prompt) in enumerate(zip(ids, prompts_ids)):
            if impl == "hf":
                r = _generate_one(target, prompt, cfg, stop, cfg.seed + i)
            else:
                r = _plain_loop_one(target, prompt, cfg, stop, torch.Generator().manual_seed(cfg.seed + i))
            per.append({"id": pid, **r})
    res = _summarise(f"plain-{impl}", cfg.temperature, 0, per, [], [], [], notes=[f"target kernels: {linear}"])
    res.tau = 1.0
    res.target_forwards = sum(max(0, len(p["token_ids"]) - 1) for p in per)
    return res


def prompt_lookup_generate(target: Target, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig,
                           ids: Sequence[str] | None = None) -> SpecResult:
    """transformers' prompt-lookup decoding (``prompt_lookup_num_tokens=cfg.prompt_lookup_tokens``)."""
    ids = list(ids) if ids is not None else [str(i) for i in range(len(prompts_ids))]
    stop = eos_ids(target)
    per = []
    linear = _prepare(target, cfg)
    with threads(cfg.threads):
        for i, (pid, prompt) in enumerate(zip(ids, prompts_ids)):
            r = _generate_one(target, prompt, cfg, stop, cfg.seed + i,
                              prompt_lookup_num_tokens=cfg.prompt_lookup_tokens)
            per.append({"id": pid, **r})
    return _summarise("prompt-lookup", cfg.temperature, cfg.prompt_lookup_tokens, per, [], [], [],
                      notes=[f"target kernels: {linear}"])


# ----------------------------------------------------------------------------- side-by-side timing


def merge_results(results: Sequence[SpecResult]) -> SpecResult:
    """Pool one method's per-prompt results into one, as if all prompts ran in one call.

    Every pooled figure is rebuilt from the per-prompt records, so a result whose
    ``per_prompt`` was cut to a subset pools to that subset's figures."""
    if not results:
        raise ValueError("merge_results needs at least one result")
    first = results[0]
    per = [p for r in results for p in r.per_prompt]
    stats = _Stats(first.depth)
    for p in per:
        for k, a in zip(p.get("drafted", []), p.get("accepted", [])):
            stats.add(min(k, first.depth), a)
    merged = _summarise(first.method, first.temperature, first.depth, per,
                        stats.hist if first.accept_hist else [], stats.drafted, stats.accepted,
                        layers=first.layers, tree_size=first.tree_size, notes=list(first.notes))
    if first.method.startswith("plain"):
        merged.tau, merged.target_forwards = 1.0, sum(max(0, len(p["token_ids"]) - 1) for p in per)
    elif not first.method.startswith("eagle3"):
        merged.acceptance_by_position, merged.tau = first.acceptance_by_position[:0], float("nan")
    return merged


Method = Callable[[Sequence[int], Callable[[SpecConfig], SpecConfig]], SpecResult]


def run_interleaved(methods: Mapping[str, Method], prompts: Sequence[tuple[str, Sequence[int]]], *,
                    warmup_tokens: int = 4, progress: bool = False) -> dict[str, SpecResult]:
    """Time several decoding methods on the same prompts, interleaved prompt by prompt.

    ``methods[name](prompt_ids, adjust)`` decodes one prompt with the method's config
    passed through ``adjust`` (which sets the per-prompt seed, or a short length for the
    untimed warm-up). Prompt ``i`` runs every method back to back, in an order rotated by
    ``i``, so load from other processes on a shared machine slows every method alike and
    the ratios of tokens/s stay meaningful. Returns each method's pooled result.
    """
    from tqdm import tqdm

    names = list(methods)
    if not prompts or not names:
        raise ValueError("run_interleaved needs at least one prompt and one method")
    for name in names:  # untimed warm-up: one-time allocations and kernel packing
        methods[name](prompts[0][1], lambda c: dataclasses.replace(c, max_new_tokens=warmup_tokens))
    runs: dict[str, list[SpecResult]] = {name: [] for name in names}
    for i, (pid, ids) in enumerate(tqdm(prompts, desc="decoding", unit="prompt", disable=not progress)):
        for name in names[i % len(names):] + names[:i % len(names)]:
            res = methods[name](ids, lambda c, i=i: dataclasses.replace(c, seed=c.seed + i))
            res.per_prompt[0]["id"] = pid
            runs[name].append(res)
    return {name: merge_results(r) for name, r in runs.items()}


# ----------------------------------------------------------------------------- offline acceptance


@torch.inference_mode()
def offline_acceptance(drafter: Eagle3Drafter, cache: CaptureCache, depth: int, split: str | None = "eval",
                       *, max_new_tokens: int | None = None, ids: Sequence[str] | None = None,
                       threshold: float = 0.0, batch_tokens: int = 4096) -> dict[str, Any]:
    """Acceptance of chain drafts at T = 0, from cached greedy responses and head forwards only.

    For each record, the rounds an online greedy run would make are replayed: the first
    anchor is the last prompt position, a round at anchor ``t`` drafts ``min(depth,
    remaining - 1)`` tokens and accepts the longest prefix equal to the cached target
    argmax (``top1``), then moves to ``t + accepted + 1``. ``max_new_tokens`` cuts the
    responses as an online run with that limit would; ``ids`` keeps only those records;
    ``threshold`` applies the dynamic draft length of ``SpecConfig.draft_threshold`` (the
    stop decisions that matter use the same, correct, tokens online and offline, so tau
    is unchanged by replaying; only the count of drafted tokens past a mismatch differs).

    Returns ``tau_offline`` (tokens per verify, as in :class:`SpecResult`),
    ``acceptance_by_position`` (per drafted position, over the replayed rounds),
    ``accept_hist``, and the same over *every* response position as anchor
    (``tau_all_anchors``, ``acceptance_all_anchors``: denser, not what a run sees).
    """
    was_training = drafter.training
    drafter.eval()
    records = load_records(cache, drafter.spec.layers, split, dtype=drafter.fc.weight.dtype)
    if ids is not None:
        keep = set(ids)
        records = [r for r in records if r.id in keep]
    stats = _Stats(depth)
    all_drafted, all_acc = [0] * depth, [0] * depth
    per_record = []
    new_total = rounds_total = 0
    for group in make_batches([len(r) for r in records], batch_tokens):
        recs = [records[i] for i in group]
        b = collate(recs, depth).to(drafter.fc.weight.device)
        outs = drafter.unroll(drafter.fuse(b.hidden), b.input_ids, b.lengths, depth, sub=b.sub)
        lps = [torch.log_softmax(drafter.logits(o).float(), -1).max(-1) for o in outs]
        preds = torch.stack([drafter.draft_to_target[lp.indices] for lp in lps], -1)  # [B, S, D] target ids
        # how many drafts the dynamic-length rule lets through: cumulative head probability >= threshold
        cum = torch.stack([lp.values for lp in lps], -1).cumsum(-1)  # [B, S, D] log
        n_ok = (cum >= math.log(threshold)).sum(-1) if threshold > 0 else torch.full(cum.shape[:2], depth)
        T = b.input_ids.shape[1]
        u = b.sub[..., None] + torch.arange(1, depth + 1, device=b.sub.device)  # [B, S, D] target-argmax positions
        ok = (u <= (b.lengths - 2)[:, None, None]) & b.sub_ok[..., None]
        match = (preds == b.top1.gather(1, u.clamp(max=T - 1).flatten(1)).view_as(u)) & ok
        for bi, r in enumerate(recs):
            m = match[bi].tolist()
            allow = n_ok[bi].tolist()
            first = int(b.sub[bi, 0])
            L = len(r) - r.prompt_len  # response tokens
            limit = L if max_new_tokens is None else max_new_tokens  # what an online run knows
            L = min(L, limit)
            # every anchor: the longest accepted prefix where i positions exist
            for s in range(int(b.sub_ok[bi].sum())):
                t = first + s
                if t < r.prompt_len - 1 or t > len(r) - 3:
                    continue
                avail = min(depth, len(r) - 2 - t)
                a = _prefix(m[s][:avail])
                for i in range(avail):
                    all_drafted[i] += 1
                    all_acc[i] += int(i < a)
            # the online walk
            t, produced, accepts = r.prompt_len - 1, 1, []
            while produced < L:
                k = min(depth, limit - produced - 1, allow[t - first])  # beyond an end token nothing matches
                a = _prefix(m[t - first][:k]) if k > 0 else 0
                stats.add(k, a)
                produced += a + 1
                accepts.append(a)
                t += a + 1
            rounds = len(accepts)
            produced = min(produced, L)
            new_total += produced
            rounds_total += rounds
            per_record.append({"index": r.index, "id": r.id, "tokens": produced, "rounds": rounds, "accepted": accepts,
                               "tau": (produced - 1) / rounds if rounds else float("nan")})
    if was_training:
        drafter.train()
    per_record.sort(key=lambda p: p["index"])
    acc_all = [a / d if d else float("nan") for a, d in zip(all_acc, all_drafted)]
    return {
        "depth": depth, "split": split, "n_records": len(per_record), "max_new_tokens": max_new_tokens,
        "tau_offline": (new_total - len(per_record)) / rounds_total if rounds_total else float("nan"),
        "acceptance_by_position": [a / d if d else float("nan") for a, d in zip(stats.accepted, stats.drafted)],
        "accept_hist": stats.hist, "rounds": rounds_total, "new_tokens": new_total,
        "tau_all_anchors": 1 + sum(math.prod(_cond(acc_all)[:i + 1]) for i in range(depth)) if depth else 1.0,
        "acceptance_all_anchors": acc_all, "per_record": per_record,
    }


def _prefix(flags: Sequence[bool]) -> int:
    n = 0
    for f in flags:
        if not f:
            break
        n += 1
    return n


def _cond(acc: Sequence[float]) -> list[float]:
    """P(prefix >= i+1) per position -> conditional acceptance P(i+1 | first i accepted)."""
    out, prev = [], 1.0
    for a in acc:
        a = 0.0 if math.isnan(a) else a
        out.append(a / prev if prev > 0 else 0.0)
        prev = a
    return out


# ----------------------------------------------------------------------------- cost model


@torch.inference_mode()
def measure_costs(target: Target, drafter: Eagle3Drafter | None, *, context: int = 256, depth: int = 4,
                  extra_sizes: Sequence[int] = (), reps: int = 7, n_threads: int = 0, seed: int = 0,
                  kernels: str | None = None) -> dict[str, Any]:
    """Time the pieces of a round on this machine (median of ``reps``, milliseconds).

    ``verify_ms[k]``: a target forward of ``k`` tokens after ``context`` cached ones, with
    all hidden states (as a verify); ``k = 1`` is a plain decoding step. ``draft_step_ms``:
    one head step of one token; ``draft_chain_ms``: a whole chain of ``depth`` drafts
    after a one-token catch-up. Sizes are interleaved across repetitions so that load
    from other processes hits all of them alike. ``kernels`` applies
    :func:`set_kernels` first (None: the model as it is).
    """
    model = target.model
    if kernels is not None:
        set_kernels(model, kernels)
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    g = torch.Generator().manual_seed(seed)
    V = target.vocab_size
    sizes = sorted(set(range(1, depth + 2)) | set(extra_sizes))
    res: dict[str, Any] = {"context": context, "depth": depth, "threads": torch.get_num_threads(),
                           "linear": "packed" if any(isinstance(m, PackedLinear) for m in model.modules()) else "hf",
                           "attention": getattr(model.config, "_attn_implementation", None)}
    with threads(n_threads):
        res["threads"] = torch.get_num_threads()
        cache = _new_cache(model)
        ctx = torch.randint(0, V, (1, context), generator=g).to(dev)
        out = _forward(model, ctx, cache, kw, logits_to_keep=1)
        times: dict[int, list[float]] = {k: [] for k in sizes}
        for rep in range(reps + 1):
            for k in sizes:
                x = torch.randint(0, V, (1, k), generator=g).to(dev)
                t0 = time.perf_counter()
                _forward(model, x, cache, kw)
                dt = time.perf_counter() - t0
                _crop(cache, context)
                if rep:  # first pass warms up
                    times[k].append(dt * 1e3)
        res["verify_ms"] = {k: statistics.median(v) for k, v in times.items()}
        res["step_ms"] = res["verify_ms"][1]
        if drafter is not None:
            dc = drafter.new_cache(context + 64)
            feat = _features(drafter, out.hidden_states)
            drafter.step(feat, torch.cat([ctx[:, 1:], ctx[:, -1:]], 1).cpu(), torch.arange(context), dc)
            one, chain = [], []
            for rep in range(reps + 1):
                o = feat[:, -1:]
                t0 = time.perf_counter()
                o2 = drafter.step(o, torch.tensor([[1]]), torch.tensor([context]), dc)
                drafter.logits(o2).argmax()
                t1 = time.perf_counter()
                dc.crop(context)
                o2 = drafter.step(o, torch.tensor([[1]]), torch.tensor([context]), dc)  # catch-up entry
                _draft_chain(drafter, o2, context + 1, depth, dc, 0.0, None)
                t2 = time.perf_counter()
                dc.crop(context)
                if rep:
                    one.append((t1 - t0) * 1e3)
                    chain.append((t2 - t1) * 1e3)
            res["draft_step_ms"] = statistics.median(one)
            res["draft_chain_ms"] = statistics.median(chain)
    return res


def cost_model(tau: float, costs: dict[str, Any], depth: int | None = None, *, verify_tokens: int | None = None,
               draft_ms: float | None = None) -> dict[str, float]:
    """Predicted speedup of speculative over plain decoding from measured costs.

    ``t_round = verify_ms[verify_tokens] + draft_ms`` (defaults: ``depth + 1`` verify
    tokens and ``costs["draft_chain_ms"]``, or ``depth`` x ``draft_step_ms``);
    ``speedup = tau * step_ms / t_round``; ``ceiling`` is the speedup at tau = depth + 1;
    ``break_even_tau = t_round / step_ms``.
    """
    depth = int(costs.get("depth", 4) if depth is None else depth)
    k = verify_tokens or depth + 1
    verify = costs["verify_ms"]
    verify_k = verify.get(k, verify.get(str(k)))
    if verify_k is None:
        raise KeyError(f"no verify time for {k} tokens in costs (have {sorted(verify)}); measure it with "
                       "measure_costs(..., extra_sizes=[k])")
    if draft_ms is None:
        draft_ms = costs.get("draft_chain_ms", depth * costs.get("draft_step_ms", 0.0))
    step = float(costs["step_ms"])
    t_round = float(verify_k) + float(draft_ms)
    return {"tau": tau, "step_ms": step, "round_ms": t_round, "speedup": tau * step / t_round,
            "ceiling": (depth + 1) * step / t_round, "break_even_tau": t_round / step}
