"""The Ray executor: a plan's units on the hosts of a Ray cluster, one unit per host at a time,
whole blocks per host, the driver's results folder the one source of truth.

    driver (this process)                        a host (a Ray node offering ``resource``)
    plan -> blocks (e2e.execute.executor.blocks)
    one Ray task per block  ------------------>  holds ``resource: 1``: the whole host
                                                 for each unit of the block, each attempt:
                            <-- Started -------    (node id, hostname)
                                                   the server session (e2e.session.session) into a
                                                   scratch folder of this host: the build is
                                                   resolved here, the host's server lock taken
                            <-- Finished ------    the unit folder's files as bytes + record
    the folder finalized atomically in the
    driver's results (e2e.results.store), the record
    with provenance["executor"] (node, block)

A block is every arm of one cell of one round (e2e.execute.executor.blocks), so a host runs whole
rounds back to back and drift on that host lands on every arm alike. Every participating node
advertises the resource exactly once (``ray start --resources='{"e2e_host": 1}'``); a unit's
task holds it, so two units never share a host.

Faults: a task that dies with its worker or its node (a Ray system error) costs the unit in
flight one attempt, kept as ``.attempts/<unit>.<n>/failure.json`` with the reason; the block's
remaining units go back to the cluster as a new task (avoiding that node while another host is
alive). Finished units are already in the driver's folder. Ctrl-C cancels every task: each
unit runs in a child process of its worker (``run_in_child``), which gets a real SIGINT, so the
session stops its server's process group; the driver waits for that before re-raising, and the
same command resumes. An error of e2e's own on a worker (a busy host, a failed build) stops
the run as it would on one host.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.config import ExecutorConfig, Experiment
from e2e.plan import Unit
from e2e.console import Say
from e2e.errors import ConfigError, E2EError
from e2e.execute.executor import Executor, LocalExecutor, RunUnit, SessionUnit, blocks
from e2e.execute.progress import Ledger, OnUnit, Outcome, complete
from e2e.paths import atomic_write_bytes, atomic_write_json, within
from e2e.plugin.source import package_dir, plugin_sha256
from e2e.results.store import (finalize_unit, new_partial_dir, next_attempt_dir, record_name,
                               unit_dir, unit_state, utc_now)

__all__ = ["RayExecutor", "executor_from", "describe_cluster_plan", "FAILURE_JSON"]

FAILURE_JSON = "failure.json"

_INSTALL = "pip install 'e2e[ray]'"


def _start_hint(resource: str) -> str:
    return (f"start a node on each host with  ray start --address=<head>:6379 "
            f"--resources='{{\"{resource}\": 1}}'  (the head: ray start --head "
            f"--resources='{{\"{resource}\": 1}}')")


# --- What a worker sends back --------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """A host began an attempt of a unit."""

    unit_id: str
    attempt: int
    node_id: str
    hostname: str
    pid: int  # the Ray worker's process on that host


@dataclass(frozen=True)
class Finished:
    """An attempt ended (valid or not): the unit folder's files, relative path -> bytes, and
    its record; for a duet every side's files under ``<run id>/`` and a list of records."""

    unit_id: str
    attempt: int
    node_id: str
    hostname: str
    files: dict[str, bytes]
    record: Any


def _worker_say(message: str) -> None:
    print(f"[{socket.gethostname()}] {message}", flush=True)  # Ray forwards it to the driver


def _read_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _answer(result) -> tuple[dict[str, bytes], Any]:
    """What a session call wrote, as (files, record): a duet's sides' files under their
    folder's name and their records as a list."""
    if not isinstance(result, list):
        folder, record = result
        return _read_tree(folder), record
    files = {f"{folder.name}/{rel}": data for folder, _ in result
             for rel, data in _read_tree(folder).items()}
    return files, [record for _, record in result]


def _all_valid(unit: Unit, record: Any) -> bool:
    return complete(unit, record if isinstance(record, list) else [record])


