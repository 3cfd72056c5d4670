"""`e2e sweep --until-settled --max-runs N`: whole rounds are added until every headline
comparison is settled, or N runs per cell are made (no server: an executor that writes
records with known values)."""

from __future__ import annotations

import numpy as np
import pytest

from e2e.analysis.estimators.sequential import boundaries, spent_alpha
from e2e.execute import Outcome
from e2e.pipeline import load_looks, sweep_until_settled
from e2e.results.looks import LOOKS_FILE
from e2e.results.records import RunMetrics, RunRecord, ServerInfo
from e2e.results.store import finalize, new_partial_dir, unit_state, write_run
from e2e.session import SessionOptions
from e2e.session.session import redacted_config


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
    assert lines[-1].startswith("after 3 reported round(s): 1 of 1 primary comparison(s) settled")
    assert settlement.look_confidence > 0.95  # alpha is spent over the looks
    # the first look of 8 planned (Pocock-type spending at t = 3/9) spends a useful share
    assert 0.02 < 1 - settlement.look_confidence < 0.025


@pytest.mark.slow
def test_noise_too_large_to_settle_stops_at_max_runs(default_experiment, tmp_path):
    executor, settlement, lines = run(default_experiment, tmp_path,
                                      {"main": 3.0, "pr": 3.03}, noise=0.2, max_runs=6)
    assert not settlement.settled and settlement.stop and settlement.rounds == 5
    assert len(executor.made) == 2 * 6
    assert "one more round" in lines[0]
    # resumable: the same call makes nothing new and takes no new look
    again, settlement2, said = run(default_experiment, tmp_path, {"main": 3.0, "pr": 3.03},
                                   noise=0.2, max_runs=6)
    assert again.made == [] and settlement2.decisions == settlement.decisions
    assert "spent all of alpha" in said[0]
    assert len(load_looks(tmp_path / "default")) == 3  # looks after rounds 3, 4, 5 only


def test_max_runs_below_the_first_look_is_refused(default_experiment, tmp_path):
    from e2e.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 4 runs"):
        run(default_experiment, tmp_path, {"main": 3.0, "pr": 3.0}, noise=0.01, max_runs=3)


@pytest.mark.slow
def test_the_pipeline_plans_executes_and_reports(default_experiment, tmp_path):
    """pipeline.sweep: plan -> executor -> results folder -> aggregate -> render."""
    from e2e.pipeline import sweep

    executor = KnownValues(default_experiment, {"main": 3.0, "pr": 3.3}, noise=0.005)
    outcome, report = sweep(default_experiment, tmp_path, arms=["main", "pr"], concurrencies=[1],
                            spec_modes=[False], runs=4, executor=executor)
    assert len(outcome.ran) == 8 and not outcome.given_up
    assert report.markdown_path.is_file()
    comparison = report.summary.comparison("pr", 1, "base", "tpot_ms_mean")
    assert comparison.verdict == "slower" and comparison.method == "model"
    # the order is recorded: a later sweep into the folder plans the same order
    import json

    recorded = json.loads((tmp_path / "default" / "order.json").read_text())
    assert recorded["order"] == "williams" and recorded["seed_source"] == "drawn"
    from e2e.plan import make_plan

    planned = make_plan(default_experiment, arms=["main", "pr"], concurrencies=[1],
                        spec_modes=[False], runs=4, seed=recorded["seed"])
    assert [r.spec.run_id for r in outcome.ran] == [u.run_id for u in planned]
    assert [u.arm for u in planned if u.repeat >= 2] != ["main", "pr"] * 3  # not one fixed order


