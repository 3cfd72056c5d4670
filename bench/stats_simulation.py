"""Simulated A/A experiments for e2e's statistics: false-call rates and MDEs, blocked vs unpaired.

Every experiment is a calibration-shaped sweep: ``--arms`` arms (main, main-repeat, delay-...)
run in rounds, one run of every arm per round back to back, the arm order rotated by one each
round (as e2e's plan does). Main and main-repeat are the same thing (A/A); the statistics compare
main-repeat with main. A run's value is

    ln y = ln 2.75 ms + drift(t) + e,   e ~ N(0, sigma_run²) independent per run (per fresh server)

where t is the run's position in the sweep and drift is linear over the sweep, of total size
ln(3.08 / 2.75) over the reported rounds, with a random sign per experiment: docs/plugin.md's
calibration, where main-repeat drifted from 2.75 to 3.08 ms over its rounds. ``--drift 0``
gives the no-drift case. sigma_run defaults to 1.25 %, the steadiest cell of that calibration
(delay-500's server TPOT, 3.63-3.72 ms over 3 runs, drift included, so an upper bound there).

For every experiment: the report's blocked comparison (``e2e.analysis._stats.log_ratio`` with rounds as
blocks) and the unpaired one (``e2e.analysis._stats.welch_log_ratio``) on the same runs, each read by
``e2e.analysis._stats.call`` at the report's defaults (95 %, minimum effect 1 %, equivalence ±1 %) and at
minimum effect 0 (the bare test); a false call is "faster" or "slower". The MDE is each
estimate's ``mde_pct`` (80 % power). The adaptive procedure (``e2e.analysis._stats.settled``) looks after
every round from ``--min-rounds`` to ``--max-rounds`` with the drift continuing at the same rate,
and is compared with naive peeking (a fixed 95 % blocked interval at every look). Last, the
calibration's delay arms (100, 250, 500 µs on a 2.75 ms step) as true effects: how often each
method calls them slower.

    PYTHONPATH=$PWD python bench/stats_simulation.py --sims 10000 --seed 1
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from e2e.analysis import _stats as stats

LEVEL_MS = 2.75
DRIFT_TOTAL = math.log(3.08 / 2.75)


@dataclass(frozen=True)
class Scenario:
    rounds: int          # reported rounds per arm
    arms: int            # arms in the sweep (A/A pair plus others)
    sigma_run: float     # per-run noise, log units
    drift_total: float   # drift over the reported rounds, log units
    per_round_drift: float | None = None  # None: drift_total / (rounds − 1)
    effect: float = 0.0  # true log ratio of the second arm (0: A/A)


def simulate_runs(rng: np.random.Generator, sc: Scenario, rounds: int | None = None) -> tuple[
        dict[int, float], dict[int, float]]:
    """One A/A experiment: (main by round, main-repeat by round), values in ms."""
    n = sc.rounds if rounds is None else rounds
    step = sc.per_round_drift if sc.per_round_drift is not None else (
        sc.drift_total / (sc.rounds - 1) if sc.rounds > 1 else 0.0)
    sign = 1.0 if rng.random() < 0.5 else -1.0
    main: dict[int, float] = {}
    repeat: dict[int, float] = {}
    for k in range(n):
        order = [(i + k) % sc.arms for i in range(sc.arms)]  # rotated; arm 0 = main, 1 = repeat
        for pos, arm in enumerate(order):
            t = k + pos / sc.arms  # time in rounds
            value = LEVEL_MS * math.exp(sign * step * t + rng.normal(0.0, sc.sigma_run))
            if arm == 0:
                main[k + 1] = value
            elif arm == 1:
                repeat[k + 1] = value * math.exp(sc.effect)
    return main, repeat


def fixed_n(sc: Scenario, sims: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    calls = {"blocked": 0, "welch": 0, "blocked0": 0, "welch0": 0, "old": 0,
             "slower_blocked": 0, "slower_welch": 0}
    mde_b, mde_w = [], []
    for _ in range(sims):
        main, rep = simulate_runs(rng, sc)
        blocked = stats.log_ratio([(k, v) for k, v in rep.items()], [(k, v) for k, v in main.items()])
        welch = stats.welch_log_ratio(list(rep.values()), list(main.values()))
        for name, est in (("blocked", blocked), ("welch", welch)):
            verdict = stats.call(est, time_metric=True, min_effect_pct=1.0)
            calls[name] += stats.is_difference(verdict)
            calls["slower_" + name] += verdict == "slower"
            calls[name + "0"] += stats.is_difference(stats.call(est, time_metric=True, min_effect_pct=0.0))
        old = stats.verdict_for(stats.compare_runs(list(rep.values()), list(main.values())),
                                higher_is_better=False, min_effect_pct=1.0)
        calls["old"] += old in ("faster", "slower")
        mde_b.append(blocked.mde_pct(0.95))
        mde_w.append(welch.mde_pct(0.95))
    out = {f"false_{k}": v / sims for k, v in calls.items()}
    out["mde_blocked"] = float(np.median(mde_b))
    out["mde_welch"] = float(np.median(mde_w))
    out["mde_ratio_median"] = float(np.median(np.array(mde_w) / np.array(mde_b)))
    return out


def adaptive(sc: Scenario, sims: int, seed: int, min_rounds: int, max_rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    false_seq = false_naive = 0
    stopped_at = []
    equivalent = 0
    for _ in range(sims):
        main, rep = simulate_runs(rng, sc, rounds=max_rounds)
        seq_done = naive_called = False
        for n in range(min_rounds, max_rounds + 1):
            m = {k: v for k, v in main.items() if k <= n}
            r = {k: v for k, v in rep.items() if k <= n}
            if not naive_called:
                v = stats.call(stats.blocked_log_ratio(r, m), time_metric=True, min_effect_pct=1.0)
                naive_called = stats.is_difference(v)
            if not seq_done:
                s = stats.settled([(r, m)], rounds=n, min_rounds=min_rounds, max_rounds=max_rounds)
                if s.stop:
                    seq_done = True
                    stopped_at.append(n)
                    false_seq += s.decisions[0] == "difference"
                    equivalent += s.decisions[0] == "equivalent"
            if seq_done and naive_called:
                break
        false_naive += naive_called
    return {"false_adaptive": false_seq / sims, "false_naive_peeking": false_naive / sims,
            "equivalent_adaptive": equivalent / sims,
            "mean_rounds_adaptive": float(np.mean(stopped_at))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=10_000)
    ap.add_argument("--grid-sims", type=int, default=2_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="reported rounds (runs 2-4 of 4)")
    ap.add_argument("--arms", type=int, default=3)
    ap.add_argument("--sigma-run", type=float, default=0.0125)
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=10)
    ap.add_argument("--no-grid", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()

    print(f"A/A simulations: {args.sims} experiments each, seed {args.seed}, {args.arms} arms, "
          f"{args.rounds} reported rounds, per-run noise {args.sigma_run * 100:g} %")
    print()
    print("| drift over the rounds | false calls, blocked | unpaired Welch | blocked, min effect 0 | "
          "unpaired, min effect 0 | old report (ratio of medians + Welch) | median MDE, blocked | "
          "unpaired | MDE ratio unpaired / blocked (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, drift in (("2.75 -> 3.08 ms (docs/plugin.md)", DRIFT_TOTAL), ("none", 0.0)):
        r = fixed_n(Scenario(args.rounds, args.arms, args.sigma_run, drift), args.sims, args.seed)
        print(f"| {label} | {r['false_blocked'] * 100:.2f} % | {r['false_welch'] * 100:.2f} % | "
              f"{r['false_blocked0'] * 100:.2f} % | {r['false_welch0'] * 100:.2f} % | "
              f"{r['false_old'] * 100:.2f} % | {r['mde_blocked']:.1f} % | {r['mde_welch']:.1f} % | "
              f"{r['mde_ratio_median']:.2f} |")
    print()

    step = DRIFT_TOTAL / (args.rounds - 1)
    print(f"Adaptive repeats (settled(), looks after rounds {args.min_rounds}..{args.max_rounds}, "
          f"drift continuing at {step * 100:.1f} % per round), {args.sims} experiments:")
    print()
    print("| drift | false calls, adaptive (alpha spending) | naive peeking at 95 % every round | "
          "settled equivalent ±1 % | mean rounds run |")
    print("|---|---:|---:|---:|---:|")
    for label, per_round in ((f"{step * 100:.1f} % per round", step), ("none", 0.0)):
        sc = Scenario(args.rounds, args.arms, args.sigma_run, 0.0, per_round_drift=per_round)
        r = adaptive(sc, args.sims, args.seed, args.min_rounds, args.max_rounds)
        print(f"| {label} | {r['false_adaptive'] * 100:.2f} % | {r['false_naive_peeking'] * 100:.2f} % | "
              f"{r['equivalent_adaptive'] * 100:.1f} % | {r['mean_rounds_adaptive']:.2f} |")
    print()

    print(f"Injected delays (the calibration's arms on a {LEVEL_MS} ms step), {args.sims} experiments "
          "each: how often the delay arm is called slower")
    print()
    print("| delay | true change | drift | called slower, blocked | unpaired Welch | "
          "median MDE, blocked | unpaired |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for delay_ms in (0.1, 0.25, 0.5):
        effect = math.log((LEVEL_MS + delay_ms) / LEVEL_MS)
        for label, drift in (("docs'", DRIFT_TOTAL), ("none", 0.0)):
            r = fixed_n(Scenario(args.rounds, args.arms, args.sigma_run, drift, effect=effect),
                        args.sims, args.seed)
            print(f"| {delay_ms * 1000:g} µs | +{(math.exp(effect) - 1) * 100:.1f} % | {label} | "
                  f"{r['false_slower_blocked'] * 100:.1f} % | {r['false_slower_welch'] * 100:.1f} % | "
                  f"{r['mde_blocked']:.1f} % | {r['mde_welch']:.1f} % |")
    print()

    if not args.no_grid:
        print(f"MDE at other noise levels and round counts (docs' drift), {args.grid_sims} experiments each:")
        print()
        print("| per-run noise | rounds | false calls, blocked | unpaired | median MDE, blocked | "
              "unpaired | ratio |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for sigma in (0.01, 0.0125, 0.02, 0.03, 0.116):
            for rounds in (3, 5):
                r = fixed_n(Scenario(rounds, args.arms, sigma, DRIFT_TOTAL), args.grid_sims, args.seed)
                print(f"| {sigma * 100:g} % | {rounds} | {r['false_blocked'] * 100:.2f} % | "
                      f"{r['false_welch'] * 100:.2f} % | {r['mde_blocked']:.1f} % | "
                      f"{r['mde_welch']:.1f} % | {r['mde_ratio_median']:.2f} |")
        print()
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
