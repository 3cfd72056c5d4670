"""`vllm bench serve --request-rate` over a dense grid of rates on e2e's server, and the
capacity read off it with e2e's own rule, to check `e2e capacity` against (docs/explanation/load.md,
"Capacity at an SLO").

The grid is run ``--passes`` times, each pass in an order shuffled by a seed and split over
fresh servers, ``--rates-per-server`` rates each; every server is the one e2e starts for
``--arm`` (its launch, its CPU set, the host's server lock held while it runs: ``e2e.session``)
and on it `vllm bench serve` (the server's own vLLM, through its module, pinned to the
config's load CPUs) runs its rates one after another, each with ``--save-result
--save-detailed``. Every result is read through e2e's import (``e2e.interop``), its goodput
share is e2e's over the imported requests, and its SLO margin is
``e2e.analysis.capacity.capacity_margin``; the capacity is where the mean margin over the servers
crosses 0, interpolated in log rate between the highest grid rate whose mean margin meets the
objective and the next rate (the rule ``e2e capacity`` applies at its boundary). Rerun to
resume: a result file already there is not measured again.

    python bench/capacity_grid.py -c configs/calibration.toml --arm main \
        --rates 1.5,1.75,2,2.25,2.5,2.75,3,3.5,4 --prompts 80 --input-len 128 \
        --output-len 64 --slo tpot=10ms,ttft=500ms --goodput 90 --passes 2 --out /tmp/grid
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from e2e.analysis.capacity.criterion import capacity_margin, capacity_margin_terms
from e2e.config import load_experiment
from e2e.interop.importing import ImportOptions
from e2e.interop.vllm_bench import read_results, to_run
from e2e.metrics import goodput
from e2e.results.capacity import objective_of
from e2e.session import server_launch
from e2e.session.server import ServerOptions, serve

VLLM_BENCH = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")


def _bench(python: Path, base_url: str, model: str, rate: float, out: Path, a, slo) -> None:
    goodput_args = [f"{k}:{v:g}" for k, v in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms),
                                              ("e2el", slo.e2e_ms)) if v is not None]
    cmd = [str(python), "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", base_url,
           "--model", model, "--dataset-name", "random", "--random-input-len", str(a.input_len),
           "--random-output-len", str(a.output_len), "--num-prompts", str(a.prompts),
           "--request-rate", f"{rate:g}", "--burstiness", "1", "--seed", str(a.seed),
           "--num-warmups", "2", "--temperature", "0", "--ignore-eos",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
           "--goodput", *goodput_args, "--save-result", "--save-detailed",
           "--result-dir", str(out.parent), "--result-filename", out.name + ".tmp"]
    if a.client_cpus:
        cmd = ["taskset", "-c", a.client_cpus, *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (out.parent / (out.name + ".tmp")).rename(out)


def _row(path: Path, a, objective) -> dict:
    result = read_results(path)[0]
    run = to_run(result, ImportOptions(experiment="grid", arm=a.arm, concurrency=1,
                                       dspark=False, input_len=a.input_len,
                                       output_len=a.output_len, prompts=a.prompts),
                 source=str(path))
    met = goodput(run.requests or (), objective.slo)  # e2e's share, over the same requests
    metrics = run.record.metrics.model_copy(update={"goodput_share": met.share})
    return {"file": path.name, "rate": float(result["request_rate"]),
            "margin": capacity_margin(metrics, objective),
            "terms": capacity_margin_terms(metrics, objective),
            "p99_tpot_ms": metrics.tpot_ms_p99, "p99_ttft_ms": metrics.ttft_ms_p99,
            "goodput_share": met.share, "vllm_request_goodput": result.get("request_goodput"),
            "request_throughput": result.get("request_throughput")}


def read_capacity(rows: list[dict]) -> dict:
    """The grid's capacity: the crossing of the per-rate mean margin, as e2e's rule reads it."""
    rates = sorted({r["rate"] for r in rows})
    means = [float(np.mean([r["margin"] for r in rows if r["rate"] == x])) for x in rates]
    first_fail = next((i for i, m in enumerate(means) if m < 0), None)
    if first_fail is None or first_fail == 0:
        return {"rates": rates, "mean_margin": means, "capacity": None,
                "why": "the grid does not bracket the boundary"}
    i = first_fail - 1
    lo, hi, mlo, mhi = rates[i], rates[first_fail], means[i], means[first_fail]
    c = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * mlo / (mlo - mhi))
    return {"rates": rates, "mean_margin": means, "lo": lo, "hi": hi, "capacity": c}


def _stop(*_):
    raise KeyboardInterrupt  # SIGTERM too stops the server (the serve context's own finally)


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--config", type=Path)
    p.add_argument("--arm", default="main")
    p.add_argument("--rates", required=True, help="comma-separated requests/s")
    p.add_argument("--prompts", type=int, default=80)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slo", required=True)
    p.add_argument("--goodput", type=float, default=90.0)
    p.add_argument("--p99", default=None)
    p.add_argument("--passes", type=int, default=2, help="times the whole grid is run")
    p.add_argument("--rates-per-server", type=int, default=3,
                   help="rates measured on one fresh server (a short hold of the host's lock)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--lock-wait", type=float, default=None,
                   help="seconds to wait for the host's server lock (default: the config's)")
    a = p.parse_args()
    objective = objective_of(a.slo, a.goodput, a.p99)
    experiment = load_experiment(a.config).override("server", lock_wait_s=a.lock_wait)
    a.client_cpus = experiment.load.cpus
    rates = [float(x) for x in a.rates.split(",")]
    a.out.mkdir(parents=True, exist_ok=True)
    launch = server_launch(experiment, a.arm, dspark=False, progress=print)
    for s in range(1, a.passes + 1):
        order = [rates[i] for i in np.random.default_rng([a.seed, s]).permutation(len(rates))]
        for c in range(0, len(order), a.rates_per_server):
            chunk = order[c:c + a.rates_per_server]
            files = {r: a.out / f"p{s}-rate{r:g}.json" for r in chunk}
            if all(f.exists() for f in files.values()):
                continue
            print(f"pass {s}: a fresh server for the rates {chunk}", flush=True)
            log = a.out / f"p{s}-server{c // a.rates_per_server + 1}.log"
            with serve(launch, log, ServerOptions.of(experiment.server)) as server:
                for r in chunk:
                    if not files[r].exists():
                        _bench(launch.python, server.base_url, launch.tokenizer or launch.model,
                               r, files[r], a, objective.slo)
                        print(f"  pass {s} rate {r:g}: {_row(files[r], a, objective)}", flush=True)
    rows = [_row(f, a, objective) for f in sorted(a.out.glob("p*-rate*.json"))]
    summary = {"objective": str(objective), "rows": rows, **read_capacity(rows)}
    (a.out / "grid.json").write_text(json.dumps(summary, indent=2) + "\n")
    for x, m in zip(summary["rates"], summary["mean_margin"]):
        print(f"rate {x:g}: mean margin {m:+.3f} "
              f"({'meets' if m >= 0 else 'misses'}; {sum(r['rate'] == x for r in rows)} server(s))")
    print(f"grid capacity: {summary['capacity']}", file=sys.stdout)


if __name__ == "__main__":
    main()
