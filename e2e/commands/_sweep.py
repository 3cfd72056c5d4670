"""``e2e sweep``: the experiment matrix, interleaved in rounds and resumable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from e2e.commands._options import (DuetOpt, ExecutorOpt, Measurement, QuietOpt, SwapOpt,
                                   csv_list, flag_groups, int_list, spec_name,
                                   unreachable_concurrency, with_duet)
from e2e.commands._report import write_report
from e2e.console import guard, out, print_run, say

__all__ = ["sweep", "spec_modes", "SweepFlags"]


def spec_modes(experiment, speculator: str | None, *, no_spec: bool = False,
               both: bool = False) -> list[bool]:
    """The spec modes a sweep runs (False: without a speculator): what the flags say, else
    what the config defines: with and without its default profile, or a plain sweep when it
    has no ``[speculators]`` table."""
    if no_spec:
        return [False]
    if both:
        experiment.speculator(speculator)  # a clear error when there is none
        return [False, True]
    if speculator is not None:
        return [True]
    return [False, True] if experiment.default_speculator else [False]


@dataclass(frozen=True)
class SweepFlags:
    """``e2e sweep``'s own flags (the measurement flags are ``Measurement``)."""

    arms: Annotated[Optional[list[str]], typer.Option(
        "--arms", metavar="ARM[,ARM...]", help="Arms, comma-separated or repeated (default: all "
        "of the config's but opt-in ones, in its order).", show_default=False)] = None
    concurrency: Annotated[Optional[list[str]], typer.Option(
        "--concurrency", metavar="N[,N...]", help="Concurrencies, comma-separated or repeated "
        "(default: the config's load.concurrencies).", show_default=False)] = None
    dspark: Annotated[bool, typer.Option(
        "--dspark", help="Only with the config's \\[speculators.dspark] profile (--spec dspark).")] = False
    no_dspark: Annotated[bool, typer.Option(
        "--no-dspark", help="Only without a speculator.")] = False
    both: Annotated[bool, typer.Option(
        "--both", help="With and without the speculator (the default when the config has a "
        "\\[speculators] profile; without one, a plain sweep is the default).")] = False
    runs: Annotated[Optional[int], typer.Option(
        help="Runs per cell (default: the config's repeats).", min=1, max=10_000)] = None
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per run before an invalid run is given up.", min=1)] = 2
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Stop at the first run given up (default: move on).")] = False
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what will happen (builds, model, servers, roughly how long), "
        "then every run's server command and env; start nothing.")] = False
    report: Annotated[bool, typer.Option(help="Render the report when the sweep ends.")] = True
    until_settled: Annotated[bool, typer.Option(
        "--until-settled", help="Keep adding whole rounds until every headline comparison is "
        "settled (a difference beyond the minimum effect, or equivalent within the band), with "
        "alpha spent over the looks so peeking adds no false calls; needs --max-runs.")] = False
    max_runs: Annotated[Optional[int], typer.Option(
        "--max-runs", help="With --until-settled: at most this many runs per cell.", min=1,
        max=10_000)] = None
    prompts_per_concurrency: Annotated[Optional[int], typer.Option(
        help="Measured requests per unit of concurrency: each run sends this x its concurrency "
        "(default: load.prompts_per_concurrency; a single run's --prompts is the total).",
        min=1)] = None
    input_len: Annotated[Optional[int], typer.Option(help="Prompt tokens (default: config).", min=1)] = None
    output_len: Annotated[Optional[int], typer.Option(help="Output tokens (default: config).", min=2)] = None
    executor: ExecutorOpt = None
    duet: DuetOpt = None
    swap: SwapOpt = None
    order_seed: Annotated[Optional[int], typer.Option(
        "--order-seed", help="Seed of the arm order for a new --results folder (default: drawn, "
        "so two sweeps of one config run their arms in different orders; recorded in the "
        "folder's order.json and kept on resume). --dry-run on a new folder prints a drawn seed "
        "that the sweep will not reuse unless given here.", min=0)] = None
    quiet: QuietOpt = False


@flag_groups
def sweep(opts: SweepFlags, flags: Measurement) -> None:
    """Run the experiment matrix: arms x concurrencies x spec modes x runs, interleaved
    (round k of every cell before round k+1, the arm order of each round a row of a Williams
    design), resumable."""
    guard(lambda: _sweep(opts, flags))


