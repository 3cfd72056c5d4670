"""Drive one client process's share of a load: streamed ``/v1/completions`` requests over one
aiohttp session, closed-loop (a fixed number of streams) or open-loop (requests sent at
scheduled times), one ``RequestRecord`` per request.

Why aiohttp and not httpx here: on the stream-reading hot path httpx goes through h11, a
pure-Python HTTP/1.1 parser that handles every chunk of a chunked body in Python; measured with
the same SSE splitting on one core (bench/load_ceiling.py's server, docs/load.md) httpx took
about 10x the CPU per chunk of aiohttp, whose llhttp parser is C. httpx remains the HTTP client
everywhere else in e2e.

Times are ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux: one clock for every process of
the host) minus the load's start ``t0``, which the parent gives every worker process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
import orjson

from e2e.loadgen.clientstats import LagProbe, ProcessUsage, runqueue_wait_s
from e2e.loadgen.sse import SSEStream, StreamFailed
from e2e.records import RequestRecord

__all__ = ["Shard", "run_shard"]

_JSON = {"content-type": "application/json"}
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


def _body(spec, prompt: Sequence[int]) -> bytes:
    return orjson.dumps({
        "model": spec.model,
        "prompt": list(prompt),
        "max_tokens": spec.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    })


async def _request(session: aiohttp.ClientSession, url: str, spec, index: int,
                   prompt: Sequence[int], t0: float, sent: float | None = None) -> RequestRecord:
    """One request; ``sent``: when an open loop dispatched it (None: now)."""
    clock = time.perf_counter
    send = clock() - t0 if sent is None else sent
    body = _body(spec, prompt)
    stream = SSEStream()
    status: int | None = None
    error: str | None = None
    try:
        async with asyncio.timeout(spec.request_timeout_s):
            async with session.post(url, data=body, headers=_JSON) as response:
                status = response.status
                if status != 200:
                    text = (await response.read()).decode(errors="replace")[:300]
                    raise StreamFailed(f"HTTP {status}: {text}")
                feed, read = stream.feed, response.content.readany
                while data := await read():  # what has arrived; b"" at the end
                    feed(data, clock() - t0)
                stream.close(clock() - t0)
    except StreamFailed as exc:
        error = str(exc)
    except aiohttp.ServerTimeoutError:
        error = f"no data for {spec.stall_timeout_s:.0f} s (load.stall_timeout_s)"
    except TimeoutError:
        error = f"timed out after {spec.request_timeout_s:.0f} s (load.request_timeout_s)"
    except aiohttp.ClientError as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # the response ends with [DONE]: its receipt, not the later end-of-body read, which only
    # adds the client's own event-loop queueing
    end = stream.done_at if stream.done_at is not None else clock() - t0
    usage = stream.usage or {}
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
    )


async def _sleep_until(deadline: float, spin_s: float = _SPIN_S) -> None:
    """Sleep to ``deadline`` (perf_counter) without the loop's ~1 ms timer rounding: sleep to
    ``spin_s`` before it, then yield to other tasks until it has passed."""
    clock = time.perf_counter
    left = deadline - clock()
    if left > spin_s:
        await asyncio.sleep(left - spin_s)
    while clock() < deadline:
        await asyncio.sleep(0)


async def run_shard(spec, shard: Shard, t0: float,
                    on_done: Callable[[RequestRecord], None] | None = None,
                    connector: aiohttp.BaseConnector | None = None,
                    ) -> tuple[list[RequestRecord], ProcessUsage]:
    """Send the shard's requests from ``t0`` on; its records (in index order) and this
    process's CPU, wall time, chunk count and event-loop lags over the load."""
    url = spec.base_url.rstrip("/") + spec.path
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=spec.stall_timeout_s)
    limit = shard.cap or 0
    if connector is None:
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, keepalive_timeout=60)
    records: dict[int, RequestRecord] = {}
    probe = LagProbe()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     headers=spec.headers) as session:
        await _sleep_until(t0)
        probe.start()
        cpu0, wall0, wait0 = time.process_time(), time.perf_counter(), runqueue_wait_s()

        async def one(index: int, prompt: Sequence[int], sent: float | None = None) -> None:
            record = await _request(session, url, spec, index, prompt, t0, sent)
            records[index] = record
            if on_done is not None:
                on_done(record)

        items = list(zip(shard.indices, shard.prompts))
        if shard.at_s is None:  # closed loop: cap streams, each sends its next prompt at once
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
        await probe.stop()
    usage = ProcessUsage(wall_s=wall, cpu_s=cpu,
                         chunks=sum(len(r.chunk_times_s) for r in records.values()),
                         lags_s=tuple(probe.lags),
                         wait_s=None if wait0 is None or wait1 is None else wait1 - wait0)
    return [records[i] for i in sorted(records)], usage
