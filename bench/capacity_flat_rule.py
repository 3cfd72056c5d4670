"""The flat-curve widening (``_widen`` in e2e/analysis/capacity/estimate.py) beside the line's interval
alone, over the same searches: how often each closes, how often a closed one covers the truth
(± one Monte Carlo standard error), its median high/low.

The widening only moves the ends of the profile interval, so the line's estimate is made once:
``record`` estimates every search that ``bench/capacity_search_simulation.py --save-runs``
saved with an estimate file (main's, from ``git show <rev>:e2e/analysis/capacity/estimate.py >
main.py``) and writes its interval, spread and df per arm (JSON lines; ``--skip N`` appends from
search N); ``compare`` applies the working tree's ``_widen`` to each record (seconds).

    python bench/capacity_search_simulation.py --sims 1000 --repeats 3 --shape plateau --seed 1 --save-runs plateau3.jsonl
    python bench/capacity_flat_rule.py record plateau3.jsonl main.py rec_plateau3.jsonl --sims 300
    python bench/capacity_flat_rule.py compare plateau3.jsonl rec_plateau3.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capacity_replay import load  # noqa: E402

_ESTIMATOR = ""


def _record(search: dict) -> dict:
    mod = load(_ESTIMATOR)
    out = {}
    for arm, got in search["arms"].items():
        if got is None:
            continue
        runs = [mod.MarginRun(r, m, c) for r, m, c in got["runs"]]
        e = mod.capacity_estimate(runs, lo=got["lo"], hi=got["hi"])
        out[arm] = {"low": e.low, "high": e.high, "rate": e.rate, "spread": e.spread,
                    "method": e.method}
    return out


def _screen(search: dict) -> list[str]:
    """The arms whose interval the widening could move: some rate whose runs are all within
    the band and whose noise at the smallest quantile (1.96) and 1.25 times the spread of the
    line's best fit is narrower than the band (``_widen``'s condition, loosened so that the
    estimate's own fit and quantile cannot pass where this did not)."""
    mod = load(str(Path(__file__).resolve().parents[1] / "e2e/analysis/capacity/estimate.py"))
    out = []
    for arm, got in search["arms"].items():
        if got is None:
            continue
        runs = [mod._near(mod.MarginRun(r, m, c)) for r, m, c in got["runs"]]
        if all(u.margin >= 0 for u in runs) or not any(u.margin >= 0 for u in runs):
            continue
        prof = mod._Profile(runs)
        x = np.log([u.rate for u in runs])
        starts = [np.array([a, b, x0]) for a, b in ((0.0, 0.0), (math.log(5.0), 0.0))
                  for x0 in (x.min(), x.mean(), x.max())]
        sigma = math.exp(prof.best(starts)[1][1])
        by: dict[float, list] = {}
        for u in runs:
            by.setdefault(u.rate, []).append(u)
        if any(not any(u.censored for u in us)
               and 1.96 * sigma / 1.25 / math.sqrt(len(us)) < mod.BAND for us in by.values()):
            out.append(arm)
    return out


def _share(x: list[bool]) -> str:
    if not x:
        return "—"
    p = float(np.mean(x))
    return f"{p * 100:5.1f} % ± {math.sqrt(p * (1 - p) / len(x)) * 100:.1f} ({len(x)})"


def _ln(v: float) -> float:
    return math.log(v) if 0 < v < math.inf else (-math.inf if v == 0 else math.inf)


def compare(searches: list[dict], records: list[dict]) -> None:
    mod = load(str(Path(__file__).resolve().parents[1] / "e2e/analysis/capacity/estimate.py"))
    print(f"{len(records)} searches")
    for arm, truth in records[0]["truth"].items():
        rows: dict[str, list] = {"line alone": [], "widened": []}
        for r in records:
            e = r["est"].get(arm)
            if e is None:
                continue
            line = (_ln(e["low"]), _ln(e["high"]))
            wide = line
            if 0 < e["rate"] < math.inf:
                df = int(e["method"].split("t on ")[1].split(" df")[0])
                runs = [mod.MarginRun(a, m, c)
                        for a, m, c in searches[r["search"]]["arms"][arm]["runs"]]
                wide = mod._widen([u for u in runs if u.rate > 0 and math.isfinite(u.margin)],
                                  line, e["spread"], float(student_t.ppf(0.975, df)))
            rows["line alone"].append(line)
            rows["widened"].append(wide)
        changed = sum(a != b for a, b in zip(rows["line alone"], rows["widened"]))
        for name, ends in rows.items():
            closed = [math.isfinite(a) and math.isfinite(b) for a, b in ends]
            cover = [a <= math.log(truth) <= b for (a, b), c in zip(ends, closed) if c]
            width = np.median([math.exp(b - a) for (a, b), c in zip(ends, closed) if c])
            print(f"  {arm:6s} {name:10s} closed {_share(closed)}; closed ones cover "
                  f"{_share(cover)}; median high/low {width:.2f}")
        print(f"  {arm:6s} widened in {changed} of {len(rows['widened'])}")


def main() -> None:
    global _ESTIMATOR
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("runs")
    r.add_argument("estimator")
    r.add_argument("out")
    r.add_argument("--sims", type=int, default=0)
    r.add_argument("--skip", type=int, default=0)
    r.add_argument("--jobs", type=int, default=2)
    sc = sub.add_parser("screen", help="how many searches the widening could change at all")
    sc.add_argument("runs")
    sc.add_argument("--sims", type=int, default=0)
    sc.add_argument("--jobs", type=int, default=2)
    c = sub.add_parser("compare")
    c.add_argument("runs")
    c.add_argument("records")
    a = p.parse_args()
    searches = [json.loads(line) for line in Path(a.runs).read_text().splitlines() if line]
    if a.cmd == "compare":
        compare(searches, [json.loads(line) for line in Path(a.records).read_text().splitlines()
                           if line])
        return
    if a.cmd == "screen":
        todo = searches[:a.sims or None]
        with Pool(a.jobs) as pool:
            got = pool.map(_screen, todo, chunksize=4)
        arms = sorted({k for s in todo for k in s["arms"]})
        for arm in arms:
            hit = [s["search"] for s, g in zip(todo, got) if arm in g]
            print(f"  {arm}: the widening could move {len(hit)} of {len(todo)} intervals: {hit[:20]}")
        return
    _ESTIMATOR = str(Path(a.estimator).resolve())
    todo = searches[a.skip:a.sims or None]
    with Pool(a.jobs) as pool, open(a.out, "a" if a.skip else "w") as f:
        for s, got in zip(todo, pool.imap(_record, todo, chunksize=2)):
            f.write(json.dumps({"search": s["search"], "truth": s["truth"], "est": got}) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
