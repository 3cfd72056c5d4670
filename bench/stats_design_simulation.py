"""The designs e2e plans, analysed as e2e analyses them: false calls, power, MDE, until-settled.

Every simulated experiment takes its arm order from e2e's own ``make_plan`` (for the
calibration config, ``configs/calibration.toml``), gives every planned run a value

    ln y = ln 2.75 ms + sign * drift * t + e + effect[arm],   e ~ N(0, sigma_run^2)

where t is the run's position in the sweep and the drift totals ln(3.08 / 2.75) over the
reported rounds (docs/plugin.md's calibration, where main-repeat drifted 2.75 -> 3.08 ms; random
sign per experiment; the warmup round drifts too), writes it as a
``RunRecord`` with the config snapshot (so A/A arms are recognised) and a start time in plan
order, and reads the verdicts from e2e's own ``summarize`` (mean TPOT only, the headline at
concurrency 1). A false call is "faster"/"slower" for an arm with no true effect. The
until-settled part runs e2e's own ``sweep_until_settled`` with an executor that writes such
records into a temporary results folder (no server), then a second invocation on the same
folder with a larger --max-runs, and reads the folder's report as ``e2e report`` would.

The same script runs on older e2e code (it only uses make_plan, summarize, sweep_until_settled
and build_report), which is how the "before" columns in docs/statistics.md were made.

    PYTHONPATH=$PWD python bench/stats_design_simulation.py --sims 2000 --settle-sims 200 --seed 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from e2e.analysis._aggregate import metric, summarize
from e2e.config import load_experiment
from e2e.execute._executor import Outcome
from e2e.plan import make_plan
from e2e.results._records import RunMetrics, RunRecord, ServerInfo
from e2e.results._store import finalize, new_partial_dir, unit_state, write_run
from e2e.session._session import SessionOptions, redacted_config

LEVEL_MS = 2.75
DRIFT_TOTAL = math.log(3.08 / 2.75)
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
CALIBRATION = Path(__file__).resolve().parent.parent / "configs" / "calibration.toml"


def record(experiment, config, spec, value: float, index: int) -> RunRecord:
    when = (T0 + dt.timedelta(seconds=20 * index)).isoformat()
    return RunRecord(
        experiment=experiment.name, run_id=spec.run_id, spec=spec, arm_settings={}, config=config,
        server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"), provenance={},
        started_at=when, finished_at=when, valid=True,
        metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                           output_tokens=0, tpot_ms_mean=value, tpot_ms_median=value))


def values(rng, plan, effects: dict[str, float], sigma: float, drift_total: float,
           report_from_run: int) -> list[float]:
    """One value per planned run, in plan order; the drift is linear in the run's position
    and totals ``drift_total`` over the reported rounds (the warmup round drifts too)."""
    sign = 1.0 if rng.random() < 0.5 else -1.0
    reported = sum(1 for u in plan if u.repeat >= report_from_run)
    step = drift_total / max(reported - 1, 1)
    return [LEVEL_MS * math.exp(sign * step * i + rng.normal(0, sigma) + effects.get(u.arm, 0.0))
            for i, u in enumerate(plan)]


def fixed(experiment, arms, runs, effects, sigma, drift, sims, seed):
    """Per arm: share called faster/slower, called slower, slower and surviving Holm; the
    median printed MDE."""
    rng = np.random.default_rng(seed)
    plan = make_plan(experiment, arms=arms, concurrencies=[1], spec_modes=[False], runs=runs)
    config = redacted_config(experiment)
    tpot = (metric("tpot_ms_mean"),)
    out = {a: {"diff": 0, "slower": 0, "holm": 0, "mde": []} for a in arms[1:]}
    methods: dict[str, int] = {}
    for _ in range(sims):
        vals = values(rng, plan, effects, sigma, drift, experiment.report_from_run)
        recs = [record(experiment, config, u, v, i) for i, (u, v) in enumerate(zip(plan, vals))]
        s = summarize(recs, metrics=tpot)
        for a in arms[1:]:
            c = s.comparison(a, 1, "base", "tpot_ms_mean")
            out[a]["diff"] += c.verdict in ("faster", "slower")
            out[a]["slower"] += c.verdict == "slower"
            out[a]["holm"] += c.verdict == "slower" and c.survives is not False
            if c.mde_pct is not None:
                out[a]["mde"].append(c.mde_pct)
            methods[c.method] = methods.get(c.method, 0) + 1
    return {a: {"diff": r["diff"] / sims, "slower": r["slower"] / sims, "holm": r["holm"] / sims,
                "mde": float(np.median(r["mde"])) if r["mde"] else float("nan")}
            for a, r in out.items()}, methods


class Synthetic:
    """An executor that writes each unit's record with a value from the model above."""

    def __init__(self, experiment, effects, sigma, per_run_drift, rng):
        self.experiment, self.effects, self.sigma, self.rng = experiment, effects, sigma, rng
        self.per_run_drift = per_run_drift
        self.sign = 1.0 if rng.random() < 0.5 else -1.0
        self.index = 0
        self.config = redacted_config(experiment)

    def run(self, experiment, units, results, run_unit, **kwargs) -> Outcome:
        outcome = Outcome()
        for spec in units:
            if unit_state(results, experiment, spec).done:
                outcome.skipped.append(spec.run_id)
                continue
            v = LEVEL_MS * math.exp(self.sign * self.per_run_drift * self.index
                                    + self.rng.normal(0, self.sigma) + self.effects.get(spec.arm, 0.0))
            rec = record(self.experiment, self.config, spec, v, self.index)
            self.index += 1
            partial = new_partial_dir(results, experiment, spec.run_id)
            write_run(partial, rec)
            finalize(partial, results, experiment, spec.run_id)
            outcome.ran.append(rec)
        return outcome


