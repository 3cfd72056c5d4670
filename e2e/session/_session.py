"""The server session: the one place where a unit of work meets a server.

    run_unit(experiment, unit, results)
        resolve the arm's launch once (build, model, argv, environment)
        -> a fresh server in its own process group (``e2e.session._server.serve``) -> /health
        -> the plugin check (mandatory; ``--no-plugin-check`` is an explicit, recorded choice)
        -> workload warmup -> [a duet's barrier] -> /metrics before -> the workload
        -> /metrics after -> [a duet side: the same load, unmeasured, until its partners are done]
        -> stop the process group
        -> the unit's folder, with its record (spec, redacted config, server argv and
           environment, provenance, plugin mode), finalized atomically

Load runs and GSM8K evaluations are two workloads inside it (``e2e.load._workload``,
``e2e.gsm8k.workload``). Whatever happens, the folder is written with what was measured and
why the unit is invalid if it is; Ctrl-C (or SIGTERM) stops the server, writes what finished
and re-raises.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from e2e.arms import ServerLaunch
from e2e.redact import Redactor
from e2e.config import Experiment
from e2e.plan import DuetSpec, Unit
from e2e.console import Say
from e2e.errors import E2EError, ServerBusyError, ServerError
from e2e.paths import atomic_write_json, atomic_write_text
from e2e.session._bounds import check_units
from e2e.session._plugin_check import check_plugin
from e2e.session._provenance import provenance
from e2e.results import PlacementInfo, PluginInfo, ServerInfo, ServerMemory
from e2e.host import describe_affinity, group_members, memory_of
from e2e.session._external import external_servers
from e2e.host import noise, snapshot, with_descendants
from e2e.results import HostNoise
from e2e.session._server import ServerOptions
from e2e.session._servers import ServerHandle, Servers
from e2e.shield import shielded
from e2e.results import finalize_unit, new_partial_dir, record_name, unit_dir, utc_now
from e2e.session._workloads import Workloads

__all__ = ["ServerHandle", "Servers", "Workload", "UnitInfo", "SessionOptions", "run_unit",
           "redacted_config", "servers_for"]



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
    duet: Any = None  # e2e.results.DuetInfo of a side of a duet
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
    workloads: Callable[..., Workload] | None = None  # None: e2e.load._workload.Workloads()
    together: Any = None  # a duet's side (e2e.session._duet.Together): its slot, the rendezvous


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
    say = options.say
    together = options.together
    check_units(experiment, [unit])  # before anything is built, drawn or started
    servers = options.servers or servers_for(experiment)
    launch = servers.launch(experiment, unit.arm, dspark=unit.dspark, progress=say)
    slot = together.place if together is not None else None
    if slot is not None and slot.env:  # the slot's env, e.g. its GPU
        launch = replace(launch, env={**launch.env, **slot.env})
    own_root = together.root_pid if together is not None else os.getpid()
    placed = _placed(experiment, slot)  # a duet side's CPUs and port
    workload = (options.workloads or Workloads())(placed, unit, launch, options)
    partial = new_partial_dir(results, experiment.name, unit.unit_id)
    redactor = experiment.redactor(launch.api_key)
    info = UnitInfo(experiment=experiment.name, unit=unit, config=redacted_config(experiment),
                    launch=launch, started_at=utc_now(),
                    server=_server_info(launch, [] if launch.external else launch.argv(0),
                                        launch.host if launch.external else f"http://{launch.host}",
                                        redactor))
    arm = experiment.arm(unit.arm)
    interrupted: BaseException | None = None
    try:
        say(f"measuring the external server {redactor.url(launch.host)} as arm {unit.arm}"
            if launch.external
            else f"starting the {unit.arm} server ({'with' if unit.dspark else 'without'} "
                 f"speculator); log: {partial / 'server.log'}")
        server_options = replace(ServerOptions.of(placed.server), own_root=own_root,
                                 slot=(None if together is None else together.slot_name))
        with servers.serve(launch, partial / "server.log", server_options) as server:
            info.server = _server_info(launch, server.argv, server.base_url, redactor)
            info.plugin = _plugin(server.log_path, arm.plugin, options.plugin_check, launch)
            if info.plugin.check == "failed":
                raise ServerError(f"arm settings not applied: {info.plugin.detail}")
            workload.warmup(server)
            if together is not None:  # every side's server is up and warm: start together
                together.arrive()
            info.metrics_before = server.scrape_metrics()
            info.placement = _placement(server)
            # an external server on this host is the server under test, not interference
            serving = server.local_pids() if hasattr(server, "local_pids") else []
            host_before = snapshot()
            if together is not None:
                if together.swap and hasattr(workload, "between_windows"):
                    moved: list[list[int]] = [info.placement.server_cores or []
                                              if info.placement else []]

                    def between(w: int) -> str | None:
                        client, cores = together.turn(w, lambda: workload.keep_busy(server),
                                                      getattr(server, "pgid", None), say=say)
                        moved.append(cores)
                        return client

                    workload.between_windows = between
                together.arrive("go")
            began = time.monotonic()
            try:
                workload.measure(server, partial)
            finally:  # own = e2e, its server and client processes (those started meanwhile too;
                # in a duet every side's, all descendants of the duet's driver)
                ended = time.monotonic()
                host_after = snapshot()
                info.placement = _with_memory(info.placement, server)
                info.host_noise = noise(host_before, host_after, own_pids=with_descendants(
                    host_after, {os.getpid(), own_root, getattr(server, "pgid", os.getpid()),
                                 *serving}))
            if server.alive():
                info.metrics_after = server.scrape_metrics()
            else:
                info.reasons.append("the server exited during the workload")
            others = server.strangers() if hasattr(server, "strangers") else None
            if others:  # e.g. a program that bound the port beside it with SO_REUSEPORT
                info.reasons.append(f"another program listened on the server's port during the "
                                    f"load ({'; '.join(others)}): some requests may have been "
                                    "answered by it, not by the server")
            if together is not None:
                together.measured(began, ended)
                held = together.hold(lambda: workload.keep_busy(server), say=say)
                info.duet, more = together.info(held_s=held, windows=getattr(unit, "windows", None))
                if info.duet.window_slots is not None and hasattr(workload, "between_windows"):
                    info.duet = info.duet.model_copy(update={"window_server_cores": moved})
                info.reasons += more
    except ServerBusyError:
        shutil.rmtree(partial, ignore_errors=True)  # nothing ran: leave no folder
        raise
    except KeyboardInterrupt as exc:
        interrupted = exc
        info.reasons.append("interrupted (Ctrl-C or SIGTERM) before the workload finished")
    except E2EError as exc:
        info.reasons.append(str(exc))
    except Exception as exc:  # a bug or a value nobody checked: the record first, then it
        interrupted = exc
        info.reasons.append(f"failed unexpectedly: {type(exc).__name__}: {exc}")
    if together is not None and info.reasons:  # partners stop waiting for this side
        together.abandon(info.reasons[0])
        if info.duet is None:
            info.duet = together.info()[0]
    with shielded():  # a second Ctrl-C must not lose what finished
        info.provenance = provenance(launch.python, launch.build)
        info.finished_at = utc_now()
        record = workload.record(info, partial)
        if info.metrics_before:
            atomic_write_text(partial / "metrics_before.prom", info.metrics_before)
        if info.metrics_after:
            atomic_write_text(partial / "metrics_after.prom", info.metrics_after)
        _scrub_log(partial / "server.log", redactor)  # a server may log its arguments
        atomic_write_json(partial / record_name(unit), record.model_dump(mode="json"))
        folder = finalize_unit(partial, unit_dir(results, experiment.name, unit))
    if interrupted is not None:
        raise interrupted
    return folder, record
