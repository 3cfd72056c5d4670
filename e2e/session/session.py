"""The server session: the one place where a unit of work meets a server.

    run_unit(experiment, unit, results)
        resolve the arm's launch once (build, model, argv, environment)
        -> a fresh server in its own process group (``e2e.session.server.serve``) -> /health
        -> the plugin check (mandatory; ``--no-plugin-check`` is an explicit, recorded choice)
        -> workload warmup -> /metrics before -> the workload -> /metrics after
        -> stop the process group
        -> the unit's folder, with its record (spec, redacted config, server argv and
           environment, provenance, plugin mode), finalized atomically

Each step is a method of ``Session``, which a duet side (``e2e.session.duet``) calls too, in
the same order, meeting its partners between them. Load runs and GSM8K evaluations are two
workloads inside it (``e2e.load.workload``, ``e2e.gsm8k.workload``). Whatever happens, the
folder is written with what was measured and why the unit is invalid if it is; Ctrl-C (or
SIGTERM) stops the server, writes what finished and re-raises.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from e2e.arms import ServerLaunch
from e2e.redact import Redactor
from e2e.config import DuetSlot, Experiment
from e2e.plan import DuetSpec, Unit
from e2e.console import Say
from e2e.errors import E2EError, ServerBusyError, ServerError
from e2e.paths import atomic_write_json, atomic_write_text
from e2e.session.bounds import check_units
from e2e.session.plugin_log import check_plugin
from e2e.session._provenance import provenance
from e2e.results.records import PlacementInfo, PluginInfo, ServerInfo, ServerMemory, HostNoise
from e2e.host import describe_affinity, group_members, memory_of
from e2e.session.external import external_servers
from e2e.host import noise, snapshot, with_descendants
from e2e.session.server import ServerOptions
from e2e.session._servers import ServerHandle, Servers
from e2e.session._shield import shielded
from e2e.results.store import finalize_unit, new_partial_dir, record_name, unit_dir, utc_now
from e2e.session._workloads import Workloads

__all__ = ["ServerHandle", "Servers", "Workload", "UnitInfo", "SessionOptions", "Session",
           "run_unit", "redacted_config", "servers_for"]



class Workload(Protocol):
    """What a unit does with its server (see the module docstring for the order of calls)."""

    def warmup(self, server: ServerHandle) -> None: ...

    def measure(self, server: ServerHandle, folder: Path) -> None: ...

    def keep_busy(self, server: ServerHandle) -> None:
        """One batch of the same load, unmeasured (a duet side holding its server under load
        while its partners still measure)."""
        ...

    def record(self, info: UnitInfo, folder: Path) -> BaseModel:
        """The unit's record from what was measured; may add reasons and warnings to
        ``info`` and files to ``folder``."""
        ...


@dataclass
class UnitInfo:
    """What the session learned of a unit, common to every workload's record."""

    experiment: str
    unit: Unit
    config: dict[str, Any]
    launch: ServerLaunch
    started_at: str
    server: ServerInfo
    provenance: dict[str, Any] = field(default_factory=dict)
    plugin: PluginInfo | None = None
    placement: PlacementInfo | None = None
    host_noise: HostNoise | None = None
    finished_at: str = ""
    metrics_before: str | None = None
    metrics_after: str | None = None
    duet: Any = None  # e2e.results.records.DuetInfo of a side of a duet
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def arm_settings(self) -> dict[str, Any]:
        return self.config["arms"][self.unit.arm]


@dataclass(frozen=True)
class SessionOptions:
    """How units run. ``plugin_check`` False is ``--no-plugin-check`` (for engines without
    e2e's plugin): recorded in every record as ``plugin.check = "skipped"``."""

    plugin_check: bool = True
    progress: bool = True
    say: Say = lambda message: None
    servers: Servers | None = None  # None: fresh servers, or the config's external one
    workloads: Callable[..., Workload] | None = None  # None: e2e.session._workloads.Workloads()


def servers_for(experiment: Experiment) -> Servers:
    """Fresh servers, or the already-running one of ``server.external`` (``--base-url``)."""
    if experiment.server.external:
        return external_servers(experiment.server.external)
    return Servers()


def redacted_config(experiment: Experiment) -> dict:
    """The experiment as JSON with secrets redacted (``e2e.redact``: every env table, every
    args list, the API key, URL credentials, any value of a secret seen anywhere)."""
    return experiment.redactor().config(experiment.model_dump(mode="json"))


