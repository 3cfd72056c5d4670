"""Per-window figures of a swapping duet folder (docs/explanation/statistics.md, "Swapping the sides' cores").

    python bench/duet_windows.py RESULTS/calibration [SEQUENTIAL/calibration]

For each duet: the log ratio of its two sides in each load window, less its arm pair's mean;
the residual sd of a duet's ratio from windows {0, 2} (both sides on their own cores, as
without a swap), {0, 1} (one swap) and all windows; the difference between the two cores; and,
for every folder given, each window's ln TPOT less its run's mean.
"""

from __future__ import annotations

import math
import statistics as st
import sys
from collections import Counter, defaultdict
from pathlib import Path

from e2e.results.records import RunRecord
from e2e.results.store import load_records


def _windows(run: RunRecord) -> list[float]:
    """The run's ln mean TPOT per load window ([] for a run without windows)."""
    return [math.log(w.tpot_ms_mean) for w in run.windows if w.tpot_ms_mean]


def _valid(root: Path) -> list[RunRecord]:
    records, problems = load_records(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return [r for r in records if r.valid and len(_windows(r)) > 1]


def duets(root: Path) -> None:
    sides: dict[str, dict[int, RunRecord]] = defaultdict(dict)
    for run in _valid(root):
        if run.duet is not None:
            sides[run.duet.id][run.duet.slot] = run
    rows = []
    for pair in sides.values():
        if len(pair) == 2:
            a, b = pair[0], pair[1]
            diffs = [x - y for x, y in zip(_windows(a), _windows(b))]
            sign = 1 if a.spec.arm < b.spec.arm else -1
            rows.append((tuple(sorted((a.spec.arm, b.spec.arm))), sign, diffs))
    placed = Counter((tuple(run.duet.window_slots or ()),
                      tuple(tuple(c) for c in run.duet.window_server_cores or ()))
                     for pair in sides.values() for run in pair.values())
    for (slots, cores), n in sorted(placed.items()):
        print(f"{n} sides: window slots {list(slots)}, server cores read back {[list(c) for c in cores]}")
    core = [(st.mean(d[0::2]) - st.mean(d[1::2])) / 2 for _, _, d in rows]
    print(f"{len(rows)} duets; slot 0's core minus slot 1's: mean {100 * st.mean(core):+.1f} %, "
          f"sd {100 * st.stdev(core):.1f} % over duets")
    for name, pick in (("windows {0,2}, no swap", [0, 2]), ("windows {0,1}, one swap", [0, 1]),
                       ("every window", None)):
        by = defaultdict(list)
        for pair, sign, d in rows:
            by[pair].append(sign * st.mean(d if pick is None else [d[i] for i in pick]))
        res = [x - st.mean(v) for v in by.values() for x in v]
        df = len(res) - len(by)
        print(f"  {name}: residual sd of a duet's ln ratio {100 * math.sqrt(sum(r * r for r in res) / df):.1f} % ({df} df)")


def trend(root: Path) -> None:
    rows = [[x - st.mean(w) for x in w] for w in map(_windows, _valid(root))]
    cols = [f"{100 * st.mean(c):+.1f} ± {100 * st.stdev(c) / math.sqrt(len(c)):.1f}" for c in zip(*rows)]
    print(f"{root}: {len(rows)} runs; window k less its run's mean (ln, %): {', '.join(cols)}")


if __name__ == "__main__":
    duets(Path(sys.argv[1]))
    for folder in sys.argv[1:]:
        trend(Path(folder))
