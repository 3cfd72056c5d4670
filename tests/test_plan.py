"""The sweep plan's order and the local executor's resume logic (no server: the session is
replaced by a function that writes records)."""

from __future__ import annotations

import json

import pytest

from e2e.plan import RunSpec
from e2e.errors import ConfigError
from e2e.execute import LocalExecutor
from e2e.execute.progress import format_eta
from e2e.plan.plan import ORDER_FILE, order_of, round_orders, williams
from e2e.plan import folder_order, make_plan, record_order
from e2e.results.records import RunRecord, ServerInfo
from e2e.results.store import finalize, new_partial_dir, write_run, unit_state as _unit_state


def test_rounds_interleave_in_the_williams_order(default_experiment):
    plan = make_plan(default_experiment, concurrencies=[1, 4], spec_modes=[False, True], runs=3)
    assert len(plan) == 3 * 2 * 2 * 3
    rounds = [s.repeat for s in plan]
    assert rounds == sorted(rounds)  # run k of every cell before run k+1
    orders = round_orders(["main", "flag-off", "pr"], 3, report_from_run=2,
                          seed=default_experiment.load.seed)
    for k in (1, 2, 3):  # every cell of a round runs its arms in that round's order
        for conc in (1, 4):
            for dspark in (False, True):
                assert [s.arm for s in plan if s.repeat == k and s.concurrency == conc
                        and s.dspark == dspark] == orders[k - 1]
    assert len({tuple(o) for o in orders}) == 3  # three different rows of the design
    # within a round the arms of one cell run back to back
    assert len({s.cell.split("-c")[1] for s in plan[:3]}) == 1
    assert make_plan(default_experiment, concurrencies=[1, 4], runs=3) == make_plan(
        default_experiment, concurrencies=[1, 4], runs=3)
    rotated = make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=3,
                        order="rotation")
    assert [s.arm for s in rotated] == ["main", "flag-off", "pr", "flag-off", "pr", "main",
                                        "pr", "main", "flag-off"]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_design_balances_position_and_carry_over(n):
    rows = williams(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    per = len(rows) // n
    for pos in range(n):  # every treatment in every position equally often
        assert sorted(r[pos] for r in rows) == sorted(list(range(n)) * per)
    follows: dict[tuple[int, int], int] = {}
    for r in rows:
        for a, b in zip(r, r[1:]):
            follows[(a, b)] = follows.get((a, b), 0) + 1
    # every treatment preceded by every other equally often (once per Latin square)
    assert set(follows) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(follows.values()) == {per}


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_round_orders_are_a_whole_design_over_a_cycle_of_reported_rounds(n):
    arms = [f"a{i}" for i in range(n)]
    cycle = len(williams(n))
    orders = round_orders(arms, 1 + cycle, report_from_run=2, seed=7)
    reported = orders[1:]
    for pos in range(n):
        assert sorted(o[pos] for o in reported) == sorted(arms * (cycle // n))
    pairs = {(o[i], o[i + 1]) for o in reported for i in range(n - 1)}
    assert len(pairs) == n * (n - 1)
    # adding rounds never reorders the earlier ones; the seed picks the rows
    assert round_orders(arms, 3 + cycle, report_from_run=2, seed=7)[:1 + cycle] == orders
    if n > 2:
        assert round_orders(arms, 1 + cycle, report_from_run=2, seed=8) != orders


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_fewer_reported_rounds_than_arms_put_every_arm_in_a_new_position(n):
    arms = [f"a{i}" for i in range(n)]
    for seed in range(5):
        reported = round_orders(arms, 1 + n, report_from_run=2, seed=seed)[1:]
        for arm in arms:
            assert len({o.index(arm) for o in reported}) == n


def test_the_calibration_design_has_no_fixed_neighbour():
    """5 arms, --runs 4: no arm always runs right before main (the rotated order did)."""
    arms = ["main", "main-repeat", "delay-100", "delay-250", "delay-500"]
    orders = round_orders(arms, 4, report_from_run=2, seed=0)[1:]
    for arm in arms[1:]:
        gaps = {o.index("main") - o.index(arm) for o in orders}
        assert len(gaps) > 1, (arm, orders)


def test_a_folder_keeps_its_order(tmp_path, default_experiment):
    folder = tmp_path / "default"
    assert order_of(folder) == "williams"  # a new folder
    spec = make_plan(default_experiment, runs=1)[0]
    store(tmp_path, default_experiment, spec, valid=True)
    assert order_of(folder) == "rotation"  # runs made before order.json: the old order
    rotated = folder_order(folder, default_experiment)
    assert (rotated.order, rotated.seed) == ("rotation", default_experiment.load.seed)
    record_order(folder, rotated)
    assert json.loads((folder / ORDER_FILE).read_text())["order"] == "rotation"
    (folder / ORDER_FILE).write_text('{"order": "williams", "seed": 0}')
    assert order_of(folder) == "williams"
    assert folder_order(folder, default_experiment).seed == 0  # as recorded before the own seed
    (folder / ORDER_FILE).write_text("nonsense")
    with pytest.raises(ConfigError, match="unreadable"):
        order_of(folder)


def test_a_folder_a_single_run_makes_keeps_the_williams_design(tmp_path, default_experiment):
    """The README's first command (`e2e run`) makes results/default; a sweep into it later
    must plan the Williams design with the folder's seed, not take it for a pre-Williams folder."""
    from e2e.plan import claim_order

    folder = tmp_path / "default"
    spec = make_plan(default_experiment, runs=1)[0]
    with pytest.raises(ConfigError), claim_order(folder, default_experiment):
        raise ConfigError("refused before anything was written")
    assert not folder.exists()  # a refused run leaves no folder behind
    with claim_order(folder, default_experiment):
        store(tmp_path, default_experiment, spec, valid=True)
    recorded = json.loads((folder / ORDER_FILE).read_text())
    assert recorded["order"] == "williams" and recorded["seed_source"] == "drawn"
    assert folder_order(folder, default_experiment).seed == recorded["seed"]
    with claim_order(folder, default_experiment):  # a second run keeps it
        pass
    assert json.loads((folder / ORDER_FILE).read_text()) == recorded
    old = tmp_path / "old" / "default"  # runs and no order.json: an old folder stays rotated
    store(tmp_path / "old", default_experiment, spec, valid=True)
    with claim_order(old, default_experiment):
        pass
    assert not (old / ORDER_FILE).exists() and order_of(old) == "rotation"


CALIBRATION_ARMS = ["main", "main-repeat", "delay-100", "delay-250", "delay-500"]


def test_a_new_folder_draws_its_own_order_seed_and_keeps_it(tmp_path, default_experiment,
                                                            monkeypatch):
    """Two new folders of one config get different order seeds (drawn) and so different arm
    orders, with the same load (prompt) seed in every run's spec; a folder keeps its recorded
    seed on resume, and a different --order-seed for it is an error, not a reordering."""
    import secrets

    drawn = iter([11, 12])
    monkeypatch.setattr(secrets, "randbelow", lambda n: next(drawn))
    a, b = (folder_order(tmp_path / name, default_experiment) for name in ("a", "b"))
    assert (a.seed, a.source, b.seed, b.source) == (11, "drawn", 12, "drawn")
    plans = [make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=4,
                       seed=o.seed) for o in (a, b)]
    assert [u.run_id for u in plans[0]] != [u.run_id for u in plans[1]]
    assert {u.seed for p in plans for u in p} == {default_experiment.load.seed}
    assert round_orders(CALIBRATION_ARMS, 4, report_from_run=2, seed=11) != round_orders(
        CALIBRATION_ARMS, 4, report_from_run=2, seed=12)
    record_order(tmp_path / "a", a)
    assert json.loads((tmp_path / "a" / ORDER_FILE).read_text()) == {
        "order": "williams", "seed": 11, "seed_source": "drawn"}
    again = folder_order(tmp_path / "a", default_experiment)
    assert (again.seed, again.source) == (11, "recorded")
    assert folder_order(tmp_path / "a", default_experiment, 11).seed == 11
    with pytest.raises(ConfigError, match="planned with order seed 11"):
        folder_order(tmp_path / "a", default_experiment, 5)
    given = folder_order(tmp_path / "c", default_experiment, 5)
    assert (given.seed, given.source) == (5, "given")
    with pytest.raises(ConfigError, match="whole number from 0"):
        folder_order(tmp_path / "c", default_experiment, -1)
    (tmp_path / "a" / ORDER_FILE).write_text('{"order": "williams", "seed": "x"}')
    with pytest.raises(ConfigError, match="not a whole number"):
        folder_order(tmp_path / "a", default_experiment)


def test_duets_take_the_folder_seed(default_experiment):
    """make_plan's seed orders duet rounds too (duet_rounds), the default being the load's."""
    from e2e.plan.plan import duet_rounds

    arms = ["main", "pr", "a", "b"]
    assert duet_rounds(arms, 2, 3, seed=3) != duet_rounds(arms, 2, 3, seed=4)
    assert duet_rounds(arms, 2, 3, seed=3) == duet_rounds(arms, 2, 3, seed=3)


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
    bad = plan[2].run_id  # not the first unit: the lines below see one attempt of each first
    failing = {bad}

    def fake_run_one(experiment, spec, results, **kwargs):
        calls.append(spec.run_id)
        folder = store(results, experiment, spec, valid=spec.run_id not in failing)
        return folder, fake_record(experiment, spec, spec.run_id not in failing)

    lines = []
    outcome = execute(default_experiment, plan, tmp_path, fake_run_one, max_attempts=2,
                      say=lines.append)
    assert calls.count(bad) == 2 and len(calls) == len(plan) + 1
    assert outcome.given_up == [bad]

    calls.clear()
    failing.clear()
    assert lines[0] == f"[1/6] {plan[0].run_id} (attempt 1 of 2) · 0 of 6 done · ETA after the first unit"
    assert lines[1].startswith(f"[2/6] {plan[1].run_id} (attempt 1 of 2) · 1 of 6 done · ETA ")
    outcome = execute(default_experiment, plan, tmp_path, fake_run_one, max_attempts=3)
    assert calls == [bad]  # only the invalid run is made again
    assert len(outcome.skipped) == len(plan) - 1 and not outcome.given_up


def test_dry_run_describes_every_run_without_starting(tmp_path, default_experiment):
    from e2e.execute import describe_plan

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
    import time

    clock = iter(range(0, 1000, 30))  # every unit takes 30 s of (fake) wall time
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    plan = make_plan(default_experiment, concurrencies=[1], spec_modes=[False], runs=2)

    def ok(experiment, spec, results):
        return store(results, experiment, spec, valid=True), fake_record(experiment, spec, True)

    lines = []
    execute(default_experiment, plan, tmp_path, ok, say=lines.append)
    assert [line.rsplit("· ", 1)[1] for line in lines] == [
        "ETA after the first unit", "ETA 2m30s", "ETA 2m00s", "ETA 1m30s", "ETA 1m00s", "ETA 0m30s"]
    assert format_eta(3725) == "1h02m"
