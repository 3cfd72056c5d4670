"""Is the host quiet? What else ran beside a run, read from ``/proc`` (and nvidia-smi /
rocm-smi where present).

    snapshot()                          -> HostSnapshot   (cheap: one pass over /proc)
    noise(before, after, *, own_pids)   -> HostNoise      (the record for run.json)
    with_descendants(snap, roots)       -> frozenset[int] (e2e and everything it started)
    require_quiet(max_cpu_share, *, sample_s, exclude_pids)   raises HostNotQuietError

Method. A snapshot reads, at one instant: the monotonic clock, the load average, the host's
CPU time by kind from the ``cpu`` line of ``/proc/stat`` (user, nice, system, irq, softirq,
steal, idle, iowait, in clock ticks), every process's ``utime + stime`` from
``/proc/<pid>/stat`` (all its threads; keyed by pid *and* start time so a reused pid is not
mistaken for the old process), the CPU frequency governor and current frequency per core
from ``/sys/devices/system/cpu/cpu*/cpufreq`` (absent on many VMs: recorded as absent), and
on GPU hosts the compute processes and clocks from ``nvidia-smi`` or ``rocm-smi`` (a tool
that is not installed is recorded as absent, one that fails as its error; never raised).

``noise`` subtracts two snapshots: per process, the CPU seconds it used between them (a
process that started in between counts from zero); ``own`` processes (pids given, exact)
are the run's own and are left out of "other". The host total from ``/proc/stat`` also
catches what per-process reads miss (processes that started and ended between snapshots,
processes outside this PID namespace): ``other_cpu_s`` = host busy − own, and
``unattributed_cpu_s`` = that minus the named others. Shares are "of one core":
CPU seconds / wall seconds (2.0 = two cores busy). Steal is the time the hypervisor ran
someone else while this VM wanted a core.

``require_quiet`` samples for ``sample_s`` and refuses (HostNotQuietError) when any other
process used more than ``max_cpu_share`` of a core, or any other process holds a GPU,
naming the busiest processes by pid and name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from e2e.errors import E2EError, HostNotQuietError
from e2e.host import _procfs as procfs
from e2e.results.records import ProcessCPU, GPUDevice, GPUProcess, GPUState, HostNoise

__all__ = ["HostNotQuietError", "HostSnapshot", "snapshot", "noise", "with_descendants",
           "require_quiet", "gpu_state", "parse_nvidia_smi", "parse_rocm_smi"]



class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HostSnapshot(_Model):
    """The host at one instant (see the module docstring for where each field comes from)."""

    monotonic_s: float
    loadavg: tuple[float, float, float]
    cpus_online: int
    cpu_ticks: dict[str, int] = Field(description="/proc/stat 'cpu' line, clock ticks by kind.")
    processes: list[ProcessCPU]
    governors: dict[str, str] | None = Field(None, description="core -> scaling governor; "
                                             "None where cpufreq is not readable.")
    freq_mhz: dict[str, float] | None = None
    gpu: GPUState = Field(default_factory=GPUState)


# --- reading /proc (through e2e.host._procfs) ------------------------------------------------

def _processes() -> list[ProcessCPU]:
    rows = []
    for pid in procfs.pids():
        stat = procfs.proc_stat(pid)
        if stat is not None:
            rows.append(ProcessCPU(pid=pid, name=stat.name, ppid=stat.ppid, pgid=stat.pgid,
                                   cpu_s=stat.cpu_s, start_ticks=stat.start_ticks))
    return rows


# --- GPU tools ------------------------------------------------------------------------------

def _num(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_nvidia_smi(gpus_csv: str, apps_csv: str) -> GPUState:
    """Parse ``nvidia-smi --query-gpu=index,uuid,name,clocks.sm,clocks.mem,clocks.max.sm,
    utilization.gpu`` and ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory``,
    both with ``--format=csv,noheader,nounits``."""
    devices, by_uuid = [], {}
    for line in gpus_csv.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 7 or not cols[0].isdigit():
            continue
        devices.append(GPUDevice(index=int(cols[0]), uuid=cols[1], name=cols[2],
                                 sm_clock_mhz=_num(cols[3]), mem_clock_mhz=_num(cols[4]),
                                 max_sm_clock_mhz=_num(cols[5]), utilization_pct=_num(cols[6])))
        by_uuid[cols[1]] = cols[0]
    processes = []
    for line in apps_csv.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 4 or not cols[1].isdigit():
            continue
        processes.append(GPUProcess(pid=int(cols[1]), name=os.path.basename(cols[2]),
                                    gpu=by_uuid.get(cols[0], cols[0]), used_mib=_num(cols[3])))
    return GPUState(tool="nvidia-smi", devices=devices, processes=processes)


def _mhz(values: dict, prefix: str) -> float | None:
    """The clock in MHz from rocm-smi's ``"<prefix> clock speed:": "(1900Mhz)"`` entry."""
    for key, value in values.items():
        found = re.search(r"(\d+(?:\.\d+)?)\s*Mhz", str(value), re.IGNORECASE)
        if key.lower().startswith(prefix) and "speed" in key.lower() and found:
            return float(found.group(1))
    return None


