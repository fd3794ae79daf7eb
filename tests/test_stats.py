"""Paired statistics: values on small hand-checked data, and the power formula by simulation."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from scipy.stats import spearmanr

from activation_wave.core import stats
from activation_wave.core.stats import (bootstrap_p, holm, min_detectable_delta, paired_bootstrap, power_at, seed_mean,
                                   spearman, spearman_ci, spearman_difference)


def test_docstring_examples():
    assert doctest.testmod(stats).failed == 0


def test_seed_mean_averages_seeds_per_prompt_and_skips_missing():
    tau = np.array([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan]])
    np.testing.assert_array_equal(seed_mean(tau), [2.0, 2.0, np.nan])
    np.testing.assert_array_equal(seed_mean([1.0, 2.0]), [1.0, 2.0])
    with pytest.raises(ValueError, match="seeds, prompts"):
        seed_mean(np.zeros((2, 2, 2)))


def test_paired_bootstrap_mean_sd_and_interval_on_a_constant_shift():
    ref = np.array([[1.2, 1.5, 1.3, 1.7, 1.1], [1.4, 1.5, 1.1, 1.7, 1.3]])  # two seeds
    new = seed_mean(ref) + 0.05  # one seed, every prompt exactly 0.05 better
    d = paired_bootstrap(new, ref, n_boot=500, seed=1)
    assert d.mean == pytest.approx(0.05)
    assert d.sd == pytest.approx(0.0, abs=1e-12)
    assert d.lo == pytest.approx(0.05) and d.hi == pytest.approx(0.05)
    assert d.p == pytest.approx(2 / 501)  # no replicate at or below 0: the smallest p the bootstrap can give
    assert d.n == 5


def test_paired_bootstrap_matches_the_textbook_numbers():
    rng = np.random.default_rng(0)
    diff = rng.normal(0.01, 0.1, size=400)
    ref = rng.normal(1.4, 0.2, size=400)
    d = paired_bootstrap(ref + diff, ref, n_boot=4000, seed=0)
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    assert d.mean == pytest.approx(diff.mean())
    assert d.sd == pytest.approx(diff.std(ddof=1))
    # the percentile interval of a mean is close to mean +- 1.96 se for n = 400
    assert d.lo == pytest.approx(diff.mean() - 1.96 * se, abs=0.15 * se)
    assert d.hi == pytest.approx(diff.mean() + 1.96 * se, abs=0.15 * se)
    from statistics import NormalDist
    z_p = 2 * (1 - NormalDist().cdf(abs(diff.mean()) / se))
    assert d.p == pytest.approx(z_p, abs=0.015)


def test_paired_bootstrap_drops_missing_prompts_and_is_seeded():
    a = np.array([1.0, 2.0, np.nan, 1.5])
    b = np.array([0.5, 2.5, 1.0, 1.0])
    d1 = paired_bootstrap(a, b, n_boot=300, seed=3)
    d2 = paired_bootstrap(a, b, n_boot=300, seed=3)
    assert d1 == d2 and d1.n == 3
    assert d1.mean == pytest.approx((0.5 - 0.5 + 0.5) / 3)
    with pytest.raises(ValueError, match="same prompts"):
        paired_bootstrap(a, b[:3])


def test_bootstrap_p_counts_both_tails():
    assert bootstrap_p([1, 2, 3, -1]) == pytest.approx(2 * 2 / 5)
    assert bootstrap_p([-1, -2, -3]) == pytest.approx(2 / 4)
    assert bootstrap_p([0.0, 0.0]) == 1.0


def test_bootstrap_p_splits_replicates_at_zero_between_the_tails():
    # 50 below 0, 23 exactly 0, 27 above: the old rule counted the 23 ties in both tails,
    # min(73, 50) = 50 -> p = 2 * 51 / 101 > 1 -> 1; half of them go to each tail instead
    r = [-1.0] * 50 + [0.0] * 23 + [1.0] * 27
    assert bootstrap_p(r) == pytest.approx(2 * (27 + 11.5 + 1) / 101)
    # the same replicates, mirrored: the same p (two-sided)
    assert bootstrap_p([-x for x in r]) == bootstrap_p(r)
    # without ties nothing changes; all ties: p = 1 (capped)
    r2 = np.random.default_rng(0).normal(0.3, 1.0, 999)
    assert bootstrap_p(r2) == pytest.approx(2 * (min((r2 < 0).sum(), (r2 > 0).sum()) + 1) / 1000)
    assert bootstrap_p([0.0] * 10) == 1.0
    # a tied share never lowers p below the share of replicates on the far side
    assert bootstrap_p([0.0] * 60 + [1.0] * 40) == pytest.approx(min(1.0, 2 * (30 + 1) / 101))


def test_bootstrap_mean_ci_and_mean_ci_match_the_intervals_already_in_the_results_files():
    """The per-set intervals chapter 7 stored (computed with experiment.bootstrap_mean_ci
    before it moved to stats) come out identical from stats.mean_ci."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data" / "results" / "default" / "smollm2-135m"
    xd = json.loads((root / "07_cross_drafters.json").read_text())
    for s in xd["sets"]:
        tau, lo, hi = stats.mean_ci(s["per_prompt"])
        assert (tau, lo, hi) == (s["tau"], s["lo"], s["hi"])
    assert np.isnan(stats.bootstrap_mean_ci([1.0])[0]) and np.isnan(stats.mean_ci([None, None])[0])


