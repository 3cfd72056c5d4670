"""CPU placement: which cores the server's processes and the load generator may run on.

    pin_process(cpus)              -> Placement   the load generator: every thread of this
                                                  process, now (threads made later inherit it)
    pinned_process(cpus)           -> context manager: pin_process for the block, then every
                                      thread back on its previous mask; yields the Placement
    spawn_pinned(cpus)             -> context manager: children started inside it (the
                                      server's ``Popen``) inherit the set from their first
                                      instruction; yields the Placement
    repin_group(pgid, cpus)        -> list[int]   every thread of every process in the group
                                                  moved onto ``cpus`` now (a duet's swap)
    describe_affinity(pid)         -> list[int]   cores any thread of pid's process group may use
    group_placement(pid)           -> list[ProcessPlacement]  the same, per process

A CPU set is given in Linux's list format (``"0-1,3"``), read by ``e2e.names.parse_cpus``.

Method: Linux keeps one CPU mask per thread (``sched_setaffinity``); a thread's children and
threads inherit its mask at fork/clone. ``spawn_pinned`` narrows only the *calling thread's*
mask around ``Popen`` and restores it afterwards, so the child starts inside the set (no
``preexec_fn``, no ``taskset``, no window in which it runs elsewhere) and the parent's other
threads are untouched. When the OS refuses a set (a core that does not exist, or one outside
the cgroup's cpuset), nothing is pinned and the Placement says why: the run goes on unpinned,
and the record shows it. A process may widen its own mask later (vLLM's CPU worker binds its
OpenMP threads itself, ``VLLM_CPU_OMP_THREADS_BIND``), which is why the record reads back what
every thread of the server's group may really use (``describe_affinity``) after startup.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


from e2e.host import _procfs as procfs
from e2e.host._procfs import physical_core
from e2e.names import parse_cpus
from e2e.results.records import Placement, ProcessPlacement

__all__ = ["format_cpus", "pin_process", "repin_group",
           "pinned_process", "spawn_pinned", "describe_affinity", "group_placement", "thread_affinity",
           "physical_core", "spread_cores"]


def format_cpus(cores: frozenset[int] | set[int] | list[int]) -> str:
    """The shortest list format for ``cores`` (``{0, 1, 3}`` -> ``"0-1,3"``)."""
    items = sorted(set(cores))
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def spread_cores(cpus, *, core_of=None) -> list[int]:
    """The CPUs in the order to hand them out one per busy process: one logical CPU of each
    physical core first, then their SMT siblings. Two hyperthreads of one core share its
    execution units: two client processes pinned to siblings take ~1.2x one, not 2x.
    ``core_of``: a CPU's physical core (default ``physical_core``, from /sys; None where
    unknown)."""
    core_of = core_of or physical_core
    first, siblings, seen = [], [], set()
    for cpu in sorted(cpus):
        core = core_of(cpu)
        if core is not None and core in seen:
            siblings.append(cpu)
        else:
            seen.add(core)
            first.append(cpu)
    return first + siblings


def thread_affinity(tid: int = 0) -> list[int]:
    """Cores one thread (0: the calling thread) may run on."""
    return sorted(os.sched_getaffinity(tid))


def _refusal(cores: frozenset[int], exc: OSError) -> str:
    online = format_cpus(os.sched_getaffinity(0)) or "?"
    return (f"the OS refused CPU set {format_cpus(cores)} ({exc.strerror or exc}); this process "
            f"may use cores {online}; ran unpinned")


def pin_process(cpus: str | None, *, target: str = "load generator") -> Placement:
    """Pin every thread of this process to ``cpus`` (threads created later inherit it from
    their creator). ``None`` pins nothing. If the OS refuses any thread, every thread is put
    back on its previous mask and the Placement records the refusal: the caller runs
    unpinned. Bad text raises ConfigError (a config mistake is not an OS refusal)."""
    if cpus is None:
        return Placement(target=target, allowed=thread_affinity())
    cores = parse_cpus(cpus)
    pid = os.getpid()
    previous: dict[int, set[int]] = {}
    try:
        for tid in procfs.threads(pid) or [0]:
            try:
                previous[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cores)
            except ProcessLookupError:
                continue  # the thread ended meanwhile
    except OSError as exc:
        for tid, mask in previous.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)
        return Placement(target=target, requested=cpus, refused=_refusal(cores, exc),
                         allowed=thread_affinity())
    # the kernel keeps only the host's cores of the set: record those, not the asked ones
    return Placement(target=target, requested=cpus, applied=sorted(os.sched_getaffinity(0)),
                     allowed=thread_affinity())


@contextlib.contextmanager
def pinned_process(cpus: str | None, *,
                   target: str = "load generator") -> Iterator[Placement]:
    """``pin_process`` for the block; on exit every thread of this process that is still
    alive goes back to the mask this thread had before (so a server started after the block
    does not inherit the load generator's set)."""
    previous = os.sched_getaffinity(0)
    placement = pin_process(cpus, target=target)
    try:
        yield placement
    finally:
        if placement.applied is not None:
            for tid in procfs.threads(os.getpid()) or [0]:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, previous)


