"""The load generator against a scripted local server that forces faults a real server cannot
show on demand: a stream that ends early or is cut, malformed SSE, a usage that disagrees, an
error event, a hang, a stall; and the SSE framing itself, fed byte by byte."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sse_server import ScriptedServer, chunk, framed, good, sse, stream, usage

from e2e.errors import ConfigError
from e2e.load.generator import LoadSpec, drive, make_prompts
from e2e.load.sse import SSEStream, StreamFailed


def run(respond, n=2, concurrency=2, **kw):
    with ScriptedServer(respond) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[5, 6, 7]] * n,
                        output_len=3, concurrency=concurrency, **kw)
        records = asyncio.run(drive(spec))
    return records, server.bodies


def blocks(*events):
    async def respond(payload, writer):
        await stream(writer, sse(*events))
    return respond


def test_good_stream_and_request_body():
    records, seen = run(blocks(chunk(), chunk(), chunk(), usage(3, 3), b"[DONE]"))
    assert all(r.ok for r in records)
    assert [len(r.chunk_times_s) for r in records] == [3, 3]
    assert records[0].prompt_tokens == 3 and records[0].completion_tokens == 3
    assert records[0].status == 200 and [r.index for r in records] == [0, 1]
    r = records[0]
    assert 0 <= r.send_s <= r.first_token_s <= r.chunk_times_s[-1] <= r.end_s
    body = seen[0]
    assert body["prompt"] == [5, 6, 7] and body["max_tokens"] == 3 and body["model"] == "m"
    assert body["ignore_eos"] is True and body["temperature"] == 0.0 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_speculator_chunks_carry_several_tokens():
    records, _ = run(blocks(chunk("ab"), chunk("c"), usage(3, 3), b"[DONE]"))
    assert all(r.ok for r in records) and len(records[0].chunk_times_s) == 2


def test_stream_that_ends_early():
    records, _ = run(blocks(chunk(), chunk()))
    assert all(not r.ok and "ended before [DONE]" in r.error for r in records)
    assert all(len(r.chunk_times_s) == 2 for r in records)  # what arrived is kept


def test_connection_cut_mid_stream():
    async def respond(payload, writer):
        await stream(writer, sse(chunk(), chunk()), finish=False)
        writer.write(b"ff\r\ndata: {\"choi")  # a chunk announced longer than what comes
        await writer.drain()
        writer.close()

    records, _ = run(respond)
    assert all(not r.ok and r.end_s is None for r in records)
    assert all("closed the connection mid-response" in r.error for r in records), records[0].error


def test_connections_are_kept_alive_and_reused():
    with ScriptedServer(blocks(chunk(), usage(3, 1), b"[DONE]")) as server:
        spec = LoadSpec(base_url=server.base_url + "/", model="m", prompts=[[1]] * 12,
                        output_len=1, concurrency=3, headers={"Authorization": "Bearer k"})
        records = asyncio.run(drive(spec))
    assert all(r.ok for r in records) and server.connections == 3
    head = server.heads[0].decode()
    assert head.startswith("POST /v1/completions HTTP/1.1\r\n")
    assert "Authorization: Bearer k" in head and f"Host: 127.0.0.1:{server.port}" in head


def test_a_server_that_closes_after_each_response():
    async def respond(payload, writer):
        body = b"".join(good(2))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    with ScriptedServer(respond) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1]] * 5, output_len=2,
                        concurrency=1)
        records = asyncio.run(drive(spec))
    assert all(r.ok for r in records) and server.connections == 5


def test_bodies_that_end_when_the_server_closes():
    """HTTP/1.1 without a length or chunks: the body ends at the close, for a good stream and
    for an error alike; a chunked body cut short stays an error (test_connection_cut_...)."""
    async def respond(payload, writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"connection: close\r\n\r\n" + b"".join(good(2)))
        await writer.drain()
        writer.close()

    records, _ = run(respond)
    assert all(r.ok and len(r.chunk_times_s) == 2 for r in records), records[0].error

    async def refuse(payload, writer):
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\r\nbusy")
        await writer.drain()
        writer.close()

    records, _ = run(refuse)
    assert all(r.status == 503 and r.error == "HTTP 503: busy" for r in records)


def test_nothing_listening_and_a_garbled_response():
    with ScriptedServer(blocks(chunk())) as server:
        port = server.port
    spec = LoadSpec(base_url=f"http://127.0.0.1:{port}", model="m", prompts=[[1]], output_len=1,
                    concurrency=1)
    (record,) = asyncio.run(drive(spec))
    assert record.error.startswith(f"cannot connect to 127.0.0.1:{port}")

    async def respond(payload, writer):
        writer.write(b"SPDY/9 what\r\n\r\n")
        await writer.drain()

    records, _ = run(respond)
    assert all("malformed HTTP response" in r.error for r in records)


def test_malformed_sse():
    records, _ = run(blocks(chunk(), b"{not json", usage(3, 3), b"[DONE]"))
    assert all("malformed SSE" in r.error for r in records)


def test_sse_that_is_not_an_object():
    records, _ = run(blocks(chunk(), b"[1, 2]", usage(3, 3), b"[DONE]"))
    assert all("malformed SSE event" in r.error for r in records)


def test_usage_that_disagrees_with_the_stream():
    records, _ = run(blocks(chunk(), chunk(), chunk(), usage(3, 2), b"[DONE]"))
    assert all("usage says 2" in r.error and "3 content chunks" in r.error for r in records)


def test_missing_usage():
    records, _ = run(blocks(chunk(), b"[DONE]"))
    assert all("no usage" in r.error for r in records)


def test_no_tokens():
    records, _ = run(blocks(usage(3, 3), b"[DONE]"))
    assert all("no tokens" in r.error for r in records)


def test_http_error_status():
    async def respond(payload, writer):
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 11\r\n\r\nengine dead")
        await writer.drain()

    records, _ = run(respond)
    assert all(r.error.startswith("HTTP 500") and "engine dead" in r.error for r in records)
    assert all(r.status == 500 for r in records)


def test_server_error_event():
    records, _ = run(blocks(chunk(), {"error": {"message": "oom"}}, b"[DONE]"))
    assert all("server error" in r.error and "oom" in r.error for r in records)


def test_vllm_style_error_object():
    records, _ = run(blocks(chunk(), {"object": "error", "message": "too long"}, b"[DONE]"))
    assert all("server error" in r.error and "too long" in r.error for r in records)


def test_hang_times_out_within_the_bound():
    async def respond(payload, writer):
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        while True:  # data keeps trickling, so only the whole-request bound can end it
            writer.write(framed(b": ping\n\n"))
            writer.write(framed(sse(chunk())[0]))
            await writer.drain()
            await asyncio.sleep(0.05)

    records, _ = run(respond, request_timeout_s=0.5)
    assert all("timed out after" in r.error for r in records)
    assert all(r.first_token_s is not None and r.end_s is None for r in records)


def test_stall_is_caught_by_the_stall_timeout():
    async def respond(payload, writer):
        await stream(writer, sse(chunk()), finish=False)
        await asyncio.sleep(30)

    records, _ = run(respond, stall_timeout_s=0.3)
    assert all("no data for" in r.error and "stall_timeout_s" in r.error for r in records)


def test_concurrency_is_bounded():
    in_flight = {"now": 0, "max": 0}

    async def respond(payload, writer):
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        await asyncio.sleep(0.02)
        in_flight["now"] -= 1
        await stream(writer, good(3))

    records, _ = run(respond, n=12, concurrency=3)
    assert all(r.ok for r in records)
    assert in_flight["max"] == 3


def test_chunks_timestamped_at_receipt():
    async def respond(payload, writer):
        await stream(writer, good(3), gap_s=0.05, finish=False)
        await asyncio.sleep(0.2)  # the body's end comes well after [DONE]
        writer.write(b"0\r\n\r\n")

    records, _ = run(respond, n=1, concurrency=1)
    gaps = [b - a for a, b in zip(records[0].chunk_times_s, records[0].chunk_times_s[1:])]
    assert all(0.04 < g < 0.2 for g in gaps), gaps
    # the end is the receipt of [DONE] (usage, then [DONE]: two 50 ms steps after the last
    # token), not the end of the body 200 ms later
    assert 0.09 < records[0].end_s - records[0].chunk_times_s[-1] < 0.15


def body_of(*events) -> bytes:
    return b"".join(sse(*events))


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_sse_framing_does_not_depend_on_read_sizes(size):
    data = body_of(chunk(), chunk("a\n\nb"), usage(3, 2), b"[DONE]")
    parsed = SSEStream()
    for i in range(0, len(data), size):
        parsed.feed(data[i:i + size], float(i))
    parsed.close(1e9)
    assert len(parsed.chunk_times) == 2 and parsed.usage["completion_tokens"] == 2
    assert parsed.done


def test_sse_comments_fields_crlf_and_unterminated_done():
    data = (b": keep-alive\r\n\r\nevent: message\r\nid: 1\r\ndata: " + sse(chunk())[0][6:-2]
            + b"\r\n\r\n" + body_of(usage(3, 1)) + b"data: [DONE]")
    parsed = SSEStream()
    parsed.feed(data, 1.0)
    parsed.close(2.0)
    assert parsed.chunk_times == [1.0] and parsed.usage["completion_tokens"] == 1


def test_sse_events_of_one_read_share_its_receipt_time():
    parsed = SSEStream()
    parsed.feed(body_of(chunk(), chunk()), 1.0)
    parsed.feed(body_of(chunk()), 2.5)
    assert parsed.chunk_times == [1.0, 1.0, 2.5]
    with pytest.raises(StreamFailed, match="ended before"):
        parsed.close(3.0)


def test_load_spec_rejects_bad_settings():
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        LoadSpec(base_url="http://x", model="m", prompts=[], output_len=1, concurrency=1, workers=0)
    with pytest.raises(ConfigError, match="request_rate must be > 0"):
        LoadSpec(base_url="http://x", model="m", prompts=[], output_len=1, concurrency=1,
                 request_rate=0.0)
    with pytest.raises(ConfigError, match="burstiness"):
        LoadSpec(base_url="http://x", model="m", prompts=[], output_len=1, concurrency=1,
                 burstiness=-1)


def test_prompts_exact_length_seeded_and_without_specials():
    a = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3)
    b = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3)
    warm = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3, stream=1)
    assert a == b and a != warm
    assert all(len(p) == 1031 for p in a)
    assert min(min(p) for p in a) >= 3 and max(max(p) for p in a) <= 99
    assert make_prompts(4, 16, vocab_size=100, seed=4) != make_prompts(4, 16, vocab_size=100, seed=3)


INTERRUPTED_LOAD = """
import sys
sys.path.insert(0, {tests!r})
from sse_server import HEAD, ScriptedServer, chunk, framed, sse
from e2e.load.generator import LoadSpec, run_measured_load

