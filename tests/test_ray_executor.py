"""The Ray executor on a real 2-node Ray cluster on this machine (``ray.cluster_utils.Cluster``:
each node its own raylet advertising ``e2e_host: 1`` and its own $E2E_HOME, so its own server
lock), with a scripted vLLM server process (tests/fakevllm.py) behind e2e's real session,
server and load generator. Tests in this module share the cluster; the node-kill test runs
last and adds a node back."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import fakevllm  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from e2e.config import ExecutorConfig  # noqa: E402
from e2e.errors import ConfigError  # noqa: E402
from e2e.execute import LocalExecutor, SessionUnit  # noqa: E402
from e2e.execute.executor import blocks  # noqa: E402
from e2e.pipeline import execute  # noqa: E402
from e2e.plan import make_plan  # noqa: E402
from e2e.execute.ray import FAILURE_JSON, RayExecutor  # noqa: E402
from e2e.execute import describe_cluster_plan  # noqa: E402
from e2e.render import build_report
from e2e.session import SessionOptions
from e2e.results.store import unit_state

pytestmark = pytest.mark.slow  # the whole module is the slow tier

START_S = 0.5  # each fake server takes this long to become healthy: a unit's fixed duration


def node_args(home: Path, pool: str) -> dict:
    return {"num_cpus": 1, "resources": {"e2e_host": 1}, "env_vars": {"E2E_HOME": str(home)},
            "labels": {"e2e-pool": pool}}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    saved = os.environ.get("E2E_HOME")
    os.environ["E2E_HOME"] = str(root / "driver-home")
    from e2e.session.tinymodel import build_tiny_llama

    model = build_tiny_llama()
    pids = root / "pids"
    pids.mkdir()
    fake = fakevllm.install(root / "fake")
    cluster = Cluster(initialize_head=True, head_node_args=node_args(root / "home-a", "a"))
    second = cluster.add_node(**node_args(root / "home-b", "b"))
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    world = {"root": root, "cluster": cluster, "second": second, "pids": pids,
             "head_id": cluster.head_node.node_id, "second_id": second.node_id,
             "experiment": fakevllm.experiment(fake, str(model), start_s=START_S, pid_dir=pids)}
    yield world
    ray.shutdown()
    cluster.shutdown()
    for pid_file in pids.iterdir():  # a server orphaned by the node-kill test
        try:
            os.kill(int(pid_file.name), signal.SIGKILL)
        except ProcessLookupError:
            pass
    if saved is None:
        os.environ.pop("E2E_HOME", None)
    else:
        os.environ["E2E_HOME"] = saved


def plan(experiment, runs=2):
    return make_plan(experiment, arms=["main", "pr"], concurrencies=[1],
                     spec_modes=[False, True], runs=runs)


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def no_server_left(pids: Path, wait_s: float = 15.0) -> list[str]:
    """The scripted servers still running after ``wait_s`` (each removes its pid file when
    stopped; a pid file of a dead process counts as stopped)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for pid_file in pids.iterdir():
            try:
                os.kill(int(pid_file.name), 0)
                alive.append(pid_file.name)
            except ProcessLookupError:
                pid_file.unlink(missing_ok=True)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def records(results: Path, experiment: str) -> dict[str, dict]:
    root = results / experiment
    return {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/run.json")}


def test_blocks_are_every_arm_of_a_cell_in_the_plan_order(default_experiment):
    from e2e.plan.plan import round_orders

    units = make_plan(default_experiment, concurrencies=[1, 4], runs=2)
    got = blocks(units)
    assert len(got) == 2 * 2 * 2  # rounds x concurrencies x spec modes
    orders = round_orders(["main", "flag-off", "pr"], 2, report_from_run=2, seed=0)
    assert [u.arm for u in got[0]] == orders[0]  # a host runs a block in the plan's order
    assert [u.arm for u in got[4]] == orders[1]
    assert all(len({(u.repeat, u.concurrency, u.dspark) for u in b}) == 1 for b in got)
    assert [u for b in got for u in b] == units  # nothing lost or reordered


def test_two_hosts_run_whole_blocks_and_the_folder_is_the_local_one(world, tmp_path):
    experiment = world["experiment"]
    units = plan(experiment)
    said: list[str] = []
    outcome = execute(experiment, units, tmp_path / "ray", executor=RayExecutor(),
                      session=SessionOptions(say=said.append, progress=False))
    assert [r.valid for r in outcome.ran] == [True] * len(units), [
        r.invalid_reasons for r in outcome.ran]
    runs = records(tmp_path / "ray", experiment.name)
    assert set(runs) == {u.run_id for u in units}
    facts = {k: r["provenance"]["executor"] for k, r in runs.items()}
    assert {f["node_id"] for f in facts.values()} == {world["head_id"], world["second_id"]}
    # every block on one host; on each host one unit at a time and whole blocks back to back
    for block_units in blocks(units):
        assert len({facts[u.run_id]["node_id"] for u in block_units}) == 1
    for node in (world["head_id"], world["second_id"]):
        mine = sorted((r["started_at"], r["finished_at"], facts[k]["block"], k)
                      for k, r in runs.items() if facts[k]["node_id"] == node)
        order = [b for _, _, b, _ in mine]
        assert order == sorted(order, key=order.index)  # no block interleaved with another
        for (_, end, _, _), (start, _, _, _) in zip(mine, mine[1:]):
            assert end <= start  # never two servers on one host
    # the report renders from the driver's folder
    report = build_report(tmp_path / "ray" / experiment.name)
    assert report.markdown_path.is_file() and "main" in report.markdown
    # the local executor writes the same units and files for the same plan
    local = execute(experiment, units, tmp_path / "local", executor=LocalExecutor(),
                    session=SessionOptions(progress=False))
    assert all(r.valid for r in local.ran)
    build_report(tmp_path / "local" / experiment.name)
    # the same files, plots aside: which plots a report draws depends on what was measured (a
    # headline whose streams arrived in bursts on a busy host is the server's twin, e2e.analysis)
    def measured(folder: Path) -> set[str]:
        return {f for f in files(folder) if "/report/plots/" not in f}

    assert measured(tmp_path / "ray") == measured(tmp_path / "local")
    # resume: nothing left to make
    again = execute(experiment, units, tmp_path / "ray", executor=RayExecutor(),
                    session=SessionOptions(progress=False))
    assert again.ran == [] and len(again.skipped) == len(units)


def test_duets_run_on_two_hosts_each_in_its_own_slots(world, tmp_path):
    from e2e.config import DuetConfig

    base = world["experiment"]  # measured windows of a second or more: a few ms of start
    # spread is then far from the 10 % of a window that makes a side invalid
    experiment = base.model_copy(update={
        "duet": DuetConfig(enabled=True, barrier_timeout_s=60),
        "load": base.load.model_copy(update={"output_len": 100, "prompts_per_concurrency": 4}),
        "server": base.server.model_copy(update={"env": {**base.server.env,
                                                         "FAKE_TPOT_S": "0.003"}})})
    units = make_plan(experiment, arms=["main", "pr"], concurrencies=[1], spec_modes=[False],
                      runs=2)
    assert [u.kind for u in units] == ["duet", "duet"]
    outcome = execute(experiment, units, tmp_path / "ray", executor=RayExecutor(),
                      session=SessionOptions(progress=False))
    assert len(outcome.ran) == 4 and all(r.valid for r in outcome.ran), [
        r.invalid_reasons for r in outcome.ran]
    runs = records(tmp_path / "ray", experiment.name)
    assert set(runs) == {s.run_id for u in units for s in u.sides}
    for unit in units:  # the sides of a duet together on one host, each in its slot
        sides = [runs[s.run_id] for s in unit.sides]
        assert len({r["provenance"]["executor"]["node_id"] for r in sides}) == 1
        assert [r["duet"]["slot"] for r in sides] == [0, 1]
        assert all(r["duet"]["overlap_share"] >= 0.9 for r in sides)
        assert [r["placement"]["server"]["requested"] for r in sides] == ["0", "1"]
    assert no_server_left(world["pids"]) == []
    again = execute(experiment, units, tmp_path / "ray", executor=RayExecutor(),
                    session=SessionOptions(progress=False))
    assert again.ran == [] and len(again.skipped) == 2


def test_ctrl_c_stops_every_remote_server_and_the_same_command_resumes(world, tmp_path):
    experiment, pids = world["experiment"], world["pids"]
    units = plan(experiment, runs=1)  # two blocks, one per host
    finished: list[str] = []
    alive_at_ctrl_c: list[str] = []
    ctrl_c_at: list[float] = []

    def ctrl_c_after_the_first(folder, record):
        finished.append(record.run_id)
        if len(finished) == 1:
            alive_at_ctrl_c.clear()
            deadline = time.monotonic() + 60  # a server starting on a busy host takes a while
            while not alive_at_ctrl_c and time.monotonic() < deadline:
                alive_at_ctrl_c.extend(p.name for p in pids.iterdir())  # a remote server runs
                time.sleep(0.05)
            ctrl_c_at.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C on the driver

    with pytest.raises(KeyboardInterrupt):
        execute(experiment, units, tmp_path, executor=RayExecutor(), on_unit=ctrl_c_after_the_first,
                session=SessionOptions(progress=False))
    # it stops, rather than running the plan out: a few server stops (stop_grace_s 10 s each),
    # with room for a busy host (the whole test took 91 s beside a CPU hog, Ctrl-C included)
    assert time.monotonic() - ctrl_c_at[0] < 120
    assert alive_at_ctrl_c, "no server was running when Ctrl-C came"
    assert sorted(p.name for p in pids.iterdir()) == []  # every server was stopped
    for pid in alive_at_ctrl_c:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
    made = {u.run_id for u in units if unit_state(tmp_path, experiment.name, u).done}
    assert set(finished) <= made and made  # what finished is kept (units finishing meanwhile too)
    # the units in flight at the Ctrl-C come back: finished, or written invalid with the
    # reason as on one host (never dropped)
    came_back = records(tmp_path, experiment.name)
    assert len(came_back) > 1, sorted(came_back)  # the first, and the one in flight then
    assert all(r["valid"] or any("interrupted" in x for x in r["invalid_reasons"])
               for r in came_back.values()), came_back
    resumed = execute(experiment, units, tmp_path, executor=RayExecutor(),
                      session=SessionOptions(progress=False))
    assert {r.run_id for r in resumed.ran} == {u.run_id for u in units} - made
    assert set(resumed.skipped) == made
    assert all(unit_state(tmp_path, experiment.name, u).done for u in units)


def test_no_node_with_the_host_resource_fails_fast_saying_how_to_add_one(world, tmp_path):
    experiment = world["experiment"]
    executor = RayExecutor(ExecutorConfig(kind="ray", resource="e2e_gpu_host"))
    with pytest.raises(ConfigError, match=r"offers the resource 'e2e_gpu_host'.*ray start"):
        executor.run(experiment.name, plan(experiment), tmp_path,
                     SessionUnit(experiment, tmp_path))
    assert not (tmp_path / experiment.name).exists()


def test_hosts_chosen_by_node_label(world, tmp_path):
    experiment = world["experiment"]
    units = plan(experiment, runs=1)[:2]
    pool_a = RayExecutor(ExecutorConfig(kind="ray", labels={"e2e-pool": "a"}))
    execute(experiment, units, tmp_path, executor=pool_a, session=SessionOptions(progress=False))
    nodes = {r["provenance"]["executor"]["node_id"] for r in records(tmp_path, experiment.name).values()}
    assert nodes == {world["head_id"]}
    nowhere = RayExecutor(ExecutorConfig(kind="ray", labels={"e2e-pool": "z"}))
    with pytest.raises(ConfigError, match="no node of the Ray cluster with labels"):
        nowhere.run(experiment.name, units, tmp_path, SessionUnit(experiment, tmp_path))


def test_dry_run_shows_blocks_and_states(world, tmp_path):
    experiment = world["experiment"]
    units = plan(experiment, runs=1)
    execute(experiment, units[:2], tmp_path, executor=LocalExecutor(),
            session=SessionOptions(progress=False))
    lines = describe_cluster_plan(experiment, units, tmp_path, ExecutorConfig(kind="ray"))
    text = "\n".join(lines)
    assert "block 1 (round 1, concurrency 1, base):" in text
    assert "  main-c1-base-r1  done (skipped)" in text
    assert "  main-c1-dspark-r1  to run" in text
    assert lines[-1] == "2 of 4 units would go to the cluster"


def test_a_worker_killed_mid_unit_is_retried_on_the_other_host(world, tmp_path):
    experiment = world["experiment"]
    units = plan(experiment, runs=1)[:2]  # one block
    killed: list[tuple[str, str]] = []

    def say(message: str) -> None:
        if not killed and " on " in message and "(node " in message:
            node = message.split("(node ")[1].split(",")[0]
            pid = int(message.split(", pid ")[1].split(",")[0])
            killed.append((message.split()[0], node))
            time.sleep(START_S / 2)  # its server is starting: mid-unit
            os.kill(pid, signal.SIGKILL)

    outcome = execute(experiment, units, tmp_path, executor=RayExecutor(),
                      session=SessionOptions(say=say, progress=False))
    unit_id, node = killed[0]
    assert outcome.given_up == [] and all(r.valid for r in outcome.ran)
    assert all(unit_state(tmp_path, experiment.name, u).done for u in units)
    record = records(tmp_path, experiment.name)[unit_id]
    assert not record["provenance"]["executor"]["node_id"].startswith(node)  # another host
    failure = json.loads((tmp_path / experiment.name / ".attempts" / f"{unit_id}.1" /
                          FAILURE_JSON).read_text())
    assert failure["executor"]["node_id"].startswith(node)
    assert failure["reason"].startswith("the Ray task died mid-unit")
    assert no_server_left(world["pids"]) == []  # the killed worker's server was stopped too


def test_executor_from_config_and_flag(default_experiment):
    from e2e.config import parse_experiment
    from e2e.execute import executor_from

    assert isinstance(executor_from(ExecutorConfig(), None), LocalExecutor)
    assert isinstance(executor_from(ExecutorConfig(kind="ray"), "local"), LocalExecutor)
    chosen = executor_from(ExecutorConfig(address="head:6379", labels={"gpu": "H200"}), "ray")
    assert isinstance(chosen, RayExecutor)
    assert (chosen.config.kind, chosen.config.address) == ("ray", "head:6379")
    with pytest.raises(ConfigError, match="give 'local'"):
        executor_from(ExecutorConfig(), "slurm")
    raw = default_experiment.model_dump(mode="json")
    assert "executor" not in raw  # operational: never in a record's config snapshot or a hash
    raw["executor"] = {"kind": "ray", "address": "head:6379"}
    experiment = parse_experiment(raw)
    assert experiment.executor.address == "head:6379"
    assert experiment.override("load", seed=5).executor == experiment.executor
    raw["executor"] = {"kind": "ray", "adress": "x"}
    with pytest.raises(ConfigError, match=r"executor.adress: unknown key \(did you mean 'address'\?\); allowed here: kind"):
        parse_experiment(raw)


def test_an_unreachable_cluster_is_a_clear_error_at_once(tmp_path):
    import subprocess
    import sys

    code = ("from e2e.execute import SessionUnit\nfrom e2e.execute.ray import RayExecutor\n"
            "from e2e.config import load_experiment\n"
            "from e2e.errors import ConfigError\n"
            "try:\n"
            f"    RayExecutor().run('default', [], {str(tmp_path)!r}, "
            f"SessionUnit(load_experiment(), {str(tmp_path)!r}))\n"
            "except ConfigError as exc:\n"
            "    print(exc)\n")
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:9")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60).stdout
    assert time.monotonic() - t0 < 30
    assert "cannot reach a Ray cluster at '127.0.0.1:9'" in out and "ray start --head" in out


def test_ray_needs_the_session_as_a_value(tmp_path, default_experiment):
    with pytest.raises(ConfigError, match="SessionUnit"):
        RayExecutor().run("default", [], tmp_path, lambda unit: None)


SAMPLES = Path(__file__).parent / "data" / "gsm8k_samples"


def scripted_lmeval(job, log_path):
    """lm-eval stand-in that runs inside a Ray worker: main's sample log for every arm."""
    import shutil as _shutil

    from e2e.gsm8k.lmeval import find_output

    out = job.output_dir / "__tiny"
    out.mkdir(parents=True)
    _shutil.copy(SAMPLES / "main.jsonl", out / f"samples_{job.source.task}_x.jsonl")
    (out / "results_x.json").write_text(json.dumps({"results": {job.source.task: {}}}))
    return find_output(job.output_dir, job.source.task)


def test_gsm8k_arms_run_as_one_block_and_come_back_whole(world, tmp_path):
    import sys

    from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests/ is not on workers
    experiment = world["experiment"]
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.jsonl", "test.jsonl"):
        (data / name).write_text('{"question": "q", "answer": "#### 1"}\n')
    folders = {}
    for kind, executor in (("ray", RayExecutor()), ("local", LocalExecutor())):
        gsm = resolve_plan(experiment, arms="main,main,pr", dspark=False, limit=12,
                           concurrency=4, data=data, results=tmp_path / kind)
        report = run_gsm8k(gsm, Runner(lmeval=scripted_lmeval, check=lambda: "0.4.13"),
                           executor=executor, progress=False)
        assert [a.n for a in report.sections[0].arms] == [12, 12, 12]
        folders[kind] = gsm.eval_dir
    arms = {p.parent.name: json.loads(p.read_text()) for p in folders["ray"].glob("*/arm.json")}
    assert set(arms) == {"main", "main.r2", "pr"} and all(a["valid"] for a in arms.values())
    assert len({a["provenance"]["executor"]["node_id"] for a in arms.values()}) == 1  # one block
    # the same files, plots aside: which plots a report draws depends on what was measured (a
    # headline whose streams arrived in bursts on a busy host is the server's twin, e2e.analysis)
    def measured(folder: Path) -> set[str]:
        return {f for f in files(folder) if "/report/plots/" not in f}

    assert measured(tmp_path / "ray") == measured(tmp_path / "local")


def test_a_unit_whose_attempts_were_spent_before_is_given_up_as_on_one_host(world, tmp_path):
    """One rule for both executors (their one bookkeeper): a unit whose attempts an earlier
    invocation spent is not run again and is given up; the rest of its block runs."""
    from e2e.execute.ray import keep_failed_attempt

    experiment = world["experiment"]
    units = plan(experiment, runs=1)[:2]  # one block
    spent = units[1]
    outcomes = {}
    for name, executor in (("ray", RayExecutor()), ("local", LocalExecutor())):
        for attempt in (1, 2):  # two attempts whose workers died: both count
            keep_failed_attempt(tmp_path / name, experiment.name, spent, {
                "unit_id": spent.unit_id, "attempt": attempt, "valid": False, "reason": "planted"})
        assert unit_state(tmp_path / name, experiment.name, spent).attempts == 2
        outcomes[name] = execute(experiment, units, tmp_path / name, executor=executor,
                                 max_attempts=2, session=SessionOptions(progress=False))
    for outcome in outcomes.values():
        assert outcome.given_up == [spent.unit_id] and not outcome.skipped
        assert [r.run_id for r in outcome.ran] == [units[0].run_id] and outcome.ran[0].valid
    assert not (tmp_path / "ray" / experiment.name / spent.run_id).exists()  # never run again


def test_a_node_killed_mid_unit_the_unit_completes_on_the_other(world, tmp_path):
    """Runs last in this module: it removes the second node (and adds one back)."""
    experiment, cluster = world["experiment"], world["cluster"]
    units = plan(experiment, runs=1)  # two blocks: one per host
    victim = world["second_id"]
    killed: list[str] = []

    def say(message: str) -> None:
        if not killed and f"(node {victim[:8]}," in message:
            killed.append(message.split()[0])
            time.sleep(START_S / 2)  # its server is starting: mid-unit
            cluster.remove_node(world["second"], allow_graceful=False)

    outcome = execute(experiment, units, tmp_path, executor=RayExecutor(),
                      session=SessionOptions(say=say, progress=False))
    try:
        assert killed, "no unit went to the second node"
        unit_id = killed[0]
        assert outcome.given_up == []
        assert all(unit_state(tmp_path, experiment.name, u).done for u in units)  # nothing lost
        record = records(tmp_path, experiment.name)[unit_id]
        assert record["provenance"]["executor"]["node_id"] == world["head_id"]
        assert record["provenance"]["executor"]["attempt"] == 2
        failure = json.loads((tmp_path / experiment.name / ".attempts" / f"{unit_id}.1" /
                              FAILURE_JSON).read_text())
        assert failure["executor"]["node_id"] == victim
        assert "died" in failure["reason"].lower()
        assert unit_state(tmp_path, experiment.name, units[0]).attempts >= 1
        assert no_server_left(world["pids"]) == []
    finally:
        world["second"] = cluster.add_node(**node_args(world["root"] / "home-c", "b"))
