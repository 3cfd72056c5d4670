"""Drive one client process's share of a load: streamed ``/v1/completions`` requests over
keep-alive connections (``conn``: why not an HTTP client library on this path), closed-loop (a
fixed number of streams) or open-loop (requests sent at scheduled times), one
``RequestRecord`` per request.

Times are ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux: one clock for every process of
the host) minus the load's start ``t0``. The clock starts once the process's event loop runs
and its connection pool is made (``run_shard`` takes ``t0`` as a function called then): a
schedule whose clock started before the loop charged the loop's start-up (uvloop's import,
the loop, the pool: 246-331 ms in two trace replays on a busy host) to its first arrivals as
lateness. Several worker processes report ready from inside their loops and are then given
one common ``t0``.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from e2e.load.conn import Endpoint, IdleClosed, Pool
from e2e.load.clientstats import LagProbe, ProcessUsage, runqueue_wait_s
from e2e.load.sse import SSEStream, StreamFailed, check_usage, output_ids
from e2e.results.records import RequestRecord

__all__ = ["Shard", "run_shard", "run_loop", "event_loop_name"]

_SPIN_S = 0.0012  # an open-loop send sleeps until this close to its time (the loop's timers wake up
#                   to ~1 ms late), then yields to other tasks until the time has come
_SPIN_BUDGET = 0.3  # ... unless that would cost more than 30 % of a core (rate x _SPIN_S)


@dataclass(frozen=True)
class Shard:
    """What one client process sends: request indices with their prompts, the send times for
    an open loop (seconds after ``t0``; None = closed loop), and the in-flight cap (closed loop:
    the number of streams; open loop: None = no cap)."""

    indices: tuple[int, ...]
    prompts: tuple[Sequence[int], ...]
    at_s: tuple[float, ...] | None
    cap: int | None
    max_tokens: tuple[int, ...] | None = None  # per request (a workload's); None: spec.output_len
    sessions: tuple[tuple[int, ...], ...] | None = None  # closed loop: turns sent in order
    think_s: float = 0.0  # between a session's turns


def _body(spec, prompt: Sequence[int], max_tokens: int | None = None) -> bytes:
    """The request: greedy, exactly ``max_tokens`` tokens, streamed with usage; with
    ``spec.record_outputs`` it asks vLLM for the token ids (``return_token_ids``: each chunk's
    new ids, and the prompt once in the first chunk)."""
    body = {
        "model": spec.model,
        "prompt": list(prompt),
        "max_tokens": spec.output_len if max_tokens is None else max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if spec.record_outputs:
        body["return_token_ids"] = True
    return orjson.dumps(body)


class _Watchdog:
    """Stops a request that has received nothing for ``stall_s``: one task checks every
    stream's last receipt a few times per ``stall_s``, rather than a timer re-armed on every
    read (what aiohttp's read timeout did: some 10 % of the client's CPU when chunks come one
    or two per read, as they do from a real server)."""

    def __init__(self, stall_s: float, t0: float) -> None:
        self.stall_s, self.t0 = stall_s, t0
        self.watched: dict[asyncio.Task, SSEStream] = {}

    async def run(self) -> None:
        clock, every = time.perf_counter, min(1.0, self.stall_s / 4)
        while True:
            await asyncio.sleep(every)
            now = clock() - self.t0
            for task, stream in self.watched.items():
                if not stream.stalled and now - stream.last > self.stall_s:
                    stream.stalled = True
                    task.cancel()


async def _request(pool: Pool, spec, index: int, prompt: Sequence[int], t0: float,
                   watchdog: _Watchdog, sent: float | None = None,
                   max_tokens: int | None = None) -> RequestRecord:
    """One request; ``sent``: when an open loop dispatched it (None: now).

    A request that fails on a reused keep-alive connection before any byte of its response
    (``IdleClosed``: the server closed the idle connection as it went out, so the server never
    saw it) is sent once more on a fresh connection and marked ``retried``. Its times start at
    that second send: the failed attempt is the connection's, not the server's latency, and
    is in no TTFT. Nothing else is retried: a fresh connection's failure is the server's, and
    a response that began is a measurement. The check costs nothing per chunk: it is made
    only when a connection is lost.

    The record carries the completion's token ids where the server sent them
    (``e2e.load.sse.output_ids``), None otherwise; a server that echoed another prompt than
    the one sent fails the request."""
    clock = time.perf_counter
    send = clock() - t0 if sent is None else sent
    request = pool.endpoint.request(_body(spec, prompt, max_tokens))
    stream = SSEStream(clock() - t0)
    status: int | None = None
    error: str | None = None
    retried = False
    task = asyncio.current_task()
    watchdog.watched[task] = stream
    conn = None
    outputs = None
    try:
        async with asyncio.timeout(spec.request_timeout_s):
            conn = await pool.take()
            try:
                conn.send(request, stream)
                status = await conn.wait()
            except IdleClosed:
                retried, send = True, clock() - t0
                stream = watchdog.watched[task] = SSEStream(send)
                conn = await pool.connect()
                conn.send(request, stream)
                status = await conn.wait()
            if status != 200:
                raise StreamFailed(f"HTTP {status}: {conn.other_body()[:300]}")
            stream.close(clock() - t0)
            pool.give_back(conn)  # only a response that ended cleanly leaves it reusable
            conn = None
            outputs = output_ids(stream, prompt, stream.usage.get("completion_tokens"))
    except asyncio.CancelledError:
        if not stream.stalled:
            raise
        task.uncancel()
        error = f"no data for {spec.stall_timeout_s:g} s (load.stall_timeout_s)"
    except StreamFailed as exc:
        error = str(exc)
    except TimeoutError:
        error = f"timed out after {spec.request_timeout_s:.0f} s (load.request_timeout_s)"
    except OSError as exc:  # could not connect
        error = (f"cannot connect to {pool.endpoint.host}:{pool.endpoint.port}: "
                 f"{exc.strerror or exc}")
    finally:
        del watchdog.watched[task]
        if conn is not None:
            conn.close()
    # the response ends with [DONE]: its receipt
    end = stream.done_at if stream.done_at is not None else clock() - t0
    usage = stream.usage or {}
    if error is not None and usage:  # a stream that failed may carry a usage nobody checked
        try:
            check_usage(usage)
        except StreamFailed:
            usage = {}
    chunks = stream.chunk_times
    return RequestRecord(
        index=index,
        send_s=send,
        first_token_s=chunks[0] if chunks else None,
        end_s=end if error is None else None,
        chunk_times_s=tuple(chunks),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        status=status,
        error=error,
        retried=retried,
        output_token_ids=outputs if error is None else None,
    )


def run_loop(coro):
    """Run a client process's event loop to the end of ``coro``: uvloop where it is installed
    (a dependency on Linux and macOS), asyncio's own elsewhere. uvloop takes ~17 % less CPU per
    chunk when chunks come one or two per read, as from a real server (docs/explanation/load.md). Ctrl-C
    and SIGTERM still raise KeyboardInterrupt (``_interruptible``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_interruptible(coro))
    return uvloop.run(_interruptible(coro))