def settle(experiment, arms, effects, sigma, per_run_drift, sims, seed, first_max, second_max):
    from e2e.pipeline import sweep_until_settled
    from e2e.render._report import build_report

    rng = np.random.default_rng(seed)
    quiet = SessionOptions(say=lambda *_: None, progress=False)
    res = {"stopped_early": 0, "rounds": [], "rounds2": []}
    for key in ("diff", "slower", "faster", "equivalent", "aa_false"):
        res[key] = 0
        res[key + "2"] = 0
    for _ in range(sims):
        with tempfile.TemporaryDirectory() as tmp:
            ex = Synthetic(experiment, effects, sigma, per_run_drift, rng)
            kw = dict(arms=arms, concurrencies=[1], spec_modes=[False], executor=ex, session=quiet)
            for suffix, max_runs in (("", first_max), ("2", second_max)):
                _, st = sweep_until_settled(experiment, Path(tmp), max_runs=max_runs, **kw)
                rep = build_report(Path(tmp) / experiment.name).summary
                pr = rep.comparison(arms[2], 1, "base", "tpot_ms_mean")
                aa = rep.comparison(arms[1], 1, "base", "tpot_ms_mean")
                res["rounds" + suffix].append(st.rounds)
                if not suffix:
                    res["stopped_early"] += st.rounds < first_max - experiment.report_from_run + 1
                # the stopping rule's own calls on its set (pr; the old code: the A/A arm and pr)
                res["diff" + suffix] += "difference" in st.decisions
                for verdict in ("slower", "faster", "equivalent"):
                    res[verdict + suffix] += pr.verdict == verdict
                res["aa_false" + suffix] += aa.verdict in ("faster", "slower")
    n = sims
    return {k: (float(np.mean(v)) if isinstance(v, list) else v / n) for k, v in res.items()}


def looks_in_memory(experiment, arms, effects, sigma, drift_total, sims, seed, max_runs):
    """The stopping rule alone, without files: the plan of ``max_runs`` rounds, values as in
    ``fixed``; after each reported round from the third, e2e's ``summarize`` on the runs so far
    and ``stats.look_at`` on the primary non-A/A comparisons with the alpha spent before, as
    ``sweep_until_settled`` does. Share of sweeps whose stopping set got a "difference", and
    the mean reported rounds at the stop."""
    from e2e.analysis import _stats as stats
    from e2e.analysis._aggregate import estimate_of

    rng = np.random.default_rng(seed)
    start = experiment.report_from_run
    plan = make_plan(experiment, arms=arms, concurrencies=[1], spec_modes=[False], runs=max_runs)
    config = redacted_config(experiment)
    tpot = (metric("tpot_ms_mean"),)
    diff = 0
    rounds = []
    for _ in range(sims):
        vals = values(rng, plan, effects, sigma, drift_total, start)
        recs = [record(experiment, config, u, v, i) for i, (u, v) in enumerate(zip(plan, vals))]
        spent = 0.0
        for runs in range(start + 2, max_runs + 1):
            s = summarize([r for r in recs if r.spec.repeat <= runs], metrics=tpot)
            primary = [c for c in s.comparisons if c.role == "primary"]
            look = stats.look_at([estimate_of(c) for c in primary], rounds=runs - start + 1,
                                 max_rounds=max_runs - start + 1, spent_before=spent)
            spent = look.cumulative
            if look.stop:
                diff += "difference" in look.decisions
                rounds.append(look.rounds)
                break
    return diff / sims, float(np.mean(rounds))


def pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--settle-sims", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sigma-run", type=float, default=0.0125)
    ap.add_argument("--only", choices=["fixed", "settle", "looks"], default=None)
    ap.add_argument("--looks-sims", type=int, default=2000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    exp = load_experiment(CALIBRATION)
    cal = ["main", "main-repeat", "delay-100", "delay-250", "delay-500"]
    three = ["main", "main-repeat", "delay-500"]
    sigma = args.sigma_run
    print(f"per-run noise {sigma * 100:g} %, linear drift ln(3.08/2.75) over the reported rounds (random sign), "
          f"{args.sims} experiments per row, seed {args.seed}; verdicts of e2e's summarize "
          "(mean TPOT, 95 %, minimum effect 1 %)")
    print()
    if args.only in (None, "fixed"):
        print("(a) A/A: every arm the same as main; share of experiments calling each arm faster/slower")
        print()
        print("| design | drift | " + " | ".join(cal[1:]) + " | methods |")
        print("|---|---|" + "---:|" * (len(cal) - 1) + "---|")
        for label, arms in (("calibration: 5 arms, --runs 4", cal), ("3 arms, --runs 4", three)):
            for dlabel, drift in (("linear", DRIFT_TOTAL), ("none", 0.0)):
                r, methods = fixed(exp, arms, 4, {}, sigma, drift, args.sims, args.seed)
                cells = [pct(r[a]["diff"]) if a in r else "—" for a in cal[1:]]
                print(f"| {label} | {dlabel} | " + " | ".join(cells) + f" | {methods} |")
        print()
        print("(b) power at a true +5 % (delay-500 arm), 3 reported rounds, linear drift; "
              "(c) at a true effect equal to the median printed MDE")
        print()
        print("| design | true effect | called slower | slower, surviving Holm | median printed MDE | A/A false calls (main-repeat) |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, arms in (("3 arms, --runs 4", three), ("calibration: 5 arms, --runs 4", cal)):
            eff = {"delay-500": math.log(1.05)}
            r, _ = fixed(exp, arms, 4, eff, sigma, DRIFT_TOTAL, args.sims, args.seed)
            print(f"| {label} | +5 % | {pct(r['delay-500']['slower'])} | {pct(r['delay-500']['holm'])} | "
                  f"{r['delay-500']['mde']:.1f} % | {pct(r['main-repeat']['diff'])} |")
            mde = r["delay-500"]["mde"]  # the MDE printed for that very comparison
            r2, _ = fixed(exp, arms, 4, {"delay-500": math.log(1 + mde / 100)}, sigma, DRIFT_TOTAL,
                          args.sims, args.seed + 1)
            print(f"| {label} | +{mde:.1f} % (= median printed MDE) | {pct(r2['delay-500']['slower'])} | "
                  f"{pct(r2['delay-500']['holm'])} | {r2['delay-500']['mde']:.1f} % | "
                  f"{pct(r2['main-repeat']['diff'])} |")
        print()
    if args.only in (None, "settle"):
        arms = ["main", "main-repeat", "delay-500"]
        per_run = DRIFT_TOTAL / (3 * 3 - 1)  # the docs' drift over 3 rounds of 3 arms, continuing
        print(f"(d) --until-settled, arms {', '.join(arms)} (main-repeat A/A), {args.settle_sims} "
              f"sweeps per row: first --max-runs 6, then a second invocation with --max-runs 10 "
              f"on the same folder; drift {per_run * 100:.2f} % per run")
        print()
        print("| delay-500 true | invocation | stopped before --max-runs | mean reported rounds | "
              "stopping rule: a difference in its set | report: delay-500 slower | faster | equivalent | "
              "report: A/A (main-repeat) faster or slower |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for eff in (0.05, 0.0):
            r = settle(exp, arms, {"delay-500": math.log(1 + eff)}, sigma, per_run,
                       args.settle_sims, args.seed, 6, 10)
            for suffix, label in (("", "1st, --max-runs 6"), ("2", "2nd, --max-runs 10")):
                early = pct(r["stopped_early"]) if not suffix else "—"
                print(f"| +{eff * 100:g} % | {label} | {early} | {r['rounds' + suffix]:.2f} | "
                      f"{pct(r['diff' + suffix])} | {pct(r['slower' + suffix])} | "
                      f"{pct(r['faster' + suffix])} | {pct(r['equivalent' + suffix])} | "
                      f"{pct(r['aa_false' + suffix])} |")
        print()
    if args.only == "looks":
        arms = ["main", "main-repeat", "delay-500"]
        print(f"(d') the stopping rule alone (in memory, no files), arms {', '.join(arms)}, "
              f"--max-runs 6, drift as in (a), {args.looks_sims} sweeps per row")
        print()
        print("| delay-500 true | stopping rule: a difference in its set | mean reported rounds at the stop |")
        print("|---:|---:|---:|")
        for eff in (0.0, 0.05):
            d, r = looks_in_memory(exp, arms, {"delay-500": math.log(1 + eff)}, sigma, DRIFT_TOTAL,
                                   args.looks_sims, args.seed, 6)
            print(f"| +{eff * 100:g} % | {pct(d)} | {r:.2f} |")
        print()
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
