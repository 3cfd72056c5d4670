"""A bank of real duet noise: A/A nights of the embedded nightly recorded on this host, kept as
test data (``tests/data/noise_bank/duets.csv``) for simulations that resample real noise
instead of a model of it.

``record`` reads the runs of nightly folders (``<results>/nightly/<date>/<experiment>/``,
``e2e nightly`` with the embedded config: ``main`` and ``reference`` are the same build, so
every duet is A/A) and appends one row per duet in time order: the condition it was recorded
under (``--condition``: quiet, cpu-hog, membw-hog, e2e-beside, ...), the night, the round, when
it started, which slot ``main`` held first, each side's server mean TPOT (the nightly's judged
metric) and recorded interference (other processes' share of a core), and the log ratio
main ÷ reference, the value the nightly judges::

    env PYTHONPATH=$PWD python bench/noise_bank.py record /tmp/bank/quiet --condition quiet \\
        --out tests/data/noise_bank/duets.csv

``summary`` prints, per condition and night, the duets' count, the sd of the log ratio, the
lag-1 autocorrelation within nights and the night means::

    env PYTHONPATH=$PWD python bench/noise_bank.py summary tests/data/noise_bank/duets.csv

Simulations draw from the bank (``bench/nightly_series_simulation.py --noise bank``): a
simulated night takes one recorded night's duets in time order (a block), so the correlation
within a night survives, and the night-to-night differences are those the recorded nights show.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

COLUMNS = ["condition", "night", "round", "duet", "started_at", "main_slot", "main_tpot_ms",
           "reference_tpot_ms", "main_interference", "reference_interference", "log_ratio"]
METRIC = "server_tpot_ms_mean"


def duet_rows(folder: Path, condition: str) -> list[dict]:
    """One row per duet of the nightly folder ``folder`` with both sides valid, by start."""
    from e2e.results.store import load_records

    records, _ = load_records(folder)
    sides: dict[str, dict[str, object]] = defaultdict(dict)
    for r in records:
        if r.valid and r.duet is not None and r.metrics is not None:
            sides[r.duet.id][r.spec.arm] = r
    night = folder.parent.name
    rows = []
    for duet, pair in sides.items():
        main, ref = pair.get("main"), pair.get("reference")
        if main is None or ref is None:
            continue
        a, b = getattr(main.metrics, METRIC), getattr(ref.metrics, METRIC)
        if not a or not b or a <= 0 or b <= 0:
            continue

        def busy(r):
            return (round(r.host_noise.other_cpu_share, 4) if r.host_noise is not None
                    else "")

        rows.append({"condition": condition, "night": night, "round": main.spec.repeat,
                     "duet": duet, "started_at": min(main.started_at, ref.started_at),
                     "main_slot": main.duet.slot, "main_tpot_ms": round(a, 6),
                     "reference_tpot_ms": round(b, 6), "main_interference": busy(main),
                     "reference_interference": busy(ref),
                     "log_ratio": round(math.log(a / b), 8)})
    return sorted(rows, key=lambda row: row["started_at"])


def nightly_folders(root: Path) -> list[Path]:
    """Every ``nightly/<date>/<experiment>`` folder under ``root`` (or ``root`` itself)."""
    if any(root.glob("*/run.json")):
        return [root]
    return sorted(p.parent for p in root.glob("nightly/*/*/night.json"))


def record(a) -> None:
    rows = [row for folder in nightly_folders(Path(a.results))
            for row in duet_rows(folder, a.condition)]
    if not rows:
        sys.exit(f"no A/A duets under {a.results}")
    out = Path(a.out)
    old = []
    if out.exists():
        with out.open(newline="") as f:
            old = [r for r in csv.DictReader(f)
                   if (r["condition"], r["night"]) not in {(x["condition"], x["night"])
                                                          for x in rows}]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(old + rows)
    tmp.replace(out)
    print(f"{len(rows)} duets of {len({r['night'] for r in rows})} night(s) "
          f"({a.condition}) -> {out}")


def read_bank(path: Path) -> dict[tuple[str, str], list[float]]:
    """{(condition, night): log ratios in time order}."""
    nights: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    with Path(path).open(newline="") as f:
        for r in csv.DictReader(f):
            nights[(r["condition"], r["night"])].append((r["started_at"], float(r["log_ratio"])))
    return {k: [x for _, x in sorted(v)] for k, v in nights.items()}


def summary(a) -> None:
    import numpy as np

    by_cond: dict[str, list[list[float]]] = defaultdict(list)
    print("condition   night        duets  sd %   lag-1   mean %")
    for (cond, night), xs in sorted(read_bank(a.bank).items()):
        x = np.asarray(xs)
        lag = (float(np.corrcoef(x[:-1], x[1:])[0, 1]) if len(x) > 2 and x.std() > 0
               else float("nan"))
        print(f"{cond:<11} {night:<12} {len(x):>5}  {100 * x.std(ddof=1):5.2f}  {lag:+.2f}  "
              f"{100 * x.mean():+6.2f}")
        by_cond[cond].append(xs)
    for cond, nights in by_cond.items():
        within = np.sqrt(np.mean([np.var(n, ddof=1) for n in nights]))
        means = [np.mean(n) for n in nights]
        between = np.std(means, ddof=1) if len(means) > 1 else float("nan")
        print(f"{cond}: {len(nights)} night(s), {sum(map(len, nights))} duets; within-night sd "
              f"{100 * within:.2f} %, sd of night means {100 * between:.2f} %")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("results")
    r.add_argument("--condition", required=True)
    r.add_argument("--out", default="tests/data/noise_bank/duets.csv")
    s = sub.add_parser("summary")
    s.add_argument("bank", nargs="?", default="tests/data/noise_bank/duets.csv")
    a = p.parse_args()
    {"record": record, "summary": summary}[a.what](a)


if __name__ == "__main__":
    main()
