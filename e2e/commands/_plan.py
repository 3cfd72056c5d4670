"""``e2e plan --target-effect 1% RESULTS``: the runs each cell needs (the work is in
``e2e.analysis``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import csv_list
from e2e.console import guard, out
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
        from e2e.analysis import (format_advice, metric, parse_effect, run_costs, runs_advice,
                                  summarize)
        from e2e.names import known_name
        from e2e.results import load_records

        target = parse_effect(target_effect)
        keys = csv_list(metric_key)
        for key in keys or []:
            try:
                metric(key)
            except KeyError as exc:
                raise ConfigError(f"--metric: {exc.args[0]}") from None
        records, problems = load_records(results_dir)
        if not records:
            raise ConfigError(f"{results_dir}: no run.json found; run `e2e sweep` first")
        if baseline is not None:
            known_name(baseline, sorted({r.spec.arm for r in records}), "baseline arm",
                       f"the arms in {results_dir}")
        summary = summarize(records, baseline=baseline or "main", report_from_run=report_from_run,
                            extra_warnings=problems)
        advice = runs_advice(summary, target, power=power,
                             metrics=tuple(keys) if keys else None,
                             costs=run_costs(records))
        out.print(format_advice(summary, advice), end="", highlight=False, markup=False,
                  soft_wrap=True)

    guard(body)