def parse_rocm_smi(pids_json: str, clocks_json: str) -> GPUState:
    """Parse ``rocm-smi --showpids --json`` (``{"system": {"PID123": "name, gpus, vram, ..."}}``)
    and ``rocm-smi --showclocks --json`` (``{"card0": {"sclk clock speed:": "(1900Mhz)", ...}}``).
    Written from rocm-smi's documented output; not yet run on a ROCm host."""
    processes, devices = [], []
    try:
        pids = json.loads(pids_json or "{}")
    except ValueError:
        pids = {}
    for key, value in (pids.get("system") or {}).items():
        match = re.fullmatch(r"PID(\d+)", key)
        if match:
            cols = [c.strip() for c in str(value).split(",")]
            processes.append(GPUProcess(pid=int(match.group(1)), name=cols[0] if cols else "?",
                                        gpu=cols[1] if len(cols) > 1 else None))
    try:
        clocks = json.loads(clocks_json or "{}")
    except ValueError:
        clocks = {}
    for card, values in clocks.items():
        match = re.fullmatch(r"card(\d+)", card)
        if not match or not isinstance(values, dict):
            continue

        devices.append(GPUDevice(index=int(match.group(1)), sm_clock_mhz=_mhz(values, "sclk"),
                                 mem_clock_mhz=_mhz(values, "mclk")))
    return GPUState(tool="rocm-smi", devices=devices, processes=processes)


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[:200]}")
    return done.stdout


def gpu_state() -> GPUState:
    """GPUs, their clocks and the processes on them, from nvidia-smi or rocm-smi; a missing
    tool or a failing one is recorded in the result, never raised."""
    try:
        if shutil.which("nvidia-smi"):
            fmt = "--format=csv,noheader,nounits"
            gpus = "--query-gpu=index,uuid,name,clocks.sm,clocks.mem,clocks.max.sm,utilization.gpu"
            return parse_nvidia_smi(
                _run(["nvidia-smi", gpus, fmt]),
                _run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                      fmt]))
        if shutil.which("rocm-smi"):
            return parse_rocm_smi(_run(["rocm-smi", "--showpids", "--json"]),
                                  _run(["rocm-smi", "--showclocks", "--json"]))
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        tool = "nvidia-smi" if shutil.which("nvidia-smi") else "rocm-smi"
        return GPUState(tool=tool, error=str(exc))
    return GPUState(detail="no GPU tool: neither nvidia-smi nor rocm-smi is on PATH")


# --- snapshots and their difference ----------------------------------------------------------

def snapshot(*, gpu: bool = True) -> HostSnapshot:
    """The host now (about 10 ms for a few hundred processes, plus the GPU tool's run time
    when ``gpu`` and one is installed)."""
    governors, freqs = procfs.cpufreq()
    return HostSnapshot(monotonic_s=time.monotonic(), loadavg=os.getloadavg(),
                        cpus_online=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                        else os.cpu_count() or 1,
                        cpu_ticks=procfs.host_cpu_ticks(), processes=_processes(), governors=governors,
                        freq_mhz=freqs, gpu=gpu_state() if gpu else GPUState(detail="not read"))


def with_descendants(snap: HostSnapshot, roots: Iterable[int]) -> frozenset[int]:
    """``roots`` and every process in ``snap`` descended from one of them (through ppid):
    e2e's own pid gives e2e, its server and the server's workers."""
    children: dict[int, list[int]] = {}
    for row in snap.processes:
        if row.ppid is not None:
            children.setdefault(row.ppid, []).append(row.pid)
    found, stack = set(), list(roots)
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    return frozenset(found)


