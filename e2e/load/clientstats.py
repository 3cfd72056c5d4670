"""How hard the load generator itself worked, and whether it could have limited the load.

- CPU: ``time.process_time()`` of each client process over the load (all its threads).
- Share of a core: that CPU time over the wall time of the load, per process; the busiest
  process counts (each process runs one event loop, which can use at most one core).
- Waiting for a core: from ``/proc/thread-self/schedstat`` (Linux), the time the client's
  thread was runnable but not running, over the wall time: the host's share of any lag.
- Event-loop lag: a ticker task asks to wake every ``TICK_S`` and records how late it woke.
  When the loop has more ready work than it can do, every callback (a stream's next read, the
  next scheduled send) waits that long too, so the lag is the client's own queueing delay.

Saturation rule: ``saturated`` when the busiest process used more than ``SATURATED_SHARE``
(80 %) of a core, or the 99th percentile of the loop lag exceeded ``SATURATED_LAG_MS`` (5 ms),
or a process waited for a core more than ``STARVED_WAIT_SHARE`` (10 %) of the load.
The lag also catches a client the host starves (more runnable processes than cores): its
timestamps then carry the host's scheduling delays, which is as bad for the measurement.
The bound, from measurement (docs/explanation/load.md): an idle loop on a quiet host lags ~0.1 ms (p50)
and ~1 ms (p99, the selector's millisecond timeout rounding); a client at its ceiling lags
50-230 ms (p99); 5 ms is 25 % of a 20 ms TPOT, the reference's slowest cell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from e2e.host import runqueue_wait_s
from e2e.results.records import ClientStats

__all__ = ["LagProbe", "ProcessUsage", "client_stats", "runqueue_wait_s",
           "TICK_S", "SATURATED_SHARE", "SATURATED_LAG_MS", "STARVED_WAIT_SHARE"]

TICK_S = 0.005
SATURATED_SHARE = 0.80
SATURATED_LAG_MS = 5.0
STARVED_WAIT_SHARE = 0.10


@dataclass(frozen=True)
class ProcessUsage:
    """What one client process measured about itself (sent from a worker to the parent)."""

    wall_s: float
    cpu_s: float
    chunks: int
    lags_s: tuple[float, ...]
    wait_s: float | None = None
    event_loop: str | None = None


class LagProbe:
    """A ticker task on the running loop that records how late each wake-up was."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        clock, tick, lags = time.perf_counter, self.tick_s, self.lags
        while True:
            due = clock() + tick
            await asyncio.sleep(tick)
            lags.append(max(clock() - due, 0.0))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


def client_stats(usages: Sequence[ProcessUsage]) -> ClientStats:
    """Combine the processes' own figures and apply the saturation rule (module docstring)."""
    wall = max((u.wall_s for u in usages), default=0.0)
    cpu = sum(u.cpu_s for u in usages)
    chunks = sum(u.chunks for u in usages)
    share = max((u.cpu_s / u.wall_s for u in usages if u.wall_s > 0), default=0.0)
    lags = np.asarray([lag for u in usages for lag in u.lags_s], dtype=float) * 1000.0
    lag_max = float(lags.max()) if lags.size else 0.0
    lag_p99 = float(np.percentile(lags, 99)) if lags.size else 0.0
    waits = [u.wait_s / u.wall_s for u in usages if u.wait_s is not None and u.wall_s > 0]
    wait = max(waits) if waits else None
    because = []
    if wait is not None and wait > STARVED_WAIT_SHARE:
        because.append(f"the host kept a client process waiting for a core {wait:.0%} of the "
                       f"time (> {STARVED_WAIT_SHARE:.0%}): more runnable processes than cores")
    if share > SATURATED_SHARE:
        because.append(f"a client process used {share:.0%} of a core (> {SATURATED_SHARE:.0%})")
    if lag_p99 > SATURATED_LAG_MS:
        because.append(f"event-loop lag p99 {lag_p99:.1f} ms (> {SATURATED_LAG_MS} ms)")
    return ClientStats(
        workers=len(usages), wall_s=wall, cpu_s=cpu, chunks=chunks,
        cpu_us_per_chunk=cpu / chunks * 1e6 if chunks else None, core_share=share,
        loop_lag_ms_max=lag_max, loop_lag_ms_p99=lag_p99, wait_share=wait,
        saturated=bool(because),
        saturated_because="; ".join(because) or None,
        event_loop=usages[0].event_loop if usages else None,
    )
