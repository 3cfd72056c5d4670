"""How many runs each cell needs to detect an effect (``e2e plan --target-effect 1% RESULTS``).

Reads a finished sweep (ideally a calibration with an A/A arm, e.g. ``configs/calibration.toml``)
and plans on the scale of the test the report makes: each cell's comparison (the A/A arm's,
else the cell's first, from ``e2e.analysis.sweep.aggregate.summarize``) has a standard error at the
rounds made, in the design it was fitted in (the model's arms and blocks, its time term's
honest errors, shared noise, the floor); times √rounds that is the standard error of one
round, and a design of k rounds has that over √k, on the test's df scaled to k rounds; the
effect a design detects counts the report's minimum effect (a difference needs the estimate
past it as well as the interval excluding 0). The answer is the fewest reported rounds
whose detected effect (the power asked, the report's confidence, and the minimum effect
where the target is above it: ``planned_floor``) is the target, planned from that standard
error's upper confidence bound at ``PLAN_NOISE_LEVEL`` on its df (the margin above the exact
minimum effect from the estimate: ``_effect``), and the ``e2e sweep --runs`` value that gives
them (plus warmups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import t as student_t

from e2e.analysis.estimators.estimates import DEFAULT_POWER, mde_log
from e2e.analysis.estimators.power import design_df, duet_shape, upper_noise
from e2e.analysis.estimators.components import Components, RunCost
from e2e.analysis.sweep.summary import Summary
from e2e.errors import ConfigError

__all__ = ["Design", "RunsAdvice", "DESIGN_ROUNDS", "WINDOW_CHOICES", "parse_effect", "planned_floor",
           "runs_advice"]


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
    plan_se_pct: float | None = None
    """What the plan uses: the standard error of one round of the test's design (ln scale, in
    %), the upper confidence bound at ``PLAN_NOISE_LEVEL`` on its df
    (``upper_noise``) of the comparison's standard error times √rounds."""
    components: Components | None = None
    slots: int = 0
    """Measured (and planned) in duets of this many sides; 0: one server at a time."""
    designs: tuple[Design, ...] = ()
    """With load windows: for each windows-per-server choice, the servers it needs and their
    time (``WINDOW_CHOICES``)."""

    @property
    def best(self) -> Design | None:
        """The design that reaches the target in the least time (None: none does)."""
        done = [d for d in self.designs if d.sweep_runs is not None and d.seconds is not None]
        return min(done, key=lambda d: (d.seconds, d.windows)) if done else None


@dataclass(frozen=True)
class Design:
    """``sweep_runs`` fresh servers per arm (warmups included; in duets, rounds of duets) ×
    ``windows`` load windows each for the target MDE; ``seconds`` their wall time per arm (the
    sweep's over its arms; None: no measured cost)."""

    windows: int
    sweep_runs: int | None
    seconds: float | None


DESIGN_ROUNDS = (3, 5, 8, 12)
WINDOW_CHOICES = (1, 2, 3, 4, 6, 8)


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


def _effect(se_round: float, rounds: int, df: float, confidence: float,
            power: float, min_effect_pct: float = 0.0, bound: float = 1.0) -> float | None:
    """The effect in % a design of ``rounds`` rounds detects with ``power`` in the report's
    test, which calls a difference when the interval excludes 0 and the estimate is at least
    ``min_effect_pct``: the larger of what the interval needs (``mde_log`` of se_round /
    √rounds on ``df``: its bar plus the power's margin) and what the minimum effect needs
    (ln(1 + min_effect) plus the power's margin). ``se_round`` is the standard error's upper
    confidence bound, ``bound`` times its estimate: the interval's bar is read from the bound,
    but the minimum effect is exact, so the margin above it is read from the estimate (from the
    bound, a design the minimum effect decides had 88-89 % power at the printed effect,
    docs/measurements/plan-power.md). None without df."""
    if df <= 0 or rounds < 1:
        return None
    se = se_round / math.sqrt(rounds)
    interval = mde_log(se, df, confidence=confidence, power=power)
    at_floor = (math.log1p(min_effect_pct / 100.0)
                + float(student_t.ppf(power, df)) * se / bound) if min_effect_pct > 0 else 0.0
    return math.expm1(max(interval, at_floor)) * 100.0


def _rounds(se_round: float, target_pct: float, df_at, confidence: float, power: float,
            min_effect_pct: float = 0.0, bound: float = 1.0, max_rounds: int = 1000) -> int | None:
    """The fewest rounds (from 2) whose detected effect (``_effect``, with the minimum effect
    ``min_effect_pct``) is at most ``target_pct``."""
    for k in range(2, max_rounds + 1):
        got = _effect(se_round, k, df_at(k), confidence, power, min_effect_pct, bound)
        if got is not None and got <= target_pct:
            return k
    return None


