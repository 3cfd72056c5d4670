"""The whole pipeline, readable in one place:

    config (TOML -> pydantic, once)
      -> plan: a list of units (e2e.plan; e2e.gsm8k.run for GSM8K; nightly plans both)
      -> executor: runs the units in rounds, resumes, shows progress (e2e.execute._executor)
           -> server session per unit: build -> fresh server -> /health -> plugin check
              -> /metrics -> workload -> /metrics -> stop -> folder finalized (e2e.session._session)
      -> aggregate: comparable cells -> comparisons (e2e.analysis._aggregate, e2e.analysis._stats)
      -> render: Markdown / CSV / PNG (e2e.render, written by e2e.render._report)

``sweep`` below is that flow for the load matrix; ``e2e gsm8k`` and ``e2e nightly`` plan other
units and call the same ``execute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from e2e import analysis
from e2e.config import Experiment, Unit
from e2e.errors import ConfigError
from e2e.execute import Executor, LocalExecutor, OnUnit, Outcome, SessionUnit
from e2e.plan import make_plan
from e2e.render import ReportOutput, build_report
from e2e.session import SessionOptions

__all__ = ["execute", "sweep", "sweep_until_settled", "headline_pairs"]


def execute(experiment: Experiment, units: Sequence[Unit], results: Path, *,
            executor: Executor | None = None, session: SessionOptions = SessionOptions(),
            max_attempts: int = 2, fail_fast: bool = False,
            on_unit: OnUnit = lambda folder, record: None) -> Outcome:
    """Run every unit not yet done, each in its own server session, into ``results``."""
    return (executor or LocalExecutor()).run(
        experiment.name, units, Path(results), SessionUnit(experiment, Path(results), session),
        max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit, say=session.say)


def sweep(experiment: Experiment, results: Path, *, arms: list[str] | None = None,
          concurrencies: list[int] | None = None, spec_modes: list[bool] | None = None,
          runs: int | None = None, executor: Executor | None = None,
          session: SessionOptions = SessionOptions(), max_attempts: int = 2,
          fail_fast: bool = False, on_unit: OnUnit = lambda folder, record: None,
          report: bool = True) -> tuple[Outcome, ReportOutput | None]:
    """plan -> execute -> aggregate and render: the load matrix (``e2e sweep``)."""
    units = make_plan(experiment, arms=arms, concurrencies=concurrencies,
                      spec_modes=spec_modes, runs=runs)
    outcome = execute(experiment, units, results, executor=executor, session=session,
                      max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit)
    return outcome, build_report(Path(results) / experiment.name) if report else None


def headline_pairs(summary) -> list[tuple[dict[int, float], dict[int, float]]]:
    """Per headline comparison of a summary (each arm against the baseline, the headline
    metric of each cell): (arm values by round, baseline values by round)."""

    pairs = []
    for comp in summary.comparisons:
        if comp.metric != analysis.headline_metric(comp.concurrency, comp.spec_mode):
            continue
        arm = summary.cell(comp.arm, comp.concurrency, comp.spec_mode, comp.metric)
        base = summary.cell(comp.baseline, comp.concurrency, comp.spec_mode, comp.metric)
        pairs.append((dict(zip(arm.repeats, arm.values)), dict(zip(base.repeats, base.values))))
    return pairs


def sweep_until_settled(experiment: Experiment, results: Path, *, max_runs: int,
                        arms: list[str] | None = None, concurrencies: list[int] | None = None,
                        spec_modes: list[bool] | None = None, executor: Executor | None = None,
                        session: SessionOptions = SessionOptions(), max_attempts: int = 2,
                        on_unit: OnUnit = lambda folder, record: None,
                        baseline: str = "main") -> tuple[Outcome, analysis.Settlement]:
    """``e2e sweep --until-settled --max-runs N``: whole rounds until every headline
    comparison is settled (``analysis.settled``: alpha spent over the looks, so peeking does not
    inflate false calls) or N runs per cell are made. Starts with enough rounds for the first
    look (3 reported rounds); resumes like any sweep."""
    from e2e.analysis import summarize
    from e2e.analysis import equivalence_of
    from e2e.results import load_records

    start = experiment.report_from_run
    runs = max(experiment.repeats, start - 1 + 3)
    if max_runs < runs:
        raise ConfigError(f"--max-runs {max_runs}: adaptive repeats need at least {runs} runs "
                          f"per cell ({start - 1} warmup + 3 reported rounds for the first look)")
    total = Outcome()
    while True:
        units = make_plan(experiment, arms=arms, concurrencies=concurrencies,
                          spec_modes=spec_modes, runs=runs)
        outcome = execute(experiment, units, results, executor=executor, session=session,
                          max_attempts=max_attempts, on_unit=on_unit)
        total.ran += outcome.ran
        total.skipped = outcome.skipped
        total.given_up = outcome.given_up
        records, _ = load_records(Path(results) / experiment.name)
        summary = summarize(records, baseline=baseline, equivalence_pct=equivalence_of(records))
        pairs = headline_pairs(summary)
        settlement = analysis.settled(pairs, rounds=runs - start + 1, max_rounds=max_runs - start + 1,
                                   min_effect_pct=summary.min_effect_pct,
                                   equivalence_pct=summary.equivalence_pct)
        session.say(f"after {runs - start + 1} reported round(s): "
                    f"{sum(d != 'open' for d in settlement.decisions)} of {len(pairs)} headline "
                    f"comparison(s) settled" + ("" if settlement.stop else "; one more round"))
        if settlement.stop or outcome.given_up:
            return total, settlement
        runs += 1
