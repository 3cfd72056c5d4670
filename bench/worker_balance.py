"""Do two client processes take twice one's chunks/s, and if not, is it e2e or the cores?

Against bench/load_ceiling.py's scripted server (as fast as it can, ``--server-procs`` processes
on the last cores), 64 streams x 509 tokens, three ways, ``--rounds`` times:

1. ``run_workers``: e2e's two pinned client processes (records sent back one by one, merged);
2. bare: the same two shards in two pinned processes that only run the load and send back
   their usage at the end (no per-record traffic to the parent);
3. one process on the first core with one shard's load (32 streams, half the requests).

Each process's wall time and share of a core are printed. Two processes with identical shards
that both run at 100 % of a core but take different times ran on cores of different speed (a
virtual machine's vCPUs that share physical cores with other work): that is the machine, not
the client, and (1) close to (2) says the merging costs nothing that matters.

    python bench/worker_balance.py [--server-procs 8] [--requests 2048] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_ceiling import _pinned, _server  # noqa: E402

from e2e.host.affinity import spread_cores  # noqa: E402
from e2e.load.generator import LoadSpec, split_load, run_measured_load  # noqa: E402
from e2e.load.stream import run_loop, run_shard  # noqa: E402
from e2e.load.workers import run_workers  # noqa: E402


def _bare(spec, shard, core: int, t0: float, conn) -> None:
    os.sched_setaffinity(0, {core})
    _, usage = run_loop(run_shard(spec, shard, t0))
    conn.send(usage)


def _row(usages) -> dict:
    wall = max(u.wall_s for u in usages)
    return {"chunks_per_s": round(sum(u.chunks for u in usages) / wall),
            "per_process": [{"wall_s": round(u.wall_s, 3), "core_share": round(u.cpu_s / u.wall_s, 2),
                             "chunks": u.chunks} for u in usages]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-procs", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cores = spread_cores(os.sched_getaffinity(0))
    rounds = []
    with _server(0.0, procs=args.server_procs) as url:
        for _ in range(args.rounds):
            spec = LoadSpec(base_url=url, model="m", prompts=[[1] * 16] * args.requests,
                            output_len=509, concurrency=64, workers=2)
            shards = split_load(spec, None)  # a closed loop: no schedule
            _, usages = run_workers(replace(spec, prompts=()), shards)
            row = {"run_workers": _row(usages)}

            ctx = mp.get_context("spawn")
            t0 = time.perf_counter() + 2.0  # after both have started
            pipes, procs = [], []
            for k, shard in enumerate(shards):
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_bare, args=(spec, shard, cores[k], t0, send))
                proc.start()
                pipes.append(receive)
                procs.append(proc)
            row["bare"] = _row([p.recv() for p in pipes])
            for proc in procs:
                proc.join()

            one = replace(spec, prompts=spec.prompts[: args.requests // 2], concurrency=32,
                          workers=1)
            with _pinned(cores[:1]):
                client = run_measured_load(one, progress=False).client
            row["one_process_half_load"] = {"chunks_per_s": round(client.chunks / client.wall_s),
                                            "core_share": round(client.core_share, 2)}
            rounds.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
