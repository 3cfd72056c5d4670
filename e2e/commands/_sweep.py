"""``e2e sweep``: the experiment matrix, interleaved in rounds and resumable."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from e2e.commands._options import (DuetOpt, ExecutorOpt, Measurement, QuietOpt, SwapOpt,
                                   csv_list, int_list, measurement_flags, spec_name,
                                   unreachable_concurrency, with_duet)
from e2e.commands._report import write_report
from e2e.console import guard, out, print_run, say

__all__ = ["sweep", "spec_modes"]


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


@measurement_flags
def sweep(
    arms: Annotated[Optional[list[str]], typer.Option(
        "--arms", metavar="ARM[,ARM...]", help="Arms, comma-separated or repeated (default: all "
        "of the config's but opt-in ones, in its order).", show_default=False)] = None,
    concurrency: Annotated[Optional[list[str]], typer.Option(
        "--concurrency", metavar="N[,N...]", help="Concurrencies, comma-separated or repeated "
        "(default: the config's load.concurrencies).", show_default=False)] = None,
    dspark: Annotated[bool, typer.Option(
        "--dspark", help="Only with the config's \\[speculators.dspark] profile (--spec dspark).")] = False,
    no_dspark: Annotated[bool, typer.Option(
        "--no-dspark", help="Only without a speculator.")] = False,
    both: Annotated[bool, typer.Option(
        "--both", help="With and without the speculator (the default when the config has a "
        "\\[speculators] profile; without one, a plain sweep is the default).")] = False,
    runs: Annotated[Optional[int], typer.Option(
        help="Runs per cell (default: the config's repeats).", min=1, max=10_000)] = None,
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per run before an invalid run is given up.", min=1)] = 2,
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Stop at the first run given up (default: move on).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what will happen (builds, model, servers, roughly how long), "
        "then every run's server command and env; start nothing.")] = False,
    report: Annotated[bool, typer.Option(help="Render the report when the sweep ends.")] = True,
    until_settled: Annotated[bool, typer.Option(
        "--until-settled", help="Keep adding whole rounds until every headline comparison is "
        "settled (a difference beyond the minimum effect, or equivalent within the band), with "
        "alpha spent over the looks so peeking adds no false calls; needs --max-runs.")] = False,
    max_runs: Annotated[Optional[int], typer.Option(
        "--max-runs", help="With --until-settled: at most this many runs per cell.", min=1,
        max=10_000)] = None,
    prompts_per_concurrency: Annotated[Optional[int], typer.Option(
        help="Measured requests per unit of concurrency: each run sends this x its concurrency "
        "(default: load.prompts_per_concurrency; a single run's --prompts is the total).",
        min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(help="Prompt tokens (default: config).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(help="Output tokens (default: config).", min=2)] = None,
    executor: ExecutorOpt = None,
    duet: DuetOpt = None,
    swap: SwapOpt = None,
    order_seed: Annotated[Optional[int], typer.Option(
        "--order-seed", help="Seed of the arm order for a new --results folder (default: drawn, "
        "so two sweeps of one config run their arms in different orders; recorded in the "
        "folder's order.json and kept on resume). --dry-run on a new folder prints a drawn seed "
        "that the sweep will not reuse unless given here.", min=0)] = None,
    quiet: QuietOpt = False,
    flags: Measurement = Measurement(),
) -> None:
    """Run the experiment matrix: arms x concurrencies x spec modes x runs, interleaved
    (round k of every cell before round k+1, the arm order of each round a row of a Williams
    design), resumable."""

    def body() -> None:
        from e2e.errors import ConfigError
        from e2e.pipeline import sweep as run_matrix
        from e2e.plan import make_plan
        from e2e.execute import describe_cluster_plan, executor_from
        from e2e.session import SessionOptions
        from e2e.execute import describe_plan

        from e2e.config import MAX_CONCURRENCY

        arm_list = csv_list(arms)
        concurrencies = int_list(concurrency, "--concurrency", high=MAX_CONCURRENCY)
        speculator = spec_name(flags.spec, dspark)
        if no_dspark and (speculator or both):
            raise ConfigError("--no-dspark runs without a speculator: leave out --spec, "
                              "--dspark and --both")
        experiment = flags.experiment(speculator=speculator,
                                      prompts_per_concurrency=prompts_per_concurrency,
                                      input_len=input_len, output_len=output_len)
        modes = spec_modes(experiment, speculator, no_spec=no_dspark, both=both)
        experiment = with_duet(experiment, duet, swap)
        results = flags.results
        from e2e.plan import describe_order, folder_order

        order = folder_order(results / experiment.name, experiment, order_seed)
        plan = make_plan(experiment, arms=arm_list, concurrencies=concurrencies,
                         spec_modes=modes, runs=runs, order=order.order, seed=order.seed)
        for line in unreachable_concurrency(plan):
            say(line)
        if dry_run:
            from e2e.config import defaulted_load_keys
            from e2e.execute import plan_header

            given = {"concurrencies": concurrencies, "input_len": input_len,
                     "output_len": output_len, "prompts_per_concurrency": prompts_per_concurrency}
            defaulted = [k for k in defaulted_load_keys(flags.config) if given.get(k) is None]
            units = describe_plan(experiment, plan, results)  # refuses a run out of bounds
            for line in plan_header(experiment, plan, results, defaulted=defaulted,
                                    executor=executor or experiment.executor.kind) + [""] + units:
                out.print(line, highlight=False, soft_wrap=True, markup=False)
            planned = {side.arm for unit in plan for side in unit.sides}
            # opt-in arms left out, in the plan's list order
            planned = [a for a in (arm_list or list(experiment.arms)) if a in planned]
            for line in describe_order(experiment, planned, runs or experiment.repeats, order,
                                       duet=experiment.duet.enabled):
                out.print(line, highlight=False, soft_wrap=True, markup=False)
            if (executor or experiment.executor.kind) == "ray":
                for line in describe_cluster_plan(experiment, plan, results):
                    out.print(line, highlight=False, soft_wrap=True, markup=False)
            return
        runner = executor_from(experiment.executor, executor)
        session = SessionOptions(plugin_check=not flags.no_plugin_check, progress=not quiet,
                                 say=(lambda message: None) if quiet else say)
        on_unit = lambda folder, record: print_run(folder, record, brief=True)  # noqa: E731
        confidence = None
        if until_settled or max_runs is not None:
            from e2e.pipeline import sweep_until_settled

            if not (until_settled and max_runs):
                raise ConfigError("--until-settled and --max-runs N go together")
            outcome, settlement = sweep_until_settled(
                experiment, results, max_runs=max_runs, arms=arm_list,
                concurrencies=concurrencies, spec_modes=modes, session=session,
                max_attempts=max_attempts, on_unit=on_unit, executor=runner,
                order=order)
            confidence = settlement.look_confidence
            out.print(f"until settled: {'settled' if settlement.settled else 'not settled'} "
                      f"after {settlement.rounds} reported round(s); the report's intervals are "
                      f"at the last look's {confidence * 100:.2f} % (alpha spent over the looks: "
                      "repeated confidence intervals, valid whenever the sweep stopped; an early "
                      "stop reads larger than the truth on average)",
                      highlight=False)
        else:
            outcome, _ = run_matrix(
                experiment, results, arms=arm_list, concurrencies=concurrencies,
                spec_modes=modes, runs=runs, session=session, executor=runner,
                max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit,
                report=False, order=order)  # rendered below, with any GSM8K results
        if outcome.stopped_early:
            out.print("[red]sweep stopped[/] (--fail-fast): rerun the same command to resume",
                      highlight=False)
        out.print(f"sweep: {len(outcome.ran)} run(s) made, {len(outcome.skipped)} already done, "
                  f"{len(outcome.invalid)} invalid, {len(outcome.given_up)} given up", highlight=False)
        for run_id in outcome.given_up:
            out.print(f"  [red]given up:[/] {run_id} (see its run.json; attempts count across "
                      "reruns: rerun with a higher --max-attempts to try again)", highlight=False)
        if report:
            write_report(results / experiment.name, confidence=confidence, quiet=quiet)
        if outcome.given_up:
            raise SystemExit(1)

    guard(body)