def _df_at(row, design: dict):
    """The test's df at k rounds: its df now (without the borrowed part) scaled by the
    design's df at k over the design's df at the rounds made, plus the borrowed df. Where the
    time term's honest errors took df (Satterthwaite's, below the design's), the same share."""
    now = design_df(row.n_blocks, **design)
    own = (row.df or 0.0) - row.prior_df

    def df_at(k: int) -> float:
        at = design_df(k, **design)
        return (own * at / now if now > 0 and own > 0 else at) + row.prior_df

    return df_at


def _designs(row, se_round: float, target_pct: float, df_at, confidence: float,
             power: float, warmups: int, cost: RunCost | None, design: dict,
             min_effect_pct: float, bound: float) -> tuple[Design, ...]:
    """Servers × windows for the target: the plan's standard error per round scaled by the
    per-run sd each windows choice gives relative to the measured one
    (``Components.run_sd_with``), so the measured design reads as the table above."""
    parts = row.components
    if parts is None or parts.run_sd_with(parts.windows) <= 0:
        return ()
    out = []
    for k in WINDOW_CHOICES:
        se = se_round * parts.run_sd_with(k) / parts.run_sd_with(parts.windows)
        n = _rounds(se, target_pct, df_at, confidence, power, min_effect_pct, bound)
        runs = None if n is None else n + warmups
        out.append(Design(windows=k, sweep_runs=runs,
                          seconds=None if runs is None or cost is None
                          else runs * cost.seconds(k) * _steps_per_arm(design)))
    return tuple(out)


def _steps_per_arm(design: dict) -> float:
    """A round's wall time per arm in units of one run: 1 one server at a time; in duets the
    round's b duets (``duet_shape``), each one run long, shared by the arms."""
    shape = duet_shape(design["method"], design["arms"], design.get("slots", 0))
    return 1.0 if shape is None else shape[1] / design["arms"]


def planned_floor(min_effect_pct: float, target_pct: float) -> float:
    """The minimum effect the rounds for ``target_pct`` are planned with: the report's, where
    the target is above it (a "slower" call needs the estimate past it, so the rounds are
    those of the call the report makes); none where the target is at or under it (no number
    of rounds gives a call at the minimum effect itself 80 % power: the estimate passes it
    about half the time), so the rounds resolve the target with the interval alone, as an
    "equivalent" call within ±target needs."""
    return min_effect_pct if target_pct > min_effect_pct else 0.0


def runs_advice(summary: Summary, target_pct: float, *, power: float = DEFAULT_POWER,
                metrics: tuple[str, ...] | None = None,
                costs: dict[tuple[int, str], RunCost] | None = None) -> tuple[RunsAdvice, ...]:
    """For every noise row of ``summary`` (``metrics`` None: all), the rounds needed for an MDE
    of ``target_pct`` in the design the report's test uses, from that test's own standard
    error per round (see the module's docstring) at ``summary.confidence`` and ``power``, and
    the effect that design detects at other round counts, all from the standard error's upper
    confidence bound at ``PLAN_NOISE_LEVEL`` (so the power is a promise with that
    confidence, not a median); with load windows, the servers × windows designs and their
    time from ``costs`` (``run_costs``)."""
    floor = planned_floor(summary.min_effect_pct, target_pct)
    out = []
    for row in summary.noise:
        if metrics is not None and row.metric not in metrics:
            continue
        if row.se is None or row.n_blocks < 1:
            continue
        design = dict(method=row.method if row.method in ("model", "blocked", "welch") else "blocked",
                      arms=row.arms_in_model, slot=row.slot, slots=row.slots)
        se_point = row.se * math.sqrt(row.n_blocks)
        se_round = upper_noise(se_point, row.df or 0.0)
        bound = se_round / se_point if se_point > 0 else 1.0
        df_at = _df_at(row, design)
        n = _rounds(se_round, target_pct, df_at, summary.confidence, power, floor, bound)
        out.append(RunsAdvice(
            concurrency=row.concurrency, spec_mode=row.spec_mode, metric=row.metric,
            noise_pct=row.noise_pct, source=row.source, mde_now_pct=row.mde_pct,
            rounds_now=row.n_blocks, target_pct=target_pct, reported_runs=n,
            sweep_runs=None if n is None else n + summary.report_from_run - 1,
            detectable=tuple((k, _effect(se_round, k, df_at(k), summary.confidence, power,
                                          summary.min_effect_pct, bound))
                             for k in DESIGN_ROUNDS),
            components=row.components, plan_se_pct=se_round * 100.0, slots=row.slots,
            designs=_designs(row, se_round, target_pct, df_at, summary.confidence, power,
                             summary.report_from_run - 1,
                             (costs or {}).get((row.concurrency, row.spec_mode)), design,
                             floor, bound)))
    return tuple(out)
