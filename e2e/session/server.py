"""A fresh vLLM server as a context manager that owns its process group.

``serve()`` takes the host's one-server lock, starts the server in a new session (its own
process group) on a free port, logs to the run's folder, and waits for ``/health``. If the
process exits first it fails at once with the log's tail. A /health answer counts only when
every socket listening on the port belongs to the server's own process group (``e2e.host.
strangers``): a port is checked free, then bound by the server, and another program can take
it in between and answer /health (e2e would then measure that program); such a server is
refused before any request is sent. Every exit path (success, error, Ctrl-C) stops it:
SIGTERM to the group, SIGKILL after a grace period, then wait until no process of the group
is alive and the port is free.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e.host import group_members, spawn_pinned, strangers
from e2e.results.records import Placement
from e2e.arms import ServerLaunch, environment_for
from e2e.config import ServerConfig
from e2e.errors import ConfigError, ServerBusyError, ServerError, ServerStartError
from e2e.host import require_quiet, snapshot, with_descendants
from e2e.paths import e2e_home, flocked
from e2e.session.http import METRICS_LIMIT, fetch
from e2e.session._shield import shielded

__all__ = ["Server", "ServerOptions", "serve", "start", "server_lock", "free_port", "log_tail",
           "group_alive", "reap_leftover", "stop_group"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # unresolvable (gaierror) or not this host's address
            raise ConfigError(f"server.host {host!r}: cannot bind to it ({exc.strerror or exc}); "
                              "give an address of this host, e.g. 127.0.0.1") from None
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def log_tail(path: Path, lines: int = 30) -> str:
    try:  # the end of the log only: a server can write gigabytes of it
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - (256 << 10)))
            text = handle.read().decode(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


def group_alive(pgid: int) -> bool:
    if os.path.isdir("/proc"):
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _flock(path: Path, mode: int, deadline: float, what: str):
    return flocked(path, shared=mode == fcntl.LOCK_SH, deadline=deadline, busy=lambda holder:
                   ServerBusyError(f"another e2e (pid {holder}) is running {what} on this host "
                                   f"(lock {path}); wait for it to finish, or stop it, then rerun"))


@contextlib.contextmanager
def server_lock(*, wait_s: float = 0.0, slots: Sequence[str] = ()) -> Iterator[None]:
    """One server on the host at a time, or one per duet slot. The locks are flocks: the
    kernel drops them when their holder dies, so a crashed e2e never leaves a stale lock
    behind. A second e2e waits up to ``wait_s`` and then refuses, naming the holder's pid.
    A plain server holds the host's lock exclusively. A duet's driver (``slots``) holds it
    shared and every slot's lock exclusively, taken in one order (sorted) before any side
    starts, so two duets never each hold a slot the other waits for, two duets in disjoint
    slots run together, and none runs beside a plain server. Its sides hold no lock."""
    deadline = time.monotonic() + wait_s
    host = e2e_home() / "server.lock"
    with contextlib.ExitStack() as held:
        # a turnstile: whoever waits for the host's lock holds it meanwhile, so a plain
        # server waiting for the host is not passed again and again by duets, which share it
        with _flock(e2e_home() / "server.turn", fcntl.LOCK_EX, deadline, "a server"):
            held.enter_context(_flock(host, fcntl.LOCK_SH if slots else fcntl.LOCK_EX,
                                      deadline, "a server"))
        if not slots:
            reap_leftover()
            yield
            return
        for slot in sorted(set(slots)):
            held.enter_context(_flock(e2e_home() / f"server-{slot}.lock", fcntl.LOCK_EX,
                                      deadline, f"a server in duet slot {slot}"))
            reap_leftover(slot)
        yield


def _state_path(slot: str | None = None) -> Path:
    return e2e_home() / ("server.json" if slot is None else f"server-{slot}.json")


def stop_group(pgid: int, grace_s: float = 10.0) -> None:
    """Stop process group ``pgid``: SIGCONT and SIGTERM, up to ``grace_s`` to exit, then
    SIGKILL (waiting up to 10 s more for it to be gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGCONT)
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.2)
    if group_alive(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and group_alive(pgid):
            time.sleep(0.2)


def reap_leftover(slot: str | None = None) -> str | None:
    """Stop a server that a crashed e2e left running (its process group outlives e2e: it runs
    in its own session). Called with the server lock held (the host's, or ``slot``'s), so its
    owner is gone; with the host's held exclusively, leftovers of every slot too. Returns what
    was done, also printed to stderr."""
    if slot is None:
        done = [m for p in sorted(e2e_home().glob("server-*.json"))
                if (m := _reap(p)) is not None]
        return "; ".join(filter(None, [_reap(_state_path()), *done])) or None
    return _reap(_state_path(slot))


def _reap(path: Path) -> str | None:
    import json
    import sys

    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return None
    pgid = int(state.get("pgid", 0))
    message = None
    if pgid > 1 and group_alive(pgid):
        stop_group(pgid)
        message = (f"stopped a server left running by a crashed e2e (pid {state.get('owner')}, "
                   f"server process group {pgid}, port {state.get('port')})")
        if group_alive(pgid):
            raise ServerBusyError(f"a server left by a crashed e2e (process group {pgid}) "
                                  f"survived SIGKILL; kill it by hand: kill -9 -{pgid}")
        print(f"e2e: {message}", file=sys.stderr)
    path.unlink(missing_ok=True)
    return message


@dataclass
class Server:
    """A running server. ``stop()`` is idempotent."""

    launch: ServerLaunch
    process: subprocess.Popen
    port: int
    log_path: Path
    argv: list[str]
    stop_grace_s: float = 30.0
    placement: Placement | None = None  # the CPU set asked for and applied
    slot: str | None = None  # a duet side's slot (its own state file)
    squatted: bool = False  # another program holds the port: stop() does not wait for it

    @property
    def base_url(self) -> str:
        return f"http://{self.launch.host}:{self.port}"

    @property
    def model(self) -> str:
        return self.launch.model

    @property
    def pgid(self) -> int:
        return self.process.pid  # the leader of its own session and group

    def alive(self) -> bool:
        return self.process.poll() is None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.launch.api_key}"} if self.launch.api_key else {}

    def scrape_metrics(self, timeout_s: float = 30.0) -> str:
        try:  # bounded in bytes and in time (e2e.session.http)
            response = fetch(self.base_url + "/metrics", timeout=timeout_s,
                             headers=self.headers(), limit=METRICS_LIMIT)
        except httpx.HTTPError as exc:
            raise ServerError(f"could not read {self.base_url}/metrics: {exc}") from exc
        if response.status_code != 200:
            raise ServerError(f"could not read {self.base_url}/metrics: HTTP "
                              f"{response.status_code}")
        return response.text

    def strangers(self) -> list[str] | None:
        """Who besides the server's process group listens on its port ([] when no one; None
        where the host cannot say): see ``e2e.host.strangers``."""
        return strangers(self.port, group_members(self.pgid) or [self.pgid])

    def _own_listener(self) -> None:
        """Raise ServerStartError when another program answers on the server's port."""
        others = self.strangers()
        if others:
            self.squatted = True
            raise ServerStartError(
                f"port {self.port} on {self.launch.host} answered /health, but the "
                f"{self.launch.arm} server (process group {self.pgid}) does not hold every "
                f"socket listening there ({'; '.join(others)}): another program took the port "
                "after e2e found it free, and e2e measures only the server it started, so it "
                "sent no request; stop that program, or give the server another port "
                "(server.port, or the duet slot's port; 0 picks a free one)")

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerStartError(
                    f"the {self.launch.arm} server exited with code {code} before it became "
                    f"healthy; its log is {self.log_path}\n--- last lines ---\n"
                    f"{log_tail(self.log_path)}"
                )
            try:
                url = self.base_url + self.launch.kind.health_path
                healthy = fetch(url, timeout=2.0, deadline_s=5.0).status_code == 200
            except (httpx.HTTPError, ServerError):
                healthy = False
            if healthy:
                self._own_listener()  # whoever answered must be this server
                return
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"the {self.launch.arm} server was not healthy after {timeout_s:.0f} s "
                    f"(server.startup_timeout_s); its log is {self.log_path}\n"
                    f"--- last lines ---\n{log_tail(self.log_path)}"
                )
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL it after the grace period, then wait until every process
        of the group is gone and the port is free."""
        pgid = self.pgid
        if group_alive(pgid) or self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGCONT)  # a stopped (SIGSTOP) server cannot exit
                os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + self.stop_grace_s
            while time.monotonic() < deadline and (group_alive(pgid) or self.process.poll() is None):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=0.2)
            if group_alive(pgid) or self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (group_alive(pgid) or (
                not self.squatted and port_in_use(self.launch.host, self.port))):
            time.sleep(0.2)
        if group_alive(pgid):
            raise ServerError(f"server process group {pgid} survived SIGKILL; "
                              f"kill it by hand: kill -9 -{pgid}")
        _state_path(self.slot).unlink(missing_ok=True)


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM for the block and deliver them after it: between a server's
    exec and the moment the session holds its handle, an interruption would leave a server
    nobody stops. The handlers (not the signal mask) are swapped, so the child starts with
    its signals as they should be (a caught signal's handler resets to the default on exec).
    Off the main thread (where Python runs no handler) it changes nothing."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
                for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:  # delivered now, to the handler that was there (guard's: KeyboardInterrupt)
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])


def start(launch: ServerLaunch, log_path: Path, *, startup_timeout_s: float,
          stop_grace_s: float = 30.0, port: int | None = None, cpus: str | None = None,
          slot: str | None = None) -> Server:
    """Start a server and wait until it is healthy; on failure nothing is left running."""
    port = port or free_port(launch.host)
    if port_in_use(launch.host, port):
        raise ServerStartError(f"port {port} on {launch.host} is taken by another program; "
                               "stop that program, or set server.port = 0 to let e2e pick a "
                               "free port")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = launch.argv(port)
    from e2e.paths import atomic_write_json

    server: Server | None = None
    try:
        with _signals_held():  # from the spawn until ``server`` exists (see _signals_held)
            with open(log_path, "ab") as log, spawn_pinned(cpus) as placement:
                try:
                    process = subprocess.Popen(argv, env=environment_for(launch), stdout=log,
                                               stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
                except OSError as exc:
                    raise ServerStartError(f"cannot start {argv[0]}: {exc}") from exc
            server = Server(launch=launch, process=process, port=port, log_path=log_path,
                            argv=argv, stop_grace_s=stop_grace_s, placement=placement,
                            slot=slot)
            atomic_write_json(_state_path(slot), {"pgid": process.pid, "port": port,
                                              "owner": os.getpid(), "log": str(log_path)})
        server.wait_healthy(startup_timeout_s)
    except BaseException:
        if server is not None:
            with shielded():
                server.stop()
        raise
    return server


@dataclass(frozen=True)
class ServerOptions:
    """How e2e operates a server (not what it measures): timeouts, the lock wait, the port."""

    startup_timeout_s: float = 600.0
    stop_grace_s: float = 30.0
    lock_wait_s: float = 0.0
    port: int = 0  # 0: a free port
    cpus: str | None = None  # the server's CPU set (None: unpinned)
    require_quiet: float | None = None  # max share of a core another process may use
    quiet_sample_s: float = 2.0
    quiet_wait_s: float = 0.0  # how long to wait for the host to become quiet (0: refuse)
    own_root: int | None = None  # e2e's process whose descendants are ours (None: this one)
    slot: str | None = None  # a duet side's slot (its driver holds the slot's lock)

    @classmethod
    def of(cls, server: ServerConfig) -> ServerOptions:
        return cls(startup_timeout_s=server.startup_timeout_s, stop_grace_s=server.stop_grace_s,
                   lock_wait_s=server.lock_wait_s, port=server.port, cpus=server.cpus,
                   require_quiet=server.require_quiet, quiet_sample_s=server.quiet_sample_s,
                   quiet_wait_s=server.quiet_wait_s)


def wait_quiet(max_cpu_share: float, *, sample_s: float, wait_s: float,
               exclude_pids=(), say=None) -> None:
    """``require_quiet``, sampled again until the host is quiet or ``wait_s`` has passed (as
    the server lock waits ``lock_wait_s``); the last refusal is raised then."""
    from e2e.errors import HostNotQuietError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            require_quiet(max_cpu_share, sample_s=sample_s, exclude_pids=exclude_pids)
            return
        except HostNotQuietError:
            if time.monotonic() + sample_s > deadline:
                raise
            time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))


@contextlib.contextmanager
def serve(launch: ServerLaunch, log_path: Path, options: ServerOptions) -> Iterator[Server]:
    """A fresh server for ``launch``, holding the host's server lock, stopped on every exit
    path. The only place in e2e that starts a server process is ``start`` below, and the
    only caller of this is the server session (``e2e.session.session``)."""
    # a duet side's slot lock is its driver's (e2e.session.duet)
    with contextlib.nullcontext() if options.slot else server_lock(wait_s=options.lock_wait_s):
        if options.require_quiet is not None:  # with the lock held: our own servers are gone
            ours = {os.getpid(), options.own_root or os.getpid()}  # a duet's partners are ours
            wait_quiet(options.require_quiet, sample_s=options.quiet_sample_s,
                       wait_s=options.quiet_wait_s,
                       exclude_pids=with_descendants(snapshot(gpu=False), ours))
        server = start(launch, log_path, startup_timeout_s=options.startup_timeout_s,
                       stop_grace_s=options.stop_grace_s, port=options.port or None,
                       cpus=options.cpus, slot=options.slot)
        try:
            yield server
        finally:
            with shielded():  # a second Ctrl-C must not leave the server running
                server.stop()