def test_h3_recomputed_from_the_committed_per_prompt_tau_no_longer_double_counts_ties():
    """H3's statistic from 06_predictors.json's own inputs: same delta and interval as
    stored, and a p that counts the replicates at exactly 0 once."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data" / "results" / "default" / "smollm2-135m"
    pred = json.loads((root / "06_predictors.json").read_text())
    tri = [s for s in pred["sets"] if len(s["layers"]) == 3 and not s["set"].endswith("+norm")]
    y = np.array([[np.nan if v is None else v for v in s["per_prompt"]] for s in tri], float)
    s2 = {q: np.array([pred["scores"][s["set"]][f"renyi2_q{q}"] for s in tri]) for q in ("0", "0.5")}
    d = spearman_difference(s2["0.5"], s2["0"], y, n_boot=pred["n_boot"])
    stored = next(f for f in pred["filtering"] if f["quantile"] == 0.5)
    assert (d.delta, d.lo, d.hi) == pytest.approx((stored["delta_vs_unfiltered"], stored["delta_lo"],
                                                   stored["delta_hi"]))
    assert d.p <= stored["delta_p"]  # ties no longer counted in both tails


def test_holm_against_a_hand_computed_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert holm([0.5, 0.6]) == pytest.approx((1.0, 1.0))
    adj = holm([0.01, float("nan"), 0.02])  # NaN does not count in m
    assert adj[0] == pytest.approx(0.02) and np.isnan(adj[1]) and adj[2] == pytest.approx(0.02)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_spearman_matches_scipy_with_ties_and_drops_nan():
    x = [1.0, 2.0, 2.0, 3.0, 5.0, np.nan]
    y = [2.0, 1.0, 4.0, 3.0, 6.0, 1.0]
    assert spearman(x, y) == pytest.approx(spearmanr(x[:5], y[:5]).statistic)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert np.isnan(spearman([1, 2], [1, 2]))


def test_spearman_ci_on_a_perfect_and_on_a_noisy_relation():
    x = np.arange(10.0)
    perfect = spearman_ci(x, x ** 2, n_boot=300)
    assert perfect.rho == 1.0 and perfect.n == 10
    assert perfect.lo == pytest.approx(1.0) and perfect.hi == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    noisy = spearman_ci(x, rng.normal(size=10), n_boot=500)
    assert noisy.lo < noisy.rho < noisy.hi and noisy.lo < 0 < noisy.hi


def test_spearman_ci_per_prompt_tau_widens_the_interval():
    rng = np.random.default_rng(1)
    x = np.arange(12.0)
    # tau per prompt: a weak trend in x under large per-prompt noise shared by nothing
    per_prompt = 0.01 * x[:, None] + rng.normal(0, 0.3, size=(12, 40))
    flat = spearman_ci(x, per_prompt.mean(1), n_boot=800, seed=0)
    both = spearman_ci(x, per_prompt, n_boot=800, seed=0)
    assert both.rho == pytest.approx(flat.rho)  # the point estimate uses the mean over prompts
    assert both.hi - both.lo > flat.hi - flat.lo
    with pytest.raises(ValueError, match="units"):
        spearman_ci(x, per_prompt[:5])


def test_spearman_difference_is_zero_for_the_same_predictor_and_positive_for_the_better_one():
    rng = np.random.default_rng(2)
    y = rng.normal(size=30)
    good = y + rng.normal(0, 0.1, size=30)
    bad = rng.normal(size=30)
    same = spearman_difference(good, good, y, n_boot=300)
    assert same.delta == 0 and same.lo == 0 and same.hi == 0 and same.p == 1.0
    diff = spearman_difference(good, bad, y, n_boot=1000)
    assert diff.delta == pytest.approx(spearman(good, y) - spearman(bad, y))
    assert diff.lo > 0 and diff.p < 0.01 and diff.n == 30


def test_group_difference_resamples_the_sets_of_each_group_as_well_as_the_prompts():
    rng = np.random.default_rng(0)
    base = rng.normal(1.3, 0.1, 96)
    # two groups of 3 sets, a constant shift of -0.02: the difference is exact, the interval tight
    a, b = np.stack([base - 0.02] * 3), np.stack([base] * 3)
    d = stats.group_difference(a, b, n_boot=2000)
    assert d.mean == pytest.approx(-0.02) and d.lo == pytest.approx(-0.02) and d.hi == pytest.approx(-0.02)
    assert d.n == 96 and d.p < 0.01
    # the same mean shift, but the sets within each group differ: the interval widens past
    # a paired bootstrap of the group means over prompts alone
    a = np.stack([base - 0.02 + off for off in (-0.03, 0.0, 0.03)])
    b = np.stack([base + off for off in (-0.03, 0.0, 0.03)])
    wide = stats.group_difference(a, b, n_boot=2000)
    narrow = paired_bootstrap(a.mean(0), b.mean(0), n_boot=2000)
    assert wide.mean == pytest.approx(-0.02) and (wide.hi - wide.lo) > 3 * (narrow.hi - narrow.lo)
    # a prompt missing in one set is dropped for all
    a[0, 5] = np.nan
    assert stats.group_difference(a, b, n_boot=200).n == 95
    with pytest.raises(ValueError, match="same prompts"):
        stats.group_difference(a, b[:, :10])


def test_within_noise_reads_the_interval():
    assert stats.within_noise(-0.87, 0.06).startswith(" (within noise")
    assert stats.within_noise(0.0, 0.012) != "" and stats.within_noise(0.001, 0.012) == ""
    assert stats.within_noise(None, 0.1) == "" and stats.within_noise(float("nan"), 0.1) == ""


def test_min_detectable_delta_known_value_and_inverse():
    # (1.959964 + 0.841621) * 1 / sqrt(100)
    assert min_detectable_delta(1.0, 100) == pytest.approx(0.2801585, abs=1e-6)
    assert min_detectable_delta(0.2, 96, alpha=0.05 / 4) == pytest.approx(
        (2.4976 + 0.8416) * 0.2 / np.sqrt(96), abs=1e-4)
    mde = min_detectable_delta(0.3, 50)
    assert power_at(mde, 0.3, 50) == pytest.approx(0.8, abs=1e-3)  # the lower tail adds ~1e-6
    with pytest.raises(ValueError, match="n >= 1"):
        min_detectable_delta(1.0, 0)


def test_power_at_the_mde_is_about_08_in_simulation():
    rng = np.random.default_rng(0)
    sd, n, sims = 0.25, 60, 4000
    mde = min_detectable_delta(sd, n)
    d = rng.normal(mde, sd, size=(sims, n))
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
    power = float((np.abs(t) > 1.959964).mean())
    # estimated SD and a normal critical value: power within simulation error of 0.8
    assert power == pytest.approx(0.8, abs=0.025)
