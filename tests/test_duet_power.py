"""`e2e plan` on duets: the power of a duet design is the duet model's, not a sequential one's.

The closed forms in ``e2e.analysis.estimators.power`` (the balanced incomplete block design's contrast variance and its
residual df) are checked against the cell model fitted to the very layout ``plan.duet_rounds``
makes, and the planner against a summary of duet runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from e2e.plan.plan import duet_rounds
from e2e.analysis.estimators.estimates import mde_log
from e2e.analysis.estimators.power import design_df, detectable_effect, runs_needed
from e2e.analysis.estimators.model import ModelRun, cell_model
from e2e.analysis.estimators.power import duet_se_factor


def _duet_runs(arms: list[str], slots: int, rounds: int, rng) -> list[ModelRun]:
    out = []
    for r, duets in enumerate(duet_rounds(arms, slots, rounds, seed=3), 1):
        for d, group in enumerate(duets):
            level = rng.normal(0.0, 0.3)  # the time the sides share: the block takes it out
            for slot, arm in enumerate(group):
                out.append(ModelRun(arm=arm, block=(r, None, d), slot=float(slot),
                                    value=math.exp(1.0 + level + rng.normal(0.0, 0.02))))
    return out


@pytest.mark.parametrize(("n_arms", "slots", "rounds"), [(2, 2, 4), (3, 2, 4), (4, 2, 4), (5, 2, 2),
                                                         (4, 3, 3), (3, 4, 6)])
def test_the_duet_se_and_df_are_the_fitted_models(n_arms, slots, rounds) -> None:
    arms = ["main"] + [f"a{i}" for i in range(1, n_arms)]
    fit = cell_model(_duet_runs(arms, slots, rounds, np.random.default_rng(n_arms * 10 + slots)),
                     "main", floor_sd=0.0)
    assert fit is not None
    with_slot = fit.slot
    assert fit.df == design_df(rounds, method="model", arms=n_arms, slot=with_slot,
                                     slots=slots)
    s = math.sqrt(fit.s2)
    # se = factor · noise / √rounds with noise = √2 s, for every arm (the design is balanced;
    # the slot term, where rounds are a multiple of the sides, is orthogonal to the arms)
    want = duet_se_factor(n_arms, slots) * math.sqrt(2.0) * s / math.sqrt(rounds)
    for est in fit.estimates.values():
        assert est.se == pytest.approx(want, rel=0.03)


def test_duets_of_two_with_four_arms_carry_twice_a_sequential_rounds_information() -> None:
    assert duet_se_factor(4, 2) == pytest.approx(1 / math.sqrt(2))
    assert duet_se_factor(3, 3) == 1.0 and duet_se_factor(3, 8) == 1.0  # one duet holds all
    seq = runs_needed(0.05, 5.0, method="model", arms=4, slot=True)
    duet = runs_needed(0.05, 5.0, method="model", arms=4, slot=True, slots=2)
    assert duet < seq
    # the same noise: the duet's MDE at 4 rounds is the sequential one's at ~8 (twice the
    # information; its df 6·4 − 3 − 1 = 20 against 3·3 − 1 = 8)
    d4 = detectable_effect(0.05, 4, method="model", arms=4, slot=True, slots=2)
    s8 = detectable_effect(0.05, 8, method="model", arms=4, slot=True)
    s4 = detectable_effect(0.05, 4, method="model", arms=4, slot=True)
    assert d4 < s4 and abs(d4 - s8) / s8 < 0.1


def test_the_plan_of_a_duet_folder_plans_duets(default_experiment) -> None:
    """A 4-arm duet sweep's noise row and `e2e plan` advice know they are duets: the source
    says so, the runs needed are rounds of duets (fewer than the sequential formula on the same
    noise would ask), and the printed advice says what `--runs` counts."""
    import datetime as dt

    from e2e.analysis.planning.advice import runs_advice
    from e2e.render import format_advice
    from e2e.analysis.sweep.aggregate import summarize
    from e2e.config import DuetConfig
    from e2e.plan import DuetSpec
    from e2e.plan import make_plan
    from e2e.results.records import RunMetrics, RunRecord, ServerInfo

    arms = ["main", "b", "c", "d"]
    exp = default_experiment.model_copy(update={
        "duet": DuetConfig(enabled=True),
        "arms": {**default_experiment.arms, **{a: default_experiment.arms["main"] for a in arms[1:]}}})
    plan = make_plan(exp, arms=arms, concurrencies=[1], spec_modes=[False], runs=5)
    rng = np.random.default_rng(4)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    records = []
    for i, unit in enumerate(plan):
        assert isinstance(unit, DuetSpec)
        level = rng.normal(0.0, 0.2)
        for side in unit.sides:
            when = (t0 + dt.timedelta(seconds=60 * i)).isoformat()
            records.append(RunRecord(
                experiment=exp.name, run_id=side.run_id, spec=side, arm_settings={},
                config={}, server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
                provenance={}, started_at=when, finished_at=when, valid=True,
                metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                                   output_tokens=0,
                                   tpot_ms_mean=3.0 * math.exp(level + rng.normal(0.0, 0.02)))))
    s = summarize(records, report_from_run=2)
    row = s.noise_row(1, "base", "tpot_ms_mean")
    assert row.slots == 2 and row.method == "model" and row.arms_in_model == 4
    assert "in duets of 2" in row.source
    assert row.n_blocks == 4  # reported rounds (2-5), not the duets an arm met the baseline in
    a = next(x for x in runs_advice(s, 2.0) if x.metric == "tpot_ms_mean")
    assert a.slots == 2
    # planned from the duet model's own standard error per round, on the duets' df: fewer
    # rounds than the sequential formula on the same noise asks
    se_round = a.plan_se_pct / 100
    duet_df = lambda k: design_df(k, method="model", arms=4, slot=row.slot, slots=2)  # noqa: E731
    n = a.reported_runs
    scale = row.df / duet_df(row.n_blocks)
    assert mde_log(se_round / math.sqrt(n), scale * duet_df(n)) <= math.log(1.02)
    assert mde_log(se_round / math.sqrt(n - 1), scale * duet_df(n - 1)) > math.log(1.02)
    noise = a.noise_pct / 100
    assert n < runs_needed(noise, 2.0, method="model", arms=4, slot=row.slot)
    text = format_advice(s, runs_advice(s, 2.0))
    assert "`--runs` counts rounds" in text


def test_the_default_designs_interval_is_plain_ols(default_experiment) -> None:
    """The default config's 3 arms at c = 1 and 4 (two cells interleaved, 3 residual df a
    cell): e2e's interval is statsmodels' OLS of ln y on round + arm + slot with its t
    quantile, so its coverage under independent normal noise is exact (docs/explanation/statistics.md,
    the default design's 4000 simulated sweeps)."""
    import datetime as dt

    import pandas as pd
    import statsmodels.formula.api as smf
    from scipy import stats as sp

    from e2e.analysis.sweep.aggregate import summarize
    from e2e.plan import make_plan
    from e2e.results.records import RunMetrics, RunRecord, ServerInfo

    arms, concs = ["main", "flag-off", "pr"], [1, 4]
    rng = np.random.default_rng(11)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    for seed in (1, 2, 3):
        plan = make_plan(default_experiment, arms=arms, concurrencies=concs, spec_modes=[False],
                         runs=4, seed=seed)
        records, rows, place = [], [], {}
        for i, u in enumerate(plan):
            y = 1.0 + rng.normal(0.0, 0.0125)
            key = "tpot_ms_mean" if u.concurrency == 1 else "tpot_ms_median"
            when = (t0 + dt.timedelta(seconds=20 * i)).isoformat()
            records.append(RunRecord(
                experiment="exp", run_id=u.run_id, spec=u, arm_settings={}, config={},
                server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
                provenance={}, started_at=when, finished_at=when, valid=True,
                metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                                   output_tokens=0, **{key: math.exp(y)})))
            if u.repeat >= 2:
                slot = place[(u.repeat, u.concurrency)] = place.get((u.repeat, u.concurrency), -1) + 1
                rows.append(dict(arm=u.arm, c=u.concurrency, block=u.repeat, slot=slot, y=y))
        s = summarize(records, report_from_run=2)
        frame = pd.DataFrame(rows)
        for c in concs:
            fit = smf.ols('y ~ C(block) + C(arm, Treatment("main")) + slot',
                          frame[frame.c == c]).fit()
            q = sp.t.ppf(0.975, fit.df_resid)
            for a in arms[1:]:
                name = f'C(arm, Treatment("main"))[T.{a}]'
                b, se = fit.params[name], fit.bse[name]
                comp = s.comparison(a, c, "base", "tpot_ms_mean" if c == 1 else "tpot_ms_median")
                lo, hi = comp.interval
                assert comp.method == "model" and fit.df_resid == 3
                assert math.log1p(lo / 100) == pytest.approx(b - q * se, abs=1e-9)
                assert math.log1p(hi / 100) == pytest.approx(b + q * se, abs=1e-9)