def driver_plugin() -> dict:
    """What the driver's plugin is made of, for each host to compare with its own."""
    return {"plugin_sha256": plugin_sha256(), "source": str(package_dir()),
            "hostname": socket.gethostname()}


def check_host_plugin(driver: dict | None, host: str, node: str) -> None:
    """E2EError unless this host's e2e has the driver's plugin and kernels: a unit's server
    runs the plugin of the e2e on its host, so a host with another e2e would measure other
    code under the driver's name."""
    if not driver:
        return
    mine = plugin_sha256()
    if mine != driver["plugin_sha256"]:
        raise E2EError(
            f"host {host} (node {node[:12]}) has another e2e: its plugin and kernels "
            f"(plugin_sha256 {mine[:12]}, from {package_dir()}) differ from the driver's "
            f"({driver['plugin_sha256'][:12]}, from {driver['source']} on "
            f"{driver['hostname']}); no unit ran on it. Install the driver's e2e on that host "
            "(the same commit and local changes, e.g. pip install the same checkout), or "
            "leave the host out ([executor] labels), then rerun: finished units are kept")


class StopFlag:
    """A Ray actor the driver sets on Ctrl-C: each worker stops its unit the way Ctrl-C would
    (the session writes it invalid, with the reason), sends it back and ends its task. A
    ``ray.cancel`` would drop what the task yields after it, so it comes only after this."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def is_stopped(self) -> bool:
        return self.stopped


def run_block(session: SessionUnit, todo: list[tuple[Unit, int]], max_attempts: int,
              driver: dict | None = None, stop: Any = None):
    """The task a host runs (a Ray generator): every unit of ``todo`` (unit, attempts made so
    far) in order, each retried here until valid or ``max_attempts`` is spent, each in a
    scratch folder of this host that is sent back as bytes and then removed. First of all the
    host's plugin is checked against the ``driver``'s (``check_host_plugin``)."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    host = socket.gethostname()
    check_host_plugin(driver, host, node)
    for unit, attempts in todo:
        while attempts < max_attempts:
            attempts += 1
            yield Started(unit.unit_id, attempts, node, host, os.getpid())
            scratch = Path(tempfile.mkdtemp(prefix="e2e-ray-"))
            try:
                files, record = run_in_child(session.at(scratch / "results"), unit, scratch,
                                             stop=stop)
            except UnitInterrupted as exc:  # written invalid, as on one host: sent back first
                yield Finished(unit.unit_id, attempts, node, host, exc.files, exc.record)
                return  # the driver is stopping: no further unit
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            yield Finished(unit.unit_id, attempts, node, host, files, record)
            if _all_valid(unit, record):
                break


class UnitInterrupted(KeyboardInterrupt):
    """A unit stopped by Ctrl-C or a cancel after its session wrote it (invalid, with the
    reason): its folder's files and record, to be finalized by the driver like any other."""

    def __init__(self, files: dict[str, bytes], record: Any) -> None:
        super().__init__("interrupted")
        self.files, self.record = files, record


def _record_of(unit: Unit, data: bytes) -> Any:
    from e2e.plan import EvalSpec

    if isinstance(unit, EvalSpec):
        from e2e.results.gsm8k import ArmResult

        return ArmResult.model_validate_json(data)
    from e2e.results.records import RunRecord

    return RunRecord.model_validate_json(data)


