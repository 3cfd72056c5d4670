"""The burst statistics of every run under some results folders: per run, the client's mean
TPOT over the server's, how many streams are burst-delivered and TPOT-affected
(``e2e.load.bursts``), and the distribution of both per-request statistics over all streams.

    python bench/burst_stats.py /tmp/h15 [more folders]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from e2e.load.bursts import (SPREAD_THRESHOLD, burst_summary, decode_reference_s, decode_share,
                        stream_spread)
from e2e.results.store import read_requests

EDGES = [0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, float("inf")]


def _histogram(values: list[float]) -> str:
    counts, _ = np.histogram(values, bins=EDGES)
    return " | ".join(f"[{lo:g},{hi:g}): {n}" for lo, hi, n in zip(EDGES, EDGES[1:], counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    spreads: list[float] = []
    shares: list[float] = []
    print("| run | client / server mean TPOT | burst-delivered | TPOT-affected | spread median |")
    print("| --- | --- | --- | --- | --- |")
    for folder in args.folders:
        for path in sorted(folder.rglob("requests.parquet")):
            run = json.loads((path.parent / "run.json").read_text())
            metrics = run.get("metrics") or {}
            server_ms = metrics.get("server_tpot_ms_mean")
            if not server_ms:
                continue
            records = read_requests(path)
            tpot = server_ms / 1e3
            summary = burst_summary(records, server_tpot_s=tpot)
            for record in records:
                ref = decode_reference_s(record, tpot)
                value = stream_spread(record, reference_s=ref)
                if value is not None:
                    spreads.append(value)
                    shares.append(decode_share(record, reference_s=ref))
            name = str(path.parent.relative_to(folder))
            print(f"| {name} | {metrics['tpot_ms_mean'] / server_ms:.3f} | "
                  f"{summary.flagged}/{summary.judged} | {summary.tpot_affected}/{summary.judged} | "
                  f"{summary.spread_median:.3f} |")
    print(f"\nspread (against server TPOT), {len(spreads)} streams, threshold {SPREAD_THRESHOLD}:")
    print(_histogram(spreads))
    burst = [s for s, v in zip(shares, spreads) if v < SPREAD_THRESHOLD]
    paced = [s for s, v in zip(shares, spreads) if v >= SPREAD_THRESHOLD]
    print(f"decode share of burst-delivered streams ({len(burst)}):")
    print(_histogram(burst))
    print(f"decode share of the other streams ({len(paced)}):")
    print(_histogram(paced))


if __name__ == "__main__":
    main()
