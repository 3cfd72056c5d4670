"""Arms measured together in time: a duet runs k server sessions at once, one per slot.

    run_duet(experiment, duet, results)
        one child process per side (forked: ``run_side``, the session's steps), each in its slot
        (server CPUs, load-generator CPUs, extra env, port, its own server lock)
          -> fresh server -> /health -> plugin check -> warmup
          -> the barrier: every side ready (a side that failed ends the wait for all)
          -> /metrics -> the measured load -> /metrics     (every side starts together)
             [swap: between windows every side holds its load until all are done with the
              window, then moves its server's threads and its load generator onto the next
              slot's CPUs, and the next window starts together]
          -> hold: the same load, unmeasured, until every side is done measuring
          -> stop -> its own folder and run.json, with the duet's facts
        -> the sides' (folder, record), in slot order

On a shared host a fresh server's speed moves by tens of percent over minutes, alike for every
process on it and invisible from inside; sides measured at the same moment share that drift,
so their ratio does not move with it (duet benchmarking, Bulej et al., ICPE 2020). The
rendezvous is a folder of small files (``ready.<slot>``, ``done.<slot>``, ``failed.<slot>``)
on CLOCK_MONOTONIC, which is system-wide on Linux, so every side's window is on one clock.
A side whose measured window had every side under load for less than ``[duet] min_overlap``
of it is invalid. Ctrl-C (or SIGTERM to e2e) reaches every side, each stops its server and
writes what finished, as one session does.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from e2e.config import DuetSlot, Experiment
from e2e.errors import E2EError, ServerError
from e2e.plan import DuetSpec, RunSpec
from e2e.results.records import DuetInfo, RunRecord
from e2e.results.store import new_partial_dir
from e2e.session.session import Session, SessionOptions
from e2e.session._shield import shielded

__all__ = ["Together", "run_duet", "run_side"]

_POLL_S = 0.005


@dataclass(frozen=True)
class Together:
    """One side's view of its duet's rendezvous folder."""

    folder: Path
    duet_id: str
    slot: int
    slot_name: str
    sides: tuple[str, ...]  # every side's run id, in slot order
    root_pid: int           # the duet's driver: every side's processes descend from it
    barrier_timeout_s: float
    min_overlap: float
    place: DuetSlot         # the slot's server and client CPUs, env and port
    placements: tuple[DuetSlot, ...] = ()  # every side's slot, in slot order (for a swap)
    swap: bool = False      # [duet] swap: trade CPUs between load windows

    def _mark(self, kind: str, **facts) -> None:
        path = self.folder / f"{kind}.{self.slot}"
        if not path.exists():  # a rename: a partner sees the whole file or none
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(facts))
            os.replace(tmp, path)

    def _read(self, kind: str, slot: int) -> dict | None:
        try:
            return json.loads((self.folder / f"{kind}.{slot}").read_text())
        except (OSError, ValueError):
            return None

    def _failed(self) -> list[str]:
        return [f"{self.sides[j]} (slot {j}): {f.get('reason', 'failed')}"
                for j in range(len(self.sides)) if j != self.slot
                and (f := self._read("failed", j)) is not None]

    def arrive(self, phase: str = "ready") -> None:
        """Ready (server up, checked, warmed up): wait until every side is. A partner that
        failed, or one not ready within ``barrier_timeout_s``, ends the wait with a
        ServerError. The session calls it twice: "ready" after the warmup, then "go" once
        its own /metrics and host snapshot are taken, so that the measured loads start
        within a few milliseconds of each other."""
        self._mark(phase, at=time.monotonic())
        deadline = time.monotonic() + self.barrier_timeout_s
        while True:
            if all((self.folder / f"{phase}.{j}").exists() for j in range(len(self.sides))):
                return
            failed = self._failed()
            if failed:
                raise ServerError("duet partner failed before the measured load: "
                                  + "; ".join(failed))
            if time.monotonic() > deadline:
                late = [self.sides[j] for j in range(len(self.sides))
                        if not (self.folder / f"{phase}.{j}").exists()]
                raise ServerError(f"duet partner(s) {', '.join(late)} not ready after "
                                  f"{self.barrier_timeout_s:g} s ([duet] barrier_timeout_s)")
            time.sleep(_POLL_S)

    def measured(self, start: float, end: float) -> None:
        self._mark("done", start=start, end=end)

    def abandon(self, reason: str) -> None:
        """This side stops (failed, interrupted) without a finished measurement; partners
        waiting at the barrier stop waiting, partners measuring see it in their overlap."""
        if not (self.folder / f"done.{self.slot}").exists():
            self._mark("failed", at=time.monotonic(), reason=reason[:500])

    def settled(self) -> bool:
        """Every side is done measuring or has failed."""
        return all((self.folder / f"done.{j}").exists() or (self.folder / f"failed.{j}").exists()
                   for j in range(len(self.sides)))

    def hold(self, keep_busy, say=lambda message: None, until=None) -> float:
        """Keep this side's server under load (``keep_busy`` runs one unmeasured batch) until
        every side is done measuring (or ``until()`` is true); returns the seconds held."""
        until = until or self.settled
        start = time.monotonic()
        while not until():
            try:
                keep_busy()
            except Exception as exc:  # noqa: BLE001 - our own figures are measured already
                say(f"duet hold stopped: {exc if isinstance(exc, E2EError) else repr(exc)}")
                break
        while not until():  # a side that stopped holding still waits for the others
            time.sleep(0.05)
        return time.monotonic() - start

    def placement(self, window: int) -> DuetSlot:
        """Where this side runs load window ``window`` (0-based): its own slot, or with
        ``swap`` slot (slot + window) mod sides."""
        if not self.swap:
            return self.place
        return self.placements[(self.slot + window) % len(self.sides)]

    def turn(self, window: int, keep_busy, pgid: int | None,
             say=lambda message: None) -> tuple[str | None, list[int]]:
        """Between load windows ``window - 1`` and ``window`` of a swapping duet: mark this
        side done with the window, hold its load until every side is (or failed), move the
        server's process group onto the next placement's server CPUs, and wait until every
        side has moved; returns the next placement's load-generator CPUs and the cores the
        server's threads may use now, read back."""
        from e2e.host import repin_group

        self._mark(f"window{window}", at=time.monotonic())
        sides = range(len(self.sides))
        self.hold(keep_busy, say=say, until=lambda: all(
            (self.folder / f"window{window}.{j}").exists()
            or (self.folder / f"failed.{j}").exists() for j in sides))
        place = self.placement(window)
        cores = repin_group(pgid, place.server_cpus) if pgid is not None else []
        self.arrive(f"moved{window}")
        return place.client_cpus, cores

    def info(self, held_s: float | None = None,
             windows: int | None = None) -> tuple[DuetInfo, list[str]]:
        """This side's duet facts (``held_s``: how long it held its load for its partners;
        ``windows``: its load windows, whose slots a swap records) and, when the overlap is
        short, the reason it is invalid."""
        mine = self._read("done", self.slot) or {}
        start, end = mine.get("start"), mine.get("end")
        partners = [s for j, s in enumerate(self.sides) if j != self.slot]
        if start is None or end is None or end <= start:
            return DuetInfo(id=self.duet_id, slot=self.slot, slot_name=self.slot_name,
                            partners=partners), []
        done = [self._read("done", j) for j in range(len(self.sides))]
        ends = [d["end"] for d in done if d]
        starts = [d["start"] for d in done if d]
        loaded, measuring = [], []
        for j, d in enumerate(done):
            if d is not None:  # it held its load until every side was done
                loaded.append((d["start"], max(ends)))
                measuring.append((d["start"], d["end"]))
            else:
                failed = self._read("failed", j) or {}
                loaded.append((start, min(end, failed.get("at", start))))
                measuring.append(loaded[-1])

        def share(windows) -> float:
            lo = max([start] + [a for a, _ in windows])
            hi = min([end] + [b for _, b in windows])
            return max(0.0, hi - lo) / (end - start)

        overlap = share(loaded)
        window_slots = ([(self.slot + w) % len(self.sides) for w in range(windows)]
                        if self.swap and windows else None)
        info = DuetInfo(id=self.duet_id, slot=self.slot, slot_name=self.slot_name,
                        partners=partners, overlap_share=overlap, window_slots=window_slots,
                        measured_overlap_share=share(measuring),
                        start_spread_s=max(starts) - min(starts) if len(starts) > 1 else None,
                        measured_s=end - start, held_s=held_s)
        if overlap >= self.min_overlap:
            return info, []
        failed = self._failed()
        return info, [
            f"duet overlap {overlap:.2f}: every side was under load for only {overlap:.0%} of "
            f"this run's measured window (below [duet] min_overlap {self.min_overlap:g})"
            + (f"; {'; '.join(failed)}" if failed else "")]


