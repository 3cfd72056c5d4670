"""Duets: arms measured together in time, one per slot (e2e.session.duet, e2e.plan).

The plan's balance is checked exactly; the session against real server processes (the
scripted vLLM of tests/fakevllm.py, started by e2e's own ``serve``): every side starts,
waits at the barrier, measures with its partners, holds its load until they are done, and
writes its own run.json with the duet's facts; a side that fails ends its partners' wait;
Ctrl-C stops every side's server."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import fakevllm
from e2e.analysis.sweep.aggregate import summarize
from e2e.config import DuetConfig, DuetSlot
from e2e.plan import DuetSpec
from e2e.pipeline import sweep
from e2e.plan.plan import duet_rounds
from e2e.plan import make_plan
from e2e.results.store import load_records


@pytest.mark.parametrize("n,k", [(2, 2), (3, 2), (4, 2), (5, 2), (3, 3), (4, 3), (2, 4)])
def test_every_arm_sits_in_every_slot_equally_and_pairs_meet_equally(n, k):
    arms = [f"a{i}" for i in range(n)]
    used = min(n, k)
    rounds = duet_rounds(arms, k, used * 2, report_from_run=2, seed=7)
    slots, pairs = Counter(), Counter()
    for groups in rounds[1:used + 1]:  # the first `used` reported rounds: one whole cycle
        for g in groups:
            assert sorted(g) == sorted(set(g)) and len(g) == used
            for s, arm in enumerate(g):
                slots[(arm, s)] += 1
            for a, b in itertools.combinations(sorted(g), 2):
                pairs[(a, b)] += 1
    assert len(set(slots.values())) == 1 and len(slots) == n * used
    assert len(set(pairs.values())) == 1 and len(pairs) == n * (n - 1) // 2
    # round k depends only on k: more rounds never reorder the earlier ones
    assert duet_rounds(arms, k, 3, report_from_run=2, seed=7) == rounds[:3]


def test_a_duet_plan_holds_each_round_of_each_cell(tmp_path):
    exp = fakevllm.experiment(tmp_path, "model")
    exp = exp.model_copy(update={"duet": DuetConfig(enabled=True)})
    plan = make_plan(exp, arms=["main", "pr"], concurrencies=[1, 2], spec_modes=[False], runs=3)
    assert all(isinstance(u, DuetSpec) for u in plan) and len(plan) == 6
    assert [(u.repeat, u.concurrency) for u in plan] == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert plan[0].sides[0].arm != plan[2].sides[0].arm  # swapped slots the next round
    ids = [s.run_id for u in plan for s in u.sides]
    assert len(ids) == len(set(ids)) and ids[0].endswith("-d1")
    with pytest.raises(Exception, match="at least two arms"):
        make_plan(exp, arms=["main"], concurrencies=[1], spec_modes=[False], runs=2)


def _duet_experiment(root: Path, *, name: str = "duet", pr_env: dict | None = None,
                     slots: list[DuetSlot] | None = None):
    from e2e.session.tinymodel import build_tiny_llama

    exp = fakevllm.experiment(fakevllm.install(root / "fake"), str(build_tiny_llama(root / "model")),
                              name=name, pid_dir=root / "pids")
    (root / "pids").mkdir(exist_ok=True)
    arms = dict(exp.arms)
    if pr_env:
        arms["pr"] = arms["pr"].model_copy(update={"env": pr_env})
    duet = DuetConfig(enabled=True, slots=slots or [
        DuetSlot(server_cpus="0", client_cpus="1", env={"CUDA_VISIBLE_DEVICES": "0"}),
        DuetSlot(server_cpus="1", client_cpus="0", env={"CUDA_VISIBLE_DEVICES": "1"})],
        barrier_timeout_s=60)
    load = exp.load.model_copy(update={"output_len": 100, "prompts_per_concurrency": 4})
    return exp.model_copy(update={"repeats": 3, "report_from_run": 1, "duet": duet, "arms": arms,
                                  "load": load})


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.slow  # real server processes
def test_a_duet_sweep_measures_the_sides_together(home):
    # pr's server is 4x slower per token: main finishes first and holds its load for it. The
    # windows (1.2 s and 4.8 s) are long beside the start spread of an overloaded host
    exp = _duet_experiment(home, pr_env={"FAKE_TPOT_S": "0.012"})
    exp = exp.model_copy(update={"server": exp.server.model_copy(
        update={"env": {**exp.server.env, "FAKE_TPOT_S": "0.003"}})})
    results = home / "results"
    outcome, _ = sweep(exp, results, arms=["main", "pr"], concurrencies=[1], spec_modes=[False],
                       report=False)
    assert not outcome.given_up and len(outcome.ran) == 6
    records, problems = load_records(results / "duet")
    assert not problems and len(records) == 6
    by_id = {r.run_id: r for r in records}
    for r in records:
        assert r.valid, r.invalid_reasons
        d = r.duet
        assert d is not None and d.id == f"duet-c1-base-r{r.spec.repeat}-d1"
        other = [x for x in records if x.duet.id == d.id and x.run_id != r.run_id]
        assert d.partners == [other[0].run_id] and other[0].spec.slot == 1 - r.spec.slot
        assert d.overlap_share >= 0.9 and d.start_spread_s < 1.0
        slot = exp.duet.slots[r.spec.slot]
        assert r.server.env["CUDA_VISIBLE_DEVICES"] == str(r.spec.slot)  # a GPU host: a GPU a slot
        assert r.placement.server.requested == slot.server_cpus
        assert r.placement.client.requested == slot.client_cpus
        assert r.config["server"]["cpus"] == exp.server.cpus  # the config as written
    mains = [r for r in records if r.spec.arm == "main"]
    prs = [r for r in records if r.spec.arm == "pr"]
    assert all(m.duet.held_s > 0.5 * p.duet.measured_s for m in mains
               for p in prs if p.duet.id == m.duet.id)  # main held while pr measured
    assert all(p.duet.measured_overlap_share < 0.5 for p in prs)  # pr measured alone, loaded
    assert sorted(r.spec.slot for r in mains) in ([0, 0, 1], [0, 1, 1])  # slots alternate
    assert list(Path(home / "pids").iterdir()) == []  # every server stopped
    summary = summarize(records, baseline="main")
    comp = next(c for c in summary.comparisons if c.arm == "pr" and c.metric == "tpot_ms_mean")
    assert comp.design == "duet" and comp.pct > 100  # 4x slower per token
    assert by_id  # resumes: the same sweep again runs nothing
    again, _ = sweep(exp, results, arms=["main", "pr"], concurrencies=[1], spec_modes=[False],
                     report=False)
    assert again.ran == [] and len(again.skipped) == 3


def test_a_swap_needs_windows_for_every_slot_and_cpus_it_can_move(tmp_path):
    exp = fakevllm.experiment(tmp_path, "model")
    plain = [DuetSlot(server_cpus="0", client_cpus="1"), DuetSlot(server_cpus="1", client_cpus="0")]
    swap = exp.model_copy(update={"duet": DuetConfig(enabled=True, swap=True, slots=plain)})
    odd = swap.model_copy(update={"load": swap.load.model_copy(update={"windows": 3})})
    with pytest.raises(Exception, match="multiple of 2"):
        make_plan(odd, arms=["main", "pr"], concurrencies=[1], spec_modes=[False], runs=2)
    even = swap.model_copy(update={"load": swap.load.model_copy(update={"windows": 4})})
    assert len(make_plan(even, arms=["main", "pr"], concurrencies=[1], spec_modes=[False],
                         runs=2)) == 2
    with pytest.raises(ValueError, match="moves CPUs only"):
        DuetConfig(swap=True, slots=[DuetSlot(server_cpus="0", env={"CUDA_VISIBLE_DEVICES": "0"}),
                                     DuetSlot(server_cpus="1")])


@pytest.mark.slow  # real server processes
def test_a_swapping_duet_moves_every_side_between_windows(home):
    # two windows: each side's server and load generator run the first on its own slot's
    # CPUs and the second on the other's, read back from the server's threads after the move
    slots = [DuetSlot(server_cpus="0", client_cpus="1"), DuetSlot(server_cpus="1", client_cpus="0")]
    exp = _duet_experiment(home, slots=slots, pr_env={"FAKE_TPOT_S": "0.006"})
    exp = exp.model_copy(update={"duet": exp.duet.model_copy(update={"swap": True}),
                                 "load": exp.load.model_copy(update={"windows": 2})})
    outcome, _ = sweep(exp, home / "results", arms=["main", "pr"], concurrencies=[1],
                       spec_modes=[False], runs=2, report=False)
    assert not outcome.given_up and len(outcome.ran) == 4  # 2 duets, 2 sides each
    records, problems = load_records(home / "results" / "duet")
    assert not problems and len(records) == 4
    for r in records:
        assert r.valid, r.invalid_reasons
        s = r.spec.slot
        assert r.duet.window_slots == [s, 1 - s]
        assert r.duet.window_server_cores == [[s], [1 - s]]
        assert r.duet.overlap_share >= 0.9
        assert len(r.windows) == 2 and all(w.ok_requests == 4 for w in r.windows)
        # the server's own figures count the measured requests only: the faster side's hold
        # between its windows (requests never measured) is taken out of its counters
        folder = home / "results" / "duet" / r.spec.run_id
        served = _served(folder / "metrics_after.prom") - _served(folder / "metrics_before.prom")
        holds = sorted(folder.glob("metrics_hold*_start.prom"))
        held = sum(_served(Path(str(h).replace("_start", "_end"))) - _served(h) for h in holds)
        assert served - held == 8, (r.spec.arm, served, held)
        assert r.metrics.server_tpot_ms_mean == pytest.approx(6.0 if r.spec.arm == "pr" else 1.0)
        if r.spec.arm == "main":  # the faster side: it held its server busy after window 1
            assert len(holds) == 1 and held >= 1
    assert list(Path(home / "pids").iterdir()) == []


def _served(prom: Path) -> float:
    """Requests a scripted server finished, read from its /metrics text."""
    for line in prom.read_text().splitlines():
        if line.startswith("vllm:request_time_per_output_token_seconds_count "):
            return float(line.split()[1])
    raise AssertionError(f"no request count in {prom}")


@pytest.mark.slow  # real server processes
def test_a_side_that_fails_ends_its_partners_wait(home):
    # pr's server never becomes healthy: main's side must not wait for the barrier's timeout
    exp = _duet_experiment(home, pr_env={"FAKE_START_S": "120"})
    exp = exp.model_copy(update={"server": exp.server.model_copy(update={"startup_timeout_s": 3.0})})
    start = time.monotonic()
    outcome, _ = sweep(exp, home / "results", arms=["main", "pr"], concurrencies=[1],
                       spec_modes=[False], runs=1, max_attempts=1, report=False)
    assert time.monotonic() - start < 50
    records, _ = load_records(home / "results" / "duet")
    by_arm = {r.spec.arm: r for r in records}
    assert not by_arm["pr"].valid and "not healthy" in " ".join(by_arm["pr"].invalid_reasons)
    assert not by_arm["main"].valid
    assert "duet partner failed" in " ".join(by_arm["main"].invalid_reasons)
    assert by_arm["main"].metrics is None  # nothing measured without its partner
    assert outcome.given_up == ["duet-c1-base-r1-d1"]
    assert list(Path(home / "pids").iterdir()) == []


def _sweep_process(home: Path, exp, folder: str, log: str, runs: int = 1):
    raw = exp.model_dump(mode="json")
    (home / f"{folder}.json").write_text(json.dumps(raw))
    (home / f"{folder}-duet.json").write_text(exp.duet.model_dump_json())
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from e2e.config import DuetConfig, Experiment\n"
        "from e2e.console import guard\n"
        "from e2e.pipeline import sweep\n"
        "home, folder, runs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])\n"
        "exp = Experiment.model_validate_json((home / f'{folder}.json').read_text())\n"
        "exp = exp.model_copy(update={'duet': DuetConfig.model_validate_json("
        "(home / f'{folder}-duet.json').read_text())})\n"
        "guard(lambda: sweep(exp, home / folder, arms=['main', 'pr'], concurrencies=[1], "
        "spec_modes=[False], runs=runs, report=False))\n")
    return subprocess.Popen([sys.executable, "-c", script, str(home), folder, str(runs)],
                            stdout=open(home / log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


@pytest.mark.slow  # real server processes
def test_two_duets_on_the_same_slots_take_turns(home):
    # each duet takes every slot's lock in one order before any side starts: two sweeps at once
    # never each hold a slot the other waits for (that deadlocked until the lock wait ran out)
    exp = _duet_experiment(home)
    first = _sweep_process(home, exp, "one", "one.log", runs=2)
    second = _sweep_process(home, exp, "two", "two.log", runs=2)
    assert first.wait(timeout=240) == 0, (home / "one.log").read_text()
    assert second.wait(timeout=240) == 0, (home / "two.log").read_text()
    for folder in ("one", "two"):
        records, _ = load_records(home / folder / "duet")
        assert len(records) == 4 and all(r.valid for r in records)
    spans = [(r.spec.slot, r.started_at, r.finished_at, f) for f in ("one", "two")
             for r in load_records(home / f / "duet")[0]]
    for slot, start, end, f in spans:  # a slot is never in two duets at once
        assert not any(s == slot and g != f and start < e and b < end
                       for s, b, e, g in spans), spans
    assert list(Path(home / "pids").iterdir()) == []


@pytest.mark.slow  # real server processes
def test_ctrl_c_stops_every_side(home):
    exp = _duet_experiment(home, pr_env={"FAKE_TPOT_S": "0.05"})
    exp = exp.model_copy(update={"load": exp.load.model_copy(update={"output_len": 200})})
    proc = _sweep_process(home, exp, "results", "sweep.log")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list((home / "pids").iterdir())) < 2:
        time.sleep(0.2)
    assert len(list((home / "pids").iterdir())) == 2, (home / "sweep.log").read_text()
    time.sleep(4.0)  # both measuring
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole group, as at a terminal
    assert proc.wait(timeout=90) == 130, (home / "sweep.log").read_text()
    assert list((home / "pids").iterdir()) == []
    records, _ = load_records(home / "results" / "duet")
    assert len(records) == 2 and not any(r.valid for r in records)
    assert all("interrupted" in " ".join(r.invalid_reasons) for r in records)


@pytest.mark.slow  # seconds of lock polling
def test_a_plain_server_waiting_for_the_host_is_not_passed_by_duets(home):
    import threading

    from e2e.session.server import server_lock

    got: dict[str, float] = {}
    start = time.monotonic()

    def duets():  # back to back, as a duet sweep takes its locks
        for _ in range(4):
            with server_lock(wait_s=30, slots=["slot0", "slot1"]):
                time.sleep(1.5)
        got["duets_done"] = time.monotonic() - start

    def plain():
        time.sleep(0.5)
        with server_lock(wait_s=30):
            got["plain"] = time.monotonic() - start

    threads = [threading.Thread(target=duets), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert got["plain"] < got["duets_done"] - 1.0, got  # it went in between, not after all


def test_a_unit_stopped_by_ctrl_c_spends_no_attempt(tmp_path, default_experiment):
    from test_cells import record

    from e2e.results.store import unit_state, write_run

    exp = default_experiment
    rec = record(exp, "main", 1, 3.0)
    folder = tmp_path / exp.name / rec.run_id
    folder.mkdir(parents=True)
    stopped = rec.model_copy(update={"valid": False, "metrics": None, "invalid_reasons": [
        "interrupted (Ctrl-C or SIGTERM) before the workload finished"]})
    write_run(folder, stopped)
    state = unit_state(tmp_path, exp.name, rec.spec)
    assert (state.done, state.attempts) == (False, 0)  # two Ctrl-Cs no longer give it up
    failed = stopped.model_copy(update={"invalid_reasons": ["the server exited"]})
    write_run(folder, failed)
    assert unit_state(tmp_path, exp.name, rec.spec).attempts == 1


@pytest.mark.slow  # real server processes
def test_a_duet_writes_and_prints_no_planted_secret(home):
    from planted import Planted

    from e2e.execute import describe_plan

    planted = Planted("DUET")
    exp = _duet_experiment(home)
    exp = exp.model_copy(update={"server": exp.server.model_copy(update=planted.server(exp.server))})
    slots = [s.model_copy(update={"env": {**s.env, "E2E_SLOT_TOKEN": f"{planted.token}-slot"}})
             for s in exp.duet.slots]
    exp = exp.model_copy(update={"duet": exp.duet.model_copy(update={"slots": slots})})
    plan = make_plan(exp, arms=["main", "pr"], concurrencies=[1], spec_modes=[False], runs=1)
    dry = "\n".join(describe_plan(exp, plan, home / "results"))
    assert "E2E_SLOT_TOKEN=" in dry and planted.mark not in dry
    proc = _sweep_process(home, exp, "results", "sweep.log")
    assert proc.wait(timeout=240) == 0, (home / "sweep.log").read_text()
    records, _ = load_records(home / "results" / "duet")
    assert len(records) == 2 and all(r.valid for r in records)
    assert all(planted.mark not in r.server.env["E2E_SLOT_TOKEN"] for r in records)
    assert planted.leaks(home / "results", output=(home / "sweep.log").read_text()) == []


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "slot\n0", ""])
def test_a_slot_name_is_a_name_not_a_path(name):
    # a slot's name becomes its lock and state files' names in the e2e home
    with pytest.raises(ValueError):
        DuetSlot(name=name)


def test_two_slots_cannot_share_a_name_or_a_port():
    with pytest.raises(ValueError, match="names must differ"):
        DuetConfig(slots=[DuetSlot(name="a"), DuetSlot(name="a")])
    with pytest.raises(ValueError, match="same port"):
        DuetConfig(slots=[DuetSlot(port=8001), DuetSlot(port=8001)])


def test_a_hold_keeps_an_open_loop_side_as_loaded_as_it_was_measured(default_experiment):
    from e2e.plan import RunSpec
    from e2e.load.workload import HOLD_S, hold_batch

    closed = RunSpec.resolve(default_experiment, arm="main", concurrency=4, dspark=False, repeat=1)
    assert hold_batch(closed) == 4  # the measured load's streams
    at = lambda rate, prompts=120: closed.model_copy(update={"request_rate": rate,
                                                             "prompts": prompts})
    assert hold_batch(at(20.0)) == 20 * HOLD_S  # two seconds of arrivals, not one request
    assert hold_batch(at(0.5)) == 4 and hold_batch(at(500.0, prompts=60)) == 60
