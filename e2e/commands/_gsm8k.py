"""``e2e gsm8k``: thin typer command; the work is in ``e2e.gsm8k.run``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import (ConfigOpt, ExecutorOpt, FormatOpt, JsonOpt, QuietOpt,
                                   ResultsOpt, SpecOpt, csv_list, output_format, spec_name)
from e2e.config import load_experiment
from e2e.plan import GSM8K_CONCURRENCY
from e2e.console import err, guard, out, print_run, say

__all__ = ["gsm8k_command"]

DEFAULT_ARMS = ["main", "main", "flag-off", "pr"]


def gsm8k_command(
    arms: Annotated[Optional[list[str]], typer.Option(
        "--arms", metavar="ARM[,ARM...]",
        help="Arms in run order, comma-separated or repeated; a repeated name is another fresh "
             "server (main,main gives the noise floor). Must include main. "
             "\\[default: main,main,flag-off,pr]", show_default=False)] = None,
    dspark: Annotated[bool, typer.Option(
        "--dspark/--no-dspark", help="Serve with the config's \\[speculators.dspark] profile "
        "(--spec dspark) and report the acceptance length over the eval.")] = False,
    spec: SpecOpt = None,
    limit: Annotated[Optional[int], typer.Option(
        help="Evaluate only the first N test documents (default: all 1319).", min=1)] = None,
    concurrency: Annotated[int, typer.Option(
        help="Requests lm-eval keeps in flight.", min=1)] = GSM8K_CONCURRENCY,
    data: Annotated[Optional[Path], typer.Option(
        help="Folder with GSM8K train.jsonl and test.jsonl (offline); default: the hub "
             "dataset through lm-eval's own gsm8k task.")] = None,
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per arm server before an invalid one is given up.", min=1)] = 2,
    executor: ExecutorOpt = None,
    no_plugin_check: Annotated[bool, typer.Option(
        "--no-plugin-check", help="Do not require the worker's e2e-plugin line (for engines "
                                  "without e2e's plugin); recorded in every arm.json.")] = False,
    config: ConfigOpt = None,
    results: ResultsOpt = Path("results"),
    format_: FormatOpt = None,
    json_: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """GSM8K 5-shot (strict-match, greedy, seed 1234) through lm-eval for every arm, each on
    a fresh server, with per-sample verdict agreement against main. Resumable per arm."""

    def body() -> None:
        from e2e.execute import executor_from
        from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k

        json_out = output_format(format_, json_) == "json"
        speculator = spec_name(spec, dspark)
        experiment = load_experiment(config)
        if speculator is not None:
            experiment = experiment.with_speculator(speculator)
        plan = resolve_plan(experiment, arms=",".join(csv_list(arms) or DEFAULT_ARMS),
                            dspark=speculator is not None, limit=limit,
                            concurrency=concurrency, data=data, results=results)
        console = err if json_out else out
        log = (lambda message: None) if quiet else say
        report = run_gsm8k(plan, Runner(log=log, on_unit=lambda folder, record: print_run(
            folder, record, console=console)), max_attempts=max_attempts,
            plugin_check=not no_plugin_check, progress=not quiet,
            executor=executor_from(experiment.executor, executor))
        root = plan.results / plan.experiment.name / "gsm8k"
        console.print((root / "gsm8k.md").read_text(encoding="utf-8"), highlight=False,
                      markup=False, soft_wrap=True)
        if json_out:
            from e2e.render import dumps, gsm8k_json

            sys.stdout.write(dumps(gsm8k_json(report)) + "\n")
        log(f"report: {root / 'gsm8k.md'} and {root / 'gsm8k.csv'}")

    guard(body, interrupted="the server was stopped; finished arms are kept")
