"""The sweep plan's order and the local executor's resume logic (no server: the session is
replaced by a function that writes records)."""

from __future__ import annotations

import pytest

from e2e.config import RunSpec
from e2e.errors import ConfigError
from e2e.execute._executor import LocalExecutor
from e2e.execute._progress import format_eta
from e2e.plan import make_plan
from e2e.results._store import unit_state as _unit_state
from e2e.results._records import RunRecord, ServerInfo
from e2e.results._store import finalize, new_partial_dir, write_run


def test_rounds_interleave_and_rotate(default_experiment):
    plan = make_plan(default_experiment, concurrencies=[1, 4], spec_modes=[False, True], runs=3)
    assert len(plan) == 3 * 2 * 2 * 3
    rounds = [s.repeat for s in plan]
    assert rounds == sorted(rounds)  # run k of every cell before run k+1
    first_cell = [s.arm for s in plan if s.concurrency == 1 and not s.dspark]
    assert first_cell == ["main", "flag-off", "pr",   # round 1
                          "flag-off", "pr", "main",   # round 2, rotated by one
                          "pr", "main", "flag-off"]   # round 3
    # within a round the arms of one cell run back to back
    assert [s.cell for s in plan[:3]] == ["main-c1-base", "flag-off-c1-base", "pr-c1-base"]
    assert make_plan(default_experiment, concurrencies=[1, 4], runs=3) == make_plan(
        default_experiment, concurrencies=[1, 4], runs=3)


def test_plan_narrowing_and_bad_arms(default_experiment):
    plan = make_plan(default_experiment, arms=["pr", "main"], concurrencies=[4],
                     spec_modes=[True], runs=2)
    assert [s.run_id for s in plan] == ["pr-c4-dspark-r1", "main-c4-dspark-r1",
                                        "main-c4-dspark-r2", "pr-c4-dspark-r2"]
    with pytest.raises(ConfigError, match="unknown arm"):
        make_plan(default_experiment, arms=["nope"])
    with pytest.raises(ConfigError, match="twice"):
        make_plan(default_experiment, arms=["main", "main"])


def fake_record(experiment, spec: RunSpec, valid: bool) -> RunRecord:
    return RunRecord(
        experiment=experiment.name, run_id=spec.run_id, spec=spec, arm_settings={}, config={},
        server=ServerInfo(argv=["x"], env={}, base_url="http://127.0.0.1:1", model="m"),
        provenance={}, started_at="t", finished_at="t", valid=valid,
        invalid_reasons=[] if valid else ["boom"])


def store(tmp_path, experiment, spec, valid):
    partial = new_partial_dir(tmp_path, experiment.name, spec.run_id)
    write_run(partial, fake_record(experiment, spec, valid))
    return finalize(partial, tmp_path, experiment.name, spec.run_id)


def run_state(results, experiment, spec):
    return _unit_state(results, experiment, spec)


def execute(experiment, plan, results, run_unit, **kwargs):
    return LocalExecutor().run(experiment.name, plan, results,
                               lambda spec: run_unit(experiment, spec, results), **kwargs)


def test_run_state(tmp_path, default_experiment):
    spec = make_plan(default_experiment, runs=1)[0]
    assert run_state(tmp_path, "default", spec).attempts == 0
    store(tmp_path, default_experiment, spec, valid=False)
    state = run_state(tmp_path, "default", spec)
    assert (state.done, state.attempts, state.last_reason) == (False, 1, "boom")
    store(tmp_path, default_experiment, spec, valid=True)  # the invalid one moves to .attempts
    state = run_state(tmp_path, "default", spec)
    assert (state.done, state.attempts) == (True, 2)
    assert (tmp_path / "default" / ".attempts" / f"{spec.run_id}.1" / "run.json").exists()
    other = spec.model_copy(update={"output_len": 7})
    assert not run_state(tmp_path, "default", other).done  # other settings: not reused


def test_resume_skips_done_and_retries_invalid_up_to_the_limit(tmp_path, default_experiment,
                                                               monkeypatch):
    plan = make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=2)
    calls = []
    failing = {"flag-off-c1-base-r1"}

    def fake_run_one(experiment, spec, results, **kwargs):
        calls.append(spec.run_id)
        folder = store(results, experiment, spec, valid=spec.run_id not in failing)
        return folder, fake_record(experiment, spec, spec.run_id not in failing)

    lines = []
    outcome = execute(default_experiment, plan, tmp_path, fake_run_one, max_attempts=2,
                      say=lines.append)
    assert calls.count("flag-off-c1-base-r1") == 2 and len(calls) == len(plan) + 1
    assert outcome.given_up == ["flag-off-c1-base-r1"]

    calls.clear()
    failing.clear()
    assert lines[0] == "[1/6] main-c1-base-r1 (attempt 1 of 2) · 0 of 6 done · ETA after the first unit"
    assert lines[1].startswith("[2/6] flag-off-c1-base-r1 (attempt 1 of 2) · 1 of 6 done · ETA ")
    outcome = execute(default_experiment, plan, tmp_path, fake_run_one, max_attempts=3)
    assert calls == ["flag-off-c1-base-r1"]  # only the invalid run is made again
    assert len(outcome.skipped) == len(plan) - 1 and not outcome.given_up


def test_dry_run_describes_every_run_without_starting(tmp_path, default_experiment):
    from e2e.execute._describe import describe_plan

    plan = make_plan(default_experiment, concurrencies=[1], spec_modes=[True], runs=1)
    text = "\n".join(describe_plan(default_experiment, plan, tmp_path))
    assert text.count("command: ") == 3
    assert "--speculative-config" in text and '"method": "ngram"' in text
    assert "E2E_PLUGIN_SETTINGS=" in text and "E2E_ARM=pr" in text
    assert not (tmp_path / "default").exists()


def test_fail_fast_stops_at_the_first_run_given_up(tmp_path, default_experiment, monkeypatch):
    plan = make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=1)
    calls = []

    def always_invalid(experiment, spec, results, **kwargs):
        calls.append(spec.run_id)
        return store(results, experiment, spec, valid=False), fake_record(experiment, spec, False)

    outcome = execute(default_experiment, plan, tmp_path, always_invalid, max_attempts=1,
                      fail_fast=True)
    assert calls == [plan[0].run_id] and outcome.stopped_early
    outcome = execute(default_experiment, plan, tmp_path, always_invalid,
                      max_attempts=2)  # moves on by default
    assert len(outcome.given_up) == len(plan) and not outcome.stopped_early


def test_eta_comes_from_the_units_made_so_far(tmp_path, default_experiment, monkeypatch):
    import e2e.execute._progress as progress

    clock = iter(range(0, 1000, 30))  # every unit takes 30 s of (fake) wall time
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    plan = make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=2)

    def ok(experiment, spec, results):
        return store(results, experiment, spec, valid=True), fake_record(experiment, spec, True)

    lines = []
    execute(default_experiment, plan, tmp_path, ok, say=lines.append)
    assert [line.rsplit("· ", 1)[1] for line in lines] == [
        "ETA after the first unit", "ETA 2m30s", "ETA 2m00s", "ETA 1m30s", "ETA 1m00s", "ETA 0m30s"]
    assert format_eta(3725) == "1h02m"
