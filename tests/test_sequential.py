"""The group-sequential boundaries of ``--until-settled`` (e2e.analysis.estimators.sequential) against an
independent reference: the multivariate normal probabilities of scipy (Genz's algorithm) for
the joint law of the looks' z statistics, corr(Z_i, Z_j) = √(I_i / I_j), and the values
published for the O'Brien–Fleming-type spending function."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp

from e2e.analysis.estimators.sequential import Look, boundaries, look_at, spending_at, spent_alpha
from e2e.analysis.estimators.estimates import LogRatio


def _inside(info, bounds, sides=2) -> float:
    """P(no crossing at any of the looks), by scipy's multivariate normal CDF."""
    info = np.asarray(info, dtype=float)
    cov = np.sqrt(np.minimum.outer(info, info) / np.maximum.outer(info, info))
    upper = np.asarray(bounds, dtype=float)
    lower = -upper if sides == 2 else np.full_like(upper, -np.inf)
    mvn = sp.multivariate_normal(mean=np.zeros(len(info)), cov=cov, maxpts=200_000 * len(info),
                                 abseps=1e-7, releps=1e-7)
    return float(mvn.cdf(upper, lower_limit=lower))


def _exits(info, bounds, sides=2) -> list[float]:
    """The reference probability of crossing first at each look."""
    inside = [1.0] + [_inside(info[:k], bounds[:k], sides) for k in range(1, len(info) + 1)]
    return [a - b for a, b in zip(inside, inside[1:])]


@pytest.mark.parametrize("spending", ["pocock", "obrien-fleming"])
@pytest.mark.parametrize("sides", [1, 2])
@pytest.mark.parametrize("info", [[3, 4, 5, 6, 7], [1, 2, 3, 4], [3, 5, 9]])
def test_boundaries_spend_what_the_function_allows(spending, sides, info):
    t = np.asarray(info) / info[-1]
    cumulative = [spending_at(x, 0.05, spending=spending, sides=sides) for x in t]
    increments = np.diff([0.0, *cumulative])
    bounds, spent = boundaries(info, increments, sides=sides)
    assert spent == pytest.approx(increments, abs=1e-7)
    assert _exits(info, bounds, sides) == pytest.approx(list(increments), abs=2e-5)
    assert sum(_exits(info, bounds, sides)) == pytest.approx(0.05, abs=3e-5)


def test_obrien_fleming_type_at_four_equal_looks_matches_the_published_boundaries():
    """Lan–DeMets O'Brien–Fleming-type spending, 4 equally spaced looks, two-sided α = 0.05:
    3.920, 2.774, 2.298, 2.043 (e.g. gsDesign's and ldbounds' tables; the first is
    z_{0.975} / √0.25 exactly)."""
    cumulative = [spending_at(k / 4, 0.05, spending="obrien-fleming") for k in range(1, 5)]
    bounds, _ = boundaries([1, 2, 3, 4], np.diff([0.0, *cumulative]))
    assert bounds == pytest.approx([3.920, 2.774, 2.298, 2.043], abs=1.5e-3)


def test_a_look_that_spends_nothing_has_no_boundary_and_later_looks_still_spend_exactly():
    bounds, spent = boundaries([3, 4, 5], [0.01, 0.0, 0.02])
    assert math.isinf(bounds[1]) and spent[1] == 0.0
    assert _exits([3, 5], [bounds[0], bounds[2]]) == pytest.approx([0.01, 0.02], abs=2e-5)


def test_kept_boundaries_are_used_as_they_were():
    first, _ = boundaries([3], [0.02])
    again, spent = boundaries([3, 6], [0.0, 0.01], fixed=[first[0]])
    assert again[0] == first[0] and spent[1] == pytest.approx(0.01, abs=1e-7)


def _est(log_ratio: float, se: float, df: float = 1e6) -> LogRatio:
    return LogRatio(method="model", log_ratio=log_ratio, se=se, df=df, noise_sd=se, raw_noise_sd=se,
                    n_arm=3, n_baseline=3, n_blocks=3, dropped=0, floored=False, floor_sd=0.001)


def test_later_looks_read_at_the_exact_boundary_not_the_increment():
    """A look after an earlier one is read at the boundary's nominal level, which is above the
    increment it spends (the looks are correlated); the union bound read it at the increment."""
    est = [_est(0.0, 0.01), _est(0.0, 0.01)]
    one = look_at(est, rounds=3, max_rounds=6)
    two = look_at(est, rounds=4, max_rounds=6, earlier=[one])
    assert one.alpha == pytest.approx(spent_alpha(3 / 6))
    assert two.alpha == pytest.approx(spent_alpha(4 / 6) - spent_alpha(3 / 6))
    per = two.alpha / 2
    assert 1.0 - two.confidence > per
    exits = _exits([3, 4], [one.boundary, two.boundary])
    assert exits == pytest.approx([one.alpha / 2, per], abs=2e-5)
    # the first look of a comparison is its increment exactly
    assert 1.0 - one.confidence == pytest.approx(one.alpha / 2, rel=1e-6)


def test_an_older_look_without_boundaries_is_read_from_its_confidence():
    old = Look(rounds=3, max_rounds=6, alpha=0.02, cumulative=0.02, confidence=1 - 0.02,
               decisions=("open",), stop=False)
    nxt = look_at([_est(0.0, 0.01)], rounds=4, max_rounds=6, earlier=[old])
    assert nxt.cumulative == pytest.approx(spent_alpha(4 / 6))
    exits = _exits([3, 4], [sp.norm.isf(0.01), nxt.boundary])
    assert exits[1] == pytest.approx(nxt.alpha, abs=2e-5)
