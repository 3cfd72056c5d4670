"""Duets against one server at a time, simulated under this host's noise and analysed as e2e
analyses them: A/A false calls per arm, power and MDE, at the same wall-clock budget.

The noise, as measured on the 2-core development host (issue 32, docs/explanation/statistics.md):

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

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.summary import metric
from e2e.config import load_experiment
from e2e.plan import make_plan
from e2e.results.records import HostNoise, RunMetrics, RunRecord, ServerInfo
from e2e.session.session import redacted_config

LEVEL_MS = 2.75
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
CALIBRATION = Path(__file__).resolve().parent.parent / "configs" / "calibration.toml"


def units(experiment, arms, concurrencies, runs: int, duet: bool):
    """(time step, spec) of every planned run, in plan order: one server at a time, unit i at
    step i; in duets, every side of duet j at step j."""
    plan = make_plan(experiment, arms=arms, concurrencies=concurrencies, spec_modes=[False],
                     runs=runs, duet=duet)
    return [(t, side) for t, unit in enumerate(plan) for side in unit.sides]


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
    if args.slow_pct:  # a slow period shared by every process, lasting several servers
        first = int(rng.integers(0, max(1, steps - args.slow_steps)))
        level[first:first + args.slow_steps] += math.log(1 + args.slow_pct / 100)
    busy = np.abs(rng.normal(0.0, args.busy_sd, steps))  # other processes, shared by a time step
    out = []
    for t, spec in planned:
        slot = spec.slot or 0
        seen = busy[t] + abs(rng.normal(0.0, 0.02))  # what each run's record says of it
        y = (math.log(LEVEL_MS) + level[t]
             + rng.normal(0.0, args.server_sd * args.cell_sd.get(spec.concurrency, 1.0))
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


def simulate(experiment, arms, concurrencies, runs: int, duet: bool, effects: dict[str, float],
             sims: int, seed: int, args) -> dict:
    """Per (concurrency, arm): verdicts other than inconclusive/equivalent ("calls"), interval
    coverage of the true effect, the MDEs; the headline is mean TPOT at every concurrency."""
    rng = np.random.default_rng(seed)
    config = redacted_config(experiment)
    planned = units(experiment, arms, concurrencies, runs, duet)
    tpot = [metric("tpot_ms_mean")]
    keys = [(c, a) for c in concurrencies for a in arms[1:]]
    calls, covered = dict.fromkeys(keys, 0), dict.fromkeys(keys, 0)
    mdes: dict = {k: [] for k in keys}
    design = set()
    for _ in range(sims):
        s = summarize(experiment_records(rng, experiment, config, planned, effects, args),
                      metrics=tpot)
        for c in s.comparisons:
            k = (c.concurrency, c.arm)
            design.add((c.method, c.design))
            calls[k] += c.verdict in ("faster", "slower")
            if c.mde_pct is not None:
                mdes[k].append(c.mde_pct)
            true = effects.get(c.arm, 0.0)
            covered[k] += c.interval is not None and c.interval[0] <= true <= c.interval[1]
    steps = 1 + max(t for t, _ in planned)
    return {"calls": calls, "covered": covered, "steps": steps, "design": sorted(design),
            "mde": {k: float(np.median(v)) for k, v in mdes.items() if v}}


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n) * 100


def _pairs(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in (item.split("=") for item in text.split(",") if item)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arms", default="main,main-repeat,delay-500",
                    help="the calibration config's arms to plan (the first is the baseline)")
    ap.add_argument("--concurrencies", default="1")
    ap.add_argument("--cell-sd", default="",
                    help="per-server noise multiplier per concurrency, e.g. 1=1,4=3")
    ap.add_argument("--runs", type=int, default=5, help="rounds one server at a time, the "
                    "first a warmup")
    ap.add_argument("--duet-runs", type=int, default=None, help="rounds in duets (default "
                    "--runs); with more arms than slots a duet round takes more time steps")
    ap.add_argument("--effects", default="delay-500=20", help="true effects in %% (the effect "
                    "scenario; the A/A scenario has none)")
    ap.add_argument("--time-sd", type=float, default=0.175)
    ap.add_argument("--server-sd", type=float, default=0.019)
    ap.add_argument("--rho", type=float, default=0.48)
    ap.add_argument("--slot-pct", type=float, default=2.0)
    ap.add_argument("--slow-pct", type=float, default=0.0,
                    help="a slow period of this many %% shared by every process ...")
    ap.add_argument("--slow-steps", type=int, default=6, help="... lasting this many servers")
    ap.add_argument("--busy-sd", type=float, default=0.0,
                    help="recorded interference (cores' worth of other processes, |N(0, sd)| "
                         "per time step, unrelated to arms); 0: none recorded")
    ap.add_argument("--designs", default="seq,duet", help="which designs to simulate")
    ap.add_argument("--scenarios", default="aa,effects", help="aa (no arm differs), effects")
    ap.add_argument("--busy-beta", type=float, default=0.3,
                    help="its effect on ln y per core (r = 0.82 measured while other work ran)")
    args = ap.parse_args()
    args.cell_sd = {int(k): v for k, v in _pairs(args.cell_sd).items()}
    arms = args.arms.split(",")
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    effects = _pairs(args.effects)
    experiment = load_experiment(CALIBRATION)
    started = time.monotonic()
    print(f"noise: time-level AR(1) sd {args.time_sd:g} rho {args.rho:g}, per-server sd "
          f"{args.server_sd:g} (x {args.cell_sd or 1} by concurrency), slot 1 {args.slot_pct:g} % "
          "faster"
          + (f", a {args.slow_pct:g} % slow period of {args.slow_steps} servers" if args.slow_pct
             else "")
          + (f", recorded interference sd {args.busy_sd:g} x {args.busy_beta:g} per core"
             if args.busy_sd else "")
          + f"; arms {', '.join(arms)}; {args.sims} experiments per row, seed {args.seed}")
    print("| design | scenario | c | arm | false or true calls | 95 % coverage | median MDE |")
    print("|---|---|---:|---|---:|---:|---:|")
    designs = args.designs.split(",")
    for duet in [d == "duet" for d in ("seq", "duet") if d in designs]:
        runs = args.duet_runs or args.runs if duet else args.runs
        scenarios = [("A/A (no arm differs)", {}),
                     ("effects " + ", ".join(f"{a} +{v:g} %" for a, v in effects.items()), effects)]
        for scenario, eff in [sc for sc, key in zip(scenarios, ("aa", "effects"))
                              if key in args.scenarios.split(",")]:
            r = simulate(experiment, arms, concurrencies, runs, duet, eff, args.sims, args.seed,
                         args)
            name = (f"{'duet' if duet else 'one server at a time'}, {runs} rounds "
                    f"({runs - experiment.report_from_run + 1} reported), {r['steps']} time steps")
            for c, arm in r["calls"]:
                p = r["calls"][(c, arm)] / args.sims
                kind = "power" if eff.get(arm) else "false calls"
                cov = r["covered"][(c, arm)] / args.sims
                print(f"| {name} | {scenario} | {c} | {arm} | {kind} {p * 100:.1f} % ± "
                      f"{se(p, args.sims):.1f} | {cov * 100:.1f} % ± {se(cov, args.sims):.1f} | "
                      f"{r['mde'].get((c, arm), float('nan')):.1f} % |")
            print(f"|  |  |  | (methods: {', '.join(f'{m}/{d}' for m, d in r['design'])}) | | | |")
    print(f"({time.monotonic() - started:.0f} s; ± is one Monte Carlo standard error)")


if __name__ == "__main__":
    main()