def test_an_a_a_arm_does_not_keep_the_sweep_running(default_experiment, tmp_path):
    """An A/A pair can only settle as "equivalent": in the stopping set it ran the sweep to
    --max-runs. It is a check, not a primary comparison, so a clear pr stops at once."""
    arms = dict(default_experiment.arms)
    experiment = default_experiment.model_copy(update={"arms": {**arms, "main-repeat": arms["main"]}})
    executor, settlement, lines = run(experiment, tmp_path,
                                      {"main": 3.0, "main-repeat": 3.0, "pr": 3.3}, noise=0.01,
                                      max_runs=10)
    assert settlement.settled and settlement.rounds == 3 and settlement.decisions == ("difference",)
    assert "1 of 1 primary comparison(s)" in lines[-1]


class Interrupted(KnownValues):
    """Stops (as Ctrl-C would) before making unit number ``stop_at`` of this invocation."""

    def __init__(self, *args, stop_at: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_at = stop_at

    def run(self, experiment, units, results, run_unit, **kwargs):
        todo = [u for u in units if not unit_state(results, experiment, u).done]
        if len(self.made) + len(todo) >= self.stop_at:
            keep = todo[:self.stop_at - len(self.made)]
            super().run(experiment, keep, results, run_unit, **kwargs)
            raise KeyboardInterrupt
        return super().run(experiment, units, results, run_unit, **kwargs)


@pytest.mark.slow
def test_looks_persist_and_a_second_invocation_continues_the_spending(default_experiment, tmp_path):
    level = {"main": 3.0, "pr": 3.03}
    kw = dict(arms=list(level), concurrencies=[1], spec_modes=[False],
              session=SessionOptions(say=lambda *_: None))
    # the first invocation is interrupted during round 6, after the looks at rounds 3 and 4
    first = Interrupted(default_experiment, level, 0.2, stop_at=2 * 5 + 1)
    with pytest.raises(KeyboardInterrupt):
        sweep_until_settled(default_experiment, tmp_path, max_runs=8, executor=first, **kw)
    looks = load_looks(tmp_path / "default")
    assert [k.rounds for k in looks] == [3, 4]
    assert looks[-1].cumulative == pytest.approx(spent_alpha(4 / 7))
    # the second continues: no look at rounds 3 or 4 again, the alpha spent so far is kept
    second = KnownValues(default_experiment, level, 0.2, seed=1)
    _, s2 = sweep_until_settled(default_experiment, tmp_path, max_runs=8, executor=second, **kw)
    again = load_looks(tmp_path / "default")
    assert [k.rounds for k in again] == [3, 4, 5, 6, 7] and again[:2] == looks
    assert again[2].alpha == pytest.approx(spent_alpha(5 / 7) - spent_alpha(4 / 7))
    # each look is read at the exact group-sequential boundary given the earlier looks'
    cumulative = [spent_alpha(k / 7) for k in (3, 4, 5)]
    exact, _ = boundaries([3, 4, 5], np.diff([0.0, *cumulative]))
    assert [k.boundary for k in again[:3]] == pytest.approx(list(exact), abs=1e-6)
    assert again[-1].cumulative == pytest.approx(0.05) and s2.stop
    # e2e report renders at the last look's confidence and says so
    from e2e.render import build_report

    out = build_report(tmp_path / "default")
    assert out.summary.confidence == pytest.approx(again[-1].confidence)
    assert any("last sequential look" in w.message for w in out.summary.warnings)
    # all of alpha is spent: a larger --max-runs runs nothing (no restart of the spending)
    third = KnownValues(default_experiment, level, 0.2, seed=2)
    said: list[str] = []
    _, s3 = sweep_until_settled(default_experiment, tmp_path, max_runs=12, executor=third,
                                **{**kw, "session": SessionOptions(say=said.append)})
    assert third.made == [] and "spent all of alpha" in said[0] and s3 == s2
    # an unreadable looks.json is refused, not restarted from scratch
    (tmp_path / "default" / LOOKS_FILE).write_text("{")
    from e2e.errors import ConfigError

    with pytest.raises(ConfigError, match="alpha already spent"):
        sweep_until_settled(default_experiment, tmp_path, max_runs=12, executor=third, **kw)
