"""``e2e plan --target-effect``: runs needed from a sweep's noise (e2e.commands._plan)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp
from typer.testing import CliRunner

from e2e.analysis.estimators.estimates import mde_log
from e2e.analysis.estimators.power import PLAN_NOISE_LEVEL, design_df, upper_noise
from e2e.analysis.sweep.aggregate import summarize
from e2e.errors import ConfigError
from e2e.analysis.planning.advice import parse_effect, runs_advice
from e2e.render import format_advice
from e2e.cli import app
from test_aggregate import cell_runs


def _records():
    return (cell_runs("main", 1, [7.0, 6.70, 6.75, 6.80, 6.72])
            + cell_runs("main-repeat", 1, [7.0, 6.78, 6.72, 6.74, 6.79])
            + cell_runs("pr", 1, [7.0, 6.5, 6.55, 6.6, 6.52]))


def test_parse_effect() -> None:
    assert parse_effect("1%") == 1.0 and parse_effect(" 0.5 % ") == 0.5 and parse_effect("2") == 2.0
    for bad in ("x", "0%", "150"):
        with pytest.raises(ConfigError):
            parse_effect(bad)


def test_advice_plans_on_the_tests_own_standard_error_and_counts_warmups() -> None:
    s = summarize(_records())
    advice = {a.metric: a for a in runs_advice(s, 1.0)}
    a = advice["tpot_ms_mean"]
    assert a.source == "A/A arm main-repeat: model residuals of 3 arms, 12 runs"
    row = s.noise_row(1, "base", "tpot_ms_mean")
    assert (row.method, row.arms_in_model) == ("model", 3)
    comp = s.comparison("main-repeat", 1, "base", "tpot_ms_mean")
    assert row.se == pytest.approx(comp.se)  # the A/A comparison's own standard error
    # per round: se·√rounds, planned from its 70 % upper confidence bound on the test's df
    se_round = comp.se * math.sqrt(row.n_blocks) * math.sqrt(row.df / sp.chi2.ppf(0.3, row.df))
    assert PLAN_NOISE_LEVEL == 0.7
    assert a.plan_se_pct == pytest.approx(se_round * 100)

    def df_at(k):  # the test's df, scaled by the model's df at k rounds over its df now
        return row.df * design_df(k, method="model", arms=3, slot=row.slot) / \
            design_df(row.n_blocks, method="model", arms=3, slot=row.slot)

    n = a.reported_runs
    assert mde_log(se_round / math.sqrt(n), df_at(n)) <= math.log(1.01)
    assert mde_log(se_round / math.sqrt(n - 1), df_at(n - 1)) > math.log(1.01)
    assert a.sweep_runs == n + 1  # run 1 is a warmup
    # the power statement: the effect detected at 3 rounds is the MDE of that design
    k, effect = a.detectable[0]
    assert k == 3 and effect == pytest.approx(
        (math.exp(mde_log(se_round / math.sqrt(3), df_at(3))) - 1) * 100)
    # the noise table's MDE is the test's own at its estimate (not a plan); the plan's at the
    # rounds made is larger: it is planned from the upper bound
    at_now = math.expm1(mde_log(se_round / math.sqrt(row.n_blocks), row.df)) * 100
    assert at_now > row.mde_pct
    assert runs_advice(s, 5.0)[0].reported_runs < n


def test_command_prints_the_table(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    for r in _records():
        (exp / r.run_id).mkdir(parents=True)
        (exp / r.run_id / "run.json").write_text(json.dumps(r.model_dump(mode="json")), encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["plan", str(exp), "--target-effect", "1%", "--metric", "tpot_ms_mean"])
    assert res.exit_code == 0, res.output
    assert "| 1 | base | mean TPOT |" in res.output and "e2e sweep --runs" in res.output
    bad = runner.invoke(app, ["plan", str(exp), "--target-effect", "lots"])
    assert bad.exit_code == 2 and "give a percentage" in bad.output
    unknown = runner.invoke(app, ["plan", str(exp), "--target-effect", "1", "--metric", "nope"])
    assert unknown.exit_code == 2 and "unknown metric" in unknown.output


def test_the_upper_bound_of_the_noise_covers_it_with_its_level() -> None:
    """σ ≤ s·√(df / χ²_{df, 0.3}) in 70 % of samples (the bound `e2e plan` plans from)."""
    rng = np.random.default_rng(0)
    df, sigma, n = 7, 0.0125, 20000
    s = sigma * np.sqrt(rng.chisquare(df, n) / df)
    bounds = np.array([upper_noise(x, df) for x in s[:2000]])
    assert np.mean(bounds >= sigma) == pytest.approx(0.7, abs=0.03)
    assert upper_noise(0.01, 7) == pytest.approx(0.01 * math.sqrt(7 / sp.chi2.ppf(0.3, 7)))
    assert upper_noise(0.01, 0.0) == 0.01  # no df: nothing to bound


def test_the_power_statement_counts_the_reports_minimum_effect() -> None:
    """The report calls "slower" only when the interval excludes 0 *and* the estimate is at
    least the minimum effect (1 %), so the effect a design detects with 80 % power is the larger
    of the interval's MDE and 1 % plus t_{0.8, df}·se; where that is the larger (a precise
    design), the interval's MDE alone would promise power the report's test does not have. The
    interval's MDE is read from the standard error's upper bound, the margin above the exact
    1 % from its estimate (from the bound, such designs had 88-89 % power)."""
    s = summarize(_records())
    assert s.min_effect_pct == 1.0
    a = next(x for x in runs_advice(s, 5.0) if x.metric == "tpot_ms_mean")
    row = s.noise_row(1, "base", "tpot_ms_mean")
    se_round = a.plan_se_pct / 100
    bound = math.sqrt(row.df / sp.chi2.ppf(0.3, row.df))
    assert se_round == pytest.approx(row.se * math.sqrt(row.n_blocks) * bound)

    def df_at(k):
        return row.df * design_df(k, method="model", arms=3, slot=row.slot) / \
            design_df(row.n_blocks, method="model", arms=3, slot=row.slot)

    floored = 0
    for k, effect in a.detectable:
        se, df = se_round / math.sqrt(k), df_at(k)
        interval = mde_log(se, df)
        at_floor = math.log(1.01) + sp.t.ppf(0.8, df) * se / bound
        assert effect == pytest.approx(math.expm1(max(interval, at_floor)) * 100)
        if at_floor > interval:  # the minimum effect is the bar: above the interval's MDE
            floored += 1
            assert effect > math.expm1(interval) * 100 + 0.05
    assert floored, "no design of the sample is precise enough to test the minimum effect"


def test_a_target_above_the_minimum_effect_plans_the_call_the_report_makes() -> None:
    """Above the report's 1 % minimum effect the rounds for a target are those whose "slower"
    call (the interval excludes 0 and the estimate passes 1 %) has 80 % power at the target,
    the same effect the "detected at" columns print; at 1 % itself no rounds give that, so the
    rounds resolve ±1 % with the interval alone and the plan says so."""
    s = summarize(_records())
    row = s.noise_row(1, "base", "tpot_ms_mean")

    def df_at(k):
        return row.df * design_df(k, method="model", arms=3, slot=row.slot) / \
            design_df(row.n_blocks, method="model", arms=3, slot=row.slot)

    bound = math.sqrt(row.df / sp.chi2.ppf(0.3, row.df))

    def called(se_round, k):  # the effect the report's call detects with 80 % power
        se, df = se_round / math.sqrt(k), df_at(k)
        return math.expm1(max(mde_log(se, df),
                              math.log(1.01) + sp.t.ppf(0.8, df) * se / bound)) * 100

    for target in (1.3, 2.0):
        a = next(x for x in runs_advice(s, target) if x.metric == "tpot_ms_mean")
        n, se_round = a.reported_runs, a.plan_se_pct / 100
        assert called(se_round, n) <= target < called(se_round, n - 1)
    at_floor = next(x for x in runs_advice(s, 1.0) if x.metric == "tpot_ms_mean")
    n = at_floor.reported_runs
    assert mde_log(at_floor.plan_se_pct / 100 / math.sqrt(n), df_at(n)) <= math.log(1.01)
    note = "is not above the report's 1 % minimum effect"
    assert note in format_advice(s, runs_advice(s, 1.0))
    assert note not in format_advice(s, runs_advice(s, 2.0))


def test_the_plan_reads_a_folder_as_the_report_does_and_names_what_it_skipped(tmp_path: Path) -> None:
    """A folder with a run.json that cannot be read and one whose metrics are not what its
    requests.parquet gives ended `e2e plan` in a traceback ('str' object has no attribute
    'cause'); `e2e report` skipped both. The plan now reads the folder the report's way: the
    same table as without those runs, each skipped one named on stderr."""
    from e2e.results.records import RequestRecord
    from e2e.results.store import write_requests
    from test_aggregate import make_record

    exp = tmp_path / "exp"
    for r in _records():
        (exp / r.run_id).mkdir(parents=True)
        (exp / r.run_id / "run.json").write_text(r.model_dump_json(), encoding="utf-8")
    runner = CliRunner()
    args = ["plan", str(exp), "--target-effect", "1%"]
    clean = runner.invoke(app, args)
    assert clean.exit_code == 0, clean.output
    (exp / "main-c1-base-r6").mkdir()
    (exp / "main-c1-base-r6" / "run.json").write_bytes(b"\xff{ not a record")
    edited = make_record("pr", 1, 6, tpot=1.0)  # read, it would move pr's noise
    (exp / edited.run_id).mkdir()
    (exp / edited.run_id / "run.json").write_text(edited.model_dump_json(), encoding="utf-8")
    write_requests(exp / edited.run_id / "requests.parquet",
                   [RequestRecord(index=i, send_s=0.0, first_token_s=0.05, end_s=5.0,
                                  chunk_times_s=(0.05, 5.0), prompt_tokens=1031,
                                  completion_tokens=509, status=200) for i in range(4)])
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and res.exception is None, res.output
    assert res.stdout == clean.stdout  # planned from the runs the report reads, no others
    said = " ".join(res.stderr.split())
    assert "skipped main-c1-base-r6/run.json: not a valid run record" in said
    assert ("skipped pr-c1-base-r6/run.json: its ok_requests (32) is not what its "
            "requests.parquet gives (4)") in said
    report = runner.invoke(app, ["report", str(exp)])  # the report names the same two
    assert report.exit_code == 0, report.output
    text = (exp / "report" / "report.md").read_text(encoding="utf-8")
    assert "main-c1-base-r6/run.json" in text and "pr-c1-base-r6/run.json" in text
