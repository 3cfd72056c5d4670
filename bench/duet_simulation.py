"""Duets against one server at a time, simulated under this host's noise and analysed as e2e
analyses them: A/A false calls per arm, power and MDE, at the same wall-clock budget.

The noise, as measured on the 2-core development host (issue 32, docs/statistics.md):

    ln y = ln 2.75 ms + L(t) + s + slot + effect[arm]

* L(t), the host's level at time step t, shared by every process running then: AR(1) with
  lag-1 correlation ``--rho`` (0.48 between consecutive servers) and sd ``--time-sd``;
* s ~ N(0, ``--server-sd``), each fresh server's own part (a duet's two servers differ by
  this alone: the log ratio of six A/A pairs had sd 2.7 %, so s has sd 2.7 / sqrt 2 = 1.9 %);
* slot: slot 1 is ``--slot-pct`` faster than slot 0 (core 1 ran about 2 % faster);
  one server at a time runs in slot 0.

The two designs take their units from e2e's own ``make_plan`` (the calibration config's
arms main, main-repeat and delay-500, the Williams order or ``duet=True``): one server at a
time, unit i runs at time step i; in duets, duet j's sides both run at time step j. With
three arms and two slots a round is three time steps either way, so equal rounds are an equal
wall-clock budget. Each run becomes a ``RunRecord`` (config snapshot, so main-repeat is
recognised as the A/A arm; spec with its duet and slot) and the verdicts come from e2e's own
``summarize`` on mean TPOT, the headline at concurrency 1.

    PYTHONPATH=$PWD python bench/duet_simulation.py --sims 1000 --seed 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import time
from pathlib import Path

import numpy as np

from e2e.analysis import metric, summarize
from e2e.config import load_experiment
from e2e.plan import make_plan
from e2e.results import HostNoise, RunMetrics, RunRecord, ServerInfo
from e2e.session._session import redacted_config

LEVEL_MS = 2.75
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
CALIBRATION = Path(__file__).resolve().parent.parent / "configs" / "calibration.toml"
ARMS = ["main", "main-repeat", "delay-500"]


def units(experiment, runs: int, duet: bool):
    """(time step, spec) of every planned run, in plan order."""
    plan = make_plan(experiment, arms=ARMS, concurrencies=[1], spec_modes=[False], runs=runs,
                     duet=duet)
    if duet:
        return [(t, side) for t, d in enumerate(plan) for side in d.sides]
    return list(enumerate(plan))


def ar1(rng, n: int, sd: float, rho: float) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.normal(0.0, sd)
    e = rng.normal(0.0, sd * math.sqrt(1 - rho * rho), n)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + e[i]
    return x


def experiment_records(rng, experiment, config, planned, effects, args) -> list[RunRecord]:
    steps = 1 + max(t for t, _ in planned)
    level = ar1(rng, steps, args.time_sd, args.rho)
    busy = np.abs(rng.normal(0.0, args.busy_sd, steps))  # other processes, shared by a time step
    out = []
    for i, (t, spec) in enumerate(planned):
        slot = spec.slot or 0
        seen = busy[t] + abs(rng.normal(0.0, 0.02))  # what each run's record says of it
        y = (math.log(LEVEL_MS) + level[t] + rng.normal(0.0, args.server_sd)
             + args.busy_beta * busy[t]
             + (math.log(1 - args.slot_pct / 100) if slot == 1 else 0.0)
             + math.log(1 + effects.get(spec.arm, 0.0) / 100))
        when = (T0 + dt.timedelta(seconds=60 * t + slot)).isoformat()
        value = math.exp(y)
        out.append(RunRecord(
            experiment=experiment.name, run_id=spec.run_id, spec=spec, arm_settings={},
            config=config, server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
            provenance={}, started_at=when, finished_at=when, valid=True,
            host_noise=None if not args.busy_sd else HostNoise(
                wall_s=60.0, cpus_online=2, loadavg_before=(0, 0, 0), loadavg_after=(0, 0, 0),
                host_busy_cpu_s=60.0, own_cpu_s=60.0, other_cpu_s=60.0 * seen,
                other_cpu_share=seen, unattributed_cpu_s=0.0, steal_s=0.0, steal_share=0.0,
                top_other=[]),
            metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                               output_tokens=0, tpot_ms_mean=value, tpot_ms_median=value)))
    return out


def simulate(experiment, runs: int, duet: bool, effects: dict[str, float], sims: int, seed: int,
             args) -> dict:
    rng = np.random.default_rng(seed)
    config = redacted_config(experiment)
    planned = units(experiment, runs, duet)
    tpot = [metric("tpot_ms_mean")]
    calls = {a: 0 for a in ARMS[1:]}
    mdes = {a: [] for a in ARMS[1:]}
    covered = {a: 0 for a in ARMS[1:]}
    design = set()
    for _ in range(sims):
        s = summarize(experiment_records(rng, experiment, config, planned, effects, args),
                      metrics=tpot)
        for c in s.comparisons:
            design.add((c.method, c.design))
            if c.verdict in ("faster", "slower"):
                calls[c.arm] += 1
            if c.mde_pct is not None:
                mdes[c.arm].append(c.mde_pct)
            true = effects.get(c.arm, 0.0)
            if c.interval is not None and c.interval[0] <= true <= c.interval[1]:
                covered[c.arm] += 1
    return {"calls": calls, "mde": {a: float(np.median(v)) for a, v in mdes.items() if v},
            "covered": covered, "design": sorted(design)}


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n) * 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="rounds, the first a warmup (4 reported)")
    ap.add_argument("--time-sd", type=float, default=0.175)
    ap.add_argument("--server-sd", type=float, default=0.019)
    ap.add_argument("--rho", type=float, default=0.48)
    ap.add_argument("--slot-pct", type=float, default=2.0)
    ap.add_argument("--effect", type=float, default=20.0, help="delay-500's true effect, %%")
    ap.add_argument("--busy-sd", type=float, default=0.0,
                    help="recorded interference (cores' worth of other processes, |N(0, sd)| "
                         "per time step, unrelated to arms); 0: none recorded")
    ap.add_argument("--busy-beta", type=float, default=0.3,
                    help="its effect on ln y per core (r = 0.82 measured while other work ran)")
    args = ap.parse_args()
    experiment = load_experiment(CALIBRATION)
    started = time.monotonic()
    print(f"noise: time-level AR(1) sd {args.time_sd:g} rho {args.rho:g}, per-server sd "
          f"{args.server_sd:g}, slot 1 {args.slot_pct:g} % faster"
          + (f", recorded interference sd {args.busy_sd:g} x {args.busy_beta:g} per core"
             if args.busy_sd else "") + f"; {args.runs} rounds "
          f"({args.runs - experiment.report_from_run + 1} reported), {args.sims} experiments "
          f"per row, seed {args.seed}")
    print("| design | scenario | arm | false or true calls | 95 % coverage | median MDE |")
    print("|---|---|---|---:|---:|---:|")
    for duet in (False, True):
        name = "duet" if duet else "one server at a time"
        for scenario, effects in (("A/A (no arm differs)", {}),
                                  (f"delay-500 +{args.effect:g} %", {"delay-500": args.effect})):
            r = simulate(experiment, args.runs, duet, effects, args.sims, args.seed, args)
            for arm in ARMS[1:]:
                p = r["calls"][arm] / args.sims
                kind = "power" if effects.get(arm) else "false calls"
                cov = r["covered"][arm] / args.sims
                print(f"| {name} | {scenario} | {arm} | {kind} {p * 100:.1f} % ± {se(p, args.sims):.1f} "
                      f"| {cov * 100:.1f} % ± {se(cov, args.sims):.1f} | "
                      f"{r['mde'].get(arm, float('nan')):.1f} % |")
            print(f"|  |  | (methods: {', '.join(f'{m}/{d}' for m, d in r['design'])}) | | | |")
    print(f"({time.monotonic() - started:.0f} s; ± is one Monte Carlo standard error)")


if __name__ == "__main__":
    main()
