"""One model per cell, shared noise, the monotone floor, spending (e2e.analysis.estimators), each
against a computation by hand (numpy least squares / the formulas written out)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp
from scipy.special import digamma, polygamma

from e2e.analysis.estimators.estimates import blocked_log_ratio, mde_log
from e2e.analysis.estimators.moderation import trigamma_inverse
from e2e.analysis.estimators.power import detectable_effect, runs_needed
from e2e.analysis.estimators.sequential import look_at, spent_alpha
from e2e.analysis.estimators.model import ModelRun, cell_model
from e2e.analysis.estimators.moderation import Prior, fit_prior, floor_noise, moderate


def _cell(values: dict[str, list[float]], orders: list[list[str]]) -> list[ModelRun]:
    runs = []
    for k, order in enumerate(orders):
        for slot, arm in enumerate(order):
            runs.append(ModelRun(arm, (k + 1, None), slot, values[arm][k]))
    return runs


VALUES = {"main": [3.00, 3.10, 3.21], "rep": [3.02, 3.06, 3.25], "pr": [3.18, 3.30, 3.36]}
ORDERS = [["main", "rep", "pr"], ["pr", "main", "rep"], ["rep", "pr", "main"]]


def test_the_contrast_is_the_least_squares_coefficient_by_hand() -> None:
    runs = _cell(VALUES, ORDERS)
    fit = cell_model(runs, "main")
    # by hand: columns = 3 round dummies, arm dummies for rep and pr, slot
    x = np.array([[r.block[0] == 1, r.block[0] == 2, r.block[0] == 3, r.arm == "rep",
                   r.arm == "pr", r.slot] for r in runs], dtype=float)
    y = np.log([r.value for r in runs])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    df = len(y) - x.shape[1]
    s2 = float(resid @ resid) / df
    cov = s2 * np.linalg.inv(x.T @ x)
    assert fit.slot and fit.df == df == 3 and fit.s2 == pytest.approx(s2)
    pr = fit.estimates["pr"]
    assert pr.method == "model" and pr.log_ratio == pytest.approx(beta[4])
    assert pr.se == pytest.approx(math.sqrt(cov[4, 4]))
    assert pr.noise_sd == pytest.approx(math.sqrt(2 * s2))
    lo, hi = pr.interval(0.95)
    half = sp.t.ppf(0.975, 3) * math.sqrt(cov[4, 4])
    assert (lo, hi) == pytest.approx((math.exp(beta[4] - half), math.exp(beta[4] + half)))
    assert fit.estimates["rep"].log_ratio == pytest.approx(beta[3])


def test_two_arms_without_a_slot_term_are_the_paired_t() -> None:
    main = {1: 3.0, 2: 3.1, 3: 3.2}
    pr = {1: 3.1, 2: 3.15, 3: 3.33}
    runs = [ModelRun("main", (k, None), None, v) for k, v in main.items()]
    runs += [ModelRun("pr", (k, None), None, v) for k, v in pr.items()]
    fit = cell_model(runs, "main")
    paired = blocked_log_ratio(pr, main)
    e = fit.estimates["pr"]
    assert not fit.slot and e.df == paired.df == 2
    assert e.log_ratio == pytest.approx(paired.log_ratio) and e.se == pytest.approx(paired.se)


def test_a_linear_drift_within_rounds_is_removed_by_the_slot_term() -> None:
    """Pure drift, no noise: every arm equal, the calibration's old rotation (5 arms, 3 rounds)
    that puts d500 always right before main. Without the slot term it reads faster; with it
    the contrast is 0."""
    arms = ["main", "rep", "d100", "d250", "d500"]
    orders = [arms[k:] + arms[:k] for k in (1, 2, 3)]
    runs = []
    rng = np.random.default_rng(0)
    for k, order in enumerate(orders):
        for slot, arm in enumerate(order):
            runs.append(ModelRun(arm, (k, None), slot,
                                 3.0 * math.exp(0.02 * (k * 5 + slot) + rng.normal(0, 1e-4))))
    fit = cell_model(runs, "main")
    assert fit.slot and fit.df == 7 and abs(fit.estimates["d500"].log_ratio) < 1e-3
    no_slot = cell_model([ModelRun(r.arm, r.block, None, r.value) for r in runs], "main")
    assert no_slot.estimates["d500"].log_ratio < -0.015


def test_an_unfittable_cell_is_none() -> None:
    assert cell_model([ModelRun("main", (1, None), 0, 3.0), ModelRun("pr", (1, None), 1, 3.1)],
                      "main") is None  # no residual df
    assert cell_model([ModelRun("pr", (k, None), 0, 3.0) for k in range(3)], "main") is None
    # pr never shares a block with main: not estimable
    runs = [ModelRun("main", ("a", k), None, 3.0 + k / 10) for k in range(3)]
    runs += [ModelRun("pr", ("b", k), None, 3.0 + k / 10) for k in range(3)]
    assert cell_model(runs, "main") is None


def test_fit_prior_is_limmas_method_of_moments_by_hand() -> None:
    pairs = [(1.1e-4, 4.0), (2.5e-4, 4.0), (0.9e-4, 6.0), (1.8e-4, 3.0), (3.0e-4, 4.0)]
    s2 = np.array([p[0] for p in pairs])
    d = np.array([p[1] for p in pairs])
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    evar = e.var(ddof=1) - polygamma(1, d / 2).mean()
    prior = fit_prior(pairs)
    if evar > 0:
        d0 = min(2 * trigamma_inverse(evar), d.sum() - d.max())
        assert float(polygamma(1, trigamma_inverse(evar))) == pytest.approx(evar)
    else:
        d0 = d.sum() - d.max()
    assert prior.df == pytest.approx(d0) and prior.units == 5
    assert prior.s2 == pytest.approx(math.exp(e.mean() + digamma(d0 / 2) - math.log(d0 / 2)))
    # conservative with few: no prior from 2 variances
    assert fit_prior(pairs[:2]).df == 0.0


def test_moderation_by_hand() -> None:
    est = blocked_log_ratio({1: 3.1, 2: 3.2, 3: 3.3}, {1: 3.0, 2: 3.12, 3: 3.15})
    s2 = est.noise_sd ** 2 / 2  # per run
    prior = Prior(s2=4e-4, df=6.0, units=4)
    m = moderate(est, s2, prior)
    s2_mod = (6.0 * 4e-4 + 2 * s2) / (6.0 + 2)
    assert m.df == 8.0 and m.prior_df == 6.0 and m.residual_df == 2.0
    assert m.se == pytest.approx(math.sqrt(2 * s2_mod / 3))
    assert m.noise_sd == pytest.approx(math.sqrt(2 * s2_mod))
    assert moderate(est, s2, Prior(0.0, 0.0, 1)) == est  # no prior: unchanged
    # the MDE uses the moderated se and df, the noise made median-unbiased: sqrt(df / chi2 median)
    unbiased = m.se * math.sqrt(8 / sp.chi2.ppf(0.5, 8))
    assert m.mde_pct(0.95) == pytest.approx(
        (math.exp((sp.t.ppf(0.975, 8) + sp.t.ppf(0.8, 8)) * unbiased) - 1) * 100)


def test_the_floor_is_monotone() -> None:
    """A larger raw spread never gives a smaller floored noise (the old pooled floor raised
    0.09 % to 1.16 % but kept 0.15 %)."""
    base = {1: 3.0, 2: 3.0, 3: 3.0, 4: 3.0}
    out = []
    for spread in np.linspace(0.0, 0.02, 41):
        arm = {1: 3.0 * (1 + spread), 2: 3.0 * (1 - spread), 3: 3.0, 4: 3.0 * (1 + spread / 2)}
        e = blocked_log_ratio(arm, base)
        out.append(floor_noise(e, 0.005).noise_sd)
    assert all(b >= a - 1e-15 for a, b in zip(out, out[1:]))
    assert out[0] == pytest.approx(math.sqrt(2) * 0.005)


def test_spending_functions() -> None:
    assert spent_alpha(1.0) == pytest.approx(0.05)
    assert spent_alpha(1.0, spending="obrien-fleming") == pytest.approx(0.05)
    assert spent_alpha(1 / 3) == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 3))
    assert spent_alpha(1 / 3, spending="obrien-fleming") < 0.001 < spent_alpha(1 / 3)
    ts = np.linspace(0, 1, 11)
    assert all(np.diff([spent_alpha(t) for t in ts]) > 0)


def test_a_look_splits_its_alpha_over_the_comparisons_and_remembers_what_was_spent() -> None:
    big = blocked_log_ratio({1: 3.6, 2: 3.61, 3: 3.62}, {1: 3.0, 2: 3.0, 3: 3.01})
    same = blocked_log_ratio({1: 3.0, 2: 3.001, 3: 3.0}, {1: 3.0, 2: 3.0, 3: 3.0005})
    look = look_at([big, same], rounds=3, max_rounds=9)
    assert look.alpha == pytest.approx(spent_alpha(3 / 9))
    assert look.confidence == pytest.approx(1 - look.alpha / 2)
    assert look.decisions == ("difference", "equivalent") and look.stop
    later = look_at([big], rounds=4, max_rounds=9, spent_before=look.cumulative)
    assert later.alpha == pytest.approx(spent_alpha(4 / 9) - look.cumulative)
    # nothing left to spend: no decision, however clear
    none = look_at([big], rounds=4, max_rounds=9, spent_before=0.05)
    assert none.alpha == 0 and none.decisions == ("open",)
    assert look_at([big], rounds=2, max_rounds=9).alpha == 0.0


def test_runs_needed_uses_the_df_of_the_design() -> None:
    n = runs_needed(0.02, 3.0, method="model", arms=5, slot=True)
    df = 4 * (n - 1) - 1
    assert mde_log(0.02 / math.sqrt(n), df) <= math.log(1.03)
    assert mde_log(0.02 / math.sqrt(n - 1), 4 * (n - 2) - 1) > math.log(1.03)
    assert runs_needed(0.02, 3.0, method="model", arms=5) <= runs_needed(0.02, 3.0)
    assert detectable_effect(0.02, 3, method="model", arms=5) == pytest.approx(
        (math.exp(mde_log(0.02 / math.sqrt(3), 8)) - 1) * 100)
