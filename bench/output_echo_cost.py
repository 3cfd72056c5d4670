"""What asking the server for the token ids costs the server: loads with and without vLLM's
``return_token_ids`` (each chunk's new token ids, and the whole prompt echoed in the first
chunk), interleaved on the same fresh server, so that the server-to-server spread (most of a
run's variance on a shared host) cancels.

Per fresh server (``--servers``): one warmup load, then ``--pairs`` pairs of loads, each pair
one load with and one without in alternating order (ABBA...), each load with prompts of its
own (no prefix-cache hit). Per load: the server's mean TTFT and TPOT (its own histograms,
``/metrics`` scraped before and after the load), the client's, and the CPU share other
processes took meanwhile. Printed: the per-pair log ratio with / without, its mean as a
percentage and a 95 % t interval over all pairs, and how noisy the host was.

    python bench/output_echo_cost.py [--config configs/default.toml] [--servers 2]
        [--pairs 6] [--concurrency 1] [--prompts 8] [--output-len 509]

Holds the host's server lock while its servers run (as e2e does), so it waits for other
servers on this host first.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from scipy import stats

from e2e import metrics as m
from e2e.config import load_experiment
from e2e.host import noise, pinned_process, snapshot, with_descendants
from e2e.load.generator import LoadSpec, make_prompts, run_measured_load, vocabulary
from e2e.session import server_launch
from e2e.session.server import ServerOptions, serve

FIGURES = ("server_ttft_ms", "server_tpot_ms", "client_ttft_ms", "client_tpot_ms")


def one_load(server, launch, experiment, prompts, *, record: bool, concurrency: int,
             output_len: int) -> dict:
    kind = launch.kind
    spec = LoadSpec(base_url=server.base_url, model=launch.model, prompts=prompts,
                    output_len=output_len, concurrency=concurrency, headers=server.headers(),
                    record_outputs=record)
    before_host = snapshot(gpu=False)
    before = m.parse_samples(server.scrape_metrics())
    with pinned_process(experiment.load.cpus):
        outcome = run_measured_load(spec, progress=False)
    after = m.parse_samples(server.scrape_metrics())
    after_host = snapshot(gpu=False)
    own = with_descendants(after_host, {os.getpid(), server.pgid})
    host = noise(before_host, after_host, own_pids=own)
    failed = [r for r in outcome.records if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} request(s) failed: {failed[0].error}")
    recorded = sum(r.output_token_ids is not None for r in outcome.records)
    if recorded != (len(prompts) if record else 0):
        raise SystemExit(f"{recorded} of {len(prompts)} outputs recorded (record={record})")
    summary = m.summarize_run(outcome.records)
    ttft = m.histogram_mean_delta(before, after, kind.server_ttft_metric)
    tpot = m.histogram_mean_delta(before, after, kind.server_tpot_metric)
    return {"record": record, "server_ttft_ms": ttft * 1e3, "server_tpot_ms": tpot * 1e3,
            "client_ttft_ms": summary.ttft_ms_mean, "client_tpot_ms": summary.tpot_ms_mean,
            "other_cpu_share": round(host.other_cpu_share, 3),
            "steal_share": round(host.steal_share, 4), "wall_s": round(host.wall_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="an experiment config (default: the "
                        "embedded default)")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=None)
    parser.add_argument("--lock-wait", type=float, default=3600.0,
                        help="seconds to wait for another e2e's server on this host")
    args = parser.parse_args()
    if args.servers * args.pairs < 2:
        raise SystemExit("give at least 2 pairs in all (--servers x --pairs)")
    experiment = load_experiment(args.config)
    output_len = args.output_len or experiment.load.output_len
    launch = server_launch(experiment, "main", dspark=False, progress=print)
    vocab, specials = vocabulary(launch.tokenizer or launch.model)
    loads: list[dict] = []
    stream = 100
    with tempfile.TemporaryDirectory() as scratch:
        for s in range(args.servers):
            log = Path(scratch) / f"server-{s}.log"
            options = replace(ServerOptions.of(experiment.server), lock_wait_s=args.lock_wait)
            with serve(launch, log, options) as server:

                def prompts() -> list[list[int]]:
                    nonlocal stream
                    stream += 1
                    return make_prompts(args.prompts, experiment.load.input_len,
                                        vocab_size=vocab, exclude=specials, seed=0,
                                        stream=stream)

                one_load(server, launch, experiment, prompts(), record=True,
                         concurrency=args.concurrency, output_len=output_len)  # warmup
                for p in range(args.pairs):
                    order = (True, False) if (p + s) % 2 == 0 else (False, True)
                    for record in order:
                        row = one_load(server, launch, experiment, prompts(), record=record,
                                       concurrency=args.concurrency, output_len=output_len)
                        loads.append({"server": s, "pair": p, **row})
                        print(json.dumps(loads[-1]), flush=True)
    result: dict = {"servers": args.servers, "pairs_per_server": args.pairs,
                    "concurrency": args.concurrency, "prompts_per_load": args.prompts,
                    "input_len": experiment.load.input_len, "output_len": output_len,
                    "other_cpu_share_median": statistics.median(r["other_cpu_share"]
                                                                for r in loads),
                    "other_cpu_share_max": max(r["other_cpu_share"] for r in loads),
                    "load_average_1min_end": os.getloadavg()[0]}
    for key in FIGURES:
        on = {(r["server"], r["pair"]): r[key] for r in loads if r["record"]}
        off = {(r["server"], r["pair"]): r[key] for r in loads if not r["record"]}
        logs = [math.log(on[k] / off[k]) for k in on]
        if len(logs) < 2:
            raise SystemExit("give at least 2 pairs in all (--servers x --pairs)")
        mean, sd = statistics.mean(logs), statistics.stdev(logs)
        half = stats.t.ppf(0.975, len(logs) - 1) * sd / math.sqrt(len(logs))
        result[key] = {
            "with_median": round(statistics.median(on.values()), 3),
            "without_median": round(statistics.median(off.values()), 3),
            "with_over_without_pct": round((math.exp(mean) - 1) * 100, 2),
            "ci95_pct": [round((math.exp(mean - half) - 1) * 100, 2),
                         round((math.exp(mean + half) - 1) * 100, 2)],
            "pair_log_ratio_sd_pct": round(sd * 100, 2), "pairs": len(logs)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
