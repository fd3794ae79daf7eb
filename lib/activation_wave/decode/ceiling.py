"""The ceiling of speculation inside llama.cpp: a round's cost from measured terms.

All costs are in *plain steps*: milliseconds over the plain decoding step of the same target,
threads and flags, measured in the same run. A llama.cpp ``draft-eagle3`` round of depth
``n`` (``p_min`` 0, so it always drafts ``n`` tokens; common/speculative.cpp) is modelled as

    round(n) = V(n + 1) + E + (n + 1) * c

* ``V(k)``: the target's verify of a batch of ``k`` tokens (logits of every row, sampling);
  ``V(1) = 1`` by definition (:func:`verify_cost`);
* ``E``: what a server that extracts the target's hidden states but never drafts adds to a
  step: the extraction of the 3 layers plus the drafter's ``fc`` encode of the row and its
  bookkeeping, minus its timed drafter call (:func:`extraction_cost`);
* ``c``: one drafter call (a decode of the one-layer head and its draft-vocabulary head, with
  llama.cpp's CPU sampling), from llama.cpp's own drafting timer divided by the calls
  (:func:`draft_call_cost`). A round makes ``n`` of them while drafting, plus one decode over
  the verify batch's rows that llama.cpp does not time (``process()``), counted as one call.

A round yields ``tau`` tokens, so the speedup is ``tau / round(n)`` (:func:`speedup_curve`);
break-even needs ``tau = round(n)``, and a perfect drafter (``tau = n + 1``) reaches the
*ceiling* ``(n + 1) / round(n)``. Pure arithmetic: the benchmark measures the terms, the
chapter reads them.

>>> v = VerifyCurve({1: 1.0, 2: 1.5, 3: 2.0})
>>> round(predict_round(v, depth=2, extraction=0.1, call=0.05), 3)
2.25
>>> ceiling(2.25, depth=2)
1.3333
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["VerifyCurve", "verify_cost", "extraction_cost", "draft_call_cost", "predict_round", "predict_ngram_round",
           "speedup_curve", "ceiling", "agreement", "ThreadModel", "thread_model"]


@dataclass(frozen=True)
class VerifyCurve:
    """Measured verify costs ``points`` (batch size k -> plain steps; k = 1 is 1.0; a probe's mean
    batch may be fractional) with a
    least-squares line ``V(k) = 1 + slope (k - 1)`` through them for batches outside the measured
    range. ``slope`` is the cost of each extra token in plain steps: 0 for a target whose step
    only reads its weights (memory-bound), 1 for one that pays every token in full."""

    points: Mapping[float, float]

    @property
    def slope(self) -> float:
        pts = [(k - 1, v - 1.0) for k, v in self.points.items() if k > 1]
        den = sum(x * x for x, _ in pts)
        return sum(x * y for x, y in pts) / den if den else 0.0

    @property
    def k_max(self) -> float:
        return max(self.points, default=1.0)

    def at(self, k: float) -> float:
        """V(k): linear between measured points, the line beyond the largest (:meth:`extrapolated`)."""
        pts = sorted({1.0: 1.0, **{float(a): float(b) for a, b in self.points.items()}}.items())
        if k <= 1:
            return 1.0
        for (k0, v0), (k1, v1) in zip(pts, pts[1:]):
            if k0 <= k <= k1:
                return v0 + (v1 - v0) * (k - k0) / (k1 - k0)
        k_top, v_top = pts[-1]
        return v_top + self.slope * (k - k_top)

    def extrapolated(self, k: float) -> bool:
        return k > self.k_max


def verify_cost(ms: float, rounds: int, drafting_rounds: int, draft_tokens: int, step_ms: float) -> dict[str, float]:
    """A verify batch's cost from a server whose drafts cost nothing to make (llama.cpp's n-gram
    lookup with every draft accepted): ``ms`` of decoding over ``rounds`` target forwards, of
    which ``drafting_rounds`` verified a draft (``draft_tokens`` drafted in all) and the rest
    were plain one-token steps of ``step_ms``. Returns the batch size ``k`` (1 + the mean draft)
    and its cost in ms and in plain steps.

    >>> verify_cost(ms=300.0, rounds=12, drafting_rounds=10, draft_tokens=30, step_ms=10.0)
    {'k': 4.0, 'ms': 28.0, 'steps': 2.8}
    """
    if drafting_rounds <= 0 or step_ms <= 0:
        raise ValueError(f"no drafting round ({drafting_rounds}) or no plain step ({step_ms} ms): the n-gram server "
                         "never drafted; check its prompts repeat a block the lookup can find")
    plain_rounds = max(0, rounds - drafting_rounds)
    v = (ms - plain_rounds * step_ms) / drafting_rounds
    return {"k": round(1.0 + draft_tokens / drafting_rounds, 3), "ms": round(v, 3), "steps": round(v / step_ms, 4)}


def extraction_cost(round_ms: float, draft_ms_per_round: float, step_ms: float) -> dict[str, float]:
    """``E``: what a never-drafting EAGLE-3 server's round (one-token verify with the hidden
    states extracted, the drafter's encode of the row, one timed drafter call that stops at
    ``p_min``) costs beyond a plain step and its timed drafter call, in ms and plain steps.

    >>> extraction_cost(round_ms=12.0, draft_ms_per_round=1.0, step_ms=10.0)
    {'ms': 1.0, 'steps': 0.1, 'round_steps': 1.2}
    """
    e = round_ms - step_ms - draft_ms_per_round
    return {"ms": round(e, 3), "steps": round(e / step_ms, 4), "round_steps": round(round_ms / step_ms, 4)}


def draft_call_cost(draft_ms: float, rounds: int, depth: int, step_ms: float) -> dict[str, float]:
    """``c``: llama.cpp's drafting time (``dur(g)``) over its drafter calls, ``depth`` per round
    (seed decode plus ``depth - 1`` one-token decodes, each sampled on the CPU).

    >>> draft_call_cost(draft_ms=60.0, rounds=10, depth=3, step_ms=10.0)
    {'ms': 2.0, 'steps': 0.2}
    """
    c = draft_ms / (rounds * depth)
    return {"ms": round(c, 4), "steps": round(c / step_ms, 4)}


def predict_round(verify: VerifyCurve, depth: int, extraction: float, call: float) -> float:
    """``round(n) = V(n + 1) + E + (n + 1) c`` in plain steps (module docstring)."""
    return verify.at(depth + 1) + extraction + (depth + 1) * call


def predict_ngram_round(verify: VerifyCurve, rounds: int, drafting_rounds: int, draft_tokens: int,
                        lookup: float = 0.0) -> dict[str, Any]:
    """An n-gram speculation round, mean over ``rounds``: the rounds without a match cost a
    plain step, the others a verify of 1 + their mean draft (``draft_tokens`` over
    ``drafting_rounds``), plus the lookup's own time per round (``lookup`` steps). The verify of
    a batch beyond the measured range comes from the curve's line (``extrapolated``)."""
    k = 1.0 + draft_tokens / drafting_rounds if drafting_rounds else 1.0
    cost = ((rounds - drafting_rounds) * 1.0 + drafting_rounds * verify.at(k)) / rounds + lookup
    return {"steps": round(cost, 4), "mean_batch": round(k, 3), "extrapolated": verify.extrapolated(k)}