@contextlib.contextmanager
def spawn_pinned(cpus: str | None, *, target: str = "server") -> Iterator[Placement]:
    """Children started inside this block inherit ``cpus``: the calling thread's mask is
    narrowed for the block and restored on exit (other threads untouched). Wrap the server's
    ``Popen`` in it. ``None`` changes nothing. A refused set yields a Placement with
    ``refused`` set and the child starts unpinned. ``allowed`` in the yielded Placement is the
    mask children get; read the server's real mask after startup with ``describe_affinity``."""
    if cpus is None:
        yield Placement(target=target, allowed=thread_affinity())
        return
    cores = parse_cpus(cpus)
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cores)
    except OSError as exc:
        yield Placement(target=target, requested=cpus, refused=_refusal(cores, exc),
                        allowed=sorted(previous))
        return
    try:
        yield Placement(target=target, requested=cpus, applied=sorted(os.sched_getaffinity(0)),
                        allowed=thread_affinity())
    finally:
        os.sched_setaffinity(0, previous)


def repin_group(pgid: int, cpus: str | None) -> list[int]:
    """Move every thread of every live process in process group ``pgid`` onto ``cpus`` (a
    duet side's server between load windows, when the sides trade places); returns the cores
    the group's threads may use afterwards. ``None`` moves nothing. A thread that ends
    meanwhile is skipped; a refused set raises OSError (the caller's run is invalid: its
    windows did not run where the record says)."""
    if cpus is not None:
        cores = parse_cpus(cpus)
        for pid in procfs.group_members(pgid):
            for tid in procfs.threads(pid):
                try:
                    os.sched_setaffinity(tid, cores)
                except ProcessLookupError:
                    continue
    return describe_affinity(pgid)


def _group_of(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return pid


def group_placement(pid: int) -> list[ProcessPlacement]:
    """Every live process in ``pid``'s process group with the cores its threads may use
    (union over its threads), from ``/proc``; processes that end while being read are
    skipped."""
    pgid = _group_of(pid)
    rows: list[ProcessPlacement] = []
    for member in procfs.pids():
        stat = procfs.proc_stat(member)
        if stat is None or stat.state == "Z" or stat.pgid != pgid:
            continue
        cores: set[int] = set()
        tids = procfs.threads(member)
        for tid in tids:
            with contextlib.suppress(OSError):
                cores.update(os.sched_getaffinity(tid))
        if cores:
            rows.append(ProcessPlacement(pid=member, name=stat.name, threads=len(tids),
                                         cores=sorted(cores)))
    return sorted(rows, key=lambda row: row.pid)


def describe_affinity(pid: int) -> list[int]:
    """Cores that any thread of any process in ``pid``'s process group may run on (the
    server's whole group: API server, engine core, workers). Empty when the group is gone."""
    cores: set[int] = set()
    for row in group_placement(pid):
        cores.update(row.cores)
    return sorted(cores)
