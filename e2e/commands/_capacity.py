"""``e2e capacity``: each arm's highest open-loop request rate within an SLO, with an interval,
and each arm's capacity against the baseline's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import (ConfigOpt, DuetOpt, ExecutorOpt, LockWaitOpt,
                                   MaxScheduleOpt, ResultsOpt, SpecOpt, SwapOpt, csv_list,
                                   flag_groups, spec_name, with_duet)
from e2e.console import guard, out, print_run, say

__all__ = ["capacity_command"]


@dataclass(frozen=True)
class CapacityFlags:
    """``e2e capacity``'s flags."""

    arms: Annotated[Optional[list[str]], typer.Option(
        "--arms", metavar="ARM[,ARM...]", show_default=False,
        help="Arms, comma-separated or repeated; the first is the baseline unless --baseline "
        "(default: all of the config's).")] = None
    slo: Annotated[Optional[str], typer.Option(
        "--slo", help="Per-request objectives of goodput, e.g. tpot=20ms,ttft=500ms (names "
        "ttft, tpot, e2e).")] = None
    goodput: Annotated[float, typer.Option(
        "--goodput", help="Percent of requests that must meet every --slo objective.")] = 90.0
    p99: Annotated[Optional[str], typer.Option(
        "--p99", help="Also objectives on the run's p99, e.g. tpot=20ms,ttft=500ms (default: "
        "none).")] = None
    baseline: Annotated[Optional[str], typer.Option(
        "--baseline", help="The arm the others' capacity is divided by (default: the first).")] = None
    start_rate: Annotated[float, typer.Option(
        "--start-rate", help="First rate tried, requests/s.", min=0.0)] = 4.0
    factor: Annotated[float, typer.Option(
        "--factor", help="Bracketing: multiply (or divide) the rate by this per step.")] = 2.0
    resolution: Annotated[float, typer.Option(
        "--resolution", help="Bisect until the boundary rates are within this ratio minus 1 "
        "(0.15: 15 %).")] = 0.15
    runs: Annotated[int, typer.Option(
        "--runs", help="Runs (fresh servers) at each of the two boundary rates.", min=2,
        max=50)] = 3
    min_rate: Annotated[float, typer.Option("--min-rate", help="Lowest rate searched.")] = 0.05
    max_rate: Annotated[float, typer.Option("--max-rate", help="Highest rate searched.")] = 1000.0
    prompts: Annotated[Optional[int], typer.Option(
        help="Measured requests per run (default: the config's prompts per concurrency).",
        min=1)] = None
    input_len: Annotated[Optional[int], typer.Option(help="Prompt tokens (default: config).", min=1)] = None
    output_len: Annotated[Optional[int], typer.Option(help="Output tokens (default: config).", min=2)] = None
    dspark: Annotated[bool, typer.Option(
        "--dspark/--no-dspark", help="With the config's \\[speculators.dspark] profile "
        "(--spec dspark).")] = False
    spec: SpecOpt = None
    burstiness: Annotated[Optional[float], typer.Option(
        "--burstiness", help="Gamma shape of the arrival gaps (1 = Poisson).", min=0.0)] = None
    windows: Annotated[Optional[int], typer.Option(
        "--windows", help="Load windows per fresh server (default: load.windows).", min=1,
        max=64)] = None
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per run before an invalid run is given up.", min=1)] = 2
    max_schedule: MaxScheduleOpt = None
    config: ConfigOpt = None
    results: ResultsOpt = Path("results")
    lock_wait: LockWaitOpt = None
    executor: ExecutorOpt = None
    duet: DuetOpt = None
    swap: SwapOpt = None
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False


@flag_groups
def capacity_command(opts: CapacityFlags) -> None:
    """Find each arm's capacity: the highest open-loop request rate whose runs (each on a
    fresh server) meet the SLO (--goodput % of requests meeting every --slo objective, and
    the p99 of each --p99 objective within it), by bracketing and bisection with --runs runs at the two boundary
    rates; print each capacity with its interval and each arm's ratio to the baseline's;
    write capacity.json and capacity.png beside the runs. Rerun the same command to resume.
    With --duet the arms' searches run side by side, one arm per slot (docs/explanation/load.md)."""
    guard(lambda: _capacity(opts))


def _capacity(opts: CapacityFlags) -> None:
    """Parse the flags, search (``e2e.capacity.capacity``), print each arm's capacity."""
    from pydantic import ValidationError

    from e2e.capacity import SearchSettings, capacity
    from e2e.config import load_experiment
    from e2e.console import describe_validation_error
    from e2e.errors import ConfigError
    from e2e.execute import executor_from
    from e2e.results.capacity import objective_of
    from e2e.session import SessionOptions

    objective = objective_of(opts.slo, opts.goodput, opts.p99)
    try:
        search = SearchSettings(start=opts.start_rate, factor=opts.factor,
                                resolution=opts.resolution, repeats=opts.runs,
                                min_rate=opts.min_rate, max_rate=opts.max_rate)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "capacity flags",
                                                    SearchSettings)) from None
    if not opts.min_rate < opts.max_rate:
        raise ConfigError(f"--min-rate {opts.min_rate:g} must be below --max-rate "
                          f"{opts.max_rate:g}")
    experiment = load_experiment(opts.config).override(
        "server", lock_wait_s=opts.lock_wait).override(
        "load", burstiness=opts.burstiness, windows=opts.windows, max_schedule_s=opts.max_schedule)
    experiment = with_duet(experiment, opts.duet, opts.swap)
    speculator = spec_name(opts.spec, opts.dspark)
    if speculator is not None:
        experiment = experiment.with_speculator(speculator)
    chosen = csv_list(opts.arms) or list(experiment.arms)
    for a in chosen:
        experiment.arm(a)
    result = capacity(
        experiment, Path(opts.results), arms=chosen, objective=objective, search=search,
        baseline=opts.baseline, dspark=speculator is not None, prompts=opts.prompts,
        input_len=opts.input_len, output_len=opts.output_len,
        executor=executor_from(experiment.executor, opts.executor),
        session=SessionOptions(progress=not opts.quiet, say=say),
        max_attempts=opts.max_attempts,
        on_unit=lambda folder, record: print_run(folder, record, brief=True))
    _print_result(result, objective)
    if any(a.given_up for a in result.arms.values()):
        raise SystemExit(1)


def _print_result(result, objective) -> None:
    out.print(f"capacity at {objective} ({result.ran} run(s) made):", highlight=False)
    for name, arm in result.arms.items():
        est = arm.estimate
        if est is None:
            why = arm.given_up or (arm.step.why if arm.step else "") or arm.status
            out.print(f"  {name}: no estimate: {why}", highlight=False)
            continue
        level = (f"{est.confidence * 100:g} %, given that the search closed it"
                 if est.closed else f"{est.confidence * 100:g} %; open: the runs could "
                 "not place that side")
        out.print(f"  {name}: {est.rate:.3g} req/s [{_bound(est.low)}, {_bound(est.high)}] "
                  f"({level}; {est.method}; boundary {est.lo:g}-{est.hi:g} req/s)",
                  highlight=False)
    for name, (r, lo, hi) in result.ratios.items():
        out.print(f"  {name} / {result.baseline}: {r:.3f} [{_bound(lo)}, {_bound(hi)}]",
                  highlight=False)
    out.print(f"written: {result.folder / 'capacity.json'}, "
              f"{result.folder / 'capacity.png'}", highlight=False)


def _bound(x: float) -> str:
    if x <= 0:
        return "0"
    return "inf" if not math.isfinite(x) else f"{x:.3g}"
