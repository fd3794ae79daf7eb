"""The online comparison: speculative decoding against its baselines, on held-out prompts.

One function serves chapter 6 and the decoding benchmark. :func:`held_out_prompts`
picks the eval-split prompts (seeded); :func:`compare_online` decodes them with plain
decoding (T = 0 and T = 1), prompt-lookup decoding (T = 0) and every given drafter
(chain at T = 0 and T = 1, a dynamic tree at T = 0 when ``spec.tree_topk > 0``),
interleaved prompt by prompt (:func:`~.timing.run_interleaved`), ``rounds`` times.

Method names: ``plain_t0``, ``prompt_lookup_t0``, ``plain_t1`` and, per drafter
``name``, ``{name}_chain_t0``, ``{name}_chain_t1``, ``{name}_tree_t0``
(:func:`method_name`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from activation_wave.decode.baselines import plain_generate, prompt_lookup_generate
from activation_wave.core.config import DataConfig, SpecConfig
from activation_wave.models.prompts import Prompt, chat_ids, load_prompts
from activation_wave.decode.rounds import SpecResult, merge_results
from activation_wave.models.drafter import Eagle3Drafter
from activation_wave.models.targets import Target
from activation_wave.decode.speculative import speculate
from activation_wave.decode.timing import Method, run_interleaved

__all__ = ["held_out_prompts", "compare_online", "OnlineComparison", "method_name"]


def method_name(drafter: str, kind: str) -> str:
    """The name of a drafter's method; ``kind`` is ``chain_t0``, ``chain_t1`` or ``tree_t0``."""
    return f"{drafter}_{kind}"


def held_out_prompts(target: Target, data: DataConfig, n: int, seed: int) -> list[tuple[Prompt, list[int]]]:
    """``n`` eval-split prompts drawn without replacement (seeded, kept in split order),
    each with its chat-templated token ids."""
    ev = [p for p in load_prompts(data) if p.split == "eval"]
    if not ev:
        raise ValueError("the prompt set has no eval-split prompt; add sources to data.sources")
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(ev), size=min(n, len(ev)), replace=False))
    return [(ev[i], chat_ids(target, ev[i].text)) for i in pick]


@dataclass(frozen=True)
class OnlineComparison:
    """Every method's result, pooled over the rounds, and each round's results."""

    prompt_ids: tuple[str, ...]
    pooled: dict[str, SpecResult]
    per_round: tuple[dict[str, SpecResult], ...]

    def identical(self, method: str, reference: str = "plain_t0") -> int:
        """Prompt runs on which ``method`` produced exactly ``reference``'s tokens."""
        return sum(a == b for a, b in zip(self.pooled[method].token_ids, self.pooled[reference].token_ids))

    def speedup(self, method: str, baseline: str) -> float:
        """Tokens/s of ``method`` over those of ``baseline``, pooled."""
        return self.pooled[method].tokens_per_s / self.pooled[baseline].tokens_per_s

    def round_speedups(self, method: str, baseline: str) -> list[float]:
        """The same ratio in each round (how far the shared machine moved it)."""
        return [r[method].tokens_per_s / r[baseline].tokens_per_s for r in self.per_round]


def compare_online(target: Target, drafters: Mapping[str, Eagle3Drafter],
                   prompts: Sequence[tuple[str, Sequence[int]]], spec: SpecConfig, *, rounds: int = 1,
                   progress: bool = False, kinds: Mapping[str, Sequence[str]] | None = None) -> OnlineComparison:
    """Decode ``prompts`` (id, token ids) with the baselines and every drafter, interleaved
    (``kinds``: the methods of a drafter named there, of ``chain_t0``, ``chain_t1``,
    ``tree_t0``; every one by default).

    ``spec`` gives depth, length, seed, threads and kernels; the temperatures are set
    here (0 and 1). With ``rounds > 1`` the interleaved run over all prompts is repeated
    and each method's figures pool every round.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    t0 = dataclasses.replace(spec, temperature=0.0, tree_topk=0)
    t1 = dataclasses.replace(spec, temperature=1.0, tree_topk=0)
    tree = dataclasses.replace(spec, temperature=0.0)
    methods: dict[str, Method] = {
        "plain_t0": lambda p, c: plain_generate(target, [p], c(t0)),
        "prompt_lookup_t0": lambda p, c: prompt_lookup_generate(target, [p], c(t0)),
        "plain_t1": lambda p, c: plain_generate(target, [p], c(t1)),
    }
    for name, d in drafters.items():
        make: dict[str, Method] = {
            "chain_t0": lambda p, c, d=d: speculate(target, d, [p], c(t0)),
            "chain_t1": lambda p, c, d=d: speculate(target, d, [p], c(t1)),
            **({"tree_t0": lambda p, c, d=d: speculate(target, d, [p], c(tree), tree=True)} if spec.tree_topk > 0
               else {})}
        for kind in (kinds or {}).get(name, tuple(make)):
            if kind not in make:
                raise ValueError(f"unknown method {kind!r} for drafter {name!r}: choose from {sorted(make)}")
            methods[method_name(name, kind)] = make[kind]
    per_round = tuple(run_interleaved(methods, prompts, progress=progress) for _ in range(rounds))
    pooled = per_round[0] if rounds == 1 else {n: merge_results([r[n] for r in per_round]) for n in methods}
    return OnlineComparison(tuple(pid for pid, _ in prompts), pooled, per_round)
