"""Time in the cell model (issue 33 item 3): the runs' start times on the host's timeline
(``run_times``), the AR(1) GLS fit against a whitening by hand, the folder's correlation
(REML over its headline cells, else the calibration's), and what the report says it used."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.frame import run_times
from e2e.analysis.sweep.summary import metric
from e2e.analysis.estimators.model import AR1_GRID, CALIBRATED_AR1_RHO, MIN_FOLDER_AR1_DF
from e2e.analysis.estimators.model import ModelRun, cell_model, folder_rho
from e2e.config import DuetConfig
from e2e.plan import DuetSpec
from e2e.plan import make_plan
from e2e.render import report_json
from e2e.results.records import RunMetrics, RunRecord, ServerInfo

ARMS = ["main", "b", "c", "d", "e"]


def _runs(rounds: int, rho: float, seed: int, effects=None) -> list[ModelRun]:
    """Every arm once a round, back to back (Williams rows by e2e's own planner order), the
    noise AR(1) with lag-1 ``rho`` over the run index (the time, in runs)."""
    from e2e.plan.plan import round_orders

    rng = np.random.default_rng(seed)
    orders = round_orders(ARMS, rounds, seed=seed)
    z = rng.standard_normal(rounds * len(ARMS))
    for i in range(1, len(z)):
        z[i] = rho * z[i - 1] + math.sqrt(1 - rho * rho) * z[i]
    runs, t = [], 0
    for k, order in enumerate(orders, start=1):
        for slot, arm in enumerate(order):
            value = 3.0 * math.exp(0.0125 * z[t] + (effects or {}).get(arm, 0.0))
            runs.append(ModelRun(arm, (k, "h"), slot, value, time=float(t)))
            t += 1
    return runs


def test_the_ar1_fit_is_gls_by_a_whitening_by_hand():
    runs = _runs(4, 0.5, seed=3, effects={"c": 0.02})
    ols = cell_model(runs, "main")
    assert ols.model == "ols" and ols.rho == 0.0 and ols.design is not None
    fit = cell_model(runs, "main", rho=0.48, rho_source="calibration")
    assert (fit.model, fit.rho, fit.rho_source) == ("ar1-gls", 0.48, "calibration")
    # by hand: corr = 0.48^|t_i - t_j|, whiten by its Cholesky factor, least squares
    t = np.array([r.time for r in runs])
    sigma = 0.48 ** np.abs(t[:, None] - t[None, :])
    x = np.array([[r.block[0] == k for k in range(1, 5)] + [r.arm == a for a in ARMS[1:]]
                  + [r.slot] for r in runs], dtype=float)
    y = np.log([r.value for r in runs])
    w = np.linalg.inv(np.linalg.cholesky(sigma))
    beta, *_ = np.linalg.lstsq(w @ x, w @ y, rcond=None)
    resid = w @ y - w @ x @ beta
    df = len(y) - x.shape[1]
    s2 = float(resid @ resid) / df
    cov = s2 * np.linalg.inv((w @ x).T @ (w @ x))
    c = fit.estimates["c"]
    assert c.log_ratio == pytest.approx(beta[4 + 1]) and c.se == pytest.approx(math.sqrt(cov[5, 5]))
    assert fit.df == df  # the calibration's correlation costs no df
    assert c.log_ratio != pytest.approx(ols.estimates["c"].log_ratio)
    assert cell_model(runs, "main", rho=0.48, rho_source="folder").df == df - 1


def test_the_errors_are_honest_for_every_plausible_correlation():
    """With the calibration's correlation (nothing in the folder says which is true) the
    standard errors and df are the worst over ρ 0–0.9: for each ρ_t the GLS estimator's
    variance under Σ(ρ_t), s² rescaled by E[rss], df by Satterthwaite (eigenvalues by hand)."""
    runs = _runs(4, 0.5, seed=3)
    plain = cell_model(runs, "main", rho=0.48, rho_source="calibration")
    fit = cell_model(runs, "main", rho=0.48, rho_source="calibration", plausible=AR1_GRID)
    assert fit.honest_for == (0.0, 0.9)
    assert all(fit.estimates[a].log_ratio == pytest.approx(plain.estimates[a].log_ratio)
               for a in ARMS[1:])
    assert all(fit.estimates[a].se >= plain.estimates[a].se - 1e-15 for a in ARMS[1:])
    assert fit.df < plain.df
    # by hand, dense: W from Σ(0.48)'s Cholesky, the worst over the grid
    t = np.array([r.time for r in runs])
    lag = np.abs(t[:, None] - t[None, :])
    w = np.linalg.inv(np.linalg.cholesky(0.48 ** lag))
    x = fit.design[1]
    xw = w @ x
    g = np.linalg.inv(xw.T @ xw)
    r = np.eye(len(t)) - xw @ g @ xw.T
    n, p = x.shape
    cs, dfs = [], []
    for rho_t in AR1_GRID:
        b = w @ (rho_t ** lag if rho_t > 0 else np.eye(len(t))) @ w.T
        lam = np.linalg.eigvals(r @ b).real
        cs.append(np.diag(g @ xw.T @ b @ xw @ g) * (n - p) / lam.sum())
        dfs.append(lam.sum() ** 2 / (lam ** 2).sum())
    c = np.max(cs, axis=0)
    s = math.sqrt(fit.s2)
    for j, a in enumerate(ARMS[1:], start=4):
        assert fit.estimates[a].se == pytest.approx(math.sqrt(c[j]) * s, rel=1e-6)
    assert fit.df == pytest.approx(min(min(dfs), n - p), rel=1e-6)


def test_runs_without_times_or_in_duets_keep_ols():
    runs = [ModelRun(r.arm, r.block, r.slot, r.value) for r in _runs(4, 0.5, seed=3)]
    fit = cell_model(runs, "main", rho=0.48, rho_source="calibration")
    assert fit.model == "ols" and fit.design is None and fit.rho_source is None


def test_the_folder_estimates_its_correlation_only_from_enough_runs():
    small = cell_model(_runs(4, 0.5, seed=1), "main")
    assert small.df < MIN_FOLDER_AR1_DF
    assert folder_rho([small]) == (CALIBRATED_AR1_RHO, "calibration", AR1_GRID)
    assert folder_rho([]) == (0.0, None, ())
    # 30 rounds of 5 arms: 116 residual df, REML near the truth, 0 for independent runs
    strong = [folder_rho([cell_model(_runs(30, 0.6, seed=s), "main")]) for s in range(2)]
    assert all(src == "folder" and 0.35 <= rho <= 0.85 and rho in set_ and len(set_) < 19
               for rho, src, set_ in strong), strong
    flat = [folder_rho([cell_model(_runs(30, 0.0, seed=s), "main")])[0] for s in range(2)]
    assert np.mean(flat) <= 0.15, flat


T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


def _records(experiment, plan, values, *, gap=20.0):
    out = []
    for i, unit in enumerate(plan):
        for side in (unit.sides if isinstance(unit, DuetSpec) else [unit]):
            when = (T0 + dt.timedelta(seconds=gap * i)).isoformat()
            out.append(RunRecord(
                experiment=experiment.name, run_id=side.run_id, spec=side, arm_settings={},
                config={}, server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
                provenance={}, started_at=when, finished_at=when, valid=True,
                metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                                   output_tokens=0, tpot_ms_mean=values[len(out) % len(values)])))
    return out


def test_times_are_in_runs_on_the_host_timeline_and_duets_have_none(default_experiment):
    plan = make_plan(default_experiment, arms=["main", "pr"], concurrencies=[1],
                     spec_modes=[False], runs=4, seed=2)
    records = _records(default_experiment, plan, [3.0, 3.1, 2.9])
    times = run_times(records)
    assert sorted(times.values()) == [float(i) for i in range(len(plan))]
    # a run resumed the next day is far from the others: its correlation with them is ~0
    later = records[-1].model_copy(update={"started_at": (T0 + dt.timedelta(days=1)).isoformat()})
    spec = later.spec
    key = (spec.arm, 1, spec.spec_mode, spec.repeat, None)
    assert run_times(records[:-1] + [later])[key] > 1000
    duet = default_experiment.model_copy(update={"duet": DuetConfig(enabled=True)})
    duets = make_plan(duet, arms=["main", "pr"], concurrencies=[1], spec_modes=[False], runs=4)
    assert run_times(_records(duet, duets, [3.0, 3.1, 2.9])) == {}


def test_the_report_says_which_model_it_used(default_experiment):
    """A sequential 5-arm sweep (7 residual df) takes the calibration's correlation, said in
    the noise table's source and the JSON's comparisons; a duet sweep keeps OLS."""
    exp = default_experiment.model_copy(update={"arms": {
        **default_experiment.arms, **{a: default_experiment.arms["main"] for a in ARMS[1:]}}})
    plan = make_plan(exp, arms=ARMS, concurrencies=[1], spec_modes=[False], runs=4, seed=5)
    rng = np.random.default_rng(0)
    values = list(3.0 * np.exp(0.0125 * rng.standard_normal(len(plan))))
    summary = summarize(_records(exp, plan, values), metrics=(metric("tpot_ms_mean"),))
    row = summary.noise_row(1, "base", "tpot_ms_mean")
    assert ("AR(1) over time ρ 0.48 (a guess: e2e's 2-core development VM's calibration, the "
            "folder too small for its own; GLS), standard errors honest for ρ 0–0.9") \
        in row.source
    assert (row.time_model, row.rho) == ("ar1-gls", 0.48)
    comps = report_json(summary)["comparisons"]
    assert comps and all(c["time_model"] == "ar1-gls" and c["rho"] == 0.48 for c in comps)
