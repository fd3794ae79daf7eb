"""Pre-registered hypotheses as data: one evaluated hypothesis, how the book words its
verdict. (What a statistic whose interval covers 0 adds to its text is
:func:`activation_wave.core.stats.within_noise`.) Shared by the
chapters that test hypotheses (6 and 7) and the pages that list them (8, the landing page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Hypothesis", "VERDICT_WORD", "GLANCE_WORDS", "glance_word", "side_word", "p_error_text"]


@dataclass(frozen=True)
class Hypothesis:
    """One pre-registered hypothesis evaluated: its primary statistic and the verdict rule's outcome."""

    name: str
    claim: str
    statistic: str  # the primary test's figure, with its interval and n
    supported: bool | None  # None: not testable with these results
    note: str
    interval: tuple[float, float] | None = None  # the primary statistic's 95% interval (None: none computed)
    null: float = 0.0  # the primary statistic's value of no effect (1 for a speedup ratio)

    @property
    def glance(self) -> str:
        """The verdict in :data:`GLANCE_WORDS` (see :func:`glance_word`).

        >>> Hypothesis("C1", "beats plain", "0.97x", False, "", (0.94, 1.01), null=1.0).glance
        'within noise'
        """
        return glance_word(self.supported, *(self.interval or (None, None)), null=self.null)


#: How the book words a pre-registered verdict (``Hypothesis.supported``).
VERDICT_WORD = {True: "supported", False: "not supported", None: "not testable here"}

#: The one vocabulary of the "results at a glance" column and the landing page's "how sure"
#: table: the same word means the same for every row.
GLANCE_WORDS = ("supported", "not supported", "within noise", "not testable")


def glance_word(supported: bool | None, lo: float | None, hi: float | None, null: float = 0.0) -> str:
    """A registered verdict in :data:`GLANCE_WORDS`: "supported" when the registered rule holds;
    "not testable" when it could not be applied (``supported`` None: no data, or a drafter that
    accepts nothing); else "within noise" when the primary statistic's interval covers ``null``
    and "not supported" when it excludes it (the effect went the other way, or not far enough).

    >>> glance_word(True, 0.01, 0.05), glance_word(False, -0.02, 0.01), glance_word(False, -0.03, -0.01)
    ('supported', 'within noise', 'not supported')
    >>> glance_word(None, 0.1, 0.2)
    'not testable'
    """
    if supported is None or lo is None or hi is None:
        return "not testable"
    if supported:
        return "supported"
    return "within noise" if lo <= null <= hi else "not supported"


def side_word(lo: float, hi: float, null: float = 0.0, up: str = "higher", down: str = "lower") -> str:
    """Which side of ``null`` an interval lies: ``up``, ``down``, or "within noise" when it covers it.

    >>> side_word(0.97, 1.13, null=1.0, up="faster", down="slower"), side_word(-0.03, -0.01)
    ('within noise', 'lower')
    """
    return "within noise" if lo <= null <= hi else (up if lo > null else down)



def p_error_text(rows: Sequence[Mapping[str, Any]], label: str) -> str:
    """How many resamples a page's registered p-values rest on and their largest Monte Carlo
    error (Holm-adjusted: ``p_holm_mcse``), naming the comparison (``row[label]``) it belongs to.

    >>> p_error_text([{"set": "a", "n_boot": 200000, "p_holm_mcse": 0.0031}, {"set": "b", "n_boot": 200000,
    ...               "p_holm_mcse": 0.0004}], "set").split(";")[0]
    'Every registered p comes from 200,000 resamples'
    """
    rows = [r for r in rows if r.get("p_holm_mcse") is not None]
    if not rows:
        return "The results file does not record the p-values' Monte Carlo error."
    worst = max(rows, key=lambda r: r["p_holm_mcse"])
    return (f"Every registered p comes from {rows[0]['n_boot']:,} resamples; its Monte Carlo error is at most "
            f"{worst['p_holm_mcse']:.4f} (Holm-adjusted, {worst[label]}; largest near p = 0.5, about a seventh of "
            f"that near 0.05), so two Monte Carlo errors move no p by more than {2 * worst['p_holm_mcse']:.3f} "
            "(`p_mcse`, `p_holm_mcse` in the results file). A Holm p within 0.01 of 0.05 is worded 'close to the "
            "line', whichever side of it the resamples put it.")
