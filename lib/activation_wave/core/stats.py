"""Paired statistics for comparing drafters scored on the same prompts.

Every drafter of chapter 6 is evaluated on the same eval prompts, so two layer sets are
compared *per prompt*: the difference of their offline tau on each prompt, averaged over
prompts, with a bootstrap over prompts (:func:`paired_bootstrap`). Seeds of a set are
averaged per prompt first (:func:`seed_mean`), so seed noise shrinks the per-prompt
values instead of counting as extra prompts. Several sets tested against one reference
are corrected with Holm's step-down rule (:func:`holm`). A comparison whose interval
covers 0 has a size attached: the minimum detectable difference at 80% power
(:func:`min_detectable_delta`).

Predictors of tau (entropy, CKA, the probe, depth) are judged by Spearman's rho with a
bootstrap interval over the units (:func:`spearman_ci`); when tau is given per prompt
([units, prompts]) each replicate also resamples the prompts, so the interval carries
the evaluation noise of tau as well as the choice of units. Two predictors of the same
tau are compared on the same resamples (:func:`spearman_difference`).

Every function is seeded and returns a frozen dataclass whose fields are plain numbers.

>>> import numpy as np
>>> ref = np.array([[1.3, 1.5, 1.2, 1.4]])          # [seeds, prompts]
>>> new = ref + np.array([[0.1, 0.0, 0.2, 0.1]])
>>> d = paired_bootstrap(new, ref, n_boot=2000)
>>> round(d.mean, 3), d.n
(0.1, 4)
>>> holm([0.01, 0.04, 0.03, 0.005])
(0.03, 0.06, 0.06, 0.02)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

#: Resamples of the registered paired tests: enough that a p-value's Monte Carlo error
#: (:func:`p_mcse`) is about 0.0005 at p = 0.05, so p is stable to the second decimal.
N_BOOT = 200_000
#: A p-value within this distance of alpha is worded "close to the line" whatever side it falls
#: on: no resample count settles a p whose true value sits at alpha, so its side is not news.
NEAR_LINE = 0.01
#: Replicates drawn at once (bounds memory at about CHUNK x prompts values).
_CHUNK = 20_000

__all__ = ["prompt_speedup", "N_BOOT", "NEAR_LINE", "PairedDelta", "p_mcse", "near_line", "hierarchical_bootstrap", "Correlation", "CorrelationDifference", "Spread", "seed_mean", "finite_values", "paired_bootstrap",
           "bootstrap_p", "bootstrap_mean_ci", "mean_ci", "holm", "spearman", "spearman_ci", "spearman_difference",
           "within_noise", "group_difference", "min_detectable_delta", "power_at", "repeat_spread"]


@dataclass(frozen=True)
class PairedDelta:
    """Mean per-prompt difference (set - reference) with its bootstrap interval and p-value.

    ``sd`` is the standard deviation of the per-prompt differences (ddof=1), the input of
    :func:`min_detectable_delta`; ``n`` the prompts both sides scored.
    """

    mean: float
    lo: float
    hi: float
    p: float
    n: int
    sd: float
    n_boot: int
    level: float
    p_mcse: float = float("nan")


def p_mcse(p: float, n_boot: int) -> float:
    """Monte Carlo standard error of a two-sided bootstrap p (:func:`bootstrap_p`) from
    ``n_boot`` replicates: p = 2q with q a tail share, so SE = 2 sqrt(q (1 - q) / B) =
    sqrt(p (2 - p) / B). For a Holm-adjusted p multiply by its factor (:func:`holm`).

    >>> round(p_mcse(0.05, 200_000), 4)
    0.0007
    """
    if not np.isfinite(p) or n_boot < 1:
        return float("nan")
    p = min(max(float(p), 0.0), 1.0)
    return float(np.sqrt(p * (2.0 - p) / n_boot))


def near_line(p: float | None, alpha: float = 0.05, band: float = NEAR_LINE) -> bool:
    """Whether ``p`` lies within ``band`` of ``alpha`` (worded "close to the line", not as a side).

    >>> near_line(0.054), near_line(0.03), near_line(None)
    (True, False, False)
    """
    return p is not None and bool(np.isfinite(p)) and abs(float(p) - alpha) < band


@dataclass(frozen=True)
class Correlation:
    """Spearman's rho over ``n`` units with a percentile bootstrap interval."""

    rho: float
    lo: float
    hi: float
    n: int
    n_boot: int
    level: float


