"""Pre-registered hypotheses as data: one evaluated hypothesis, the statistics its chapter
computed. Its verdict word is not here: :mod:`activation_wave.study.findings` words every
registered test by one rule and writes the record every page quotes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Hypothesis", "side_word", "p_error_text"]


@dataclass(frozen=True)
class Hypothesis:
    """One pre-registered hypothesis evaluated: its primary statistic and the verdict rule's outcome."""

    name: str
    claim: str
    statistic: str  # the primary test's figure, with its interval and n
    supported: bool | None  # the chapter's own rule (for its tables); None: not testable with these results
    note: str
    interval: tuple[float, float] | None = None  # the primary statistic's 95% interval (None: none computed)
    null: float = 0.0  # the primary statistic's value of no effect (1 for a speedup ratio)
    value: float | None = None  # the primary statistic itself
    p: float | None = None  # the p-value the registered rule reads (corrected where the test says so)
    n: int | None = None  # how many units the interval resamples (prompts, triples, layers)
    base: float | None = None  # the reference's value beside a difference (the default's tau)
    seeds: str | None = None  # the verdict when seeds are resampled too (sensitivity analysis), if run
    mde: float | None = None  # the smallest effect the design detects, where the chapter computed it
    compared: str | None = None  # the set (or arm) the statistic is of, where the test picks one (H1's best rule)


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
