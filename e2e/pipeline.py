"""The whole pipeline, readable in one place:

    config (TOML -> pydantic, once)
      -> plan: a list of units (e2e.plan; e2e.gsm8k.run for GSM8K; nightly plans both)
      -> executor: runs the units in rounds, resumes, shows progress (e2e.execute.executor)
           -> server session per unit: build -> fresh server -> /health -> plugin check
              -> /metrics -> workload -> /metrics -> stop -> folder finalized (e2e.session.session)
      -> aggregate: comparable cells -> comparisons (e2e.analysis.sweep.aggregate, e2e.analysis.estimators)
      -> render: Markdown / CSV / PNG (e2e.render, written by e2e.render.report)

``sweep`` below is that flow for the load matrix; ``e2e gsm8k`` and ``e2e nightly`` plan other
units and call the same ``execute``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from collections.abc import Sequence
from pathlib import Path

from e2e.analysis.estimators import DEFAULT_SPENDING, Look, Settlement, Spending, look_at
from e2e.analysis.sweep import primary_metric
from e2e.config import Experiment
from e2e.plan import Unit
from e2e.errors import ConfigError
from e2e.execute import Executor, LocalExecutor, OnUnit, Outcome, SessionUnit
from e2e.plan import FolderOrder, folder_order, make_plan, record_order
from e2e.results.looks import LOOKS_FILE, read_looks, write_looks
from e2e.results.store import writing
from e2e.execute import describe_cluster_plan, describe_plan, plan_header
from e2e.plan import describe_order
from e2e.render import ReportOutput, build_report
from e2e.session import SessionOptions, check_units

__all__ = ["execute", "sweep", "sweep_until_settled", "run_sweep", "describe_sweep",
           "headline_pairs", "load_looks", "save_looks"]


def execute(experiment: Experiment, units: Sequence[Unit], results: Path, *,
            executor: Executor | None = None, session: SessionOptions = SessionOptions(),
            max_attempts: int = 2, fail_fast: bool = False,
            on_unit: OnUnit = lambda folder, record: None) -> Outcome:
    """Run every unit not yet done, each in its own server session, into ``results``. Every
    load run's schedule, prompt tokens and longest request are checked first
    (``e2e.session.check_units``): a plan with one out of bounds starts no server. The
    experiment's folder is held meanwhile (``e2e.results.store.writing``): a second e2e writing
    runs there waits ``server.lock_wait_s``, then is refused."""
    check_units(experiment, units)
    with writing(results, experiment.name, wait_s=experiment.server.lock_wait_s):
        return (executor or LocalExecutor()).run(
            experiment.name, units, Path(results), SessionUnit(experiment, Path(results), session),
            max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit, say=session.say)


def sweep(experiment: Experiment, results: Path, *, arms: list[str] | None = None,
          concurrencies: list[int] | None = None, spec_modes: list[bool] | None = None,
          runs: int | None = None, executor: Executor | None = None,
          session: SessionOptions = SessionOptions(), max_attempts: int = 2,
          fail_fast: bool = False, on_unit: OnUnit = lambda folder, record: None,
          report: bool = True, order: FolderOrder | None = None) -> tuple[Outcome, ReportOutput | None]:
    """plan -> execute -> aggregate and render: the load matrix (``e2e sweep``). The arm order
    is the folder's (``order``, by default ``plan.folder_order``: Williams for a new folder,
    with its own order seed, drawn, recorded in order.json)."""
    folder = Path(results) / experiment.name
    order = order or folder_order(folder, experiment)
    units = make_plan(experiment, arms=arms, concurrencies=concurrencies,
                      spec_modes=spec_modes, runs=runs, order=order.order, seed=order.seed)
    check_units(experiment, units)  # before the folder is made or its order recorded
    with writing(results, experiment.name, wait_s=experiment.server.lock_wait_s):
        record_order(folder, order)
        outcome = execute(experiment, units, results, executor=executor, session=session,
                          max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit)
    return outcome, build_report(folder) if report else None


def run_sweep(experiment: Experiment, results: Path, *, order: FolderOrder,
              max_runs: int | None = None, runs: int | None = None, fail_fast: bool = False,
              **matrix) -> tuple[Outcome, Settlement | None]:
    """``e2e sweep``'s runs, its report left to the caller: the plan's rounds (``sweep``), or
    with ``max_runs`` whole rounds until every headline comparison is settled
    (``sweep_until_settled``: its settlement second). ``matrix``: the arms, concurrencies,
    spec modes, executor, session, attempts and ``on_unit`` both take."""
    if max_runs is None:
        outcome, _ = sweep(experiment, results, runs=runs, fail_fast=fail_fast, report=False,
                           order=order, **matrix)
        return outcome, None
    return sweep_until_settled(experiment, results, max_runs=max_runs, order=order, **matrix)


def describe_sweep(experiment: Experiment, units: Sequence[Unit], results: Path, *,
                   order: FolderOrder, executor: str, arms: Sequence[str] | None = None,
                   runs: int | None = None, defaulted: Sequence[str] = ()) -> list[str]:
    """``e2e sweep --dry-run``: what the plan will do (``plan_header``), every unit's server
    command (``describe_plan``, which refuses a run out of bounds), the arm order of each round
    and, for ``executor`` ray, the blocks the cluster would get. Starts nothing."""
    described = describe_plan(experiment, units, results)  # refuses a run out of bounds
    lines = plan_header(experiment, units, results, defaulted=defaulted,
                        executor=executor) + [""] + described
    planned = {side.arm for unit in units for side in unit.sides}
    planned = [a for a in (arms or list(experiment.arms)) if a in planned]  # opt-in arms left out
    lines += describe_order(experiment, planned, runs or experiment.repeats, order,
                            duet=experiment.duet.enabled)
    if executor == "ray":
        lines += describe_cluster_plan(experiment, units, results)
    return lines


def headline_pairs(summary, records=None) -> list[tuple[dict, dict]]:
    """Per primary comparison of a summary (each arm but the A/A ones against the baseline, the
    headline metric of each cell): (arm values by block, baseline values by block), the block
    being (round, host) as the report keys runs (``Cell.blocks``); a block holding two runs of
    one side (a repeat recorded twice) gets their geometric mean. ``records`` is not needed
    (kept for callers)."""
    pairs = []
    for comp in summary.comparisons:
        if comp.metric != primary_metric(comp.concurrency, comp.spec_mode) or comp.role == "check":
            continue
        sides = []
        for arm in (comp.arm, comp.baseline):
            cell = summary.cell(arm, comp.concurrency, comp.spec_mode, comp.metric)
            groups: dict = {}
            for block, v in zip(cell.blocks(), cell.values):
                groups.setdefault(block, []).append(v)
            sides.append({k: v[0] if len(v) == 1 else math.exp(sum(map(math.log, v)) / len(v))
                          for k, v in groups.items()})
        pairs.append((sides[0], sides[1]))
    return pairs


def load_looks(folder: Path) -> list[Look]:
    """The looks an earlier ``--until-settled`` took in ``folder`` (``looks.json``), oldest
    first; [] when there is none. An unreadable file is an error (its alpha is spent)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(list[Look]).validate_python(read_looks(folder))
    except ValidationError as exc:
        raise ConfigError(f"{Path(folder) / LOOKS_FILE}: unreadable ({exc.error_count()} bad "
                          "value(s)); it records the alpha already spent by --until-settled: "
                          "restore it or use a new --results folder") from None


