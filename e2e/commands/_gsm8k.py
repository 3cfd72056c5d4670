"""``e2e gsm8k``: thin typer command; the work is in ``e2e.gsm8k.run``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.config import load_experiment
from e2e.plan import GSM8K_CONCURRENCY
from e2e.console import err, guard, out, print_run, say

__all__ = ["gsm8k_command"]


def gsm8k_command(
    arms: Annotated[str, typer.Option(
        help="Arms in run order, comma-separated; a repeated name is another fresh server "
             "(main,main gives the noise floor). Must include main.")] = "main,main,flag-off,pr",
    dspark: Annotated[bool, typer.Option(
        "--dspark/--no-dspark", help="Serve with the experiment's speculator profile and "
                                     "report the acceptance length over the eval.")] = False,
    limit: Annotated[Optional[int], typer.Option(
        help="Evaluate only the first N test documents (default: all 1319).", min=1)] = None,
    concurrency: Annotated[int, typer.Option(
        help="Requests lm-eval keeps in flight.", min=1)] = GSM8K_CONCURRENCY,
    data: Annotated[Optional[Path], typer.Option(
        help="Folder with GSM8K train.jsonl and test.jsonl (offline); default: the hub "
             "dataset through lm-eval's own gsm8k task.")] = None,
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per arm server before an invalid one is given up.", min=1)] = 2,
    executor: Annotated[Optional[str], typer.Option(
        "--executor", help="Where the arms' servers run: local or ray (a Ray cluster, one "
                           "server per host; docs/cluster.md). Default: the config's.")] = None,
    no_plugin_check: Annotated[bool, typer.Option(
        "--no-plugin-check", help="Do not require the worker's e2e-plugin line (for engines "
                                  "without e2e's plugin); recorded in every arm.json.")] = False,
    config: Annotated[Optional[Path], typer.Option(
        help="Experiment TOML (default: the embedded tiny CPU default).")] = None,
    results: Annotated[Path, typer.Option(help="Results folder.")] = Path("results"),
    json_: Annotated[bool, typer.Option(
        "--json", help="Print the report as one JSON document on stdout (human text to "
                       "stderr); keys in docs/json.md.")] = False,
) -> None:
    """GSM8K 5-shot (strict-match, greedy, seed 1234) through lm-eval for every arm, each on
    a fresh server, with per-sample verdict agreement against main. Resumable per arm."""

    def body() -> None:
        experiment = load_experiment(config)
        from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k

        plan = resolve_plan(experiment, arms=arms, dspark=dspark, limit=limit,
                            concurrency=concurrency, data=data, results=results)
        console = err if json_ else out
        from e2e.execute import executor_from

        report = run_gsm8k(plan, Runner(log=say, on_unit=lambda folder, record: print_run(
            folder, record, console=console)), max_attempts=max_attempts,
            plugin_check=not no_plugin_check,
            executor=executor_from(experiment.executor, executor))
        root = plan.results / plan.experiment.name / "gsm8k"
        console.print((root / "gsm8k.md").read_text(encoding="utf-8"), highlight=False,
                      markup=False, soft_wrap=True)
        if json_:
            from e2e.render import dumps, gsm8k_json

            sys.stdout.write(dumps(gsm8k_json(report)) + "\n")
        say(f"report: {root / 'gsm8k.md'} and {root / 'gsm8k.csv'}")

    guard(body, interrupted="the server was stopped; finished arms are kept")
