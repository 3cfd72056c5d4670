"""e2e.analysis.estimators against hand-computed values, against scipy, and for calibration on A/A data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from e2e.analysis.estimators.estimates import median_range, relative_range
from e2e.analysis.estimators.median_ratio import (
    INTERVAL_METHOD, RatioEstimate, compare_runs, ratio_of_medians, verdict_for,
    welch_log_ratio_interval
)

E = math.e


def test_median_range_known_values() -> None:
    assert median_range([6.74, 6.65, 6.73]) == median_range([6.65, 6.73, 6.74])
    mr = median_range([6.74, 6.65, 6.73])
    assert (mr.median, mr.low, mr.high, mr.n) == (6.73, 6.65, 6.74, 3)
    assert median_range([1.0, 2.0, 4.0, 10.0]).median == 3.0


def test_relative_range_known_values() -> None:
    assert relative_range([9.0, 10.0, 11.0]) == pytest.approx(0.2)
    assert relative_range([5.0]) == 0.0
    assert relative_range([-1.0, 0.0, 1.0]) == math.inf
    with pytest.raises(ValueError):
        relative_range([])
    with pytest.raises(ValueError):
        relative_range([1.0, float("nan")])


def test_welch_interval_known_values() -> None:
    # logs: arm 1,2,3 (mean 2, var 1); baseline 0,1,2 (mean 1, var 1)
    # se = sqrt(2/3), df = 4, t(0.975, 4) = 2.7764451052
    lo, hi = welch_log_ratio_interval([E, E**2, E**3], [1.0, E, E**2])
    half = 2.7764451052 * math.sqrt(2 / 3)
    assert lo == pytest.approx(math.exp(1 - half), rel=1e-9)
    assert hi == pytest.approx(math.exp(1 + half), rel=1e-9)
    assert ratio_of_medians([E, E**2, E**3], [1.0, E, E**2]) == pytest.approx(E)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("seed", range(5))
def test_welch_interval_matches_scipy_ttest_on_logs(confidence: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = 6.7 * np.exp(rng.normal(0.0, 0.02, size=3 + seed))
    b = 6.9 * np.exp(rng.normal(0.0, 0.05, size=3 + 2 * seed))
    ci = sps.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(confidence)
    lo, hi = welch_log_ratio_interval(a, b, confidence=confidence)
    assert math.log(lo) == pytest.approx(ci.low, rel=1e-9, abs=1e-12)
    assert math.log(hi) == pytest.approx(ci.high, rel=1e-9, abs=1e-12)


def test_interval_needs_two_runs_per_side_and_positive_values() -> None:
    assert welch_log_ratio_interval([1.0], [1.0, 2.0]) is None
    assert welch_log_ratio_interval([1.0, 1.0], [2.0, 2.0]) == (0.5, 0.5)
    with pytest.raises(ValueError):
        welch_log_ratio_interval([1.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        welch_log_ratio_interval([1.0, 2.0], [1.0, 2.0], confidence=1.0)


positive = st.floats(min_value=0.1, max_value=1000.0, allow_nan=False)
samples = st.lists(positive, min_size=2, max_size=10)


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.floats(min_value=0.01, max_value=100.0))
def test_interval_is_scale_free_and_antisymmetric(a: list[float], b: list[float], k: float) -> None:
    lo, hi = welch_log_ratio_interval(a, b)
    assert lo <= hi
    # scaling both arms by k changes nothing; swapping arms inverts the interval
    slo, shi = welch_log_ratio_interval([x * k for x in a], [x * k for x in b])
    assert slo == pytest.approx(lo, rel=1e-6) and shi == pytest.approx(hi, rel=1e-6)
    ilo, ihi = welch_log_ratio_interval(b, a)
    assert ilo == pytest.approx(1 / hi, rel=1e-6) and ihi == pytest.approx(1 / lo, rel=1e-6)


def _est(ratio: float, low: float | None, high: float | None) -> RatioEstimate:
    return RatioEstimate(ratio, low, high, 0.95, INTERVAL_METHOD)


def test_verdict_direction_and_threshold() -> None:
    down = _est(0.969, 0.960, 0.978)  # −3.1 % [−4.0, −2.2]
    assert verdict_for(down, higher_is_better=False) == "faster"
    assert verdict_for(down, higher_is_better=True) == "slower"
    up = _est(1.05, 1.01, 1.09)
    assert verdict_for(up, higher_is_better=False) == "slower"
    assert verdict_for(up, higher_is_better=True) == "faster"
    assert verdict_for(_est(0.99, 0.97, 1.01), higher_is_better=False) == "within noise"
    # resolved but smaller than the minimum practical effect
    small = _est(0.995, 0.992, 0.998)
    assert verdict_for(small, higher_is_better=False, min_effect_pct=0.0) == "faster"
    assert verdict_for(small, higher_is_better=False, min_effect_pct=1.0) == "within noise"
    # point estimate (medians) on the other side of 1 than the interval (means): not called
    assert verdict_for(_est(1.001, 0.95, 0.99), higher_is_better=False) == "within noise"
    assert verdict_for(_est(0.9, None, None), higher_is_better=False) == "too few runs"


def test_compare_runs_point_is_ratio_of_medians() -> None:
    est = compare_runs([6.5, 6.52, 6.55], [6.73, 6.65, 6.74])
    assert est.ratio == pytest.approx(6.52 / 6.73)
    assert est.pct == pytest.approx((6.52 / 6.73 - 1) * 100)
    assert est.pct_low < est.pct < est.pct_high < 0
    assert est.method == INTERVAL_METHOD


def _aa_false_alarm_rate(n: int, sigma: float, sims: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    called = 0
    for _ in range(sims):
        a = 6.7 * np.exp(rng.normal(0.0, sigma, n))
        b = 6.7 * np.exp(rng.normal(0.0, sigma, n))
        v = verdict_for(compare_runs(a, b), higher_is_better=False, min_effect_pct=1.0)
        called += v != "within noise"
    return called / sims


@pytest.mark.slow
def test_a_a_3_vs_3_at_1_percent_noise_is_not_over_confident() -> None:
    # nominal 5 %; Welch at equal variances is slightly conservative
    rate = _aa_false_alarm_rate(3, 0.01, 3000, seed=1)
    assert rate <= 0.06, rate


def test_detects_a_3_percent_change_with_3_runs_at_half_percent_noise() -> None:
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(300):
        base = 6.73 * np.exp(rng.normal(0.0, 0.005, 3))
        pr = 0.97 * 6.73 * np.exp(rng.normal(0.0, 0.005, 3))
        hits += verdict_for(compare_runs(pr, base), higher_is_better=False, min_effect_pct=1.0) == "faster"
    assert hits / 300 > 0.9


@pytest.mark.slow
def test_why_not_a_bootstrap_of_medians_scipy_is_over_confident_at_3_vs_3() -> None:
    """The rejected alternative: scipy's percentile bootstrap of the ratio of medians calls an
    A/A pair different about 10 % of the time at a nominal 95 % (it reduces to 'complete
    separation', probability 2/20)."""
    rng = np.random.default_rng(3)
    sims, called = 400, 0
    for i in range(sims):
        a = np.exp(rng.normal(0.0, 0.01, 3))
        b = np.exp(rng.normal(0.0, 0.01, 3))
        res = sps.bootstrap((a, b), lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
                            vectorized=True, n_resamples=999, method="percentile", random_state=i)
        ci = res.confidence_interval
        called += not (ci.low <= 1.0 <= ci.high)
    assert called / sims > 0.065


def test_why_not_a_permutation_test_scipy_cannot_reach_5_percent_at_3_vs_3() -> None:
    res = sps.permutation_test(
        (np.log([1.0, 1.01, 1.02]), np.log([1.10, 1.11, 1.12])),
        lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent", vectorized=True, n_resamples=np.inf,
    )
    assert res.pvalue == pytest.approx(0.1)  # 2 of C(6, 3) = 20 arrangements
    # the t-interval resolves the same clear 10 % separation
    assert verdict_for(compare_runs([1.10, 1.11, 1.12], [1.0, 1.01, 1.02]),
                       higher_is_better=False) == "slower"
