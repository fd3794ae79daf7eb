"""Pre-registered hypotheses as data: one evaluated hypothesis, how the book words its
verdict. (What a statistic whose interval covers 0 adds to its text is
:func:`activation_wave.core.stats.within_noise`.) Shared by the
chapters that test hypotheses (6 and 7) and the pages that list them (8, the landing page)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Hypothesis", "VERDICT_WORD"]


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

