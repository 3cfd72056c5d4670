"""``e2e plan --target-effect 1% RESULTS``: the runs each cell needs (the work is in
``e2e.analysis``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import csv_list
from e2e.console import guard, out, say
from e2e.errors import ConfigError

__all__ = ["plan_target_effect"]


def plan_target_effect(
    results_dir: Annotated[Path, typer.Argument(
        help="results/<experiment> of a finished sweep, best a calibration with an A/A arm.")],
    target_effect: Annotated[str, typer.Option(
        "--target-effect", help="Smallest effect to detect, e.g. 1% or 0.5.")],
    baseline: Annotated[Optional[str], typer.Option(
        help="Arm the others are compared with, one of the folder's (default: main).",
        show_default=False)] = None,
    metric_key: Annotated[Optional[list[str]], typer.Option(
        "--metric", metavar="KEY[,KEY...]", show_default=False,
        help="Only these metrics (keys as in cells.csv), comma-separated or repeated.")] = None,
    report_from_run: Annotated[Optional[int], typer.Option(
        help="First reported run (default: the sweep's config).", min=1)] = None,
    power: Annotated[float, typer.Option(help="Power at the target effect.", min=0.5, max=0.99)] = 0.8,
) -> None:
    """Say how many runs each cell needs for a target minimal detectable effect."""

    def body() -> None:
        from e2e.analysis.estimators import run_costs
        from e2e.analysis.planning import parse_effect, runs_advice
        from e2e.analysis.sweep import metric
        from e2e.render import format_advice, read_summary

        target = parse_effect(target_effect)
        keys = csv_list(metric_key)
        for key in keys or []:
            try:
                metric(key)
            except KeyError as exc:
                raise ConfigError(f"--metric: {exc.args[0]}") from None
        read = read_summary(results_dir, baseline=baseline, report_from_run=report_from_run)
        for message in read.skipped:  # as the report names them; the plan is without them
            say(message)
        summary, records = read.summary, read.records
        advice = runs_advice(summary, target, power=power,
                             metrics=tuple(keys) if keys else None,
                             costs=run_costs(records))
        out.print(format_advice(summary, advice), end="", highlight=False, markup=False,
                  soft_wrap=True)

    guard(body)
