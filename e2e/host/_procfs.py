"""The one reader of ``/proc`` and ``/sys``: every file e2e reads about processes, threads,
CPU time and CPU topology is read here, and nowhere else (as pyperf's ``_utils``).

    read_text(path)           -> str | None      any file, None when it cannot be read
    proc_stat(pid)            -> ProcStat | None ``/proc/<pid>/stat``, parsed once
    pids()                    -> list[int]       every process now
    group_members(pgid)       -> list[int]       live (non-zombie) processes of a group
    threads(pid)              -> list[int]       ``/proc/<pid>/task``
    host_cpu_ticks()          -> dict[str, int]  the ``cpu`` line of ``/proc/stat``
    physical_core(cpu)        -> (package, core) | None   sysfs topology
    runqueue_wait_s()         -> float | None    this thread's wait for a core (schedstat)
    cpu_model()               -> str             ``/proc/cpuinfo``'s model name
    cpufreq()                 -> (governors, MHz) per core; None where not readable
    listening_sockets(port)   -> set[int] | None  inodes of TCP sockets listening on ``port``
    socket_inodes(pid)        -> set[int]        the sockets a process holds (its fds)

``/proc/<pid>/stat``: the name is between the first ``(`` and the *last* ``)`` (a name may hold
either), then proc(5)'s fields from field 3 on: state, ppid, pgrp, ..., utime 14, stime 15,
starttime 22 (clock ticks).

``/proc/net/tcp`` and ``tcp6`` (this network namespace's TCP sockets): after a header line, one
socket a line: ``sl local_address rem_address st ... uid timeout inode``; the address is
``HEXIP:HEXPORT``, state ``0A`` is LISTEN. A process's fds are ``/proc/<pid>/fd/*`` links; a
socket's reads ``socket:[<inode>]`` (another user's fds cannot be read: they are not ours).
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
from dataclasses import dataclass

__all__ = ["TICK", "STAT_KINDS", "ProcStat", "read_text", "proc_stat", "pids", "group_members",
           "threads", "host_cpu_ticks", "physical_core", "runqueue_wait_s", "cpu_model",
           "cpufreq", "listening_sockets", "socket_inodes"]

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STAT_KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    name: str
    state: str
    ppid: int
    pgid: int
    cpu_s: float  # utime + stime
    start_ticks: int


def read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return None


def proc_stat(pid: int) -> ProcStat | None:
    """``/proc/<pid>/stat`` parsed; None when the process is gone or the line is odd."""
    stat = read_text(f"/proc/{pid}/stat")
    if not stat:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return ProcStat(pid=pid, name=name, state=fields[0], ppid=int(fields[1]),
                        pgid=int(fields[2]), cpu_s=(int(fields[11]) + int(fields[12])) / TICK,
                        start_ticks=int(fields[19]))
    except (IndexError, ValueError):
        return None


def pids() -> list[int]:
    try:
        return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    members = []
    for pid in pids():
        stat = proc_stat(pid)
        if stat is not None and stat.state != "Z" and stat.pgid == pgid:
            members.append(pid)
    return members


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


_LISTEN = "0A"


def listening_sockets(port: int) -> set[int] | None:
    """Inodes of this network namespace's TCP sockets (IPv4 and IPv6) listening on ``port``, on
    any address; None when ``/proc/net/tcp`` cannot be read (not Linux)."""
    found: set[int] = set()
    read = False
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        text = read_text(name)
        if text is None:
            continue
        read = True
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            try:
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[9]))
            except (IndexError, ValueError):
                continue
    return found if read else None


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open; empty when its fds cannot be read
    (gone, or another user's)."""
    inodes: set[int] = set()
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for entry in entries:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{entry}")
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            with contextlib.suppress(ValueError):
                inodes.add(int(target[8:-1]))
    return inodes


def host_cpu_ticks() -> dict[str, int]:
    for line in (read_text("/proc/stat") or "").splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            return {k: values[i] for i, k in enumerate(STAT_KINDS) if i < len(values)}
    return {}


def physical_core(cpu: int) -> tuple[int, int] | None:
    """(package, core id) of a logical CPU, from sysfs; None where Linux does not say."""
    base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
    package, core = read_text(base + "physical_package_id"), read_text(base + "core_id")
    try:
        return int(package), int(core)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def runqueue_wait_s() -> float | None:
    """Seconds this thread has spent runnable but waiting for a core (Linux schedstat)."""
    text = read_text("/proc/thread-self/schedstat")
    try:
        return int(text.split()[1]) / 1e9  # type: ignore[union-attr]
    except (AttributeError, IndexError, ValueError):
        return None


def cpu_model() -> str:
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpufreq() -> tuple[dict[str, str] | None, dict[str, float] | None]:
    """(core -> scaling governor, core -> MHz); cpuinfo's "cpu MHz" where cpufreq is absent
    (common on VMs); None for what cannot be read."""
    governors: dict[str, str] = {}
    freqs: dict[str, float] = {}
    for folder in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq")):
        core = folder.split("/")[-2][3:]
        governor = read_text(folder + "/scaling_governor")
        if governor:
            governors[core] = governor.strip()
        khz = read_text(folder + "/scaling_cur_freq")
        if khz and khz.strip().isdigit():
            freqs[core] = int(khz) / 1000.0
    if not freqs:
        core_n = -1
        for line in (read_text("/proc/cpuinfo") or "").splitlines():
            if line.startswith("processor"):
                core_n = int(line.split(":")[1])
            elif line.startswith("cpu MHz") and core_n >= 0:
                freqs[str(core_n)] = float(line.split(":")[1])
    return governors or None, freqs or None


def memory_of(pids_: list[int]) -> dict | None:
    """What memory a process group holds and where: resident and transparent-huge-page MiB
    (``smaps_rollup``, summed over ``pids_``), MiB per NUMA node (``numa_maps``' ``N<node>=``
    page counts, in pages of the mapping's ``kernelpagesize_kB``), and the host's THP mode.
    None when no process could be read."""
    rss = huge = 0.0
    nodes: dict[str, float] = {}
    read = False
    for pid in pids_:
        rollup = read_text(f"/proc/{pid}/smaps_rollup")
        if rollup is None:
            continue
        read = True
        for line in rollup.splitlines():
            key, _, rest = line.partition(":")
            if key in ("Rss", "AnonHugePages"):
                kb = float(rest.split()[0])
                rss, huge = (rss + kb / 1024, huge) if key == "Rss" else (rss, huge + kb / 1024)
        for line in (read_text(f"/proc/{pid}/numa_maps") or "").splitlines():
            fields = line.split()
            page_kb = next((float(f.split("=", 1)[1]) for f in fields
                            if f.startswith("kernelpagesize_kB=")), 4.0)
            for f in fields:
                if f[:1] == "N" and "=" in f and f[1:].split("=", 1)[0].isdigit():
                    node, pages = f[1:].split("=", 1)
                    nodes[node] = nodes.get(node, 0.0) + float(pages) * page_kb / 1024
    if not read:
        return None
    thp = read_text("/sys/kernel/mm/transparent_hugepage/enabled") or ""
    mode = next((w[1:-1] for w in thp.split() if w.startswith("[")), None)
    return {"rss_mib": round(rss, 1), "anon_huge_mib": round(huge, 1),
            "numa_mib": {k: round(v, 1) for k, v in sorted(nodes.items())}, "thp": mode}