def _scrub_log(path: Path, redactor: Redactor) -> None:
    """The server's log with every known secret masked (vLLM logs its non-default args)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    clean = redactor.text(text)
    if clean != text:
        atomic_write_text(path, clean)


def _server_info(launch: ServerLaunch, argv: list[str], base_url: str,
                 redactor: Redactor) -> ServerInfo:
    return ServerInfo(kind="external" if launch.external else "fresh",
                      argv=redactor.argv(argv), env=redactor.env(launch.env),
                      base_url=redactor.url(base_url), model=launch.model,
                      model_hash=launch.model_hash)


def _plugin(log_path: Path | None, settings: dict, check: bool, launch: ServerLaunch) -> PluginInfo:
    """The plugin check; the hash the server's plugin must have is the one of the folder
    the launch put on its PYTHONPATH (the driver's own plugin)."""
    expected = launch.plugin.get("plugin_sha256")
    copied_from = launch.plugin.get("copied_from")
    if log_path is None:
        return PluginInfo(check="skipped", settings=settings,
                          detail="external server: e2e cannot see its log")
    if not check:
        return PluginInfo(check="skipped", settings=settings, expected_sha256=expected,
                          copied_from=copied_from,
                          detail="--no-plugin-check: the arm's settings were not verified")
    return check_plugin(log_path, settings, expected, copied_from)


def _placement(server) -> PlacementInfo | None:
    """The server's CPU set (asked, applied) and the cores its processes may run on."""
    pgid = getattr(server, "pgid", None)
    if pgid is None:  # not a server e2e started
        return None
    return PlacementInfo(server=getattr(server, "placement", None),
                         server_cores=describe_affinity(pgid) or None)


def _with_memory(placement: PlacementInfo | None, server) -> PlacementInfo | None:
    """``placement`` with the server group's memory as it is now (after the load)."""
    pgid = getattr(server, "pgid", None)
    facts = memory_of(group_members(pgid)) if placement is not None and pgid is not None else None
    if facts is None:
        return placement
    return placement.model_copy(update={"server_memory": ServerMemory(**facts)})


def _placed(experiment: Experiment, slot) -> Experiment:
    """The experiment as a duet side in ``slot`` runs it: the slot's server and load-generator
    CPUs and port (its env is added to the launch). The record keeps the config as written;
    the run's placement and duet blocks say where it ran."""
    if slot is None:
        return experiment
    return experiment.model_copy(update={
        "server": experiment.server.model_copy(update={"cpus": slot.server_cpus,
                                                       "port": slot.port}),
        "load": experiment.load.model_copy(update={"cpus": slot.client_cpus})})


def run_unit(experiment: Experiment, unit: Unit, results: Path,
             options: SessionOptions = SessionOptions()) -> tuple[Path, BaseModel]:
    """Run ``unit`` on a fresh server and write its folder under ``results``; returns the
    folder and the record (``record.valid`` False for an invalid unit, which is written
    too). Raises ServerBusyError (nothing written) when another e2e holds the host."""
    if isinstance(unit, DuetSpec):
        raise TypeError("a duet runs through e2e.session.run_duet (SessionUnit does)")
    session = Session.open(experiment, unit, results, options)
    with session.recording(), session.serve() as server:
        session.workload.warmup(server)
        session.watch(server)
        session.measure(server)
        session.after(server)
    return session.finish()


class Session:
    """One unit's server session, step by step (module docstring): ``open`` resolves the
    launch and the workload, ``serve`` starts the server and checks its plugin, ``watch``
    reads what comes before the measured load, ``measure`` runs it, ``after`` reads what
    comes after, ``finish`` writes the unit's folder; ``recording`` turns whatever goes wrong
    between into the reason the unit is invalid. ``slot`` is a duet side's place (its CPUs,
    port and env) and ``root_pid`` the duet's driver, whose descendants are e2e's own."""

    def __init__(self, experiment: Experiment, unit: Unit, results: Path,
                 options: SessionOptions, slot: DuetSlot | None = None,
                 root_pid: int | None = None, slot_name: str | None = None) -> None:
        self.experiment, self.unit, self.results, self.options = experiment, unit, results, options
        self.say = options.say
        self.servers = options.servers or servers_for(experiment)
        launch = self.servers.launch(experiment, unit.arm, dspark=unit.dspark, progress=self.say)
        if slot is not None and slot.env:  # the slot's env, e.g. its GPU
            launch = replace(launch, env={**launch.env, **slot.env})
        self.launch = launch
        self.root_pid = root_pid if root_pid is not None else os.getpid()
        self.slot_name = slot_name
        self.placed = _placed(experiment, slot)  # a duet side's CPUs and port
        self.workload = (options.workloads or Workloads())(self.placed, unit, launch, options)
        self.partial = new_partial_dir(results, experiment.name, unit.unit_id)
        self.redactor = experiment.redactor(launch.api_key)
        self.info = UnitInfo(
            experiment=experiment.name, unit=unit, config=redacted_config(experiment),
            launch=launch, started_at=utc_now(),
            server=_server_info(launch, [] if launch.external else launch.argv(0),
                                launch.host if launch.external else f"http://{launch.host}",
                                self.redactor))
        self.arm = experiment.arm(unit.arm)
        self.interrupted: BaseException | None = None
        self._serving: list[int] = []
        self._host_before: Any = None

    @classmethod
    def open(cls, experiment: Experiment, unit: Unit, results: Path, options: SessionOptions,
             **place: Any) -> Session:
        """The unit's session, its bounds checked before anything is built, drawn or started."""
        check_units(experiment, [unit])
        return cls(experiment, unit, results, options, **place)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Whatever goes wrong inside becomes a reason the unit is invalid (its folder is still
        written by ``finish``); Ctrl-C and a bug are raised again after that. A busy host
        (another e2e's server) leaves no folder and is raised at once."""
        try:
            yield
        except ServerBusyError:
            shutil.rmtree(self.partial, ignore_errors=True)  # nothing ran: leave no folder
            raise
        except KeyboardInterrupt as exc:
            self.interrupted = exc
            self.info.reasons.append("interrupted (Ctrl-C or SIGTERM) before the workload finished")
        except E2EError as exc:
            self.info.reasons.append(str(exc))
        except Exception as exc:  # a bug or a value nobody checked: the record first, then it
            self.interrupted = exc
            self.info.reasons.append(f"failed unexpectedly: {type(exc).__name__}: {exc}")

    @contextlib.contextmanager
    def serve(self) -> Iterator[ServerHandle]:
        """The unit's server, its plugin checked (a failed check is a ServerError); stopped,
        its process group with it, when the block ends."""
        launch, unit, info = self.launch, self.unit, self.info
        self.say(f"measuring the external server {self.redactor.url(launch.host)} as arm {unit.arm}"
                 if launch.external
                 else f"starting the {unit.arm} server ({'with' if unit.dspark else 'without'} "
                      f"speculator); log: {self.partial / 'server.log'}")
        server_options = replace(ServerOptions.of(self.placed.server), own_root=self.root_pid,
                                 slot=self.slot_name)
        with self.servers.serve(launch, self.partial / "server.log", server_options) as server:
            info.server = _server_info(launch, server.argv, server.base_url, self.redactor)
            info.plugin = _plugin(server.log_path, self.arm.plugin, self.options.plugin_check,
                                  launch)
            if info.plugin.check == "failed":
                raise ServerError(f"arm settings not applied: {info.plugin.detail}")
            yield server

    def watch(self, server) -> None:
        """Just before the measured load: the server's counters, where its processes may run,
        and what the host is doing."""
        self.info.metrics_before = server.scrape_metrics()
        self.info.placement = _placement(server)
        # an external server on this host is the server under test, not interference
        self._serving = server.local_pids() if hasattr(server, "local_pids") else []
        self._host_before = snapshot()

    def measure(self, server) -> tuple[float, float]:
        """The measured load; returns when it began and ended (``time.monotonic``). Whatever
        happens, what else used the host meanwhile is recorded: own = e2e, its server and
        client processes (those started meanwhile too; in a duet every side's, all
        descendants of the duet's driver)."""
        began = time.monotonic()
        try:
            self.workload.measure(server, self.partial)
        finally:
            ended = time.monotonic()
            host_after = snapshot()
            self.info.placement = _with_memory(self.info.placement, server)
            self.info.host_noise = noise(self._host_before, host_after, own_pids=with_descendants(
                host_after, {os.getpid(), self.root_pid, getattr(server, "pgid", os.getpid()),
                             *self._serving}))
        return began, ended

    def after(self, server) -> None:
        """Just after the measured load: the server's counters, or why the run is invalid."""
        info = self.info
        if server.alive():
            info.metrics_after = server.scrape_metrics()
        else:
            info.reasons.append("the server exited during the workload")
        others = server.strangers() if hasattr(server, "strangers") else None
        if others:  # e.g. a program that bound the port beside it with SO_REUSEPORT
            info.reasons.append(f"another program listened on the server's port during the "
                                f"load ({'; '.join(others)}): some requests may have been "
                                "answered by it, not by the server")

    def finish(self) -> tuple[Path, BaseModel]:
        """The unit's folder with its record, finalized atomically (a second Ctrl-C cannot cut
        it short); then an interruption or a bug caught by ``recording`` is raised again."""
        info, partial = self.info, self.partial
        with shielded():  # a second Ctrl-C must not lose what finished
            info.provenance = provenance(self.launch.python, self.launch.build)
            info.finished_at = utc_now()
            record = self.workload.record(info, partial)
            if info.metrics_before:
                atomic_write_text(partial / "metrics_before.prom", info.metrics_before)
            if info.metrics_after:
                atomic_write_text(partial / "metrics_after.prom", info.metrics_after)
            _scrub_log(partial / "server.log", self.redactor)  # a server may log its arguments
            atomic_write_json(partial / record_name(self.unit), record.model_dump(mode="json"))
            folder = finalize_unit(partial, unit_dir(self.results, self.experiment.name, self.unit))
        if self.interrupted is not None:
            raise self.interrupted
        return folder, record
