"""How many runs each cell needs to detect an effect (``e2e plan --target-effect 1% RESULTS``).

Reads a finished sweep (ideally a calibration with an A/A arm, e.g. ``configs/calibration.toml``),
takes each cell's run-to-run noise from ``e2e.analysis._aggregate.summarize`` (the A/A arm's blocked
comparison, else the cell's pooled blocked residuals) and answers with ``e2e.analysis._stats.runs_needed``:
the fewest reported runs per arm whose minimal detectable effect (80 % power, the report's
confidence) is the target, and the ``e2e sweep --runs`` value that gives them (plus warmups).
"""

from __future__ import annotations

from dataclasses import dataclass
from e2e.analysis import _stats as stats
from e2e.analysis._aggregate import Summary, metric
from e2e.errors import ConfigError

__all__ = ["RunsAdvice", "parse_effect", "runs_advice", "format_advice"]


@dataclass(frozen=True)
class RunsAdvice:
    """Runs one (concurrency, spec mode, metric) needs: ``reported_runs`` per arm for an MDE of
    ``target_pct`` (None: more than 1000), ``sweep_runs`` = that plus the warmups."""

    concurrency: int
    spec_mode: str
    metric: str
    noise_pct: float
    source: str
    mde_now_pct: float | None
    rounds_now: int
    target_pct: float
    reported_runs: int | None
    sweep_runs: int | None
    detectable: tuple[tuple[int, float | None], ...] = ()
    """(reported rounds, the effect in % that design detects with the power asked), for the
    rounds of ``DESIGN_ROUNDS``: the calibration rule as a power statement."""


DESIGN_ROUNDS = (3, 5, 8, 12)


def parse_effect(text: str) -> float:
    """``"1%"``, ``"1 %"``, ``"0.5"`` -> percent as a float (> 0 and < 100)."""
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"--target-effect {text!r}: give a percentage such as 1% or 0.5") from None
    if not 0.0 < value < 100.0:
        raise ConfigError(f"--target-effect {text!r}: must be between 0 and 100 %")
    return value


def runs_advice(summary: Summary, target_pct: float, *, power: float = stats.DEFAULT_POWER,
                metrics: tuple[str, ...] | None = None) -> tuple[RunsAdvice, ...]:
    """For every noise row of ``summary`` (``metrics`` None: all), the runs needed for an MDE of
    ``target_pct`` in the design the report's test uses (its method, the number of arms in the
    cell's model, the slot term, the df borrowed by shared noise) at ``summary.confidence`` and
    ``power``, and the effect that design detects at other round counts."""
    out = []
    for row in summary.noise:
        if metrics is not None and row.metric not in metrics:
            continue
        design = dict(method=row.method if row.method in ("model", "blocked", "welch") else "blocked",
                      arms=row.arms_in_model, prior_df=row.prior_df, slot=row.slot,
                      noise_df=row.df)
        n = stats.runs_needed(row.noise_pct / 100.0, target_pct, confidence=summary.confidence,
                              power=power, **design)
        out.append(RunsAdvice(
            concurrency=row.concurrency, spec_mode=row.spec_mode, metric=row.metric,
            noise_pct=row.noise_pct, source=row.source, mde_now_pct=row.mde_pct,
            rounds_now=row.n_blocks, target_pct=target_pct, reported_runs=n,
            sweep_runs=None if n is None else n + summary.report_from_run - 1,
            detectable=tuple((k, stats.detectable_effect(row.noise_pct / 100.0, k,
                                                         confidence=summary.confidence,
                                                         power=power, **design))
                             for k in DESIGN_ROUNDS)))
    return tuple(out)


def format_advice(summary: Summary, advice: tuple[RunsAdvice, ...]) -> str:
    """Markdown: one row per (concurrency, spec mode, metric) and the ``--runs`` to use."""
    if not advice:
        return ("No noise estimate: the sweep needs an A/A arm (settings equal to "
                f"{summary.baseline}'s) or at least 2 rounds in which every arm ran.\n")
    target = advice[0].target_pct
    lines = [f"Runs for a minimal detectable effect of {target:g} % (80 % power, "
             f"{summary.confidence * 100:g} % confidence, the comparison the report makes) from "
             f"{summary.experiment}:", "",
             "| concurrency | spec mode | metric | noise | from | MDE now | rounds now | reported runs "
             "| e2e sweep --runs | "
             + " | ".join(f"detected at {k} rounds" for k in DESIGN_ROUNDS) + " |",
             "|---:|---|---|---:|---|---:|---:|---:|---:|" + "---:|" * len(DESIGN_ROUNDS)]
    for a in advice:
        lines.append(
            f"| {a.concurrency} | {a.spec_mode} | {metric(a.metric).label} | {a.noise_pct:.2f} % | "
            f"{a.source} | {'—' if a.mde_now_pct is None else f'{a.mde_now_pct:.1f} %'} | "
            f"{a.rounds_now} | {'more than 1000' if a.reported_runs is None else a.reported_runs} | "
            f"{'—' if a.sweep_runs is None else a.sweep_runs} | "
            + " | ".join('—' if e is None else f"{e:.1f} %" for _, e in a.detectable) + " |")
    reachable = [a.sweep_runs for a in advice if a.sweep_runs is not None]
    lines.append("")
    if reachable:
        lines.append(f"The largest: `e2e sweep --runs {max(reachable)}` (runs 1–"
                     f"{summary.report_from_run - 1} of each cell are warmups). Per-server variance "
                     "does not shrink with blocking; only more runs (or a quieter host) shrink it.")
    lines.append("")
    lines.append("“Detected at k rounds”: the true change each design finds with 80 % power "
                 "from the measured noise (a calibration's injected delays at least that large "
                 "should read “slower” about 80 % of the time, smaller ones less often).")
    return "\n".join(lines) + "\n"
