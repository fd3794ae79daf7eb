"""Timing decoding methods side by side, and the cost model that explains their speed.

:func:`run_interleaved` times several methods on the same prompts, interleaved prompt by
prompt, so that load from other processes on a shared machine slows all of them alike.
:func:`measure_costs` times the pieces of a round, which :func:`~.costs.cost_model` turns
into a predicted speedup.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from activation_wave.core.config import SpecConfig
from activation_wave.core.progress import progress_bar
from activation_wave.decode.rounds import SpecResult, _crop, _cache_kw, _forward, _new_cache, merge_results
from activation_wave.models.drafter import Eagle3Drafter
from activation_wave.decode.kernels import PackedLinear, set_kernels, threads
from activation_wave.models.targets import Target
from activation_wave.decode.speculative import _draft_chain, _features

__all__ = ["Method", "run_interleaved", "rotated_medians", "measure_costs"]


def rotated_medians(fns: dict[str, Callable[[], Any]], repeats: int = 3, rotate: bool = True) -> dict[str, float]:
    """Median wall time of each callable over ``repeats`` rounds; every round runs all of
    them back to back (in an order rotated by the round when ``rotate``), so that load
    from other processes falls on all of them alike."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        k = r % len(names) if rotate else 0
        for n in names[k:] + names[:k]:
            t = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - t)
    return {n: statistics.median(v) for n, v in times.items()}


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
    names = list(methods)
    if not prompts or not names:
        raise ValueError("run_interleaved needs at least one prompt and one method")
    for name in names:  # untimed warm-up: one-time allocations and kernel packing
        methods[name](prompts[0][1], lambda c: dataclasses.replace(c, max_new_tokens=warmup_tokens))
    runs: dict[str, list[SpecResult]] = {name: [] for name in names}
    bar = progress_bar(prompts, desc="decoding", unit="prompt", disable=not progress)
    for i, (pid, ids) in enumerate(bar):
        for name in names[i % len(names):] + names[:i % len(names)]:
            res = methods[name](ids, lambda c, i=i: dataclasses.replace(c, seed=c.seed + i))
            res.per_prompt[0]["id"] = pid
            runs[name].append(res)
    return {name: merge_results(r) for name, r in runs.items()}


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
