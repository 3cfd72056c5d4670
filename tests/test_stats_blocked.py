"""e2e.analysis.estimators' blocked comparison, noise floor, MDE, four verdicts, Holm and adaptive repeats:
against scipy, hand-computed values and small simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from e2e.analysis.estimators.estimates import (
    RESOLUTION_SD, blocked_log_ratio, log_ratio, mde_log, welch_log_ratio
)
from e2e.analysis.estimators.multiplicity import holm
from e2e.analysis.estimators.power import runs_needed
from e2e.analysis.estimators.verdicts import call


@pytest.mark.parametrize("seed", range(4))
def test_blocked_interval_is_scipys_paired_t_on_logs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    drift = rng.normal(0, 0.05, 5)
    base = 3.0 * np.exp(drift + rng.normal(0, 0.01, 5))
    arm = 3.1 * np.exp(drift + rng.normal(0, 0.01, 5))
    est = blocked_log_ratio(dict(enumerate(arm)), dict(enumerate(base)))
    ci = sps.ttest_rel(np.log(arm), np.log(base)).confidence_interval(0.95)
    lo, hi = est.interval(0.95)
    assert math.log(lo) == pytest.approx(ci.low, rel=1e-9)
    assert math.log(hi) == pytest.approx(ci.high, rel=1e-9)
    assert est.p_value() == pytest.approx(sps.ttest_rel(np.log(arm), np.log(base)).pvalue, rel=1e-9)
    assert est.method == "blocked" and est.n_blocks == 5 and est.df == 4 and not est.floored


def test_welch_estimate_is_scipys_welch_on_logs() -> None:
    a, b = [3.0, 3.2, 3.1, 3.3], [2.9, 3.0, 3.05]
    est = welch_log_ratio(a, b)
    ci = sps.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(0.9)
    lo, hi = est.interval(0.9)
    assert (math.log(lo), math.log(hi)) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert welch_log_ratio([1.0], [1.0, 2.0]) is None


def test_point_and_interval_estimate_the_geometric_mean_ratio() -> None:
    arm, base = {1: 2.0, 2: 8.0}, {1: 1.0, 2: 2.0}  # ratios 2 and 4: geometric mean sqrt(8)
    est = blocked_log_ratio(arm, base)
    assert est.ratio == pytest.approx(math.sqrt(8))
    lo, hi = est.interval(0.95)
    assert lo < est.ratio < hi
    assert math.sqrt(lo * hi) == pytest.approx(est.ratio)


def test_log_ratio_pairs_blocks_and_falls_back_to_welch() -> None:
    arm = [((1, "a"), 3.0), ((2, "a"), 3.3), ((3, "a"), 3.1), (None, 9.0)]
    base = [((1, "a"), 2.9), ((2, "a"), 3.2), ((4, "a"), 3.0)]
    est = log_ratio(arm, base)
    assert est.method == "blocked" and est.n_blocks == 2 and est.dropped == 3
    assert est.log_ratio == pytest.approx((math.log(3.0 / 2.9) + math.log(3.3 / 3.2)) / 2)
    other_host = [((1, "b"), 3.0), ((2, "b"), 3.3)]
    assert log_ratio(other_host, base).method == "welch"
    # two runs of one side in one block: their geometric mean is paired
    twice = log_ratio([(1, 2.0), (1, 8.0), (2, 4.0)], [(1, 2.0), (2, 2.0)])
    assert twice.log_ratio == pytest.approx((math.log(2.0) + math.log(2.0)) / 2)


def test_identical_values_never_give_a_zero_width_interval() -> None:
    est = blocked_log_ratio({1: 5.0, 2: 5.0, 3: 5.0}, {1: 5.0, 2: 5.0, 3: 5.0})
    assert est.floored and est.raw_noise_sd == 0.0
    assert est.noise_sd == pytest.approx(math.sqrt(2) * RESOLUTION_SD)
    lo, hi = est.interval(0.95)
    assert lo < 1.0 < hi and hi - lo > 0.004
    w = welch_log_ratio([5.0, 5.0, 5.0], [5.01, 5.01, 5.01])
    assert w.floored and w.interval(0.95)[0] < w.ratio < w.interval(0.95)[1]
    # a larger floor from other cells' noise widens it further
    wide = blocked_log_ratio({1: 5.0, 2: 5.0, 3: 5.0}, {1: 5.0, 2: 5.0, 3: 5.0}, floor_sd=0.02)
    assert wide.interval(0.95)[1] > hi


def _est(arm: list[float], base: list[float]):
    return blocked_log_ratio(dict(enumerate(arm)), dict(enumerate(base)))


def test_four_verdicts() -> None:
    base = [10.0, 10.05, 9.95, 10.02, 9.98, 10.0]
    slower = _est([10.5, 10.56, 10.44, 10.52, 10.49, 10.51], base)
    assert call(slower, time_metric=True, min_effect_pct=1.0) == "slower"
    assert call(slower, time_metric=False, min_effect_pct=1.0) == "higher"
    faster = _est([9.5, 9.56, 9.44, 9.52, 9.47, 9.5], base)
    assert call(faster, time_metric=True) == "faster"
    assert call(faster, time_metric=False) == "lower"
    same = _est([10.01, 10.04, 9.96, 10.02, 9.99, 10.0], base)
    assert call(same, time_metric=True, equivalence_pct=1.0) == "equivalent"
    # TOST at alpha = the (1 - 2 alpha) interval inside the band
    lo, hi = same.interval(0.90)
    assert 0.99 < lo and hi < 1.01
    assert call(same, time_metric=True, equivalence_pct=0.05) == "inconclusive"
    noisy = _est([10.5, 9.6, 10.3], [10.0, 10.1, 9.7])
    assert call(noisy, time_metric=True) == "inconclusive"
    assert call(None, time_metric=True) == "too few runs"
    # resolved but under the minimum effect, and not inside the band: inconclusive
    small = _est([10.06, 10.11, 10.01, 10.08, 10.04, 10.06], base)
    assert small.interval(0.95)[0] > 1.0
    assert call(small, time_metric=True, min_effect_pct=1.0, equivalence_pct=0.3) == "inconclusive"
    assert call(small, time_metric=True, min_effect_pct=0.0) == "slower"


def test_tost_p_is_the_larger_one_sided_p() -> None:
    arm, base = [10.05, 10.0, 9.93, 10.06], [10.0, 10.05, 9.95, 10.02]
    est = _est(arm, base)
    assert not est.floored
    d = np.log(arm) - np.log(base)
    p_lo = sps.ttest_1samp(d, math.log(0.99), alternative="greater").pvalue
    p_hi = sps.ttest_1samp(d, math.log(1.01), alternative="less").pvalue
    assert est.tost_p_value(1.0) == pytest.approx(max(p_lo, p_hi), rel=1e-9)


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.02, 0.04, 0.30 -> 0.04, 0.06, 0.08, 0.30 (monotone), back in input order
    assert holm([0.04, 0.01, 0.30, 0.02]) == pytest.approx([0.08, 0.04, 0.30, 0.06])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


@pytest.mark.slow
def test_mde_gives_about_80_percent_power_by_simulation() -> None:
    rng = np.random.default_rng(5)
    n, sigma = 6, 0.02
    se = sigma / math.sqrt(n)
    effect = mde_log(se, n - 1)
    hits = 0
    sims = 2000
    for _ in range(sims):
        d = rng.normal(effect, sigma, n)
        hits += sps.ttest_1samp(d, 0.0).pvalue < 0.05
    assert 0.74 < hits / sims < 0.86  # the t-quantile formula, not the exact noncentral t


def test_runs_needed_is_the_first_n_whose_mde_reaches_the_target() -> None:
    noise = 0.03  # sd of one pair's log ratio
    n = runs_needed(noise, 2.0)
    assert mde_log(noise / math.sqrt(n), n - 1) <= math.log(1.02)
    assert mde_log(noise / math.sqrt(n - 1), n - 2) > math.log(1.02)
    assert runs_needed(noise, 2.0, method="welch") <= n  # more df at the same se
    assert runs_needed(0.5, 0.01, max_runs=50) is None
    with pytest.raises(ValueError):
        runs_needed(0.0, 1.0)


