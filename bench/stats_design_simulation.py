"""The designs e2e plans, analysed as e2e analyses them, under the noise structures of issue 33:
noise that differs by cell, AR(1) server levels, true changes at the equivalence band's edge,
sequential looks, and `e2e plan`'s power statement.

Every simulated sweep takes its arm order from e2e's own ``make_plan`` on
``configs/calibration.toml`` (the arms named per case), gives every planned run a value

    ln y = ln 2.75 ms + noise(run) + effect[arm]

writes each as a ``RunRecord`` with the config snapshot (so A/A arms are recognised) and a
start time in plan order, and reads the verdicts from e2e's own ``summarize`` (mean TPOT at
concurrency 1, median TPOT above it: the headlines; 95 %, minimum effect 1 %, band ±1 %).
The looks use e2e's own ``look_at`` as ``sweep_until_settled`` does; the power statement
e2e's own ``runs_advice`` (what `e2e plan` prints). Every rate is printed with its Monte Carlo
standard error, sqrt(p (1 − p) / n).

    nice -n 10 env PYTHONPATH=$PWD python bench/stats_design_simulation.py --only family --sims 400
    nice -n 10 env PYTHONPATH=$PWD python bench/stats_design_simulation.py --only ar1 --rho 0.9 \
        --designs calibration5,default --orders fixed:1,folder --models ols,e2e --sims 250
    (the same with --only cells, ar1, looks, plan; each case's options in --help; the commands
    behind docs/explanation/statistics.md's figures are listed there)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import time
from pathlib import Path

import numpy as np
from e2e.analysis.estimators.multiplicity import holm
from e2e.analysis.estimators.sequential import look_at
from e2e.analysis.estimators.verdicts import call, is_difference
from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.compare import estimate_of
from e2e.analysis.sweep.summary import metric
from e2e.analysis.planning.advice import DESIGN_ROUNDS, runs_advice
from e2e.config import load_experiment
from e2e.plan import make_plan
from e2e.results.records import RunMetrics, RunRecord, ServerInfo
from e2e.session.session import redacted_config

LEVEL_MS = 2.75
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
CALIBRATION = Path(__file__).resolve().parent.parent / "configs" / "calibration.toml"
METRICS = (metric("tpot_ms_mean"), metric("tpot_ms_median"))
DELAYS = ["delay-100", "delay-250", "delay-500"]


def record(experiment, config, spec, value: float, index: int) -> RunRecord:
    when = (T0 + dt.timedelta(seconds=20 * index)).isoformat()
    return RunRecord(
        experiment=experiment.name, run_id=spec.run_id, spec=spec, arm_settings={}, config=config,
        server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"), provenance={},
        started_at=when, finished_at=when, valid=True,
        metrics=RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=0,
                           output_tokens=0, **{stats_key(spec.concurrency): value}))


def stats_key(concurrency: int) -> str:
    """The headline metric of a cell without the speculator (only it is simulated)."""
    return "tpot_ms_mean" if concurrency == 1 else "tpot_ms_median"


def noise(rng, plan, sigma, rho: float = 0.0) -> np.ndarray:
    """Per-run log noise in plan (time) order: sd ``sigma`` (a number, or per concurrency a
    dict), AR(1) with lag-1 correlation ``rho`` when rho > 0 (marginal sd kept)."""
    sd = np.array([sigma[u.concurrency] if isinstance(sigma, dict) else sigma for u in plan])
    z = rng.standard_normal(len(plan))
    if rho > 0:
        for i in range(1, len(z)):
            z[i] = rho * z[i - 1] + math.sqrt(1 - rho * rho) * z[i]
    return sd * z


def sweep(rng, experiment, plan, config, effects, sigma, rho=0.0):
    e = noise(rng, plan, sigma, rho)
    return [record(experiment, config, u, LEVEL_MS * math.exp(e[i] + effects.get(u.arm, 0.0)), i)
            for i, u in enumerate(plan)]


def rate(k: float, n: int) -> str:
    p = k / n
    return f"{p * 100:.1f} % ± {math.sqrt(max(p * (1 - p), 1e-12) / n) * 100:.1f}"


def clustered_rate(per_sweep: list[float]) -> str:
    """A share pooled over every comparison of every sweep, with its Monte Carlo error taken
    over sweeps (the comparisons of one sweep share the baseline's runs, so they are not
    independent draws: sqrt(p (1 - p) / n) over comparisons understates the error)."""
    x = np.asarray(per_sweep, dtype=float)
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
    return f"{x.mean() * 100:.1f} % ± {se * 100:.1f}"


def _holm_before(comps) -> dict:
    """The rule before issue 33: one Holm family, each comparison entering with the p of the
    test behind its verdict (the smaller of the two when inconclusive)."""
    def used(c):
        if is_difference(c.verdict):
            return c.p_value
        return c.tost_p if c.verdict == "equivalent" else min(c.p_value, c.tost_p)
    adj = holm([used(c) for c in comps])
    return {id(c): a for c, a in zip(comps, adj)}


def family(exp, sims, seed, comparisons, verdicts):
    """A false "equivalent" (a true change at the band's edge, +1.0 %) or a false difference (no
    change), anywhere in the family, surviving the family-wise rule; noise 0.2 % per run."""
    print("(1) family-wise false verdicts: arms main + delay-100/250/500 (no A/A arm), --runs 4 "
          "(3 reported rounds), every delay arm's true change the same; per-run noise 0.2 % for "
          "a false equivalent (at the band's edge), 1.25 % for a false difference (no change)")
    print()
    print("| comparisons | true change | false verdict | after: both hypotheses (paired_holm) "
          "| before: each comparison's own verdict's p | unadjusted |")
    print("|---:|---:|---|---:|---:|---:|")
    for concs in [[1, 2, 4, 8][:comparisons // len(DELAYS)]]:
        arms = ["main", *DELAYS]
        plan = make_plan(exp, arms=arms, concurrencies=concs, spec_modes=[False], runs=4)
        config = redacted_config(exp)
        for true, what, sigma in ((math.log(1.01), "equivalent", 0.002),
                                  (0.0, "difference", 0.0125)):
            if what not in verdicts:
                continue
            rng = np.random.default_rng(seed)
            after = before = raw = 0
            for _ in range(sims):
                s = summarize(sweep(rng, exp, plan, config, {a: true for a in DELAYS}, sigma),
                              metrics=METRICS)
                prim = [c for c in s.comparisons if c.role == "primary"]
                bad = [c for c in prim if (c.verdict == "equivalent" if what == "equivalent"
                                           else is_difference(c.verdict))]
                old = _holm_before(prim)
                after += any(c.survives for c in bad)
                before += any(old[id(c)] < 0.05 for c in bad)
                raw += bool(bad)
            print(f"| {len(DELAYS) * len(concs)} | {'+1.0 % (edge)' if true else '0'} | {what} | "
                  f"{rate(after, sims)} | {rate(before, sims)} | {rate(raw, sims)} |")
    print()


def cells(exp, sims, seed, levels):
    """Noise that differs by concurrency: A/A false calls and coverage per cell."""
    arms = ["main", "main-repeat", "delay-500"]
    concs = [1, 2, 4, 8]
    print("(2) noise that differs by cell: arms main, main-repeat (A/A), delay-500 (no true "
          "change), concurrency 1/2/4/8, --runs 4; share called faster/slower (A/A false calls, "
          "unadjusted) and share of 95 % intervals holding the true 0, per cell")
    print()
    print("| per-run noise at c1/c2/c4/c8 | arm | c1 | c2 | c4 | c8 | coverage c1 | c2 | c4 | c8 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    plan = make_plan(exp, arms=arms, concurrencies=concs, spec_modes=[False], runs=4)
    config = redacted_config(exp)
    for label, sigma in (("/".join(f"{x:g}" for x in levels) + " %",
                          {c: x / 100 for c, x in zip(concs, levels)}),):
        rng = np.random.default_rng(seed)
        false = {(a, c): 0 for a in arms[1:] for c in concs}
        cover = {(a, c): 0 for a in arms[1:] for c in concs}
        for _ in range(sims):
            s = summarize(sweep(rng, exp, plan, config, {}, sigma), metrics=METRICS)
            for a in arms[1:]:
                for c in concs:
                    comp = s.comparison(a, c, "base", stats_key(c))
                    false[(a, c)] += is_difference(comp.verdict)
                    lo, hi = comp.interval
                    cover[(a, c)] += lo <= 0.0 <= hi
        for a in arms[1:]:
            print(f"| {label} | {a} | " + " | ".join(rate(false[(a, c)], sims) for c in concs)
                  + " | " + " | ".join(rate(cover[(a, c)], sims) for c in concs) + " |")
    print()


DEFAULT = CALIBRATION.parent / "default.toml"
ARM_SETS = {
    "calibration5": (CALIBRATION, ["main", "main-repeat", *DELAYS], [1]),
    "calibration3": (CALIBRATION, ["main", "main-repeat", "delay-500"], [1]),
    "default": (DEFAULT, ["main", "flag-off", "pr"], [1, 4]),
}
"""ar1's designs: the calibration config's 5 and 3 arms (concurrency 1), the default config's
3 arms at its concurrencies 1 and 4 (without the speculator): two cells interleaved per round."""


def time_model(name: str):
    """Set the cell model's AR(1) correlation as the row asks: "ols" (none, as before issue 33
    item 3), "e2e" (e2e's rule, ``_model.folder_rho``: REML over the folder's headline cells
    with 40 residual df or more, else the calibration's 0.48), "reml" (REML over the folder's
    cells whatever their df, with its plausible set), or "fixed:X" (plain GLS at ρ = X wherever
    the term is possible, standard errors at that ρ only)."""
    from e2e.analysis.estimators import model as _model
    from e2e.analysis.sweep import compare as _compare  # where the comparison calls it

    _model.MIN_FOLDER_AR1_DF = 0 if name == "reml" else 40
    if name in ("e2e", "reml"):
        _compare.folder_rho = _model.folder_rho
    else:
        value = 0.0 if name == "ols" else float(name.split(":", 1)[1])
        _compare.folder_rho = lambda fits: ((value, "calibration", ()) if value > 0
                                          else (0.0, None, ()))


def ar1(sims, seed, rho, orders, designs, models, runs=4):
    """AR(1) server levels in time order: A/A false calls and interval coverage per arm, with
    a fixed order seed (every sweep of a config the same order: the load's seed, as before
    issue 33 item 3) or the folder's own (drawn per sweep, ``folder_order``), the cell model
    without time (OLS) or with it (AR(1) GLS)."""

    print(f"(3) AR(1) server levels, lag-1 correlation {rho:g} per run in time order (the plan's "
          "order, one run every 20 s), marginal noise 1.25 % per run, no arm changes anything, "
          f"--runs {runs} ({runs - 1} reported rounds); per arm: share called faster/slower (unadjusted) and "
          "share of 95 % intervals holding 0; the worst arm's, and every arm's together")
    print()
    print("| design | order seed | model | per-arm false calls | worst arm | per-arm coverage "
          "| lowest | coverage, all arms | AR(1) used | mean se of ln ratio |")
    print("|---|---|---|---|---:|---|---:|---:|---:|---:|")
    try:
        for design in designs:
            path, arms, concs = ARM_SETS[design]
            exp = load_experiment(path)
            config = redacted_config(exp)
            for order in orders:
                for model in models:
                    time_model(model)
                    rng = np.random.default_rng(seed)
                    false = {a: 0 for a in arms[1:]}
                    cover = {a: 0 for a in arms[1:]}
                    used = total = 0
                    ses: list[float] = []
                    per_sweep: list[float] = []
                    fixed = (make_plan(exp, arms=arms, concurrencies=concs, spec_modes=[False],
                                       runs=runs, seed=int(order.split(":")[1]))
                             if order.startswith("fixed") else None)
                    draw = np.random.default_rng([seed, 7])
                    for _ in range(sims):
                        plan = fixed or make_plan(exp, arms=arms, concurrencies=concs,
                                                  spec_modes=[False], runs=runs,
                                                  seed=int(draw.integers(2**31)))
                        s = summarize(sweep(rng, exp, plan, config, {}, 0.0125, rho),
                                      metrics=METRICS)
                        held = 0
                        for a in arms[1:]:
                            for c in concs:
                                comp = s.comparison(a, c, "base", stats_key(c))
                                false[a] += is_difference(comp.verdict)
                                lo, hi = comp.interval
                                cover[a] += lo <= 0.0 <= hi
                                held += lo <= 0.0 <= hi
                                used += comp.time_model == "ar1-gls"
                                ses.append(comp.se)
                                total += 1
                        per_sweep.append(held / (len(arms[1:]) * len(concs)))
                    n = sims * len(concs)
                    worst = max(arms[1:], key=lambda a: false[a])
                    low = min(arms[1:], key=lambda a: cover[a])
                    label = ("the folder's (drawn per sweep)" if order == "folder"
                             else f"{order.split(':')[1]} (fixed)")
                    print(f"| {design} ({len(arms)} arms, c{'/'.join(map(str, concs))}) | {label} "
                          f"| {model} | " + ", ".join(f"{a} {rate(false[a], n)}" for a in arms[1:])
                          + f" | {worst}: {rate(false[worst], n)} | "
                          + ", ".join(f"{a} {rate(cover[a], n)}" for a in arms[1:])
                          + f" | {low}: {rate(cover[low], n)} | "
                          f"{rate(sum(cover.values()), n * len(arms[1:]))} "
                          f"(by sweep {clustered_rate(per_sweep)}) | "
                          f"{used / total * 100:.0f} % | {np.mean(ses) * 100:.3f} % |", flush=True)
    finally:
        time_model("e2e")
    print()


def looks(exp, sims, seed, max_runs, effects):
    """The stopping rule of --until-settled without files (the loop of sweep_until_settled:
    summarize on the rounds so far, look_at with the looks before), exact boundaries against
    the union bound; what the report shows at the stop (the interval at the look's level)."""
    arms = ["main", "main-repeat", "delay-500"]
    start = exp.report_from_run
    plan = make_plan(exp, arms=arms, concurrencies=[1], spec_modes=[False], runs=max_runs)
    config = redacted_config(exp)
    print(f"(4) --until-settled, arms {', '.join(arms)} (main-repeat A/A, outside the stopping "
          f"set), --max-runs {max_runs} (looks after 3..{max_runs - start + 1} reported rounds), "
          "noise 1.25 % per run, Pocock-type spending at 5 %")
    print()
    print("| delay-500 true | boundaries | decided difference | decided equivalent | stopped "
          "early | mean rounds | coverage at the stop | coverage, early stops only |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for eff in effects:
        true = math.log(1 + eff)
        rng = np.random.default_rng(seed)
        res = {rule: {"diff": 0, "equiv": 0, "early": 0, "cover": 0, "cover_early": 0,
                      "rounds": []} for rule in ("exact", "union")}
        for _ in range(sims):
            recs = sweep(rng, exp, plan, config, {"delay-500": true}, 0.0125)
            primaries: dict[int, list] = {}  # rounds -> the primary comparisons, shared by both rules
            for rule, r in res.items():
                earlier: list = []
                for runs in range(start + 2, max_runs + 1):
                    if runs not in primaries:
                        s = summarize([x for x in recs if x.spec.repeat <= runs], metrics=METRICS[:1])
                        primaries[runs] = [c for c in s.comparisons if c.role == "primary"]
                    prim = primaries[runs]
                    kw = dict(rounds=runs - start + 1, max_rounds=max_runs - start + 1)
                    if rule == "exact":
                        look = look_at([estimate_of(c) for c in prim], earlier=earlier, **kw)
                    else:
                        spent = earlier[-1].cumulative if earlier else None
                        look = look_at([estimate_of(c) for c in prim], spent_before=spent, **kw)
                    earlier.append(look)
                    if look.stop:
                        break
                r["diff"] += "difference" in look.decisions
                r["equiv"] += "equivalent" in look.decisions
                stopped_early = look.rounds < max_runs - start + 1
                r["early"] += stopped_early
                r["rounds"].append(look.rounds)
                lo, hi = estimate_of(prim[0]).interval(look.confidence)
                inside = lo <= math.exp(true) <= hi
                r["cover"] += inside
                r["cover_early"] += inside and stopped_early
        for rule, r in res.items():
            early = r["early"]
            cond = f"{rate(r['cover_early'], early)} (of {early})" if early else "—"
            print(f"| +{eff * 100:g} % | {rule} | {rate(r['diff'], sims)} | {rate(r['equiv'], sims)} | "
                  f"{rate(early, sims)} | {np.mean(r['rounds']):.2f} | {rate(r['cover'], sims)} | "
                  f"{cond} |")
    print()


def _test_power(exp, config, arms, rounds, sims, seed, rho, sigma=0.0125, check=None):
    """e2e's own test in the calibration design at ``rounds`` reported rounds: ``sims`` sweeps
    with no change, every non-baseline arm's comparison kept (its estimate, standard error,
    df); a true change δ only shifts an estimate by ln(1 + δ) (the model's residuals, its
    errors and df do not move with an arm's effect), so the test's power at δ is the share of
    the kept comparisons that ``call`` reads as slower once shifted. Each comparison is
    kept as the smallest shift that makes it "slower" (its 95 % interval's lower end above 1
    and at least the minimum effect, 1 %), so the power at any δ is the share of those at most
    ln(1 + δ): returns them per sweep (rows: sweeps, columns: the sweep's comparisons) and the
    kept estimates. ``check``: effects (in %) at which the shares are checked against
    ``call`` itself on the kept comparisons."""
    plan = make_plan(exp, arms=arms, concurrencies=[1], spec_modes=[False], runs=rounds + 1)
    rng = np.random.default_rng([seed, rounds, int(rho * 100)])
    floor = math.log1p(0.01)
    per_sweep, kept = [], []
    for _ in range(sims):
        s = summarize(sweep(rng, exp, plan, config, {}, sigma, rho), metrics=METRICS[:1])
        row = []
        for c in s.comparisons:
            if c.arm != "main":
                e = estimate_of(c)
                if e is not None:
                    kept.append(e)
                    lo, _ = e.interval(0.95)
                    row.append(max(-math.log(lo), floor - e.log_ratio))
        per_sweep.append(row)
    shifts = np.array(per_sweep, dtype=float)
    for effect_pct in check or ():
        shift = math.log1p(effect_pct / 100.0)
        direct = np.mean([call(dataclasses.replace(e, log_ratio=e.log_ratio + shift),
                                     time_metric=True, confidence=0.95, min_effect_pct=1.0)
                          == "slower" for e in kept])
        assert abs(direct - np.mean(shifts <= shift)) < 1e-9, (effect_pct, direct)
    return shifts, kept


def _power_at(shifts: np.ndarray, effects: np.ndarray) -> np.ndarray:
    """The share of ``shifts`` (each comparison's smallest shift read as slower) at most
    ln(1 + effect) for each effect in %: the test's power at it."""
    ordered = np.sort(shifts.ravel())
    return np.searchsorted(ordered, np.log1p(effects / 100.0), side="right") / ordered.size


def plan_power(exp, sims, seed, target, power_sims, rhos=(0.0, 0.5), ks=(3, 5, 8, 12),
               boot=200, diagnose=False):
    """`e2e plan`'s power statement: from simulated calibrations (5 arms, --runs 4, noise 1.25 %
    per run, independent or AR(1) in time), the effect `e2e plan` says each design detects with
    80 % power (``runs_advice``), and e2e's own test's power at it (``_test_power``: the same
    design at those rounds, the same noise). The mean true power has two Monte Carlo errors:
    over the calibrations (the sd of their powers / √sims) and over the power curve (a
    bootstrap, ``boot`` resamples of the power sweeps, each sweep with all its comparisons)."""
    if not set(ks) <= set(DESIGN_ROUNDS):
        raise SystemExit(f"--rounds: e2e plan prints {DESIGN_ROUNDS}, not {ks}")
    arms = ["main", "main-repeat", *DELAYS]
    plan = make_plan(exp, arms=arms, concurrencies=[1], spec_modes=[False], runs=4)
    config = redacted_config(exp)
    sigma = 0.0125
    print(f"(5) `e2e plan`'s power statement: {sims} simulated calibrations per row (5 arms, "
          "--runs 4, noise 1.25 % per run; independent runs, or AR(1) over the runs' time "
          "order); for each design the effect `e2e plan --target-effect "
          f"{target:g}%` prints as detected with 80 % power, and e2e's own test's power at it "
          f"({power_sims} sweeps of that design per row, every arm's comparison); mean true "
          "power ± Monte Carlo error over calibrations ± over the power curve (bootstrap of "
          f"the power sweeps, {boot} resamples), and both together; last, the effect planned "
          "without the report's minimum effect (the interval's MDE alone, as `e2e plan` did "
          "before it counted it) and the mean true power there, on the same draws")
    print()
    print("| noise | rounds | printed effect (median) | mean true power | ± calibrations "
          "| ± power curve | ± both | true power under 80 % | under 50 % "
          "| interval's MDE alone (median) | its mean true power |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    diag = []
    for rho in rhos:
        time_model("e2e")
        rng = np.random.default_rng([seed, int(rho * 100)])
        printed = {k: [] for k in ks}
        alone = {k: [] for k in ks}
        plan_se = {k: [] for k in ks}
        for _ in range(sims):
            s = summarize(sweep(rng, exp, plan, config, {}, sigma, rho), metrics=METRICS[:1])
            adv = runs_advice(s, target, metrics=("tpot_ms_mean",))[0]
            # the plan as if the report had no minimum effect: the interval's MDE alone
            bare = runs_advice(dataclasses.replace(s, min_effect_pct=0.0), target,
                               metrics=("tpot_ms_mean",))[0]
            for (k, effect), (_, effect0) in zip(adv.detectable, bare.detectable):
                if k in printed:
                    printed[k].append(effect)
                    alone[k].append(effect0)
                    plan_se[k].append(adv.plan_se_pct / 100.0 / math.sqrt(k))
        label = "independent" if rho == 0 else f"AR(1) ρ {rho:g}"
        for k in ks:
            effects = np.array([e for e in printed[k] if e is not None], dtype=float)
            shifts, kept = _test_power(exp, config, arms, k, power_sims, seed, rho, sigma,
                                       check=[float(np.median(effects))])
            p = _power_at(shifts, effects)
            se_cal = p.std(ddof=1) / math.sqrt(len(p))
            brng = np.random.default_rng([seed, k, int(rho * 100), 9])
            means = [_power_at(shifts[brng.integers(0, len(shifts), len(shifts))], effects).mean()
                     for _ in range(boot)]
            se_curve = float(np.std(means, ddof=1))
            p0 = _power_at(shifts, np.array([e for e in alone[k] if e is not None], dtype=float))
            print(f"| {label} | {k} | {np.median(effects):.1f} % | {p.mean() * 100:.1f} % | "
                  f"{se_cal * 100:.1f} | {se_curve * 100:.1f} | "
                  f"{math.hypot(se_cal, se_curve) * 100:.1f} | "
                  f"{rate(int((p < 0.8).sum()), len(p))} | "
                  f"{rate(int((p < 0.5).sum()), len(p))} | {np.median(alone[k]):.1f} % | "
                  f"{p0.mean() * 100:.1f} % |", flush=True)
            if diagnose:
                lr = np.array([e.log_ratio for e in kept])
                se = np.array([e.se for e in kept])
                df = np.array([e.df for e in kept])
                bare_shifts = np.array([[-math.log(e.interval(0.95)[0]) for e in kept]])
                bare = _power_at(bare_shifts, effects).mean()
                diag.append(f"| {label} | {k} | {bare * 100:.1f} % | "
                            f"{lr.std(ddof=1) * 100:.3f} % | "
                            f"{np.mean(se) * 100:.3f} % | {np.sqrt(np.mean(se ** 2)) * 100:.3f} % | "
                            f"{np.median(df):.1f} | {np.median(plan_se[k]) * 100:.3f} % | "
                            f"{np.mean(plan_se[k]) * 100:.3f} % |")
    print()
    if diag:
        print("The test at those rounds (the power sweeps): the mean true power at the printed "
              "effects were the test's interval alone the call (no minimum effect), the sd of "
              "its estimates, its mean "
              "standard error and their root mean square, its median df; and the plan's "
              "standard error for that design (upper bound per round / √rounds), median and mean "
              "over the calibrations")
        print()
        print("| noise | rounds | power, interval alone | sd of estimates | mean se | rms se "
              "| median df | plan's se (median) | plan's se (mean) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(diag))
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["family", "cells", "ar1", "looks", "plan"], required=True)
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--max-runs", type=int, default=6)
    ap.add_argument("--runs", type=int, default=4, help="ar1: runs per cell (1 warmup)")
    ap.add_argument("--target", type=float, default=5.0)
    ap.add_argument("--power-sims", type=int, default=200,
                    help="plan: sweeps of each design that measure the test's power")
    ap.add_argument("--rhos", default="0,0.5", help="plan: AR(1) correlations of the noise")
    ap.add_argument("--rounds", default="3,5,8,12",
                    help="plan: the designs' reported rounds (of e2e plan's 3, 5, 8, 12)")
    ap.add_argument("--boot", type=int, default=200,
                    help="plan: bootstrap resamples of the power sweeps (the power curve's error)")
    ap.add_argument("--diagnose", action="store_true",
                    help="plan: also the test's standard error and df at each design beside "
                    "the plan's")
    ap.add_argument("--comparisons", type=int, choices=[3, 6, 9, 12], default=12,
                    help="family: 3 delay arms x 1, 2, 3 or 4 concurrencies")
    ap.add_argument("--verdicts", default="equivalent,difference",
                    help="family: which false verdicts (equivalent at the edge, difference at 0)")
    ap.add_argument("--noise", default="1,2,4,8", help="cells: per-run noise in %% at c1/c2/c4/c8")
    ap.add_argument("--orders", default="fixed:1,folder",
                    help="ar1: order seeds, fixed:N (every sweep seed N) or folder (drawn per sweep)")
    ap.add_argument("--designs", default="calibration5",
                    help="ar1: " + ", ".join(ARM_SETS) + " (comma-separated)")
    ap.add_argument("--models", default="ols,e2e",
                    help="ar1: the cell model's time term: ols, e2e (its rule), reml (the "
                    "folder's REML whatever its df), fixed:RHO")
    ap.add_argument("--effects", default="0,0.02,0.05", help="looks: true changes of delay-500")
    args = ap.parse_args()
    t0 = time.perf_counter()
    exp = load_experiment(CALIBRATION)
    print(f"{args.sims} sweeps per row, seed {args.seed}; e2e's summarize (95 %, minimum effect "
          "1 %, band ±1 %); rates ± their Monte Carlo standard error")
    print()
    if args.only == "family":
        family(exp, args.sims, args.seed, args.comparisons, args.verdicts.split(","))
    elif args.only == "cells":
        cells(exp, args.sims, args.seed, [float(x) for x in args.noise.split(",")])
    elif args.only == "ar1":
        ar1(args.sims, args.seed, args.rho, args.orders.split(","), args.designs.split(","),
            args.models.split(","), args.runs)
    elif args.only == "looks":
        looks(exp, args.sims, args.seed, args.max_runs, [float(x) for x in args.effects.split(",")])
    else:
        plan_power(exp, args.sims, args.seed, args.target, args.power_sims,
                   tuple(float(x) for x in args.rhos.split(",")),
                   tuple(int(x) for x in args.rounds.split(",")), args.boot, args.diagnose)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
