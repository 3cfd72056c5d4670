"""The load generator against an in-process transport that forces faults a real server cannot
show on demand: a stream that ends early, malformed SSE, a usage that disagrees, a hang."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from e2e.load import LoadSpec, drive, make_prompts


def sse(*events) -> bytes:
    out = b""
    for event in events:
        out += b"data: " + (event if isinstance(event, bytes) else json.dumps(event).encode()) + b"\n\n"
    return out


def chunk(text="x"):
    return {"choices": [{"index": 0, "text": text, "finish_reason": None}]}


def usage(prompt, completion):
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def run(body_for, n=2, concurrency=2, **kw):
    seen = []

    async def handler(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        seen.append(payload)
        result = body_for(payload)
        if isinstance(result, httpx.Response):
            return result
        return httpx.Response(200, content=result, headers={"content-type": "text/event-stream"})

    spec = LoadSpec(base_url="http://test", model="m", prompts=[[5, 6, 7]] * n, output_len=3,
                    concurrency=concurrency, **kw)
    records = asyncio.run(drive(spec, transport=httpx.MockTransport(handler)))
    return records, seen


def test_good_stream_and_request_body():
    records, seen = run(lambda p: sse(chunk(), chunk(), chunk(), usage(3, 3), b"[DONE]"))
    assert all(r.ok for r in records)
    assert [len(r.chunk_times_s) for r in records] == [3, 3]
    assert records[0].prompt_tokens == 3 and records[0].completion_tokens == 3
    body = seen[0]
    assert body["prompt"] == [5, 6, 7] and body["max_tokens"] == 3
    assert body["ignore_eos"] is True and body["temperature"] == 0.0 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_speculator_chunks_carry_several_tokens():
    records, _ = run(lambda p: sse(chunk("ab"), chunk("c"), usage(3, 3), b"[DONE]"))
    assert all(r.ok for r in records) and len(records[0].chunk_times_s) == 2


def test_stream_that_ends_early():
    records, _ = run(lambda p: sse(chunk(), chunk()))
    assert all(not r.ok and "ended before [DONE]" in r.error for r in records)
    assert all(len(r.chunk_times_s) == 2 for r in records)  # what arrived is kept


def test_malformed_sse():
    records, _ = run(lambda p: sse(chunk(), b"{not json", usage(3, 3), b"[DONE]"))
    assert all("malformed SSE" in r.error for r in records)


def test_usage_that_disagrees_with_the_stream():
    records, _ = run(lambda p: sse(chunk(), chunk(), chunk(), usage(3, 2), b"[DONE]"))
    assert all("usage says 2" in r.error and "3 content chunks" in r.error for r in records)


def test_missing_usage():
    records, _ = run(lambda p: sse(chunk(), b"[DONE]"))
    assert all("no usage" in r.error for r in records)


def test_http_error_status():
    records, _ = run(lambda p: httpx.Response(500, content=b"engine dead"))
    assert all(r.error.startswith("HTTP 500") and "engine dead" in r.error for r in records)
    assert all(r.status == 500 for r in records)


def test_server_error_event():
    records, _ = run(lambda p: sse(chunk(), {"error": {"message": "oom"}}, b"[DONE]"))
    assert all("server error" in r.error and "oom" in r.error for r in records)


def test_hang_times_out_within_the_bound():
    class Hang(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield sse(chunk())
            await asyncio.sleep(30)

    records, _ = run(lambda p: httpx.Response(200, stream=Hang()), request_timeout_s=0.5)
    assert all("timed out after" in r.error for r in records)
    assert all(r.first_token_s is not None for r in records)


def test_concurrency_is_bounded():
    in_flight = {"now": 0, "max": 0}

    class Slow(httpx.AsyncByteStream):
        async def __aiter__(self):
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            await asyncio.sleep(0.02)
            in_flight["now"] -= 1
            yield sse(chunk(), chunk(), chunk(), usage(3, 3), b"[DONE]")

    records, _ = run(lambda p: httpx.Response(200, stream=Slow()), n=12, concurrency=3)
    assert all(r.ok for r in records)
    assert in_flight["max"] == 3


def test_prompts_exact_length_seeded_and_without_specials():
    a = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3)
    b = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3)
    warm = make_prompts(4, 1031, vocab_size=100, exclude=[0, 1, 2], seed=3, stream=1)
    assert a == b and a != warm
    assert all(len(p) == 1031 for p in a)
    assert min(min(p) for p in a) >= 3 and max(max(p) for p in a) <= 99
    assert make_prompts(4, 16, vocab_size=100, seed=4) != make_prompts(4, 16, vocab_size=100, seed=3)
