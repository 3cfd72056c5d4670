"""`e2e sweep --until-settled --max-runs N`: whole rounds are added until every headline
comparison is settled, or N runs per cell are made (no server: an executor that writes
records with known values)."""

from __future__ import annotations

import numpy as np
import pytest

from e2e.execute._executor import Outcome
from e2e.pipeline import sweep_until_settled
from e2e.results._records import RunMetrics, RunRecord, ServerInfo
from e2e.session._session import SessionOptions, redacted_config
from e2e.results._store import finalize, new_partial_dir, unit_state, write_run


class KnownValues:
    """Writes each unit's record with mean TPOT = level[arm] x lognormal noise."""

    def __init__(self, experiment, level: dict[str, float], noise: float, seed: int = 0):
        self.experiment, self.level, self.noise = experiment, level, noise
        self.rng = np.random.default_rng(seed)
        self.made: list[str] = []

    def run(self, experiment, units, results, run_unit, **kwargs) -> Outcome:
        outcome = Outcome()
        for spec in units:
            if unit_state(results, experiment, spec).done:
                outcome.skipped.append(spec.run_id)
                continue
            value = self.level[spec.arm] * float(np.exp(self.rng.normal(0, self.noise)))
            record = RunRecord(
                experiment=experiment, run_id=spec.run_id, spec=spec, arm_settings={},
                config=redacted_config(self.experiment),
                server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
                provenance={}, started_at="t", finished_at="t", valid=True,
                metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                                   output_tokens=0, tpot_ms_mean=value, tpot_ms_median=value))
            partial = new_partial_dir(results, experiment, spec.run_id)
            write_run(partial, record)
            finalize(partial, results, experiment, spec.run_id)
            self.made.append(spec.run_id)
            outcome.ran.append(record)
        return outcome


def run(experiment, tmp_path, level, noise, max_runs):
    executor = KnownValues(experiment, level, noise)
    lines: list[str] = []
    outcome, settlement = sweep_until_settled(
        experiment, tmp_path, max_runs=max_runs, arms=list(level), concurrencies=[1],
        spec_modes=[False], executor=executor, session=SessionOptions(say=lines.append))
    return executor, settlement, lines


def test_a_clear_difference_settles_at_the_first_look(default_experiment, tmp_path):
    executor, settlement, lines = run(default_experiment, tmp_path,
                                      {"main": 3.0, "pr": 3.3}, noise=0.005, max_runs=10)
    assert settlement.settled and settlement.rounds == 3
    assert settlement.decisions == ("difference",)
    assert len(executor.made) == 2 * 4  # warmup + 3 reported rounds per arm
    assert lines[-1] == "after 3 reported round(s): 1 of 1 headline comparison(s) settled"
    assert settlement.look_confidence > 0.95  # alpha is spent over the looks


def test_noise_too_large_to_settle_stops_at_max_runs(default_experiment, tmp_path):
    executor, settlement, lines = run(default_experiment, tmp_path,
                                      {"main": 3.0, "pr": 3.03}, noise=0.2, max_runs=6)
    assert not settlement.settled and settlement.stop and settlement.rounds == 5
    assert len(executor.made) == 2 * 6
    assert "one more round" in lines[0]
    # resumable: the same call makes nothing new
    again, settlement2, _ = run(default_experiment, tmp_path, {"main": 3.0, "pr": 3.03},
                                noise=0.2, max_runs=6)
    assert again.made == [] and settlement2.decisions == settlement.decisions


def test_max_runs_below_the_first_look_is_refused(default_experiment, tmp_path):
    from e2e.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 4 runs"):
        run(default_experiment, tmp_path, {"main": 3.0, "pr": 3.0}, noise=0.01, max_runs=3)


def test_the_pipeline_plans_executes_and_reports(default_experiment, tmp_path):
    """pipeline.sweep: plan -> executor -> results folder -> aggregate -> render."""
    from e2e.pipeline import sweep

    executor = KnownValues(default_experiment, {"main": 3.0, "pr": 3.3}, noise=0.005)
    outcome, report = sweep(default_experiment, tmp_path, arms=["main", "pr"], concurrencies=[1],
                            spec_modes=[False], runs=4, executor=executor)
    assert len(outcome.ran) == 8 and not outcome.given_up
    assert report.markdown_path.is_file()
    comparison = report.summary.comparison("pr", 1, "base", "tpot_ms_mean")
    assert comparison.verdict == "slower" and comparison.method == "blocked"