def _interrupted_answer(answer: Path, finished: bool = False) -> UnitInterrupted | None:
    """The child's answer as a UnitInterrupted when it wrote its unit invalid on the
    interruption (or, ``finished``, when the unit had finished before it came)."""
    from ray import cloudpickle

    try:
        outcome, *value = cloudpickle.loads(answer.read_bytes())
    except (OSError, ValueError, EOFError):
        return None
    wanted = ("interrupted", "ok") if finished else ("interrupted",)
    return UnitInterrupted(value[0], value[1]) if outcome in wanted else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM to this process when the Ray worker that started it dies."""
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop_asked(stop: Any) -> bool:
    if stop is None:
        return False
    import ray

    try:
        return bool(ray.get(stop.is_stopped.remote(), timeout=5.0))
    except Exception:  # noqa: BLE001 - no answer: go on (a dead driver ends its tasks itself)
        return False


def run_in_child(session: SessionUnit, unit: Unit, scratch: Path,
                 poll_s: float = 0.2, stop: Any = None) -> tuple[dict[str, bytes], Any]:
    """One unit's server session in a child process of this Ray worker; returns its folder's
    files and its record, or raises the session's error.

    Why a child: Ray cancels a running task by raising KeyboardInterrupt in it between two
    bytecodes, so a task blocked in a long call (lm-eval's process, a build) would hear of a
    Ctrl-C only when that call returns. Here the worker only polls, hears it within
    ``poll_s``, and passes it on as a real SIGINT, which interrupts any call; the session then
    stops its server and the child exits. If the worker dies outright (killed, OOM), the
    kernel sends the child SIGTERM (PR_SET_PDEATHSIG), which the session treats as Ctrl-C, so
    no server outlives its worker."""
    import signal
    import subprocess
    import sys

    from ray import cloudpickle

    job, answer = scratch / "unit.pickle", scratch / "answer.pickle"
    job.write_bytes(cloudpickle.dumps((session, unit)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen([sys.executable, "-m", "e2e.execute.ray", str(job), str(answer)],
                             env=env, stdin=subprocess.DEVNULL,
                             preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    try:
        asked = time.monotonic()
        while child.poll() is None:
            time.sleep(poll_s)
            if stop is not None and time.monotonic() - asked >= 1.0:
                asked = time.monotonic()
                if _stop_asked(stop):
                    raise KeyboardInterrupt  # the driver's Ctrl-C, passed on as a SIGINT below
    except BaseException as exc:  # a cancel (KeyboardInterrupt): stop the child as Ctrl-C would
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=600)
        except subprocess.TimeoutExpired:
            child.kill()
        # the unit's answer, finished or written invalid by the interruption: sent back too
        stopped = _interrupted_answer(answer, finished=True) if answer.is_file() else None
        if stopped is not None and isinstance(exc, KeyboardInterrupt):
            raise stopped from None
        raise
    if answer.is_file() and (stopped := _interrupted_answer(answer)) is not None:
        raise stopped  # the child had the Ctrl-C itself (the terminal's, to the group)
    if not answer.is_file():
        raise RuntimeError(f"the unit's process exited with status {child.returncode} "
                           "without an answer (see the worker's output above)")
    outcome, *value = cloudpickle.loads(answer.read_bytes())
    if outcome == "error":
        raise value[0]
    return value[0], value[1]


def _child_main(job: str, answer: str) -> int:
    """``python -m e2e.execute.ray JOB ANSWER``: the unit of ``run_in_child``."""
    import pickle
    import signal

    def terminated(signum, frame):
        raise KeyboardInterrupt  # SIGTERM (the worker died) is handled like Ctrl-C

    signal.signal(signal.SIGTERM, terminated)
    session, unit = pickle.loads(Path(job).read_bytes())
    try:
        result: tuple = ("ok", *_answer(session(unit)))
    except E2EError as exc:
        result = ("error", exc)
    except KeyboardInterrupt:  # the session stopped its server and wrote the unit invalid
        from ray import cloudpickle

        from e2e.results.store import record_name, unit_dir

        written = []
        for side in unit.sides:
            folder = unit_dir(session.results, session.experiment.name, side)
            if (folder / record_name(side)).is_file():
                written.append((folder, _record_of(side, (folder / record_name(side)).read_bytes())))
        if written:
            files, record = _answer(written if unit.kind == "duet" else written[0])
            atomic_write_bytes(Path(answer), cloudpickle.dumps(("interrupted", files, record)))
        return 130
    from ray import cloudpickle

    atomic_write_bytes(Path(answer), cloudpickle.dumps(result))
    return 0


# --- The driver --------------------------------------------------------------------------


@dataclass
class _Flight:
    """A block's task and the attempt it is making now."""

    index: int
    units: list[Unit]
    current: Started | None = None
    strikes: int = 0  # earlier tasks of this block that died before starting a unit
    started: bool = False


class _Blocks:
    """The driver's side of one execution on the cluster: the blocks waiting for a host, the
    tasks in flight, and each message a task sends, into the ``Ledger`` (which keeps the
    attempts, the units given up and the progress, as on one host)."""

    def __init__(self, executor: RayExecutor, ledger: Ledger, session: SessionUnit,
                 units: Sequence[Unit]) -> None:
        self.executor, self.ledger, self.session = executor, ledger, session
        self.by_id = {u.unit_id: u for u in units}
        self.queue: deque[tuple[int, list[Unit], str | None, int]] = deque()
        self.running: dict[Any, _Flight] = {}
        self.stopping = False
        tried = {unit.unit_id: attempts for _, unit, attempts in ledger.todo}  # not done yet
        for index, block in enumerate(blocks(units), 1):
            left = []
            for unit in (u for u in block if u.unit_id in tried):
                if tried[unit.unit_id] >= ledger.max_attempts:
                    ledger.ended(unit)  # its attempts were spent before: given up, as on one host
                else:
                    left.append(unit)
            if left:
                self.queue.append((index, left, None, 0))

    def submit(self) -> None:
        """Every queued block to the cluster, each unit with the attempts it has made."""
        while self.queue:
            index, todo, avoid, strikes = self.queue.popleft()
            pairs = [(u, self.ledger.attempts(u)) for u in todo]
            gen = self.executor._submit(self.session, pairs, self.ledger.max_attempts, avoid)
            self.running[gen] = _Flight(index, todo, strikes=strikes)

    def step(self, timeout: float) -> None:
        """Take in the next message of a task that has one (waiting up to ``timeout``)."""
        import ray

        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=timeout)
        for gen in ready:
            flight = self.running[gen]
            try:
                message = ray.get(next(gen))
            except StopIteration:
                del self.running[gen]
                continue
            except ray.exceptions.RayTaskError as exc:  # e2e's own error on the host
                del self.running[gen]
                cause = exc.cause
                raise (cause if isinstance(cause, E2EError) else exc) from None
            except ray.exceptions.RayError as exc:  # worker or node died, task cancelled
                del self.running[gen]
                if not self.stopping:
                    self._fault(flight, exc)
                continue
            self._take(flight, message)

    def _take(self, flight: _Flight, message: Started | Finished) -> None:
        unit, ledger = self.by_id[message.unit_id], self.ledger
        if isinstance(message, Started):
            flight.current, flight.started = message, True
            ledger.started(unit, message.attempt, f"{unit.unit_id} on {message.hostname}",
                           f"node {message.node_id[:8]}, pid {message.pid}, "
                           f"block {flight.index}; ")
            return
        facts = {"kind": "ray", "node_id": message.node_id, "hostname": message.hostname,
                 "block": flight.index, "round": getattr(unit, "repeat", None),
                 "attempt": message.attempt}
        written = finalize_remote(ledger.results, ledger.experiment, unit, message, facts)
        flight.current = None
        if ledger.made(unit, written) or message.attempt >= ledger.max_attempts:
            ledger.ended(unit)

    def _fault(self, flight: _Flight, exc: BaseException) -> None:
        """The task died with its worker or node: the attempt in flight is kept as a
        failure, the block's remaining units go back to the queue."""
        ledger = self.ledger
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        current = flight.current
        if current is not None:
            unit = self.by_id[current.unit_id]
            why = f"the Ray task died mid-unit: {reason}"
            for side in unit.sides:  # a duet's every side
                keep_failed_attempt(ledger.results, ledger.experiment, side, {
                    "unit_id": side.unit_id, "run_id": side.unit_id,
                    "attempt": current.attempt, "spec": side.model_dump(mode="json"),
                    "valid": False, "reason": why, "invalid_reasons": [why], "at": utc_now(),
                    "executor": {"kind": "ray", "node_id": current.node_id,
                                 "hostname": current.hostname, "block": flight.index}})
            ledger.say(f"{unit.unit_id}: attempt {current.attempt} lost on {current.hostname} "
                       f"(node {current.node_id[:8]}): {reason}")
        left = []
        for unit in (u for u in flight.units if not ledger.is_over(u)):
            if ledger.attempts(unit) >= ledger.max_attempts:
                ledger.ended(unit)
            else:
                left.append(unit)
        strikes = 0 if flight.started else flight.strikes + 1
        if strikes >= 3:
            raise E2EError(f"the Ray tasks of block {flight.index} died 3 times before "
                           f"starting a unit ({reason}); check that every host has e2e "
                           f"installed ({_INSTALL}, the same version as here)")
        if left and not ledger.stopped:
            self.queue.append((flight.index, left, current.node_id if current else None, strikes))

    def stop(self) -> None:
        """Cancel every task (KeyboardInterrupt in its worker: the session stops its server)
        and wait until they ended, taking in units that finish meanwhile."""
        import ray

        self.stopping = True

        def wait(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while self.running and time.monotonic() < deadline:
                try:
                    self.step(1.0)
                except Exception:  # noqa: BLE001 - stopping anyway; the first error is raised
                    continue

        flag, wait_s = self.executor._flag, self.executor.stop_wait_s
        try:
            if flag is not None:  # each worker stops its unit and sends it back
                flag.stop.remote()
                wait(wait_s / 2)
            for gen in list(self.running):  # a worker that did not: cancelled (what it yields is lost)
                ray.cancel(gen)
            wait(wait_s / 2)
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait
            pass
        for gen in list(self.running):
            ray.cancel(gen, force=True)


def _with_executor(record: Any, facts: dict) -> Any:
    return record.model_copy(update={"provenance": {**record.provenance, "executor": facts}})


def finalize_remote(results: Path, experiment: str, unit: Unit, message: Finished,
                    facts: dict) -> list[tuple[Path, Any]]:
    """A worker's unit folder into the driver's results: files written into a fresh partial
    folder, the record (with ``provenance["executor"] = facts``) last, then one atomic rename
    (e2e.results.store.finalize_unit, which keeps an earlier attempt in ``.attempts``).
    A duet's sides each get their folder so; returns every (folder, record) written."""
    if unit.kind != "duet":
        return [_finalize_one(results, experiment, unit, message.files, message.record, facts)]
    out = []
    for record in message.record:
        side = next(s for s in unit.sides if s.run_id == record.run_id)
        prefix = f"{side.run_id}/"
        files = {rel[len(prefix):]: data for rel, data in message.files.items()
                 if rel.startswith(prefix)}
        out.append(_finalize_one(results, experiment, side, files, record, facts))
    return out


def _finalize_one(results: Path, experiment: str, unit: Unit, files: dict[str, bytes],
                  record: Any, facts: dict) -> tuple[Path, Any]:
    partial = new_partial_dir(results, experiment, unit.unit_id)
    name = record_name(unit)
    for rel, data in files.items():
        if rel != name:  # a worker's path stays inside the unit's folder
            atomic_write_bytes(within(partial, partial / rel, "a unit's file"), data)
    record = _with_executor(record, facts)
    atomic_write_json(partial / name, record.model_dump(mode="json"))
    return finalize_unit(partial, unit_dir(results, experiment, unit)), record


def keep_failed_attempt(results: Path, experiment: str, unit: Unit, failure: dict) -> Path:
    """An attempt that left no folder (its worker or node died) as
    ``.attempts/<unit>.<n>/failure.json``: counted by ``e2e.results.store.unit_state`` as an
    attempt, ignored by reports."""
    final = unit_dir(results, experiment, unit)
    partial = new_partial_dir(results, experiment, unit.unit_id)
    atomic_write_json(partial / FAILURE_JSON, failure)
    target = next_attempt_dir(final)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(partial, target)
    return target


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """ConnectionError unless ``host:port`` (or ``ray://host:port``) takes a TCP connection;
    'auto' and 'local' are left to Ray."""
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if address in ("auto", "local") or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port} ({exc})") from None


