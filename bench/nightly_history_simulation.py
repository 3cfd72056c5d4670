"""A nightly's relative cell (tonight's build ÷ the pinned reference, measured together in
duets) judged against its ratio's history of nights, against the previous rule (one
baseline night, Welch), simulated through e2e's own ``judge_cell``.

Each night has ``--runs`` duets; a duet's log ratio is the night's level b (the ratio's
night-to-night drift: which core is faster tonight, what else ran beside it; sd ``--spread``
× the sd of a night's mean, so 0 is no drift and 1 drift as large as a night's own noise;
or, with ``--night-sd``, that sd itself, the same whatever ``--runs``, to compare designs)
plus the duet's own part, sd ``--within-sd`` (6.1 % in the calibration's duets, 2026-12-01).
A/A: every night the same build; a change: tonight's ratio ``--effect`` % higher. A false
call is "regressed" or "improved" on an A/A night; power is "regressed" on a changed one.
Threshold ``--threshold`` % (the nightly-duet config's 2 %).

    PYTHONPATH=$PWD python bench/nightly_history_simulation.py --sims 2000 --seed 1
    # 4 or 8 duets a night under the swapping duets' noise (4.1 % a duet, a night part 0-2 %)
    PYTHONPATH=$PWD python bench/nightly_history_simulation.py --runs 8 --within-sd 0.041 \
        --night-sd 0,0.01,0.02 --nights 4 --effect 8 --sims 2000 --seed 3
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from e2e.analysis.nightly.judge import Rules, judge_cell
from e2e.results import CellKey, NightCell

KEY = CellKey("load", "main-vs-reference", 1, "base", "server_tpot_ms_mean")


def _cell(values) -> NightCell:
    return NightCell(KEY, tuple(float(x) for x in values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=4, help="reported duets a night")
    ap.add_argument("--within-sd", type=float, default=0.061)
    ap.add_argument("--nights", default="4,6,10", help="history nights (the previous rule "
                    "uses the last of them only)")
    ap.add_argument("--spread", default="0,0.5,1,2")
    ap.add_argument("--night-sd", default=None, help="the nights' own sd of ln ratio (e.g. "
                    "0,0.01,0.02), instead of --spread")
    ap.add_argument("--effect", type=float, default=15.0)
    ap.add_argument("--threshold", type=float, default=2.0)
    args = ap.parse_args()
    rules = Rules(thresholds={"base": {KEY.metric: args.threshold}}, reference="reference")
    rng = np.random.default_rng(args.seed)
    k, sw = args.runs, args.within_sd
    se = lambda p: 100 * math.sqrt(max(p * (1 - p), 1e-9) / args.sims)  # noqa: E731
    print(f"{args.sims} simulated nights per row, seed {args.seed}; {k} duets a night, duet "
          f"sd {sw:.3f}; change {args.effect:g} %, threshold {args.threshold:g} %; "
          "± one Monte Carlo standard error")
    print(f"| history nights | {'night sd' if args.night_sd else 'night-to-night spread'} "
          "| rule | A/A false calls | power |")
    print("|---:|---:|---|---:|---:|")
    for n in (int(x) for x in args.nights.split(",")):
        for spread in (float(x) for x in (args.night_sd or args.spread).split(",")):
            night_sd = spread if args.night_sd else spread * sw / math.sqrt(k)
            counts = {"history": [0, 0], "one night (Welch)": [0, 0]}
            for _ in range(args.sims):
                level = rng.normal(0.0, night_sd, n + 1)
                nights = [np.exp(level[i] + rng.normal(0.0, sw, k)) for i in range(n + 1)]
                history = [(f"d{i}", _cell(v)) for i, v in enumerate(nights[:-1])]
                for changed, tonight in ((0, nights[-1]), (1, nights[-1] * (1 + args.effect / 100))):
                    for rule, hist in (("history", history), ("one night (Welch)", ())):
                        # the previous rule as it called (pinned: the one-night rule now
                        # makes any change it calls undecided)
                        v = judge_cell(KEY, _cell(tonight), history[-1][1], rules, history=hist,
                                       pinned=not hist)
                        if changed:
                            counts[rule][1] += v.verdict == "regressed"
                        else:
                            counts[rule][0] += v.verdict in ("regressed", "improved")
            for rule, (false, power) in counts.items():
                f, p = false / args.sims, power / args.sims
                print(f"| {n} | {spread:g} | {rule} | {100 * f:.1f} % ± {se(f):.1f} "
                      f"| {100 * p:.1f} % ± {se(p):.1f} |")


if __name__ == "__main__":
    main()
