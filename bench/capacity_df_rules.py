"""How capacity intervals would close and cover under other df rules for the t quantile, from
the records ``bench/capacity_root_diagnostics.py --records`` wrote over searches that
``bench/capacity_search_simulation.py --save-runs`` saved (each record: the signed root of the
profile deviance at the truth and at the measured ends, the runs near the edge, the fit).

An interval at quantile c closes when the signed root reaches c at both measured ends, and a
closed one covers when |root at the truth| <= c (the truth within the measured rates): the
estimate's own rule (``e2e/analysis/capacity/estimate.py``), so for records its estimate made the
rule it uses reproduces its ``closed`` (counted as "own closing differs"). The median width
(high/low) is the record's own where the rule's quantile is the estimate's; else scaled from
it by the quantiles' ratio (the root taken as linear in ln C), marked ≈.

    python bench/capacity_df_rules.py r6.jsonl:runs6.jsonl [more records:searches pairs]

A record names the estimate's rule in its method; ``records:searches:now`` (or ``:earlier``)
says which made records that do not.
"""
from __future__ import annotations

import collections
import json
import math
import sys

import numpy as np
from scipy.stats import t as student_t

BAND = 0.5  # e2e/analysis/capacity/estimate.py's


def q(df: float) -> float:
    return float(student_t.ppf(0.975, max(df, 1)))


def per_rate(c: int):
    """The runs near the edge less 2, counting at most ``c`` a rate."""
    return lambda r: q(sum(min(n, c) for n in r["cnt"]) - 2)


RULES = {
    "runs near the edge − 2 (earlier)": lambda r: q(r["op"] - 2),
    "… at most 2 a rate: min(runs − 2, 2·rates)": lambda r: q(min(r["op"] - 2, 2 * r["kop"])),
    "… less one: min(runs − 2, 2·rates − 1) (now)": lambda r: q(min(r["op"] - 2, 2 * r["kop"] - 1)),
    "… at most 3 runs a rate, − 2": per_rate(3),
    "… at most 4 runs a rate, − 2": per_rate(4),
    "2·rates near the edge": lambda r: q(2 * r["kop"]),
    "min(runs − 2, 5)": lambda r: q(min(r["op"] - 2, 5)),
    "runs / 2 − 2": lambda r: q(r["op"] / 2 - 2),
}
EARLIER, TWO, NOW = list(RULES)[:3]


def load(records: str, searches: str) -> list[dict]:
    """The records, each with ``cnt``: its runs near the edge per rate (from the searches)."""
    found = [json.loads(line) for line in open(searches) if line.strip()]
    out = []
    for line in open(records):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by stopping the diagnostics
            continue
        if not r["open"]:
            runs = found[r["search"]]["arms"][r["arm"]]["runs"]
            x = np.log([u[0] for u in runs])
            near = np.abs(r["slope"] * (math.log(r["rate"]) - x)) < 2 * r["sigma"] + BAND
            assert int(near.sum()) == r["op"]
            r["cnt"] = list(collections.Counter(x[near].tolist()).values())
        out.append(r)
    return out


def own(r: dict) -> str:
    """The rule the estimate that made ``r`` used (read from the df its method names)."""
    if "method" not in r and "made" in r:
        return r["made"]
    method = r.get("method", "")
    if "rates)" not in method:
        return EARLIER
    df = int(method.split("t on ")[1].split(" df")[0])
    return NOW if df == max(min(r["op"] - 2, 2 * r["kop"] - 1), 1) else TWO


def _share(x: list[bool]) -> str:
    p = float(np.mean(x))
    return f"{p * 100:5.1f} % ± {math.sqrt(p * (1 - p) / len(x)) * 100:.1f}"


def evaluate(recs: list[dict], name: str, rule) -> str:
    closed, cover, width, scaled, differs = [], [], [], 0, 0
    for r in recs:
        if r["open"]:
            closed.append(False)
            continue
        c = rule(r)
        ok = r["sL"] >= c and -r["sR"] >= c
        closed.append(ok)
        if own(r) == name:
            differs += ok != r["closed"]
        if ok:
            cover.append(abs(r["rT"]) <= c and r["inside"])
            if r["closed"]:
                base = RULES[own(r)](r)
                width.append(math.exp(math.log(r["high"] / r["low"]) * c / base))
                scaled += abs(c - base) > 1e-12
    mark = "≈" if scaled else ""
    return (f"closed {_share(closed)}, closed ones cover {_share(cover)} ({len(cover)}), "
            f"median high/low {mark}{np.median(width):.2f}; own closing differs in {differs}")


def main() -> None:
    for pair in sys.argv[1:]:
        records, searches, made = (pair.split(":") + [""])[:3]
        recs = load(records, searches)
        for r in recs:
            if made:
                r["made"] = {"now": NOW, "earlier": EARLIER}[made]
        ns = sorted({r["search"] for r in recs})
        print(f"{records}: {len(ns)} searches ({ns[0]}-{ns[-1]}); made by the "
              + ", ".join(f"{k!r}: {v}" for k, v in collections.Counter(
                  own(r) for r in recs if not r["open"]).items()))
        placed = [r for r in recs if not r["open"]]
        by = collections.defaultdict(list)
        for r in placed:
            if r["inside"]:
                by[min(r["kop"], 4)].append(abs(r["rT"]))
        print("  |root at the truth|, 95 % quantile by rates near the edge (4: 4 or more): "
              + ", ".join(f"{k}: {np.quantile(v, 0.95):.2f} ({len(v)})" for k, v in sorted(by.items())))
        arms = sorted({r["arm"] for r in recs}, key=lambda a: a != "main")
        for name, rule in RULES.items():
            print(f"  {name}")
            for a in arms:
                print(f"    {a:6s} " + evaluate([r for r in recs if r["arm"] == a], name, rule))


if __name__ == "__main__":
    main()
