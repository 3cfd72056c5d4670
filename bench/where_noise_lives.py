"""What makes one fresh server slower than the next? (issue 23, item 8)

Reads a finished sweep (best one with ``[load] windows`` > 1, e.g. configs/calibration.toml) and
relates each server's own level to what run.json recorded about it:

    python bench/where_noise_lives.py results/calibration [--metric tpot_ms_mean]

A server's level is its run's ln(metric) minus its arm's and its round's effects (statsmodels
OLS of ln y on arm + round over the valid reported runs; the residual is the per-server part,
drift between rounds removed). Each candidate cause is a number per run: the server's
transparent-huge-page MiB and resident MiB after the load, the CPU share other processes took
and the hypervisor's steal during the load, the 1-minute load average before it, the server
core's MHz, the slot in its round (how many servers started before it in the round) and the
first window's excess over the server's later windows (the first requests after a fresh
start). Printed: the variance components (e2e's own noise table), then Spearman's rank
correlation of the level with each candidate, with its p-value and the number of runs. A
correlation is a lead, not a cause: with 20 servers |rho| must exceed ~0.44 to reach p < 0.05.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats

from e2e.analysis.sweep.aggregate import summarize
from e2e.metrics import metric_value
from e2e.results.store import load_records


def candidates(record, key: str) -> dict[str, float | None]:
    mem = record.placement.server_memory if record.placement else None
    noise = record.host_noise
    cores = (record.placement.server.applied or []) if record.placement and record.placement.server else []
    freq = None
    if noise is not None and noise.freq_mhz_after and cores:
        freq = noise.freq_mhz_after.get(str(cores[0]))
    windows = [metric_value(w, key) for w in record.windows]
    first = None
    if len(windows) >= 2 and all(v and v > 0 for v in windows):
        first = math.log(windows[0]) - float(np.mean([math.log(v) for v in windows[1:]]))
    return {
        "THP MiB": None if mem is None else mem.anon_huge_mib,
        "resident MiB": None if mem is None else mem.rss_mib,
        "other processes' CPU share": None if noise is None else noise.other_cpu_share,
        "steal share": None if noise is None else noise.steal_share,
        "load average before": None if noise is None else noise.loadavg_before[0],
        "server core MHz": freq,
        "first window excess (ln)": first,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--metric", default="tpot_ms_mean")
    ap.add_argument("--baseline", default="main")
    args = ap.parse_args(argv)
    records, problems = load_records(args.folder)
    for p in problems:
        print(f"skipped: {p.message if hasattr(p, 'message') else p}", file=sys.stderr)
    summary = summarize(records, baseline=args.baseline)
    start = summary.report_from_run
    rows = []
    for r in records:
        value = metric_value(r.metrics, args.metric)
        if not r.valid or r.spec.repeat < start or not value or value <= 0:
            continue
        rows.append({"arm": r.spec.arm, "round": r.spec.repeat, "started": str(r.started_at),
                     "y": math.log(value), **candidates(r, args.metric)})
    frame = pd.DataFrame(rows)
    if len(frame) < 4:
        print("fewer than 4 reported runs: nothing to relate", file=sys.stderr)
        return 2
    frame["slot"] = frame.groupby("round")["started"].rank(method="first") - 1
    fit = smf.ols("y ~ C(arm) + C(round)", data=frame).fit()
    frame["level"] = fit.resid
    row = next((n for n in summary.noise if n.metric == args.metric), None)
    print(f"{args.folder}: {len(frame)} reported runs, metric {args.metric}")
    if row is not None and row.components is not None:
        c = row.components
        print(f"variance components: between servers {c.between_sd * 100:.2f} %, within a server "
              f"{c.within_sd * 100:.2f} % per window ({c.windows} windows × {c.runs} runs, "
              f"{c.within_df} df), {c.between_share:.0%} of a run's variance between servers; "
              f"first window {c.first_window * 100:+.2f} % ± {(c.first_window_se or 0) * 100:.2f}")
    print(f"per-server level (residual of ln y ~ arm + round): sd {frame['level'].std(ddof=1) * 100:.2f} % "
          f"on {int(fit.df_resid)} df")
    print()
    print("| candidate | runs | Spearman rho | p | range |")
    print("|---|---:|---:|---:|---|")
    for name in ["slot", *candidates(records[0], args.metric)]:
        sub = frame[["level", name]].dropna()
        if len(sub) < 4 or sub[name].nunique() < 2:
            print(f"| {name} | {len(sub)} | — | — | constant or missing |")
            continue
        rho, p = stats.spearmanr(sub["level"], sub[name])
        print(f"| {name} | {len(sub)} | {rho:+.2f} | {p:.3f} | "
              f"{sub[name].min():.4g}–{sub[name].max():.4g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