def _used(before: HostSnapshot, after: HostSnapshot) -> list[ProcessCPU]:
    """CPU seconds each process in ``after`` used since ``before`` (new processes: all)."""
    old = {(p.pid, p.start_ticks): p.cpu_s for p in before.processes}
    wall = max(after.monotonic_s - before.monotonic_s, 1e-9)
    rows = []
    for p in after.processes:
        used = max(p.cpu_s - old.get((p.pid, p.start_ticks), 0.0), 0.0)
        rows.append(p.model_copy(update={"cpu_s": used, "share": used / wall}))
    return rows


def _ticks(before: HostSnapshot, after: HostSnapshot, kinds: Iterable[str]) -> float:
    return sum(after.cpu_ticks.get(k, 0) - before.cpu_ticks.get(k, 0) for k in kinds) / procfs.TICK


def noise(before: HostSnapshot, after: HostSnapshot, *, own_pids: Iterable[int],
          top: int = 5) -> HostNoise:
    """What processes other than ``own_pids`` (exact pids; expand with ``with_descendants``)
    used of the host between two snapshots: CPU seconds, share of one core, the ``top``
    busiest by pid and name, steal time, and GPU processes that are not the run's own."""
    own = frozenset(own_pids)
    wall = max(after.monotonic_s - before.monotonic_s, 1e-9)
    used = _used(before, after)
    own_cpu = sum(p.cpu_s for p in used if p.pid in own)
    others = sorted((p for p in used if p.pid not in own and p.cpu_s > 0),
                    key=lambda p: p.cpu_s, reverse=True)
    busy = _ticks(before, after, ("user", "nice", "system", "irq", "softirq"))
    other_cpu = max(busy - own_cpu, 0.0)
    steal = _ticks(before, after, ("steal",))
    gpu_others = [g for g in after.gpu.processes if g.pid not in own]
    return HostNoise(
        wall_s=wall, cpus_online=after.cpus_online, loadavg_before=before.loadavg,
        loadavg_after=after.loadavg, host_busy_cpu_s=busy, own_cpu_s=own_cpu,
        other_cpu_s=other_cpu, other_cpu_share=other_cpu / wall,
        unattributed_cpu_s=max(other_cpu - sum(p.cpu_s for p in others), 0.0),
        steal_s=steal, steal_share=steal / wall, top_other=others[:top],
        governors=after.governors, freq_mhz_before=before.freq_mhz, freq_mhz_after=after.freq_mhz,
        gpu_before=before.gpu, gpu_after=after.gpu, gpu_other_processes=gpu_others)


def _cmdline(pid: int, limit: int = 80) -> str:
    raw = procfs.read_text(f"/proc/{pid}/cmdline")
    text = (raw or "").replace("\0", " ").strip()
    return f" [{text[:limit]}{'...' if len(text) > limit else ''}]" if text else ""


def require_quiet(max_cpu_share: float, *, sample_s: float = 2.0,
                  exclude_pids: Iterable[int] = ()) -> HostNoise:
    """Watch the host for ``sample_s`` seconds; raise HostNotQuietError when a process other
    than ``exclude_pids`` (exact pids) and this one used more than ``max_cpu_share`` of one
    core, or when a process other than those holds a GPU. The message names every such
    process (busiest first, by pid and name). Returns the sample's HostNoise when quiet."""
    if not 0 < max_cpu_share:
        raise E2EError(f"require_quiet: max_cpu_share must be > 0 (a share of one core), "
                       f"got {max_cpu_share}")
    exclude = frozenset(exclude_pids) | {os.getpid()}
    before = snapshot()
    time.sleep(sample_s)
    after = snapshot()
    sample = noise(before, after, own_pids=exclude, top=len(after.processes))
    busy = [p for p in sample.top_other if (p.share or 0.0) > max_cpu_share]
    problems = [f"pid {p.pid} ({p.name}) used {100 * (p.share or 0):.0f} % of a core"
                f"{_cmdline(p.pid)}" for p in busy[:8]]
    if len(busy) > 8:
        problems.append(f"and {len(busy) - 8} more")
    problems += [f"pid {g.pid} ({g.name}) holds GPU {g.gpu}" for g in sample.gpu_other_processes]
    if problems:
        raise HostNotQuietError(
            f"the host is not quiet: over {sample_s:g} s, " + "; ".join(problems)
            + f" (the limit: {100 * max_cpu_share:.0f} % of a core per process, and no other "
            "process on a GPU); stop them or wait, or run without --require-quiet "
            "(the run then records the noise)")
    return sample.model_copy(update={"top_other": sample.top_other[:5]})
