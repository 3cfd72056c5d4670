"""How many stream chunks per second e2e's load generator takes on one core, and whether it
skews TPOT near that rate.

A scripted SSE server (its own process, pinned to another core when there is one) streams
vLLM-shaped completion chunks; e2e's ``drive()`` runs pinned to one core with 64 concurrent
streams, as the heaviest reference cell has.

1. ceiling: the server streams as fast as it can; chunks/s the client takes.
2. skew: the server paces every stream at a fixed inter-token interval; the client's TPOT is
   compared with the true interval.
3. timestamp overhead: the cost of one ``time.perf_counter()`` call.

    python bench/load_ceiling.py [--streams 64] [--tokens 509] [--paced-rate 32000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import statistics
import time
import timeit

from e2e.load import LoadSpec, drive
from e2e.metrics import summarize_run

CHUNK = ('data: {"id":"cmpl-0","object":"text_completion","created":0,"model":"m",'
         '"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,'
         '"stop_reason":null}]}\n\n').encode()


def _usage(prompt: int, tokens: int) -> bytes:
    body = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "m",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": tokens,
                                     "total_tokens": prompt + tokens}}
    return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def _serve(port: int, interval_s: float, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})

    framed = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
    block = framed * 8  # unpaced: 8 chunks per write, pre-built, so the server stays cheap

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            raw = await reader.readexactly(length) if length else b""
            if not head.startswith(b"POST /v1/completions "):
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            body = json.loads(raw)
            tokens, prompt = body["max_tokens"], len(body["prompt"])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            if interval_s:
                start = time.perf_counter()
                for i in range(tokens):
                    delay = start + i * interval_s - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    writer.write(framed)
                    await writer.drain()
            else:
                for _ in range(tokens // 8):
                    writer.write(block)
                    await writer.drain()
                writer.write(framed * (tokens % 8))
            tail = _usage(prompt, tokens)
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _measure(streams: int, tokens: int, interval_s: float, requests: int) -> dict:
    cores = sorted(os.sched_getaffinity(0))
    port = _free_port()
    server = mp.Process(target=_serve, args=(port, interval_s, cores[-1] if len(cores) > 1 else None),
                        daemon=True)
    server.start()
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        os.sched_setaffinity(0, {cores[0]})
        spec = LoadSpec(base_url=f"http://127.0.0.1:{port}", model="m",
                        prompts=[[1] * 16] * requests, output_len=tokens, concurrency=streams)
        cpu0, t0 = time.process_time(), time.perf_counter()
        records = asyncio.run(drive(spec))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        os.sched_setaffinity(0, set(cores))
        server.kill()
        server.join()
    failed = [r for r in records if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed: {failed[0].error}")
    chunks = sum(len(r.chunk_times_s) for r in records)
    summary = summarize_run(records)
    return {"chunks": chunks, "wall_s": wall, "client_cpu_s": cpu,
            "chunks_per_s": chunks / wall, "client_cpu_us_per_chunk": cpu / chunks * 1e6,
            "tpot_ms_mean": summary.tpot_ms_mean, "tpot_ms_median": summary.tpot_ms_median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=509)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--paced-rate", type=float, default=32000.0,
                        help="chunks/s over all streams in the skew test (10x a 64-stream cell "
                        "at 20 ms TPOT)")
    args = parser.parse_args()

    per_call = min(timeit.repeat(time.perf_counter, number=100_000, repeat=5)) / 100_000
    ceiling = _measure(args.streams, args.tokens, 0.0, args.requests)
    interval = args.streams / args.paced_rate
    paced = _measure(args.streams, args.tokens, interval, args.streams * 2)
    result = {
        "streams": args.streams,
        "timestamp_overhead_ns": per_call * 1e9,
        "ceiling_chunks_per_s": round(ceiling["chunks_per_s"]),
        "ceiling_client_cpu_us_per_chunk": round(ceiling["client_cpu_us_per_chunk"], 2),
        "paced_rate_chunks_per_s": args.paced_rate,
        "paced_true_tpot_ms": interval * 1e3,
        "paced_measured_tpot_ms_mean": round(paced["tpot_ms_mean"], 4),
        "paced_measured_tpot_ms_median": round(paced["tpot_ms_median"], 4),
        "paced_tpot_error_pct": round((paced["tpot_ms_mean"] / (interval * 1e3) - 1) * 100, 2),
        "paced_achieved_chunks_per_s": round(paced["chunks_per_s"]),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
