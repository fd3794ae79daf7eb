"""What every decoding method shares: its result, its round statistics, the target's KV cache.

:class:`SpecResult` is the outcome of one method over a list of prompts, whatever the
method (speculative chain or tree, plain ``generate``, prompt lookup). **tau** =
generated tokens per target verify forward (accepted drafts + the bonus token; the
prefill token is not counted), the "mean accepted length" of the EAGLE papers.
``acceptance_by_position[i]`` = share of rounds that drafted position ``i + 1`` and
accepted it (with all earlier ones). :func:`merge_results` pools per-prompt results of
one method. The ``_forward`` / ``_crop`` helpers hide the differences between
transformers versions' KV-cache APIs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from activation_wave.models.capture import engine_hidden_states, last_block_output
from activation_wave.core.config import SpecConfig
from activation_wave.models.prompts import eos_ids
from activation_wave.decode.kernels import prepare_kernels, threads
from activation_wave.models.targets import Target
from activation_wave.core.results import to_jsonable

__all__ = ["SpecResult", "DecodeStats", "merge_results", "decode_prompts"]


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
        return to_jsonable(asdict(self))

    @property
    def token_ids(self) -> list[list[int]]:
        return [p["token_ids"] for p in self.per_prompt]


def summarise(method: str, temperature: float, depth: int, per_prompt: list[dict[str, Any]],
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


@dataclass
class DecodeStats:
    """Counts of drafted and accepted positions over the rounds of a run."""

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


def _pick(logits: Tensor, temperature: float, gen: torch.Generator | None) -> int:
    """Target token from logits [V]: argmax at T = 0, else a sample of softmax(logits / T)."""
    if temperature <= 0:
        return int(logits.argmax())
    return int(torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1, generator=gen))


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
    """One target forward over ids [1, m] appended to ``cache``, with all hidden states;
    index N is the last block's output before the final norm, as in the capture
    (:func:`~activation_wave.models.capture.last_block_output`) and in the engines."""
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


def merge_results(results: Sequence[SpecResult]) -> SpecResult:
    """Pool one method's per-prompt results into one, as if all prompts ran in one call.

    Every pooled figure is rebuilt from the per-prompt records, so a result whose
    ``per_prompt`` was cut to a subset pools to that subset's figures."""
    if not results:
        raise ValueError("merge_results needs at least one result")
    first = results[0]
    per = [p for r in results for p in r.per_prompt]
    stats = DecodeStats(first.depth)
    for p in per:
        for k, a in zip(p.get("drafted", []), p.get("accepted", [])):
            stats.add(min(k, first.depth), a)
    merged = summarise(first.method, first.temperature, first.depth, per,
                        stats.hist if first.accept_hist else [], stats.drafted, stats.accepted,
                        layers=first.layers, tree_size=first.tree_size, notes=list(first.notes))
    if first.method.startswith("plain"):
        merged.tau, merged.target_forwards = 1.0, sum(max(0, len(p["token_ids"]) - 1) for p in per)
    elif not first.method.startswith("eagle3"):
        merged.acceptance_by_position, merged.tau = first.acceptance_by_position[:0], float("nan")
    return merged


def decode_prompts(target: Target, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig, ids: Sequence[str] | None,
                   decode_one: Callable[[Sequence[int], int, set[int]], dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Decode each prompt with ``decode_one(prompt ids, prompt index, stop ids)`` on the
    target's ``cfg.kernels`` with ``cfg.threads`` threads; returns the per-prompt records
    (``id`` first; ids default to "0", "1", ...) and a note on the kernels in effect."""
    ids = list(ids) if ids is not None else [str(i) for i in range(len(prompts_ids))]
    stop = eos_ids(target)
    kernels = prepare_kernels(target, cfg)
    with threads(cfg.threads):
        per = [{"id": pid, **decode_one(prompt, i, stop)} for i, (pid, prompt) in enumerate(zip(ids, prompts_ids))]
    return per, f"target kernels: {kernels}"