def _hosts(resource: str, labels: dict[str, str]) -> list[dict]:
    """Alive nodes offering ``resource`` (and carrying ``labels``, plain values only)."""
    import ray

    out = []
    for node in ray.nodes():
        if not node.get("Alive") or node.get("Resources", {}).get(resource, 0) < 1:
            continue
        have = node.get("Labels") or {}
        if all(have.get(k) == v for k, v in labels.items() if v and v[0].isalnum()):
            out.append(node)
    return out


class RayExecutor:
    """Units on a Ray cluster (see the module docstring). Connects to ``config.address``
    (None: $RAY_ADDRESS, else 'auto') unless this process is connected already."""

    def __init__(self, config: ExecutorConfig = ExecutorConfig(kind="ray"), *,
                 stop_wait_s: float = 120.0, poll_s: float = 1.0):
        self.config = config
        self.stop_wait_s = stop_wait_s
        self.poll_s = poll_s
        self._driver_plugin: dict | None = None
        self._flag: Any = None  # the run's StopFlag actor

    # connection and the fail-fast checks
    def _connect(self) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(f"--executor ray needs Ray: {_INSTALL}") from None
        if ray.is_initialized():
            return
        address = self.config.address or os.environ.get("RAY_ADDRESS") or "auto"
        try:
            _reachable(address)  # ray.init would retry an unreachable address for minutes
            ray.init(address=address, logging_level="WARNING", log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot reach a Ray cluster at {address!r}: {exc}; "
                              f"{_start_hint(self.config.resource)}, or give [executor] "
                              "address / $RAY_ADDRESS") from None

    def check_hosts(self) -> list[dict]:
        """The participating hosts; a ConfigError when none offers the resource or one offers
        it more than once (two units would share that host)."""
        resource = self.config.resource
        hosts = _hosts(resource, self.config.labels)
        where = f" with labels {self.config.labels}" if self.config.labels else ""
        if not hosts:
            raise ConfigError(f"no node of the Ray cluster{where} offers the resource "
                              f"{resource!r}, so no unit can run; {_start_hint(resource)}")
        shared = [h for h in hosts if h["Resources"][resource] > 1]
        if shared:
            node = shared[0]
            raise ConfigError(f"node {node['NodeID'][:12]} ({node.get('NodeManagerAddress')}) "
                              f"offers {resource}: {node['Resources'][resource]:g}; each host "
                              f"must offer it once, or units would share its GPUs; restart it "
                              f"with --resources='{{\"{resource}\": 1}}'")
        return hosts

    def _submit(self, session: SessionUnit, todo: list[tuple[Unit, int]], max_attempts: int,
                avoid: str | None):
        import ray

        selector = dict(self.config.labels)
        if avoid and any(h["NodeID"] != avoid for h in _hosts(self.config.resource, selector)):
            selector[ray._raylet.RAY_NODE_ID_KEY] = f"!{avoid}"
        task = ray.remote(run_block).options(
            num_cpus=0, resources={self.config.resource: 1}, max_retries=0,
            retry_exceptions=False, label_selector=selector or None)
        # the driver's ``say`` (a console) stays here: the worker prints, Ray forwards it
        shipped = session.at(say=_worker_say, progress=False)  # each block writes to its scratch
        return task.remote(shipped, todo, max_attempts, self._driver_plugin, self._flag)

    def run(self, experiment: str, units: Sequence[Unit], results: Path, run_unit: RunUnit, *,
            max_attempts: int = 2, fail_fast: bool = False,
            on_unit: OnUnit = lambda folder, record: None,
            say: Say = lambda message: None) -> Outcome:
        if not isinstance(run_unit, SessionUnit):
            raise ConfigError("the Ray executor runs the server session on other hosts and "
                              "needs it as a value: pass e2e.execute.SessionUnit(experiment, "
                              "results, options) as run_unit (e2e.pipeline.execute does)")
        self._connect()
        self.check_hosts()
        self._driver_plugin = driver_plugin()
        self._flag = self._stop_flag()
        ledger = Ledger(experiment, units, results, max_attempts=max_attempts,
                        fail_fast=fail_fast, on_unit=on_unit, say=say)
        ledger.clock.start()  # the cluster's pace counts from here
        cluster = _Blocks(self, ledger, run_unit, units)
        checked = time.monotonic()
        try:
            while (cluster.queue or cluster.running) and not ledger.stopped:
                cluster.submit()
                cluster.step(self.poll_s)
                if cluster.running and time.monotonic() - checked > 10:
                    checked = time.monotonic()
                    self.check_hosts()  # every host gone: fail, keeping what finished
        except BaseException:
            cluster.stop()
            raise
        if cluster.running:  # fail_fast: stop the rest
            cluster.stop()
        return ledger.outcome

    def _stop_flag(self) -> Any:
        """The run's StopFlag actor, on the driver's node: it lives and dies with the driver."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        return ray.remote(num_cpus=0)(StopFlag).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)).remote()


def executor_from(config: ExecutorConfig, flag: str | None = None) -> Executor:
    """The executor for ``[executor]`` and ``--executor`` (the flag wins): LocalExecutor or
    RayExecutor. A bad flag is a ConfigError; so is ``ray`` without Ray installed."""
    kind = flag if flag is not None else config.kind
    if kind not in ("local", "ray"):
        raise ConfigError(f"--executor {kind!r}: give 'local' (this host) or 'ray' (a Ray "
                          "cluster, see docs/how-to/cluster.md)")
    if kind == "local":
        return LocalExecutor()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray on this machine and every host: {_INSTALL}") from None
    return RayExecutor(config.model_copy(update={"kind": "ray"}))


def describe_cluster_plan(experiment: Experiment, units: Sequence[Unit], results: Path,
                          config: ExecutorConfig | None = None) -> list[str]:
    """For ``--dry-run --executor ray``: the blocks the cluster would get, in order, each
    with its units and their state. Contacts no cluster."""
    config = config or experiment.executor
    where = config.address or os.environ.get("RAY_ADDRESS") or "auto"
    labels = f", labels {json.dumps(config.labels, sort_keys=True)}" if config.labels else ""
    lines = [f"Ray cluster {where}: each block holds one host ({config.resource}: 1{labels}) "
             "and runs its units back to back; blocks go to hosts as they come free"]
    to_run = 0
    for index, block in enumerate(blocks(units), 1):
        first = block[0]
        what = (f"round {first.repeat}, concurrency {first.concurrency}, {first.spec_mode}"
                if first.kind == "load" else f"GSM8K {first.eval_name}, {first.spec_mode}")
        lines.append(f"block {index} ({what}):")
        for unit in block:
            state = unit_state(results, experiment.name, unit)
            status = ("done (skipped)" if state.done else
                      f"rerun (attempt {state.attempts + 1})" if state.attempts else "to run")
            to_run += not state.done
            lines.append(f"  {unit.unit_id}  {status}")
    lines.append(f"{to_run} of {len(units)} units would go to the cluster")
    return lines


if __name__ == "__main__":  # the child process of run_in_child
    import sys

    sys.exit(_child_main(*sys.argv[1:3]))
