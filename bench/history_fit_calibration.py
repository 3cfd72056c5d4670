"""How often ``HistoryFit``'s one-sided p of no change falls under a level on unchanged nights
(the call's tail, ratio to the level): 20 history nights of 8 duets, tonight 8 or 32 duets (a
night's first and last look), per-duet sd 4.5 % and a night part of 1 %; ``loading`` adds
(l1 − l2) × an AR(1) host level (sd 17 %, ρ 0.5, loadings 1 ± 0.07 a night), ``t3`` server
parts of Student's t on 3 df on top of it.

    nice -n 10 env PYTHONPATH=$PWD python bench/history_fit_calibration.py --sims 20000
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.stats import t as student_t

from e2e.analysis.nightly.judge import history_fit


def night(rng, k: int, regime: str) -> np.ndarray:
    part = rng.normal(0, 0.01)
    server = (0.045 * rng.standard_t(3, k) / math.sqrt(3) if regime == "t3"
              else rng.normal(0, 0.045, k))
    if regime == "iid":
        return part + server
    l1, l2 = 1 + rng.normal(0, 0.07, 2)
    level = np.empty(k)
    level[0] = rng.normal(0, 0.17)
    shocks = rng.normal(0, 0.17 * math.sqrt(0.75), k)
    for j in range(1, k):
        level[j] = 0.5 * level[j - 1] + shocks[j]
    return part + server + (l1 - l2) * level


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    levels = (0.05, 0.01, 0.002, 0.0005)
    print("regime duets " + " ".join(f"p<{x:g}" for x in levels) + "  (share / level)")
    for regime in ("iid", "loading", "t3"):
        for k in (8, 32):
            ps = []
            for _ in range(a.sims):
                hist = [np.exp(night(rng, 8, regime)) for _ in range(20)]
                fit = history_fit(np.exp(night(rng, 32, regime))[:k], hist)
                ps.append(student_t.sf(fit.d / math.sqrt(fit.var(k)), fit.df(k)))
            ps = np.asarray(ps)
            print(regime, k, " ".join(f"{(ps < x).mean() / x:.2f}" for x in levels))


if __name__ == "__main__":
    main()
