"""Estimate the searches ``bench/capacity_search_simulation.py --save-runs FILE`` wrote, over
many processes, with one or more versions of e2e's estimate side by side (the same searches).

Each ``--estimator`` is a file holding e2e's estimate, ``e2e/analysis/capacity/estimate.py`` (the
working tree's by default; an earlier one from ``git show <rev>:e2e/analysis/capacity/estimate.py >
old.py``, or ``<rev>:e2e/capacity/_estimate.py`` from before it moved there), loaded from its
file. The estimate takes its records (``MarginRun``, ``Capacity``) from ``e2e.results``, so e2e
must be importable (``PYTHONPATH`` at the checkout); an ``_estimate.py`` from before the move
needs only numpy and scipy. Printed per version and arm as the simulation prints it: how often
the interval closes, how often a closed one covers the truth (± one Monte Carlo standard error,
stated level beside it), its median width and error, and the ratio's coverage and how often it
separates from 1.

    python bench/capacity_search_simulation.py --sims 800 --repeats 6 --save-runs runs6.jsonl
    python bench/capacity_replay.py runs6.jsonl --estimator old.py --estimator e2e/analysis/capacity/estimate.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

_MODULES: dict[str, object] = {}


def load(path: str):
    """The estimate module in ``path``, loaded once per process."""
    if path not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"_estimate_{len(_MODULES)}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        _MODULES[path] = module
    return _MODULES[path]


def estimate_search(job: tuple[str, dict]) -> dict:
    """One search's estimates (every arm that finished) and ratios to the first arm."""
    path, search = job
    mod = load(path)
    truth, ests = search["truth"], {}
    for arm, got in search["arms"].items():
        if got is None:
            ests[arm] = None
            continue
        runs = [mod.MarginRun(r, m, c) for r, m, c in got["runs"]]
        fit = getattr(mod, "capacity_estimate", None) or mod.estimate  # (named estimate before)
        ests[arm] = fit(runs, lo=got["lo"], hi=got["hi"])
    base = next(iter(truth))
    out = {"arms": {a: None if e is None else {"rate": e.rate, "low": e.low, "high": e.high,
                                               "closed": e.closed, "confidence": e.confidence}
                    for a, e in ests.items()}, "ratios": {}}
    for arm, e in ests.items():
        if arm != base and e is not None and ests[base] is not None:
            out["ratios"][arm] = ((getattr(mod, "capacity_ratio", None) or mod.ratio)(e, ests[base]), e.closed and ests[base].closed)
    return out


def _share(x: list[bool]) -> str:
    if not x:
        return "—"
    p = float(np.mean(x))
    return f"{p * 100:.1f} % ± {math.sqrt(p * (1 - p) / len(x)) * 100:.1f} (n {len(x)})"


def summary(searches: list[dict], results: list[dict]) -> None:
    truth = searches[0]["truth"]
    base = next(iter(truth))
    for arm, cap in truth.items():
        got = [r["arms"][arm] for r in results if r["arms"][arm] is not None]
        closed = [e for e in got if e["closed"]]
        cover = [e["low"] <= cap <= e["high"] for e in closed]
        allc = [e["low"] <= cap <= e["high"] for e in got]
        level = got[0]["confidence"] if got else float("nan")
        width = np.median([e["high"] / e["low"] for e in closed]) if closed else float("nan")
        bias = np.median([math.log(e["rate"] / cap) for e in closed]) if closed else float("nan")
        print(f"  {arm}: estimate in {len(got)}/{len(results)}; interval closed "
              f"{_share([e['closed'] for e in got])}; closed ones cover the truth {_share(cover)} "
              f"(stated {level * 100:g} %), all {_share(allc)}; median high/low {width:.2f}, "
              f"median ln(estimate / truth) {bias:+.3f}")
    for arm, cap in truth.items():
        if arm == base:
            continue
        t = cap / truth[base]
        rs = [r["ratios"][arm] for r in results if arm in r["ratios"]]
        if not rs:
            continue
        both = [x for x, c in rs if c]
        print(f"  ratio {arm}/{base}: {len(rs)} with both; covers the truth "
              f"{_share([lo <= t <= hi for (_, lo, hi), _c in rs])}, where both arms closed "
              f"{_share([lo <= t <= hi for _, lo, hi in both])}; its interval closed "
              f"{_share([lo > 0 and math.isfinite(hi) for (_, lo, hi), _c in rs])}, separates "
              f"from 1 {_share([hi < 1 or lo > 1 for (_, lo, hi), _c in rs])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", help="a file --save-runs wrote")
    p.add_argument("--estimator", action="append",
                   help="a file holding e2e's estimate, e2e/analysis/capacity/estimate.py "
                        "(repeatable; default the working tree's)")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--sims", type=int, default=0, help="only the first N searches (0: all)")
    a = p.parse_args()
    searches = [json.loads(line) for line in Path(a.runs).read_text().splitlines() if line]
    if a.sims:
        searches = searches[:a.sims]
    paths = a.estimator or [str(Path(__file__).resolve().parents[1] / "e2e/analysis/capacity/estimate.py")]
    print(f"{len(searches)} searches from {a.runs}; truth "
          + ", ".join(f"{k} {v:g}" for k, v in searches[0]["truth"].items()))
    with Pool(a.jobs) as pool:
        for path in paths:
            t0 = time.perf_counter()
            results = pool.map(estimate_search, [(path, s) for s in searches], chunksize=1)
            print(f"{path}: {time.perf_counter() - t0:.0f} s on {a.jobs} processes")
            summary(searches, results)


if __name__ == "__main__":
    main()
