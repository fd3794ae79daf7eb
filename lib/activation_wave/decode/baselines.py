"""The baselines speculative decoding is measured against, on the same prompts and stop rule.

:func:`plain_generate`: transformers' ``generate`` (greedy or pure-temperature sampling),
or this package's own KV-cached loop; :func:`prompt_lookup_generate`: transformers'
prompt-lookup decoding. Both return a :class:`~.decoding.SpecResult` timed the same way
as :func:`~.speculative.speculate`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from activation_wave.core.config import SpecConfig
from activation_wave.decode.rounds import SpecResult, _cache_kw, _finish, _new_cache, _pick, decode_prompts, summarise
from activation_wave.models.targets import Target

__all__ = ["plain_generate", "prompt_lookup_generate"]


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

    def one(prompt: Sequence[int], i: int, stop: set[int]) -> dict[str, Any]:
        if impl == "hf":
            return _generate_one(target, prompt, cfg, stop, cfg.seed + i)
        return _plain_loop_one(target, prompt, cfg, stop, torch.Generator().manual_seed(cfg.seed + i))

    per, note = decode_prompts(target, prompts_ids, cfg, ids, one)
    res = summarise(f"plain-{impl}", cfg.temperature, 0, per, [], [], [], notes=[note])
    res.tau = 1.0
    res.target_forwards = sum(max(0, len(p["token_ids"]) - 1) for p in per)
    return res


def prompt_lookup_generate(target: Target, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig,
                           ids: Sequence[str] | None = None) -> SpecResult:
    """transformers' prompt-lookup decoding (``prompt_lookup_num_tokens=cfg.prompt_lookup_tokens``)."""
    per, note = decode_prompts(target, prompts_ids, cfg, ids, lambda prompt, i, stop: _generate_one(
        target, prompt, cfg, stop, cfg.seed + i, prompt_lookup_num_tokens=cfg.prompt_lookup_tokens))
    return summarise("prompt-lookup", cfg.temperature, cfg.prompt_lookup_tokens, per, [], [], [], notes=[note])