@dataclass(frozen=True)
class CorrelationDifference:
    """``rho(a, y) - rho(b, y)`` on the same units, its paired bootstrap interval and p-value."""

    delta: float
    lo: float
    hi: float
    p: float
    rho_a: float
    rho_b: float
    n: int
    n_boot: int
    level: float


def seed_mean(tau: ArrayLike) -> np.ndarray:
    """Per-prompt mean over seeds: ``[seeds, prompts]`` (or ``[prompts]``) -> ``[prompts]``.

    A prompt missing (NaN) in one seed keeps the mean of the others; a prompt missing in
    every seed stays NaN and is dropped by the paired tests.
    """
    a = np.asarray(tau, float)
    if a.ndim == 1:
        return a.copy()
    if a.ndim != 2:
        raise ValueError(f"per-prompt tau must be [seeds, prompts] or [prompts], got shape {a.shape}")
    ok = np.isfinite(a)
    count = ok.sum(0)
    total = np.where(ok, a, 0.0).sum(0)
    return np.divide(total, count, out=np.full(a.shape[1], np.nan), where=count > 0)


def finite_values(row: ArrayLike) -> list[float | None]:
    """Per-prompt values as a results file holds them: NaN or infinite (not scored) -> None.

    >>> finite_values([1.5, float("nan")])
    [1.5, None]
    """
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(row, float)]


def bootstrap_p(replicates: ArrayLike) -> float:
    """Two-sided bootstrap p-value of "the statistic is 0" from its bootstrap replicates.

    Twice the smaller tail share on either side of 0 (the level at which the percentile
    interval just touches 0), with the +1 correction so it is never exactly 0. Replicates
    exactly at 0 are split half to each tail (a mid-p), so a statistic with discrete
    values, such as a difference of two Spearman correlations over a few units, whose
    replicates often land on 0, does not count those ties twice:
    ``p = min(1, 2 * (1 + min(#(r < 0), #(r > 0)) + #(r == 0) / 2) / (B + 1))``.
    Without ties this is the plain two-tail count.

    >>> bootstrap_p([-1.0] * 50 + [0.0] * 23 + [1.0] * 27)  # 2 * (1 + 27 + 11.5) / 101
    0.7821782178217822
    """
    r = np.asarray(replicates, float)
    r = r[np.isfinite(r)]
    if len(r) == 0:
        return float("nan")
    ties = int((r == 0).sum())
    tail = min(int((r < 0).sum()), int((r > 0).sum())) + ties / 2
    return float(min(1.0, 2.0 * (tail + 1) / (len(r) + 1)))