block = framed(b"".join(sse(*[chunk()] * 64)))

async def respond(payload, writer):  # a stream that keeps the client busy reading
    writer.write(HEAD)
    for _ in range(100_000):
        writer.write(block)
        await writer.drain()

with ScriptedServer(respond, process=True) as server:
    spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1]] * 4, output_len=1,
                    concurrency=4)
    print("loading", flush=True)
    try:
        records = run_measured_load(spec, progress=False).records
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    else:
        print("finished:", [r.error for r in records], flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_load_interrupts_it(tmp_path, signum):
    """Ctrl-C (or SIGTERM, which e2e's commands turn into Ctrl-C) while the client is busy
    reading must interrupt the load. Raised inside a protocol callback, uvloop would take the
    KeyboardInterrupt for a transport error, fail that one request and go on."""
    script = tmp_path / "load.py"
    script.write_text(INTERRUPTED_LOAD.format(tests=str(Path(__file__).parent)))
    setup = ("import signal, runpy\n"
             "signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))\n"
             f"runpy.run_path({str(script)!r}, run_name='__main__')\n")
    proc = subprocess.Popen([sys.executable, "-c", setup], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "loading"
        time.sleep(1.0)  # well into the streams
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the scripted server's process too
        except ProcessLookupError:
            pass
        proc.wait()
    assert output.strip().splitlines()[-1] == "interrupted", output