def save_looks(folder: Path, looks: Sequence[Look], *, confidence: float,
               spending: str) -> None:
    write_looks(folder, [asdict(k) for k in looks], confidence=confidence, spending=spending)


def _settlement(look: Look) -> Settlement:
    return Settlement(rounds=look.rounds, look_confidence=look.confidence,
                            decisions=look.decisions,
                            settled=bool(look.decisions) and all(d != "open" for d in look.decisions),
                            stop=look.stop)


def sweep_until_settled(experiment: Experiment, results: Path, *, max_runs: int,
                        arms: list[str] | None = None, concurrencies: list[int] | None = None,
                        spec_modes: list[bool] | None = None, executor: Executor | None = None,
                        session: SessionOptions = SessionOptions(), max_attempts: int = 2,
                        on_unit: OnUnit = lambda folder, record: None,
                        baseline: str = "main",
                        spending: Spending = DEFAULT_SPENDING,
                        order: FolderOrder | None = None) -> tuple[Outcome, Settlement]:
    """``e2e sweep --until-settled --max-runs N``: whole rounds until every primary comparison
    (the headline metric of each cell, every arm but the A/A checks) is settled, or N runs per
    cell are made. Each look reads the report's own comparisons (``summarize``: one model per
    cell) at the α a Lan–DeMets spending function (``look_at``; Pocock-type by default,
    so the first look can settle a large effect) allows at t = reported rounds / (N − warmups),
    split over the comparisons, each read at the exact group-sequential boundary for the rounds
    reached given the earlier looks'. The looks are stored in ``<experiment>/looks.json``: a
    second invocation on the folder continues the spending where the first stopped (it never
    looks at the same rounds twice; once all of alpha is spent it runs nothing), and
    ``e2e report`` renders at the last look's confidence.
    Starts with enough rounds for the first look (3 reported rounds); resumes like any sweep."""
    from e2e.analysis.sweep import DEFAULT_CONFIDENCE, equivalence_of, estimate_of, summarize
    from e2e.results.store import load_records

    start = experiment.report_from_run
    folder = Path(results) / experiment.name
    runs = max(experiment.repeats, start - 1 + 3)
    if max_runs < runs:
        raise ConfigError(f"--max-runs {max_runs}: adaptive repeats need at least {runs} runs "
                          f"per cell ({start - 1} warmup + 3 reported rounds for the first look)")
    with writing(results, experiment.name, wait_s=experiment.server.lock_wait_s):
        looks = load_looks(folder)
        if looks and looks[-1].cumulative >= (1.0 - DEFAULT_CONFIDENCE) - 1e-12:
            session.say(f"{LOOKS_FILE}: the looks after {looks[-1].rounds} reported round(s) spent "
                        "all of alpha; more rounds cannot settle anything in this folder (a new "
                        "--results folder starts a new sequential test)")
            return Outcome(), _settlement(looks[-1])
        if looks:
            last = looks[-1]
            if _settlement(last).settled or (last.stop and max_runs - start + 1 <= last.rounds):
                session.say(f"{LOOKS_FILE}: stopped at the look after {last.rounds} reported "
                            "round(s) already; nothing more to run")
                return Outcome(), _settlement(last)
            runs = max(runs, last.rounds + start)  # the next look is after one more round
            if runs > max_runs:
                return Outcome(), _settlement(last)
        order = order or folder_order(folder, experiment)
        total = Outcome()
        while True:
            units = make_plan(experiment, arms=arms, concurrencies=concurrencies,
                              spec_modes=spec_modes, runs=runs, order=order.order, seed=order.seed)
            record_order(folder, order)
            outcome = execute(experiment, units, results, executor=executor, session=session,
                              max_attempts=max_attempts, on_unit=on_unit)
            total.ran += outcome.ran
            total.skipped = outcome.skipped
            total.given_up = outcome.given_up
            records, _ = load_records(folder)
            summary = summarize(records, baseline=baseline, equivalence_pct=equivalence_of(records))
            primary = [c for c in summary.comparisons if c.role == "primary"
                       and c.metric == primary_metric(c.concurrency, c.spec_mode)]
            look = look_at([estimate_of(c) for c in primary], rounds=runs - start + 1,
                                 max_rounds=max_runs - start + 1, earlier=looks,
                                 confidence=summary.confidence, min_effect_pct=summary.min_effect_pct,
                                 equivalence_pct=summary.equivalence_pct, spending=spending)
            if look.alpha == 0.0 and looks:  # nothing spent here: the report keeps the last level
                look = replace(look, confidence=looks[-1].confidence)
            looks.append(look)
            save_looks(folder, looks, confidence=summary.confidence, spending=spending)
            session.say(f"after {look.rounds} reported round(s): "
                        f"{sum(d != 'open' for d in look.decisions)} of {len(primary)} primary "
                        f"comparison(s) settled (look alpha {look.alpha:.2g}, "
                        f"{look.cumulative:.2g} of {1 - summary.confidence:.2g} spent)"
                        + ("" if look.stop else "; one more round"))
            if look.stop or outcome.given_up:
                return total, _settlement(look)
            runs += 1