def run_side(experiment: Experiment, unit: RunSpec, results: Path, options: SessionOptions,
             together: Together) -> tuple[Path, BaseModel]:
    """One side's server session (``e2e.session.session.Session``'s steps, as ``run_unit``
    takes them) in its slot, meeting its partners between the steps: ready after the warmup,
    go once its counters and host snapshot are read, then its load held until every side is
    done measuring (with ``swap``, also between load windows). A side that fails lets its
    partners go on without it."""
    session = Session.open(experiment, unit, results, options, slot=together.place,
                           root_pid=together.root_pid, slot_name=together.slot_name)
    workload, info = session.workload, session.info
    moved: list[list[int]] = []  # the server's cores in each load window (a swap)
    with session.recording(), session.serve() as server:
        workload.warmup(server)
        together.arrive()  # every side's server is up and warm: start together
        session.watch(server)
        if together.swap and hasattr(workload, "between_windows"):
            moved.append(info.placement.server_cores or [] if info.placement else [])

            def between(w: int) -> str | None:
                client, cores = together.turn(w, lambda: workload.keep_busy(server),
                                              getattr(server, "pgid", None), say=session.say)
                moved.append(cores)
                return client

            workload.between_windows = between
        together.arrive("go")
        began, ended = session.measure(server)
        session.after(server)
        together.measured(began, ended)
        held = together.hold(lambda: workload.keep_busy(server), say=session.say)
        info.duet, more = together.info(held_s=held, windows=getattr(unit, "windows", None))
        if info.duet.window_slots is not None and hasattr(workload, "between_windows"):
            info.duet = info.duet.model_copy(update={"window_server_cores": moved})
        info.reasons += more
    if info.reasons:  # partners stop waiting for this side
        together.abandon(info.reasons[0])
        if info.duet is None:
            info.duet = together.info()[0]
    return session.finish()