def bootstrap_mean_ci(values: ArrayLike, *, n_boot: int = 2000, level: float = 0.95,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (non-finite values dropped; NaN with fewer
    than 2 values): the interval of a set's tau over its prompts, or over its seeds.

    >>> lo, hi = bootstrap_mean_ci([1.0, 1.2, 1.1, 1.3], n_boot=500)
    >>> 1.0 <= lo < hi <= 1.3
    True
    """
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(1)
    return float(np.quantile(means, (1 - level) / 2)), float(np.quantile(means, (1 + level) / 2))


def mean_ci(per_prompt: Sequence[float | None], **kw: float) -> tuple[float, float, float]:
    """Mean over prompts of a per-prompt value (None / NaN: not scored) and its
    :func:`bootstrap_mean_ci` interval: ``(mean, lo, hi)``.

    >>> mean_ci([1.0, None, 1.0])
    (1.0, 1.0, 1.0)
    """
    y = np.array([np.nan if v is None else v for v in per_prompt], float)
    mean = float(np.nanmean(y)) if np.isfinite(y).any() else float("nan")
    return (mean, *bootstrap_mean_ci(y, **kw))


def _interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    r = replicates[np.isfinite(replicates)]
    if len(r) == 0:
        return float("nan"), float("nan")
    q = (1.0 - level) / 2.0
    return float(np.quantile(r, q)), float(np.quantile(r, 1.0 - q))


def _check_level(level: float, n_boot: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}; 0.95 gives a 95% interval")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")


def _mean_resamples(d: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` means of ``d`` [n] resampled with replacement, drawn in chunks."""
    out = np.empty(n_boot)
    for start in range(0, n_boot, _CHUNK):
        m = min(_CHUNK, n_boot - start)
        out[start:start + m] = d[rng.integers(0, len(d), size=(m, len(d)))].mean(1)
    return out


def paired_bootstrap(tau_set: ArrayLike, tau_ref: ArrayLike, *, n_boot: int = 10_000, level: float = 0.95,
                     seed: int = 0) -> PairedDelta:
    """Paired bootstrap of delta tau = set - reference over prompts.

    ``tau_set`` and ``tau_ref`` are per-prompt values ``[seeds, prompts]`` (or
    ``[prompts]``), prompts in the same order; seeds are averaged per prompt first
    (:func:`seed_mean`). Prompts that either side lacks (NaN) are dropped. The mean of
    the per-prompt differences is resampled over prompts ``n_boot`` times (seeded);
    the interval is the percentile interval at ``level``, the p-value two-sided
    (:func:`bootstrap_p`). With a handful of prompts the resamples take only a few
    distinct values, so the interval and p-value mean little: read them with ``n``.
    """
    _check_level(level, n_boot)
    a, b = seed_mean(tau_set), seed_mean(tau_ref)
    if a.shape != b.shape:
        raise ValueError(f"the set has {a.shape[0]} prompts and the reference {b.shape[0]}: "
                         "score both on the same prompts, in the same order")
    d = a - b
    d = d[np.isfinite(d)]
    n = len(d)
    if n < 2:
        raise ValueError(f"only {n} prompt(s) scored by both sides: a paired bootstrap needs at least 2")
    boots = _mean_resamples(d, n_boot, np.random.default_rng(seed))
    lo, hi = _interval(boots, level)
    p = bootstrap_p(boots)
    return PairedDelta(mean=float(d.mean()), lo=lo, hi=hi, p=p, n=n, sd=float(d.std(ddof=1)),
                       n_boot=n_boot, level=level, p_mcse=p_mcse(p, n_boot))


def _inflate(a: np.ndarray) -> np.ndarray:
    """Seeds ``[S, prompts]`` spread about their per-prompt mean by sqrt(S / (S - 1)) (S > 1)."""
    if a.shape[0] < 2:
        return a
    mean = seed_mean(a)
    return mean + (a - mean) * np.sqrt(a.shape[0] / (a.shape[0] - 1))


def hierarchical_bootstrap(terms: Sequence[tuple[float, ArrayLike]], *, n_boot: int = 20_000, level: float = 0.95,
                           seed: int = 0) -> PairedDelta:
    """A seed-sensitivity bootstrap of a paired contrast: the mean over prompts of
    ``sum_i w_i * seedmean(X_i)``, each ``X_i`` per-prompt tau ``[seeds, prompts]`` (prompts in
    the same order), resampled at two levels: each replicate draws every term's seeds with
    replacement (the drafters of a set are a sample of the seeds one could train), averages
    them per prompt, then draws the prompts once for all terms. The paired bootstrap over
    prompts alone (:func:`paired_bootstrap`) treats the trained seeds as the whole population;
    this one lets a set whose few seeds disagree widen its interval. A term with one seed adds
    no seed variance. Prompts missing (NaN) in any term's seed mean are dropped.

    With S seeds, a resample of S seeds with replacement has (S - 1) / S of the seed mean's
    variance (half of it with 2 seeds), so each term's seeds are first spread about their
    per-prompt mean by sqrt(S / (S - 1)) (Davison and Hinkley's variance-inflated residuals):
    the resampled seed mean then has the unbiased between-seed variance s^2 / S.

    ``[(1, set), (-1, ref)]`` is a set against a reference; ``[(1, a_top), (-1, ref_top),
    (-1, a_bottom), (1, ref_bottom)]`` an interaction.

    >>> ref = np.array([[1.0, 1.2, 1.4, 1.1], [1.1, 1.2, 1.5, 1.1]])
    >>> d = hierarchical_bootstrap([(1.0, ref + 0.1), (-1.0, ref)], n_boot=500)
    >>> round(d.mean, 3), d.n
    (0.1, 4)
    """
    _check_level(level, n_boot)
    arrays = [np.atleast_2d(np.asarray(x, float)) for _, x in terms]
    weights = [float(w) for w, _ in terms]
    if len({a.shape[1] for a in arrays}) != 1:
        raise ValueError(f"every term must score the same prompts, got shapes {[a.shape for a in arrays]}")
    ok = np.logical_and.reduce([np.isfinite(seed_mean(a)) for a in arrays])
    arrays = [_inflate(a[:, ok]) for a in arrays]
    n = int(ok.sum())
    if n < 2:
        raise ValueError(f"only {n} prompt(s) scored by every term: a bootstrap needs at least 2")
    d = sum(w * seed_mean(a) for w, a in zip(weights, arrays))
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for start in range(0, n_boot, _CHUNK):
        m = min(_CHUNK, n_boot - start)
        per_prompt = np.zeros((m, n))
        for w, a in zip(weights, arrays):
            rows = rng.integers(0, a.shape[0], size=(m, a.shape[0]))
            with np.errstate(invalid="ignore"):
                per_prompt += w * np.nanmean(a[rows], axis=1)  # [m, seeds, prompts] -> [m, prompts]
        cols = rng.integers(0, n, size=(m, n))
        boots[start:start + m] = np.nanmean(np.take_along_axis(per_prompt, cols, axis=1), axis=1)
    lo, hi = _interval(boots, level)
    p = bootstrap_p(boots)
    return PairedDelta(mean=float(d.mean()), lo=lo, hi=hi, p=p, n=n, sd=float(d.std(ddof=1)), n_boot=n_boot,
                       level=level, p_mcse=p_mcse(p, n_boot))


def holm(p_values: Sequence[float]) -> tuple[float, ...]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest of m p-values (i from 1) is multiplied by
    ``m - i + 1``, capped at 1, and made non-decreasing along the order. A hypothesis is
    rejected at family-wise level alpha when its adjusted p is below alpha. NaN entries
    (tests that could not run) stay NaN and do not count in m.
    """
    p = np.asarray(p_values, float)
    if np.any((p[np.isfinite(p)] < 0) | (p[np.isfinite(p)] > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    out = np.full(p.shape, np.nan)
    idx = np.nonzero(np.isfinite(p))[0]
    m = len(idx)
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return tuple(float(v) for v in out)


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank)."""
    from scipy.stats import rankdata

    return rankdata(a, axis=-1)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of matching rows of ``x`` and ``y`` ([B, n]); NaN where a row is constant."""
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    den = np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _pearson_rows(_ranks(x), _ranks(y))


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation of paired values (average ranks for ties).

    Pairs with a non-finite value are dropped; NaN when fewer than 3 pairs remain or
    one side is constant. Same value as :func:`scipy.stats.spearmanr`.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    return float(_spearman_rows(x[ok][None], y[ok][None])[0])


def _prepare(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Units with a finite predictor and at least one finite tau; y as [units, prompts]."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    y2 = y[:, None] if y.ndim == 1 else y
    if x.ndim != 1 or y2.ndim != 2 or len(x) != len(y2):
        raise ValueError(f"predictor must be [units] and tau [units] or [units, prompts]; got {x.shape} and {y.shape}")
    ok = np.isfinite(x) & np.isfinite(y2).any(1)
    return x[ok], y2[ok]


def _resampled_y(y: np.ndarray, units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """tau of the resampled units [B, n]: per-prompt values averaged over resampled prompts."""
    if y.shape[1] == 1:
        return y[units, 0]
    cols = rng.integers(0, y.shape[1], size=(units.shape[0], y.shape[1]))
    out = np.empty(units.shape)
    for b in range(units.shape[0]):  # one replicate at a time keeps memory at [n, prompts]
        out[b] = np.nanmean(y[units[b]][:, cols[b]], axis=1)
    return out


def spearman_ci(x: ArrayLike, y: ArrayLike, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Correlation:
    """Spearman's rho of a predictor ``x`` [units] against tau ``y`` with a bootstrap interval.

    ``y`` is ``[units]`` or per prompt ``[units, prompts]`` (then tau of a unit is its mean
    over prompts; prompts in the same order for every unit, NaN where missing). Each
    replicate resamples the units with replacement and, for per-prompt ``y``, the
    prompts too (the same prompt draw for every unit, since all were scored on the same
    prompts). Units with a non-finite predictor are dropped; ``n`` counts the rest.
    """
    _check_level(level, n_boot)
    x, y = _prepare(x, y)
    n = len(x)
    rho = spearman(x, np.nanmean(y, 1)) if n else float("nan")
    if n < 3:
        return Correlation(rho, float("nan"), float("nan"), n, n_boot, level)
    rng = np.random.default_rng(seed)
    units = rng.integers(0, n, size=(n_boot, n))
    boots = _spearman_rows(x[units], _resampled_y(y, units, rng))
    lo, hi = _interval(boots, level)
    return Correlation(rho, lo, hi, n, n_boot, level)


def spearman_difference(a: ArrayLike, b: ArrayLike, y: ArrayLike, *, n_boot: int = 2000, level: float = 0.95,
                        seed: int = 0) -> CorrelationDifference:
    """``rho(a, y) - rho(b, y)`` for two predictors of the same tau, paired bootstrap.

    Both correlations are computed on the same resampled units (and prompts, for
    per-prompt ``y``, as in :func:`spearman_ci`), so what the two predictors share
    cancels. Units where either predictor is non-finite are dropped. Used for H3
    (filtered vs unfiltered statistics).
    """
    _check_level(level, n_boot)
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"the two predictors must score the same units: shapes {a.shape} and {b.shape}")
    both = np.where(np.isfinite(a) & np.isfinite(b), 0.0, np.nan)
    xa, y2 = _prepare(a + both, y)
    xb, _ = _prepare(b + both, y)
    n = len(xa)
    ybar = np.nanmean(y2, 1) if n else np.zeros(0)
    ra, rb = spearman(xa, ybar), spearman(xb, ybar)
    if n < 3:
        return CorrelationDifference(ra - rb, float("nan"), float("nan"), float("nan"), ra, rb, n, n_boot, level)
    rng = np.random.default_rng(seed)
    units = rng.integers(0, n, size=(n_boot, n))
    yb = _resampled_y(y2, units, rng)
    boots = _spearman_rows(xa[units], yb) - _spearman_rows(xb[units], yb)
    lo, hi = _interval(boots, level)
    return CorrelationDifference(ra - rb, lo, hi, bootstrap_p(boots), ra, rb, n, n_boot, level)


def within_noise(lo: float | None, hi: float | None) -> str:
    """What a statistic whose 95% interval covers 0 adds to its text: within noise, which
    is no verdict on the sign (empty when the interval excludes 0 or is undefined).

    >>> within_noise(-0.87, 0.06)
    ' (within noise: the interval covers 0)'
    """
    ok = lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi)
    return " (within noise: the interval covers 0)" if ok and lo <= 0 <= hi else ""


def group_difference(a: ArrayLike, b: ArrayLike, *, n_boot: int = 10_000, level: float = 0.95,
                     seed: int = 0) -> PairedDelta:
    """Mean tau of one group of sets minus another's, per prompt, with a bootstrap that
    resamples the sets within each group and the prompts.

    ``a`` and ``b`` are ``[sets, prompts]`` (seed-averaged per-prompt tau, prompts in the
    same order, NaN where missing). The statistic is the mean over prompts of
    (mean over ``a``'s sets - mean over ``b``'s sets); each replicate draws the sets of each
    group with replacement and one prompt sample for both, so the interval carries the
    choice of sets as well as the prompts (a paired bootstrap over prompts alone would
    treat the few sets of a group as the whole population). ``sd`` is the SD of the
    per-prompt group difference, ``n`` the prompts both groups scored.
    """
    _check_level(level, n_boot)
    a, b = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the groups have {a.shape[1]} and {b.shape[1]} prompts: score both on the same prompts")
    ok = np.isfinite(a).all(0) & np.isfinite(b).all(0)
    a, b = a[:, ok], b[:, ok]
    n = a.shape[1]
    if n < 2:
        raise ValueError(f"only {n} prompt(s) scored by every set: a bootstrap needs at least 2")
    d = a.mean(0) - b.mean(0)
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for i in range(n_boot):  # one replicate at a time keeps memory at [sets, prompts]
        cols = rng.integers(0, n, n)
        ra, rb = rng.integers(0, len(a), len(a)), rng.integers(0, len(b), len(b))
        boots[i] = a[ra][:, cols].mean() - b[rb][:, cols].mean()
    lo, hi = _interval(boots, level)
    p = bootstrap_p(boots)
    return PairedDelta(mean=float(d.mean()), lo=lo, hi=hi, p=p, n=n, sd=float(d.std(ddof=1)),
                       n_boot=n_boot, level=level, p_mcse=p_mcse(p, n_boot))


def min_detectable_delta(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference a paired two-sided test detects with ``power``.

    Normal approximation for a paired design with ``n`` prompts whose per-prompt
    differences have standard deviation ``sd``:
    ``MDE = (z_{1 - alpha/2} + z_{power}) * sd / sqrt(n)``. For Holm across m tests use
    the strictest level, ``alpha / m``.

    >>> round(min_detectable_delta(1.0, 100), 4)
    0.2802
    """
    if n < 1 or not sd >= 0:
        raise ValueError(f"need n >= 1 and sd >= 0, got n={n}, sd={sd}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie in (0, 1), got alpha={alpha}, power={power}")
    z = NormalDist()
    return float((z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / np.sqrt(n))


def power_at(delta: float, sd: float, n: int, *, alpha: float = 0.05) -> float:
    """Power of the paired two-sided z-test to detect a true mean difference ``delta``
    (the inverse of :func:`min_detectable_delta`, both tails counted)."""
    if n < 1 or not sd > 0:
        raise ValueError(f"need n >= 1 and sd > 0, got n={n}, sd={sd}")
    z = NormalDist()
    crit = z.inv_cdf(1 - alpha / 2)
    shift = delta * np.sqrt(n) / sd
    return float(z.cdf(shift - crit) + z.cdf(-shift - crit))


@dataclass(frozen=True)
class Spread:
    """``n`` repeated measurements of one quantity (e.g. a speedup in each interleaved round):
    their mean with a Student-t interval at ``level``, their standard deviation (ddof=1) and
    range. With fewer than two measurements the interval and ``sd`` are NaN."""

    mean: float
    lo: float
    hi: float
    sd: float
    min: float
    max: float
    n: int
    level: float


def repeat_spread(values: ArrayLike, level: float = 0.95) -> Spread:
    """The :class:`Spread` of repeated measurements (NaNs dropped).

    >>> s = repeat_spread([1.2, 1.3, 1.25, 1.35, 1.15])
    >>> round(s.mean, 3), round(s.lo, 3), round(s.hi, 3), s.min, s.max, s.n
    (1.25, 1.152, 1.348, 1.15, 1.35, 5)
    """
    from scipy.stats import t

    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not 0 < level < 1:
        raise ValueError(f"level {level}: must lie strictly between 0 and 1")
    if len(v) == 0:
        raise ValueError("repeat_spread needs at least one finite value")
    mean = float(v.mean())
    if len(v) < 2:
        return Spread(mean, float("nan"), float("nan"), float("nan"), float(v.min()), float(v.max()), 1, level)
    sd = float(v.std(ddof=1))
    half = float(t.ppf((1 + level) / 2, len(v) - 1) * sd / np.sqrt(len(v)))
    return Spread(mean, mean - half, mean + half, sd, float(v.min()), float(v.max()), len(v), level)


def prompt_speedup(per_prompt: Sequence[Mapping[str, Any]], method: str, reference: str = "plain_t0", *,
                   n_boot: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """The pooled speedup of ``method`` over ``reference`` (total tokens over total wall time,
    each prompt's runs summed over the interleaved rounds) with its 95% bootstrap interval over
    the **prompts**: the prompts are the sample, the rounds repeat the same prompts, so an
    interval over rounds is too narrow. ``per_prompt``: the decoding entry's rows (one per
    prompt and round), each method's run as ``{tokens, wall_s}`` (the study's loop) or
    ``{tokens, ms}`` (the engines' benchmarks). Returns ``speedup``, ``lo``, ``hi`` and ``n`` (prompts).

    >>> rows = [{"id": i, "plain_t0": {"tokens": 10, "wall_s": 1.0}, "spec": {"tokens": 10, "wall_s": w}}
    ...         for i, w in (("a", 0.5), ("b", 1.0), ("a", 0.5), ("b", 1.0))]
    >>> d = prompt_speedup(rows, "spec", n_boot=200)
    >>> round(d["speedup"], 3), d["n"], d["lo"] <= d["speedup"] <= d["hi"]
    (1.333, 2, True)
    """
    ids = list(dict.fromkeys(r["id"] for r in per_prompt if method in r and reference in r))
    if len(ids) < 2:
        return {"speedup": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": len(ids)}
    def seconds(run: Mapping[str, Any]) -> float:
        return run["wall_s"] if "wall_s" in run else run["ms"] / 1000

    arr = np.array([[sum(v(r[k]) for r in per_prompt if r["id"] == i and method in r) for k in (reference, method)
                     for v in (lambda run: run["tokens"], seconds)] for i in ids], dtype=float)
    tot = arr.sum(axis=0)
    idx = np.random.default_rng(seed).integers(0, len(arr), size=(n_boot, len(arr)))
    boot = arr[idx].sum(axis=1)
    ratio = (boot[:, 2] / boot[:, 3]) / (boot[:, 0] / boot[:, 1])
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    return {"speedup": float((tot[2] / tot[3]) / (tot[0] / tot[1])), "lo": float(lo), "hi": float(hi), "n": len(ids)}