def _sweep(opts: SweepFlags, flags: Measurement) -> None:
    """Parse the flags, plan, then describe the plan (``--dry-run``) or run it and print the
    outcome; the stages hold each branch (``e2e.pipeline``: ``describe_sweep``, ``run_sweep``)."""
    from e2e.config import MAX_CONCURRENCY, defaulted_load_keys
    from e2e.errors import ConfigError
    from e2e.execute import executor_from
    from e2e.pipeline import describe_sweep, run_sweep
    from e2e.plan import folder_order, make_plan
    from e2e.session import SessionOptions

    arms = csv_list(opts.arms)
    concurrencies = int_list(opts.concurrency, "--concurrency", high=MAX_CONCURRENCY)
    speculator = spec_name(flags.spec, opts.dspark)
    if opts.no_dspark and (speculator or opts.both):
        raise ConfigError("--no-dspark runs without a speculator: leave out --spec, "
                          "--dspark and --both")
    lengths = {"input_len": opts.input_len, "output_len": opts.output_len,
               "prompts_per_concurrency": opts.prompts_per_concurrency}
    experiment = flags.experiment(speculator=speculator, **lengths)
    modes = spec_modes(experiment, speculator, no_spec=opts.no_dspark, both=opts.both)
    experiment, results = with_duet(experiment, opts.duet, opts.swap), flags.results
    order = folder_order(results / experiment.name, experiment, opts.order_seed)
    plan = make_plan(experiment, arms=arms, concurrencies=concurrencies, spec_modes=modes,
                     runs=opts.runs, order=order.order, seed=order.seed)
    for line in unreachable_concurrency(plan):
        say(line)
    if opts.dry_run:
        given = {"concurrencies": concurrencies, **lengths}
        defaulted = [k for k in defaulted_load_keys(flags.config) if given.get(k) is None]
        for line in describe_sweep(experiment, plan, results, order=order, arms=arms,
                                   runs=opts.runs, defaulted=defaulted,
                                   executor=opts.executor or experiment.executor.kind):
            out.print(line, highlight=False, soft_wrap=True, markup=False)
        return
    if (opts.until_settled or opts.max_runs is not None) and not (opts.until_settled
                                                                  and opts.max_runs):
        raise ConfigError("--until-settled and --max-runs N go together")
    session = SessionOptions(plugin_check=not flags.no_plugin_check, progress=not opts.quiet,
                             say=(lambda message: None) if opts.quiet else say)
    outcome, settlement = run_sweep(
        experiment, results, order=order, max_runs=opts.max_runs,
        runs=opts.runs, fail_fast=opts.fail_fast, arms=arms, concurrencies=concurrencies,
        spec_modes=modes, session=session, max_attempts=opts.max_attempts,
        executor=executor_from(experiment.executor, opts.executor),
        on_unit=lambda folder, record: print_run(folder, record, brief=True))
    _print_outcome(outcome, settlement)
    if opts.report:  # with any GSM8K results beside the runs
        write_report(results / experiment.name, quiet=opts.quiet,
                     confidence=settlement.look_confidence if settlement else None)
    if outcome.given_up:
        raise SystemExit(1)


def _print_outcome(outcome, settlement) -> None:
    if settlement is not None:
        out.print(f"until settled: {'settled' if settlement.settled else 'not settled'} "
                  f"after {settlement.rounds} reported round(s); the report's intervals are "
                  f"at the last look's {settlement.look_confidence * 100:.2f} % (alpha spent "
                  "over the looks: repeated confidence intervals, valid whenever the sweep "
                  "stopped; an early stop reads larger than the truth on average)",
                  highlight=False)
    if outcome.stopped_early:
        out.print("[red]sweep stopped[/] (--fail-fast): rerun the same command to resume",
                  highlight=False)
    out.print(f"sweep: {len(outcome.ran)} run(s) made, {len(outcome.skipped)} already done, "
              f"{len(outcome.invalid)} invalid, {len(outcome.given_up)} given up", highlight=False)
    for run_id in outcome.given_up:
        out.print(f"  [red]given up:[/] {run_id} (see its run.json; attempts count across "
                  "reruns: rerun with a higher --max-attempts to try again)", highlight=False)
