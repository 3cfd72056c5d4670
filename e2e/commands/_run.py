"""``e2e run``: one run, a fresh server for one arm at one concurrency."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from e2e.commands._options import (FormatOpt, JsonOpt, Measurement, QuietOpt,
                                   flag_groups, output_format, spec_name,
                                   unreachable_concurrency)
from e2e.plan import RunSpec
from e2e.console import err, guard, print_run, say

__all__ = ["run"]


@flag_groups
def run(
    arm: Annotated[str, typer.Option(help="Arm to run (see `e2e arms`).")] = "main",
    concurrency: Annotated[int, typer.Option(help="Requests in flight.", min=1, max=1_000_000)] = 1,
    dspark: Annotated[bool, typer.Option(
        "--dspark/--no-dspark", help="Serve with the config's \\[speculators.dspark] profile "
        "(--spec dspark).")] = False,
    prompts: Annotated[Optional[int], typer.Option(
        help="Measured requests of this run (default: load.prompts_per_concurrency x "
        "--concurrency; a sweep's --prompts-per-concurrency).", min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(
        help="Prompt length in tokens (default 1031).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(
        help="Completion length in tokens, ignore_eos (default 509).", min=2)] = None,
    seed: Annotated[Optional[int], typer.Option(help="Prompt seed (same prompts on every arm).")] = None,
    format_: FormatOpt = None,
    json_: JsonOpt = False,
    quiet: QuietOpt = False,
    flags: Measurement = Measurement(),
) -> None:
    """One run: a fresh server for ARM, the reference load at one concurrency, its metrics
    written to results/<experiment>/<run id>/ (run.json, requests.parquet, server.log,
    /metrics before and after)."""

    def body() -> None:
        from e2e.plan import claim_order
        from e2e.results.store import next_repeat, writing
        from e2e.session import SessionOptions, check_units, run_unit

        as_json = output_format(format_, json_) == "json"
        speculator = spec_name(flags.spec, dspark)
        experiment = flags.experiment(speculator=speculator)
        results = flags.results
        spec = RunSpec.resolve(experiment, arm=arm, concurrency=concurrency,
                               dspark=speculator is not None,
                               prompts=prompts, input_len=input_len, output_len=output_len,
                               seed=seed)
        check_units(experiment, [spec])  # before its run id names a folder
        for line in unreachable_concurrency([spec]):
            say(line)
        session = SessionOptions(plugin_check=not flags.no_plugin_check, progress=not quiet,
                                 say=(lambda message: None) if quiet else say)
        # one writer at a time: two runs at once would take the same repeat number
        with writing(results, experiment.name, wait_s=experiment.server.lock_wait_s):
            spec = spec.model_copy(update={"repeat": next_repeat(results, experiment.name,
                                                                 spec.cell)})
            with claim_order(results / experiment.name, experiment):
                folder, record = run_unit(experiment, spec, results, session)
        if as_json:
            from e2e.render import dumps, run_json

            print_run(folder, record, console=err)
            sys.stdout.write(dumps(run_json(folder, record)) + "\n")
        else:
            print_run(folder, record)
        if not record.valid:
            raise SystemExit(1)

    guard(body)

