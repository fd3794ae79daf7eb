"""Pre-registered hypotheses as data: one evaluated hypothesis, how the book words its
verdict, and what a statistic whose interval covers 0 adds to its text. Shared by the
chapters that test hypotheses (6 and 7) and the pages that list them (8, the landing page)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Hypothesis", "VERDICT_WORD", "within_noise"]


@dataclass(frozen=True)
class Hypothesis:
    """One pre-registered hypothesis evaluated: its primary statistic and the verdict rule's outcome."""

    name: str
    claim: str
    statistic: str  # the primary test's figure, with its interval and n
    supported: bool | None  # None: not testable with these results
    note: str


#: How the book words a pre-registered verdict (``Hypothesis.supported``).
VERDICT_WORD = {True: "supported", False: "not supported", None: "not testable here"}


def within_noise(lo: float | None, hi: float | None) -> str:
    """What a statistic whose 95% interval covers 0 adds to its text: within noise, which
    is no verdict on the sign (empty when the interval excludes 0 or is undefined)."""
    ok = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    return " (within noise: the interval covers 0)" if ok and lo <= 0 <= hi else ""