async def _interruptible(coro):
    """Await ``coro`` with SIGINT and SIGTERM taken by the loop: the load is cancelled and
    KeyboardInterrupt raised from here. A Python signal handler that raises runs wherever the
    main thread is, and inside a protocol callback (``data_received``) uvloop would take the
    KeyboardInterrupt for a transport error, fail that request and go on. Only signals that
    already have a Python handler (Ctrl-C's; e2e's commands give SIGTERM one) are taken, and
    their handlers are put back after."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    caught: list[int] = []
    taken = []
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if callable(previous):
                loop.add_signal_handler(signum, lambda s=signum: (caught.append(s), task.cancel()))
                taken.append((signum, previous))
    try:
        return await coro
    except asyncio.CancelledError:
        if caught:
            raise KeyboardInterrupt from None
        raise
    finally:
        for signum, previous in taken:
            loop.remove_signal_handler(signum)
            signal.signal(signum, previous)


def event_loop_name() -> str:
    """Which event loop runs this code: 'uvloop' or 'asyncio'."""
    return "uvloop" if "uvloop" in type(asyncio.get_running_loop()).__module__ else "asyncio"


async def _sleep_until(deadline: float, spin_s: float = _SPIN_S) -> None:
    """Sleep to ``deadline`` (perf_counter) without the loop's ~1 ms timer rounding: sleep to
    ``spin_s`` before it, then yield to other tasks until it has passed."""
    clock = time.perf_counter
    left = deadline - clock()
    if left > spin_s:
        await asyncio.sleep(left - spin_s)
    while clock() < deadline:
        await asyncio.sleep(0)


async def run_shard(spec, shard: Shard, t0: float | Callable[[], float],
                    on_done: Callable[[RequestRecord], None] | None = None,
                    ) -> tuple[list[RequestRecord], ProcessUsage]:
    """Send the shard's requests from ``t0`` on; its records (in index order) and this
    process's CPU, wall time, chunk count and event-loop lags over the load. ``t0`` may be a
    function, called once the loop runs and the pool is made, that returns the start (e.g.
    ``time.perf_counter``): the schedule's clock then starts when the loop is ready."""
    endpoint = Endpoint(spec.base_url.rstrip("/") + spec.path, spec.headers)
    records: dict[int, RequestRecord] = {}
    probe = LagProbe()
    pool = Pool(endpoint, 0.0)
    if callable(t0):
        t0 = t0()
    pool.t0 = t0
    try:
        await _sleep_until(t0)
        probe.start()
        watchdog = _Watchdog(spec.stall_timeout_s, t0)
        watching = asyncio.get_running_loop().create_task(watchdog.run())
        cpu0, wall0, wait0 = time.process_time(), time.perf_counter(), runqueue_wait_s()

        lengths = dict(zip(shard.indices, shard.max_tokens)) if shard.max_tokens else {}

        async def one(index: int, prompt: Sequence[int], sent: float | None = None) -> None:
            record = await _request(pool, spec, index, prompt, t0, watchdog, sent,
                                    lengths.get(index))
            records[index] = record
            if on_done is not None:
                on_done(record)

        items = list(zip(shard.indices, shard.prompts))
        if shard.sessions is not None:  # each stream runs whole sessions, turn after turn
            prompt_of = dict(items)
            sessions = iter(shard.sessions)

            async def session_slot() -> None:
                for session in sessions:
                    for k, index in enumerate(session):
                        if k and shard.think_s:  # on perf_counter: never short of it
                            await _sleep_until(time.perf_counter() + shard.think_s)
                        await one(index, prompt_of[index])

            await asyncio.gather(*(session_slot()
                                   for _ in range(min(shard.cap or 1, len(shard.sessions)))))
        elif shard.at_s is None:  # closed loop: cap streams, each sends its next prompt at once
            queue = iter(items)

            async def stream_slot() -> None:
                for index, prompt in queue:
                    await one(index, prompt)

            await asyncio.gather(*(stream_slot() for _ in range(min(shard.cap or 1, len(items)))))
        else:  # open loop: send at the scheduled times; a cap delays sends, never drops them
            gate = asyncio.Semaphore(shard.cap) if shard.cap else None
            tasks = []
            rate = len(shard.at_s) / shard.at_s[-1] if shard.at_s and shard.at_s[-1] > 0 else 0.0
            spin = _SPIN_S if rate * _SPIN_S <= _SPIN_BUDGET else 0.0

            async def gated(index: int, prompt: Sequence[int], sent: float) -> None:
                try:
                    await one(index, prompt, sent)
                finally:
                    if gate is not None:
                        gate.release()

            for (index, prompt), at in zip(items, shard.at_s):
                await _sleep_until(t0 + at, spin)
                if gate is not None:
                    await gate.acquire()
                sent = time.perf_counter() - t0  # the arrival, as dispatched
                tasks.append(asyncio.ensure_future(gated(index, prompt, sent)))
            await asyncio.gather(*tasks)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        wait1 = runqueue_wait_s()
        watching.cancel()
        await probe.stop()
    finally:
        pool.close()
    usage = ProcessUsage(wall_s=wall, cpu_s=cpu,
                         chunks=sum(len(r.chunk_times_s) for r in records.values()),
                         lags_s=tuple(probe.lags),
                         wait_s=None if wait0 is None or wait1 is None else wait1 - wait0,
                         event_loop=event_loop_name())
    return [records[i] for i in sorted(records)], usage