def _side(experiment, unit, results, options, together: Together, conn) -> None:
    """A side's process: its server session (``run_side``); sends back (folder, record as
    JSON) or (None, reason)."""
    from dataclasses import replace

    # Ctrl-C at the terminal reaches every process of e2e's group: the driver turns it into
    # one SIGTERM per side, so that each side stops its server once, in its own order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    code = 0
    try:
        say = options.say
        side_options = replace(options, say=lambda m: say(f"[{together.slot_name}] {m}"))
        folder, record = run_side(experiment, unit, results, side_options, together)
        conn.send((str(folder), record.model_dump_json()))
    except KeyboardInterrupt:
        code = 130
        with contextlib.suppress(Exception):
            conn.send((None, "interrupted"))
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which raises
        code = 1
        together.abandon(f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            conn.send((None, f"{type(exc).__name__}: {exc}"))
    finally:
        together.abandon("its session ended without a measurement")
        with contextlib.suppress(Exception):
            conn.close()
        os._exit(code)  # no atexit of the driver's in a forked side


_SAID: set[str] = set()


def shared_cores(slots: list[DuetSlot], names: list[str]) -> list[str]:
    """Why slots' servers may share a core, one line per pair: both unpinned (no
    ``server_cpus`` and no env of their own, e.g. a GPU), or pinned to hyperthreads of one
    physical core (sysfs topology). The config refuses the same logical CPUs outright."""
    from itertools import combinations

    from e2e.host import physical_core
    from e2e.names import parse_cpus

    lines = []
    for (i, a), (j, b) in combinations(enumerate(slots), 2):
        if not a.server_cpus and not b.server_cpus and not a.env and not b.env:
            lines.append(f"duet slots {names[i]} and {names[j]} do not pin their servers "
                         "(server_cpus): the two may share cores, each slowing the other; give "
                         "each slot cores of its own")
            continue
        if not a.server_cpus or not b.server_cpus:
            continue
        mine = {physical_core(c) for c in parse_cpus(a.server_cpus)} - {None}
        theirs = {physical_core(c) for c in parse_cpus(b.server_cpus)} - {None}
        if mine & theirs:
            lines.append(f"duet slots {names[i]} ({a.server_cpus}) and {names[j]} "
                         f"({b.server_cpus}) run their servers on hyperthreads of one physical "
                         "core: each slows the other; give each slot a physical core of its own")
    return lines


def run_duet(experiment: Experiment, duet: DuetSpec, results: Path,
             options: SessionOptions) -> list[tuple[Path, RunRecord]]:
    """Run ``duet``'s sides at once, one per slot (module docstring); returns every side's
    (folder, record) that was written, in slot order. Raises KeyboardInterrupt after every
    side stopped when interrupted."""
    slots = experiment.duet.slots
    names = experiment.duet.slot_names()
    if len(duet.sides) > len(slots):
        raise ServerError(f"{duet.unit_id}: {len(duet.sides)} sides but [duet] has "
                          f"{len(slots)} slots")
    from e2e.session.bounds import check_units

    check_units(experiment, [duet])  # before any side starts
    for line in shared_cores(slots[:len(duet.sides)], names):
        if line not in _SAID:  # once per process, not once per duet
            _SAID.add(line)
            options.say(f"warning: {line}")
    from e2e.session.server import server_lock

    with server_lock(wait_s=experiment.server.lock_wait_s, slots=names[:len(duet.sides)]):
        return _run_sides(experiment, duet, results, options, names)


def _run_sides(experiment: Experiment, duet: DuetSpec, results: Path, options,
               names: list[str]) -> list[tuple[Path, RunRecord]]:
    slots = experiment.duet.slots
    rendezvous = new_partial_dir(results, experiment.name, duet.unit_id)
    ctx = mp.get_context("fork")
    children = []
    sides = tuple(s.run_id for s in duet.sides)
    for i, unit in enumerate(duet.sides):
        together = Together(rendezvous, duet.unit_id, i, names[i], sides, os.getpid(),
                            experiment.duet.barrier_timeout_s, experiment.duet.min_overlap,
                            slots[i], placements=tuple(slots[:len(sides)]),
                            swap=experiment.duet.swap)
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_side, name=f"e2e-duet-{names[i]}",
                              args=(experiment, unit, results, options, together, send))
        process.start()
        send.close()
        children.append((process, receive, together))
    answers: list[tuple[str | None, str] | None] = [None] * len(children)
    interrupted = False

    def collect(block: float) -> None:
        for i, (process, receive, together) in enumerate(children):
            if answers[i] is None:
                with contextlib.suppress(EOFError, OSError):
                    if receive.poll(block):
                        answers[i] = receive.recv()
                if answers[i] is None and not process.is_alive():
                    process.join()
                    answers[i] = (None, f"its process ended (exit code {process.exitcode})")
                    together.abandon(answers[i][1])

    try:
        while any(a is None for a in answers):
            collect(0.2 / len(children))
    except KeyboardInterrupt:
        interrupted = True
        with shielded():  # every side stops its server and writes what finished
            for process, _, _ in children:
                if process.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
            while any(a is None for a in answers):
                collect(0.1)
    finally:
        for process, receive, _ in children:
            process.join(timeout=30)
            receive.close()
        shutil.rmtree(rendezvous, ignore_errors=True)
    out = [(Path(folder), RunRecord.model_validate_json(text))
           for folder, text in (a for a in answers if a is not None) if folder is not None]
    if interrupted or any(a is not None and a[1] == "interrupted" for a in answers):
        raise KeyboardInterrupt
    failed = [f"{duet.sides[i].run_id}: {a[1]}" for i, a in enumerate(answers)
              if a is not None and a[0] is None]
    if failed and not out:
        raise ServerError(f"{duet.unit_id}: no side was recorded: " + "; ".join(failed))
    return out