def speedup_curve(round_steps: float, depth: int) -> list[tuple[int, float]]:
    """Speedup ``tau / round`` at tau = 1 .. depth + 1 (the most a round can yield)."""
    return [(t, round(t / round_steps, 4)) for t in range(1, depth + 2)]


def ceiling(round_steps: float, depth: int) -> float:
    """The best speedup a drafter can reach at this round cost: every draft accepted."""
    return round((depth + 1) / round_steps, 4)


def agreement(predicted: float, measured: float) -> float:
    """Relative difference of a prediction from the measurement: (predicted - measured) / measured."""
    return round((predicted - measured) / measured, 4)


@dataclass(frozen=True)
class ThreadModel:
    """How a target's step and verify scale with threads: a step is a weight read (``mem_ms``,
    the same for every token of a batch) plus per-token compute (``cmp_ms`` at one thread),
    ``V(k) = (mem + k cmp / T) / (mem + cmp / T)``. Fitted to the verify slopes measured at
    two thread counts (:func:`thread_model`); beyond them it assumes compute divides over the
    threads and the weight read does not get faster (the memory bandwidth the measured threads
    already draw)."""

    mem_ms: float
    cmp_ms: float
    threads: tuple[int, ...]
    fit: str = ""

    def step_ms(self, threads: float) -> float:
        return self.mem_ms + self.cmp_ms / threads

    def slope(self, threads: float) -> float:
        """The verify cost of each extra token, in plain steps, at ``threads``."""
        return (self.cmp_ms / threads) / self.step_ms(threads)

    def round_steps(self, threads: float, depth: int, extraction: float, call: float) -> float:
        """``round(n)`` at ``threads`` with the drafter's terms (in plain steps) held at their measured value."""
        return 1.0 + depth * self.slope(threads) + extraction + (depth + 1) * call

    def threads_for(self, tau: float, depth: int, extraction: float, call: float) -> float | None:
        """The thread count at which break-even falls to ``tau`` (None: never, the drafter's own
        terms already cost ``tau - 1`` or more)."""
        room = tau - 1.0 - extraction - (depth + 1) * call
        if room <= 0:
            return None
        s = room / depth  # the slope needed: cmp/T / (mem + cmp/T) = s
        if s >= 1.0:
            return 1.0
        if self.mem_ms <= 0:
            return None
        return self.cmp_ms * (1.0 - s) / (s * self.mem_ms)


def thread_model(points: Mapping[int, tuple[float, float]]) -> ThreadModel | None:
    """:class:`ThreadModel` from ``points``: threads -> (plain step ms, verify slope). Each point
    splits its step into compute (slope x step) and weight read (the rest); the model takes the
    compute at one thread as the mean of compute x threads and the weight read as that of the
    largest thread count. None with fewer than one usable point."""
    usable = {t: (s, b) for t, (s, b) in points.items() if s > 0 and 0 <= b <= 1.5 and math.isfinite(b)}
    if not usable:
        return None
    cmp1 = sum(min(b, 1.0) * s * t for t, (s, b) in usable.items()) / len(usable)
    t_top = max(usable)
    s_top, b_top = usable[t_top]
    mem = max(0.0, s_top * (1.0 - min(b_top, 1.0)))
    parts = [f"{t} thread(s): step {s:.1f} ms, slope {b:.2f}" for t, (s, b) in sorted(usable.items())]
    return ThreadModel(mem, cmp1, tuple(sorted(usable)), "; ".join(parts))

