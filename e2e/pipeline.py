"""The whole pipeline, readable in one place:

    config (TOML -> pydantic, once)
      -> plan: a list of units (e2e.plan; e2e.gsm8k.run for GSM8K; nightly plans both)
      -> executor: runs the units in rounds, resumes, shows progress (e2e.executor)
           -> server session per unit: build -> fresh server -> /health -> plugin check
              -> /metrics -> workload -> /metrics -> stop -> folder finalized (e2e.session)
      -> aggregate: comparable cells -> comparisons (e2e.aggregate, e2e.stats)
      -> render: Markdown / CSV / PNG (e2e.render, written by e2e.report)

``sweep`` below is that flow for the load matrix; ``e2e gsm8k`` and ``e2e nightly`` plan other
units and call the same ``execute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from e2e.config import Experiment, Unit
from e2e.executor import Executor, LocalExecutor, OnUnit, Outcome, SessionUnit
from e2e.plan import make_plan
from e2e.report import ReportOutput, build_report
from e2e.session import SessionOptions

__all__ = ["execute", "sweep"]


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
