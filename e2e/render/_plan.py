"""``e2e plan``'s Markdown: one row per (concurrency, spec mode, metric) with the runs each
needs (``runs_advice``'s numbers), the servers × windows table where the runs had load windows,
and how to read them."""

from __future__ import annotations

from e2e.analysis.estimators import PLAN_NOISE_LEVEL
from e2e.analysis.planning import DESIGN_ROUNDS, RunsAdvice, planned_floor
from e2e.analysis.sweep import Summary, metric

__all__ = ["format_advice"]


def format_advice(summary: Summary, advice: tuple[RunsAdvice, ...]) -> str:
    """Markdown: one row per (concurrency, spec mode, metric) and the ``--runs`` to use."""
    if not advice:
        return ("No noise estimate: the sweep needs an A/A arm (settings equal to "
                f"{summary.baseline}'s) or at least 2 rounds in which every arm ran.\n")
    target = advice[0].target_pct
    level = PLAN_NOISE_LEVEL * 100
    lines = [f"Runs for a minimal detectable effect of {target:g} % (80 % power, "
             f"{summary.confidence * 100:g} % confidence, the comparison the report makes) from "
             f"{summary.experiment}, planned from the standard error per round of the report's "
             f"own test (its {level:g} % upper confidence bound):",
             "",
             "| concurrency | spec mode | metric | noise | se per round (upper bound) | from | MDE now "
             "| rounds now | reported runs "
             "| e2e sweep --runs | "
             + " | ".join(f"detected at {k} rounds" for k in DESIGN_ROUNDS) + " |",
             "|---:|---|---|---:|---:|---|---:|---:|---:|---:|" + "---:|" * len(DESIGN_ROUNDS)]
    for a in advice:
        lines.append(
            f"| {a.concurrency} | {a.spec_mode} | {metric(a.metric).label} | {a.noise_pct:.2f} % | "
            f"{'—' if a.plan_se_pct is None else f'{a.plan_se_pct:.2f} %'} | {a.source} | {'—' if a.mde_now_pct is None else f'{a.mde_now_pct:.1f} %'} | "
            f"{a.rounds_now} | {'more than 1000' if a.reported_runs is None else a.reported_runs} | "
            f"{'—' if a.sweep_runs is None else a.sweep_runs} | "
            + " | ".join('—' if e is None else f"{e:.1f} %" for _, e in a.detectable) + " |")
    reachable = [a.sweep_runs for a in advice if a.sweep_runs is not None]
    lines.append("")
    if reachable:
        warm = (f"runs 1–{summary.report_from_run - 1} of each cell are warmups"
                if summary.report_from_run > 2 else
                "run 1 of each cell is a warmup" if summary.report_from_run == 2 else "no warmups")
        lines.append(f"The largest: `e2e sweep --runs {max(reachable)}` ({warm}). Per-server variance "
                     "does not shrink with blocking; only more runs (or a quieter host) shrink it.")
    if any(a.slots for a in advice):
        lines.append("Rows measured in duets plan duets: `--runs` counts rounds, each round "
                     "every group of arms measured together once (C(arms, sides) duets; each "
                     "arm sits in C(arms − 1, sides − 1) of them), and the noise is the duets' "
                     "own, with the time the sides share taken out.")
    if planned_floor(summary.min_effect_pct, target) == 0.0 and summary.min_effect_pct > 0:
        lines.append(
            f"A target of {target:g} % is not above the report's {summary.min_effect_pct:g} % "
            "minimum effect: the report calls a difference only where the estimate passes "
            f"{summary.min_effect_pct:g} %, so a true change of {target:g} % or less reads "
            "“slower” in at most about half of sweeps, however many rounds are run. The "
            f"rounds above resolve ±{target:g} % with the interval alone (what an “equivalent” "
            "call within that band needs); to plan a “slower” call, give a --target-effect above "
            f"{summary.min_effect_pct:g} % (the “detected at” columns say what each design finds).")
    lines += _windows_table(advice)
    lines.append("")
    lines.append(f"“Detected at k rounds”: the true change each design finds with 80 % power "
                 "in the report's own test: its standard error at the rounds made (the model's "
                 "design, its errors honest for the time term, shared noise, the floor) times "
                 "√(rounds made / k), on its df scaled to k rounds, planned from that standard "
                 f"error's {level:g} % upper confidence bound (se·√(df / "
                 f"χ²_{{df, {1 - PLAN_NOISE_LEVEL:g}}})), or the {summary.min_effect_pct:g} % "
                 "minimum effect a difference needs plus the power's margin from the standard "
                 "error itself, whichever is larger (the minimum effect is exact), so the power is "
                 f"80 % or more, with {level:g} % confidence where the interval decides (83-88 % "
                 "on average over calibrations of 3-12 rounds, docs/measurements/plan-power.md); "
                 "an injected delay that large should read “slower” about that often. The "
                 "extrapolation assumes the standard error shrinks as 1/√rounds.")
    return "\n".join(lines) + "\n"


def _minutes(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds / 60:.1f} min"


def _windows_table(advice: tuple[RunsAdvice, ...]) -> list[str]:
    """Where the noise lives and the servers × windows that reach the target fastest."""
    rows = [a for a in advice if a.components is not None and a.designs]
    if not rows:
        return []
    lines = ["", "Where the noise lives (runs with load windows) and servers × windows per arm for "
             "the same MDE (fresh servers incl. warmups, and their time):", "",
             "| concurrency | spec mode | metric | between servers | within a server (per window) "
             "| first window | " + " | ".join(f"{d.windows} window{'s' if d.windows > 1 else ''}"
                                              for d in rows[0].designs) + " | fastest |",
             "|---:|---|---|---:|---:|---:|" + "---|" * len(rows[0].designs) + "---|"]
    for a in rows:
        c = a.components
        first = ("—" if c.first_window is None else f"{c.first_window * 100:+.2f} %"
                 + ("" if c.first_window_se is None else f" ± {c.first_window_se * 100:.2f}"))
        best = a.best
        lines.append(
            f"| {a.concurrency} | {a.spec_mode} | {metric(a.metric).label} | "
            f"{c.between_sd * 100:.2f} % ({c.between_share:.0%} of a run's variance) | "
            f"{c.within_sd * 100:.2f} % | {first} | "
            + " | ".join("more than 1000" if d.sweep_runs is None else
                         f"{d.sweep_runs} × {d.windows}, {_minutes(d.seconds)}" for d in a.designs)
            + f" | {'—' if best is None else f'`--runs {best.sweep_runs}` with windows = {best.windows}'} |")
    lines += ["", "Between servers: the sd of a fresh server's own level (ln scale, in %) beyond what "
              "its windows explain; more windows do not shrink it, only more servers do. Within a "
              "server: one window's sd around its server's level. First window: how much slower "
              "the first window after a fresh start is than the server's later ones (mean ± se)."]
    return lines
