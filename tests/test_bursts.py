"""Burst detection: hand-made streams (paced, burst-delivered, first chunks on time and the
rest in one lump, too short to judge), and a scripted SSE server that paces one stream and
holds another back to deliver it in one write, read by e2e's own load generator."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import socket
import time

import pytest

from e2e.load.bursts import (SPREAD_THRESHOLD, burst_summary, decode_reference_s, decode_share,
                             stream_spread)
from e2e.load.generator import LoadSpec, drive
from e2e.results.records import RequestRecord
from e2e.session.server import free_port


def _record(index: int, chunks: list[float], *, send: float = 0.0, end: float | None = None,
            tokens: int | None = None, error: str | None = None) -> RequestRecord:
    return RequestRecord(index=index, send_s=send, first_token_s=chunks[0] if chunks else None,
                         end_s=None if error else (end if end is not None else chunks[-1] + 1e-4),
                         chunk_times_s=tuple(chunks), prompt_tokens=8,
                         completion_tokens=tokens or len(chunks), error=error)


def paced(index=0, n=128, ttft=0.03, tpot=0.003, jitter=0.0):
    return _record(index, [ttft + i * tpot + (jitter if i % 7 == 3 else 0.0) for i in range(n)])


def burst(index=0, n=128, at=0.39, gap=10e-6):
    """Everything held back: TTFT 0.39 s, then n chunks 10 us apart (as measured here)."""
    return _record(index, [at + i * gap for i in range(n)])


def lumps(index=0, n=128, on_time=5, ttft=0.03, tpot=0.003, gap=10e-6):
    """First chunks on time, then the rest in one lump at the end of decoding."""
    first = [ttft + i * tpot for i in range(on_time)]
    lump_at = ttft + (n - 1) * tpot
    return _record(index, first + [lump_at + i * gap for i in range(n - on_time)])


def test_paced_streams_spread_over_their_decode_time():
    record = paced()
    # the smallest 90 % of 127 gaps of 3 ms against 127 x 3 ms of server decode time
    assert stream_spread(record, reference_s=0.003 * 127) == pytest.approx(115 / 127)
    assert stream_spread(record) == pytest.approx(115 * 0.003 / (0.03 + 127 * 0.003 + 1e-4))
    jittery = paced(jitter=0.002)  # every 7th chunk 2 ms late: still paced
    assert stream_spread(jittery, reference_s=0.003 * 127) > 0.5


def test_burst_and_lumpy_streams_collapse():
    assert stream_spread(burst(), reference_s=0.003 * 127) < 0.01
    assert stream_spread(burst()) < 0.01  # against E2E latency: no server figure needed
    # TTFT is short here (so "TTFT >= 0.9 x E2E" misses it) and the last 90 % of chunks
    # span the lump only after a long gap; the smallest gaps still collapse
    late = lumps()
    assert (late.first_token_s - late.send_s) < 0.1 * (late.end_s - late.send_s)
    assert stream_spread(late, reference_s=0.003 * 127) < 0.01


def test_unjudgeable_requests():
    assert stream_spread(_record(0, [0.1, 0.2])) is None  # one gap carries no pacing
    assert stream_spread(_record(0, [0.1, 0.2, 0.3], error="HTTP 500")) is None
    assert decode_reference_s(_record(0, [0.1, 0.2, 0.3], error="x"), 0.003) is None
    assert decode_reference_s(_record(0, [0.1, 0.2, 0.3], tokens=9), 0.003) == pytest.approx(0.024)
    assert decode_reference_s(_record(0, [0.1, 0.2, 0.3], send=0.05, end=0.35), None) == \
        pytest.approx(0.3)


def test_decode_share_tells_a_held_back_stream_from_a_lumpy_one():
    reference = 0.003 * 127
    assert decode_share(paced(), reference_s=reference) == pytest.approx(1.0)
    assert decode_share(burst(), reference_s=reference) < 0.01  # decode time hidden in TTFT
    assert decode_share(lumps(), reference_s=reference) == pytest.approx(1.0, abs=0.01)
    assert decode_share(burst()) < 0.01  # against E2E latency
    assert decode_share(_record(0, [0.1, 0.2, 0.3], error="x")) is None


def test_burst_summary_flags_bursts_and_warns_above_the_share():
    records = ([paced(i) for i in range(17)] + [burst(17), burst(18), lumps(19)]
               + [_record(20, [0.1, 0.2])])
    summary = burst_summary(records, server_tpot_s=0.003)
    assert summary.judged == 20 and summary.flagged == 3
    assert summary.flagged_indices == [17, 18, 19] and summary.tpot_affected_indices == [17, 18]
    assert summary.share == pytest.approx(0.15) and summary.tpot_affected_share == pytest.approx(0.1)
    assert summary.affected and summary.itl_affected
    assert summary.reference == "server TPOT" and summary.threshold == SPREAD_THRESHOLD
    assert summary.warnings[0].startswith("client TPOT burst-affected: 2 of 20 requests (10%)")
    assert summary.warnings[1].startswith("inter-chunk latency burst-affected: 3 of 20")
    assert summary.spread_min < 0.01 and summary.spread_median > 0.9

    calm = burst_summary([paced(i) for i in range(20)])
    assert calm.flagged == 0 and not calm.affected and calm.warnings == []
    assert calm.reference == "E2E latency" and calm.held_limit == 0.1

    # lumps whose first chunks came on time: inter-chunk latency is affected, TPOT is not
    lumpy = burst_summary([paced(i) for i in range(10)] + [lumps(i) for i in range(10, 20)],
                          server_tpot_s=0.003)
    assert lumpy.itl_affected and not lumpy.affected and lumpy.tpot_affected == 0
    assert [w.split(":")[0] for w in lumpy.warnings] == ["inter-chunk latency burst-affected"]

    one_in_twenty_one = burst_summary([paced(i) for i in range(20)] + [burst(20)])
    assert one_in_twenty_one.tpot_affected == 1 and not one_in_twenty_one.affected  # 4.8 %

    assert burst_summary([]).share is None and not burst_summary([]).affected


# --- a scripted SSE server: stream 0 paced, stream 1 held back and sent in one write ---------

def _chunk() -> bytes:
    body = {"id": "c", "object": "text_completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "text": " t", "finish_reason": None}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _tail(prompt: int, tokens: int) -> bytes:
    body = {"id": "c", "object": "text_completion", "created": 0, "model": "m", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": tokens,
                      "total_tokens": prompt + tokens}}
    return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def _serve(port: int, interval_s: float) -> None:
    def framed(data: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def handle(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()  # the readiness probe: connected and closed
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = json.loads(await reader.readexactly(length))
        tokens, prompt = body["max_tokens"], body["prompt"]
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        if prompt[0] == 1:  # burst: hold everything back, then one write
            await asyncio.sleep(interval_s * tokens)
            writer.write(b"".join(framed(_chunk()) for _ in range(tokens)))
        else:  # paced: a chunk, then a pause (a late wakeup delays, never lumps, chunks)
            for _ in range(tokens):
                writer.write(framed(_chunk()))
                await writer.drain()
                await asyncio.sleep(interval_s)
        writer.write(framed(_tail(len(prompt), tokens)) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())



@pytest.mark.slow
def test_scripted_server_burst_is_flagged_and_paced_stream_is_not():
    port, interval = free_port(), 0.02
    server = mp.get_context("spawn").Process(target=_serve, args=(port, interval), daemon=True)
    server.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the scripted server did not start"
                time.sleep(0.05)
        spec = LoadSpec(base_url=f"http://127.0.0.1:{port}", model="m",
                        prompts=[[0] * 8, [1] * 8], output_len=30, concurrency=2)
        records = asyncio.run(drive(spec))
    finally:
        server.kill()
        server.join()
    assert all(r.ok and len(r.chunk_times_s) == 30 for r in records), records
    summary = burst_summary(records, server_tpot_s=interval)
    assert summary.flagged_indices == [1] and summary.tpot_affected_indices == [1], summary
    spread = {r.index: stream_spread(r, reference_s=decode_reference_s(r, interval))
              for r in records}
    assert spread[0] > SPREAD_THRESHOLD and spread[1] < 0.05, spread
    against_e2e = burst_summary(records)  # no server figure: against E2E latency
    assert against_e2e.flagged_indices == [1] and against_e2e.tpot_affected_indices == [1]
