"""Runs of the default experiment under CPU placements, side by side: for each run the
client's and the server's mean TPOT, the burst-delivered share (``e2e.load.bursts``), what else
used the host during the measured load (``e2e.host.quiet``) and the cores the server's
process group and the load generator really had (``e2e.host.affinity``).

Until the session takes ``[server] cpus`` / ``[load] cpus`` itself, this script applies a
placement around the session: the load generator's process is pinned with ``pin_process``
and the server's ``Popen`` runs inside ``spawn_pinned``.

    python bench/placement.py --placement none --placement server=0,client=1 \
        --runs 2 --concurrency 1 --prompts 16 --output-len 128 --results /tmp/placement

One JSON line per run on stdout (and in <results>/placement.jsonl); placements are
interleaved run by run (round k of every placement before round k+1).

    python bench/placement.py --table /tmp/placement/placement.jsonl [more]   # Markdown table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

from e2e.session import server as server_module
from e2e.host.affinity import describe_affinity, format_cpus, pin_process, spawn_pinned
from e2e.load.bursts import burst_summary
from e2e.plan import RunSpec
from e2e.host.quiet import noise, snapshot, with_descendants
from e2e.session.session import SessionOptions, run_unit
from e2e.results.store import next_repeat, read_requests
from e2e.session import Workloads


def _placement(text: str) -> dict[str, str | None]:
    if text == "none":
        return {"server": None, "client": None}
    parts = dict(item.split("=", 1) for item in text.split(";"))
    return {"server": parts.get("server"), "client": parts.get("client")}


class _Watched:
    """A workload whose measured load is bracketed by host snapshots."""

    def __init__(self, inner, facts: dict):
        self.inner, self.facts = inner, facts

    def warmup(self, server):
        self.inner.warmup(server)

    def measure(self, server, folder):
        pgid = getattr(server, "pgid", None)
        if pgid:
            self.facts["server_cores"] = describe_affinity(pgid)
        self.facts["client_cores"] = sorted(os.sched_getaffinity(0))
        before = snapshot(gpu=False)
        try:
            self.inner.measure(server, folder)
        finally:
            after = snapshot(gpu=False)
            own = with_descendants(after, {os.getpid()})
            self.facts["noise"] = noise(before, after, own_pids=own)

    def record(self, info, folder):
        return self.inner.record(info, folder)


def _bursts(run: dict):
    """The run's burst summary under the current rule (recomputed from requests.parquet, so
    that a table of old runs follows ``e2e.load.bursts``)."""
    tpot = run["server_tpot_ms"] / 1e3 if run["server_tpot_ms"] else None
    return burst_summary(read_requests(Path(run["run"]) / "requests.parquet"), server_tpot_s=tpot)


def _table(paths: list[Path]) -> None:
    print("| placement | round | client TPOT ms | server TPOT ms | client / server | "
          "burst-delivered | TPOT-affected | server's cores | client's cores | others, cores "
          "| load avg |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            b = _bursts(r)
            print(f"| {r['placement']} | {r['round']} | {r['client_tpot_ms']:.3f} | "
                  f"{r['server_tpot_ms']:.3f} | {r['client_over_server']:.3f} | "
                  f"{b.flagged}/{b.judged} | {b.tpot_affected}/{b.judged} | "
                  f"{format_cpus(r['server_cores'] or [])} | "
                  f"{format_cpus(r['client_cores'] or [])} | {r['other_cpu_share']:.2f} | "
                  f"{r['loadavg_after'][0]:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placement", action="append", default=[],
                        help="'none' or 'server=CPUS;client=CPUS' (either may be left out)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--results", type=Path)
    parser.add_argument("--table", type=Path, nargs="+", help="print these JSON lines files "
                        "as one Markdown table and exit")
    parser.add_argument("--lock-wait", type=float, default=3600.0)
    args = parser.parse_args()
    if args.table:
        _table(args.table)
        return
    if args.results is None:
        parser.error("--results is required")

    from e2e.config import load_experiment

    experiment = load_experiment(None).override("server", lock_wait_s=args.lock_wait)
    full = os.sched_getaffinity(0)
    real_popen = subprocess.Popen
    out = args.results / "placement.jsonl"
    args.results.mkdir(parents=True, exist_ok=True)
    for round_ in range(1, args.runs + 1):
        for text in args.placement or ["none"]:
            place = _placement(text)
            facts: dict = {}
            # the server inherits this process's mask: with only the client pinned, start
            # the server on every core explicitly, or it would share the client's set
            server_cpus = place["server"] or (format_cpus(full) if place["client"] else None)

            def popen(*a, **kw):
                with spawn_pinned(server_cpus) as placed:
                    facts["server_placement"] = placed
                    return real_popen(*a, **kw)

            server_module.subprocess.Popen = popen  # type: ignore[attr-defined]
            client = pin_process(place["client"])
            try:
                results = args.results / (text.replace(";", "_").replace("=", "") or "none")
                spec = RunSpec.resolve(experiment, arm="main", concurrency=args.concurrency,
                                       dspark=False, prompts=args.prompts,
                                       output_len=args.output_len)
                spec = spec.model_copy(update={"repeat": next_repeat(results, experiment.name,
                                                                     spec.cell)})
                options = SessionOptions(progress=False, workloads=lambda *a: _Watched(
                    Workloads()(*a), facts))
                folder, record = run_unit(experiment, spec, results, options)
            finally:
                server_module.subprocess.Popen = real_popen  # type: ignore[attr-defined]
                for tid in os.listdir("/proc/self/task"):
                    os.sched_setaffinity(int(tid), full)
            metrics = record.metrics
            server_tpot = metrics.server_tpot_ms_mean if metrics else None
            bursts = burst_summary(read_requests(folder / "requests.parquet"),
                                   server_tpot_s=server_tpot / 1e3 if server_tpot else None)
            hn = facts.get("noise")
            row = {
                "placement": text, "round": round_, "run": str(folder), "valid": record.valid,
                "client_tpot_ms": metrics.tpot_ms_mean if metrics else None,
                "server_tpot_ms": server_tpot,
                "client_over_server": (metrics.tpot_ms_mean / server_tpot
                                       if metrics and server_tpot else None),
                "burst_share": bursts.share, "burst_flagged": bursts.flagged,
                "spread_median": bursts.spread_median,
                "server_applied": getattr(facts.get("server_placement"), "applied", None),
                "server_refused": getattr(facts.get("server_placement"), "refused", None),
                "server_cores": facts.get("server_cores"),
                "client_applied": client.applied, "client_cores": facts.get("client_cores"),
                "other_cpu_share": hn.other_cpu_share if hn else None,
                "steal_share": hn.steal_share if hn else None,
                "loadavg_after": hn.loadavg_after if hn else None,
                "top_other": [f"{p.pid} {p.name} {p.share:.2f}" for p in hn.top_other[:3]]
                if hn else None,
            }
            line = json.dumps(row)
            print(line, flush=True)
            with open(out, "a") as handle:
                handle.write(line + "\n")


if __name__ == "__main__":
    main()
