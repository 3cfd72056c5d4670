"""One load over several client processes, merged exactly.

Method: the parent splits the requests into shards (``split_requests``): closed loop,
request ``i`` goes to the process that owns stream slot ``i mod concurrency`` (slots dealt out
round-robin, so every process gets requests in proportion to its streams); open loop, arrival
``i`` of the one seeded schedule goes to process ``i mod workers`` and keeps its scheduled time,
so the processes together send exactly the schedule one process would. Worker processes (spawned,
each pinned to its own core when there are at least as many cores as workers) open their
session, report ready, and wait for a common start time ``t0`` on ``time.perf_counter()``
(CLOCK_MONOTONIC: system-wide on Linux), so every record's times are on one clock. Records come
back one by one as they finish (``on_done`` runs in the parent); ``merge_shards`` puts them in
index order. Nothing is pre-aggregated: percentiles of the merged records are those of the same
records from one process.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import time
import traceback
from collections.abc import Callable, Sequence

from e2e.host import spread_cores
from e2e.load.clientstats import ProcessUsage
from e2e.load.stream import Shard
from e2e.results.records import RequestRecord

__all__ = ["split_requests", "merge_shards", "run_workers"]

_START_MARGIN_S = 0.05


def split_requests(n: int, workers: int, *, streams: int | None,
                   at_s: Sequence[float] | None,
                   cap: int | None) -> list[tuple[list[int], list[float] | None, int | None]]:
    """Per process: (request indices, their send times or None, its in-flight cap)."""
    shards = []
    if at_s is None:  # closed loop: streams = total concurrency, workers <= streams
        assert streams is not None
        owner = [slot % workers for slot in range(streams)]
        for k in range(workers):
            indices = [i for i in range(n) if owner[i % streams] == k]
            shards.append((indices, None, owner.count(k)))
    else:
        for k in range(workers):
            indices = list(range(k, n, workers))
            share = None if cap is None else cap // workers + (k < cap % workers)
            shards.append((indices, [at_s[i] for i in indices], share))
    return shards


def merge_shards(shards: Sequence[Sequence[RequestRecord]]) -> list[RequestRecord]:
    """The records of every process in one list, in request-index order (unchanged)."""
    merged = sorted((r for shard in shards for r in shard), key=lambda r: r.index)
    if len({r.index for r in merged}) != len(merged):
        raise ValueError("two client processes returned a record for the same request")
    return merged


def _pin(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def _worker_main(k: int, spec, shard: Shard, core: int | None, start, out) -> None:
    """A client process: pin, build the loop, report ready from inside it, wait for t0,
    drive, report back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers on Ctrl-C
    try:
        from e2e.load.stream import run_loop, run_shard

        _pin(core)

        def ready() -> float:  # called by run_shard once the loop runs: nothing to wait for
            out.put(("ready", k, None))
            return start.recv()

        def done(record: RequestRecord) -> None:
            out.put(("record", k, record))

        _, usage = run_loop(run_shard(spec, shard, ready, done))
        out.put(("usage", k, usage))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        out.put(("error", k, traceback.format_exc()))


def run_workers(spec, shards: Sequence[Shard],
                on_done: Callable[[RequestRecord], None] | None = None,
                ) -> tuple[list[RequestRecord], list[ProcessUsage]]:
    """Run each shard in its own spawned process from one common ``t0``; merged records and
    each process's usage."""
    ctx = mp.get_context("spawn")
    cores = spread_cores(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pin = len(cores) >= len(shards)
    out = ctx.Queue()
    procs, starts = [], []
    for k, shard in enumerate(shards):
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker_main, name=f"e2e-load-{k}", daemon=True,
                           args=(k, spec, shard, cores[k] if pin else None, receive, out))
        proc.start()
        procs.append(proc)
        starts.append(send)
    results: list[list[RequestRecord]] = [[] for _ in shards]
    usages: dict[int, ProcessUsage] = {}
    try:
        ready = 0
        while ready < len(shards):
            kind, k, payload = _get(out, procs)
            if kind == "error":
                raise RuntimeError(f"load client process {k} failed:\n{payload}")
            ready += kind == "ready"
        t0 = time.perf_counter() + _START_MARGIN_S
        for send in starts:
            send.send(t0)
        while len(usages) < len(shards):
            kind, k, payload = _get(out, procs)
            if kind == "record":
                results[k].append(payload)
                if on_done is not None:
                    on_done(payload)
            elif kind == "usage":
                usages[k] = payload
            elif kind == "error":
                raise RuntimeError(f"load client process {k} failed:\n{payload}")
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.join(timeout=5 if len(usages) == len(shards) else 0)
            if proc.is_alive():
                proc.terminate()
                proc.join()
    return merge_shards(results), [usages[k] for k in range(len(shards))]


def _get(out, procs):
    while True:
        try:
            return out.get(timeout=1.0)
        except queue_mod.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"load client process {dead[0].name} died "
                                   f"(exit code {dead[0].exitcode})") from None
