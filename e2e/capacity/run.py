"""``e2e capacity``: every arm's capacity at an SLO, each run on a fresh server.

    for each round: per arm, the next step of its search (``_search.next_rates``, replayed
    from the records in the folder) -> the units of all arms -> ``e2e.pipeline.execute``
    (the executor: local or Ray; resume and retries as for sweeps) -> margins
    (``e2e.analysis.capacity.capacity_margin``) -> per arm the estimate from every run it made
    (``e2e.analysis.capacity.capacity_estimate``) -> capacity.json, capacity.png

The records it keeps (``ArmSearch``, ``CapacityResult``) are ``e2e.results``'; the plot is
``e2e.render.render_capacity_plot``.

A unit is an open-loop ``RunSpec`` at one rate (``<arm>-c1-rate<r>-<mode>-r<k>``). In duets
(``[duet] enabled``, ``--duet``) a round is instead one unit of each arm that has one, run
together, one arm per slot (``DuetSpec``: each side at its own arm's rate and repeat; run ids
``...-r<k>-d1``); an arm with nothing left to search supplies a partner: one more run at its
boundary (``extra``: read by its estimate, not by its search), so every unit of the others is
measured beside a loaded partner. The arm order rotates over the slots round by round. The
search's settings, the objective and the workload are written to ``capacity.json`` before the
first unit; a rerun over the folder with other ones is refused (its runs answer another
question), the same ones resume. ``--repeats`` may change on a rerun: it says how many runs the
boundary rates get (more narrow the interval) and the widening steps on their means, so a
rerun with more may widen a bracket; every run already made stays a measurement at its rate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from e2e.capacity.search import SearchSettings, next_rates, round_rate
from e2e.analysis.capacity import (
    capacity_censored, capacity_estimate, capacity_margin, capacity_margin_terms, capacity_ratio
)
from e2e.config import Experiment
from e2e.plan import DuetSpec, RunSpec
from e2e.errors import ConfigError
from e2e.names import known_name
from e2e.execute import Executor, OnUnit
from e2e.paths import atomic_write_bytes, atomic_write_json, read_bounded
from e2e.results.capacity import ArmSearch, CapacityResult, MarginRun, Objective, Step
from e2e.results.store import read_run, unit_dir, unit_state, writing
from e2e.session import SessionOptions

__all__ = ["round_duets", "capacity", "CAPACITY_FILE", "CAPACITY_PLOT"]

CAPACITY_FILE = "capacity.json"
CAPACITY_PLOT = "capacity.png"
MAX_ROUNDS = 60  # steps per arm: a search that has not converged by then has a bug


def _unit(base: RunSpec, rate: float, repeat: int) -> RunSpec:
    return RunSpec.model_validate({**base.model_dump(), "request_rate": rate, "repeat": repeat})


def _settings_doc(objective: Objective, search: SearchSettings, base: dict, confidence: float,
                  duet: list[str] | None) -> dict:
    doc = {"objective": {"slo": str(objective.slo), "goodput_pct": objective.goodput_pct,
                         "p99": str(objective.p99) if objective.p99 else None},
           "search": search.model_dump(mode="json"), "workload": base, "confidence": confidence}
    return {**doc, "duet": {"slots": duet} if duet else None}


def _recorded(results: Path, experiment: str, unit: RunSpec, slots: int) -> RunSpec | None:
    """The unit as it was run, when it is done: a duet side records the slot it sat in, which
    the search does not choose (``slots``: how many it may be; 0 outside duets)."""
    for slot in [None, *range(slots)]:
        candidate = unit if slot is None else unit.model_copy(update={"slot": slot})
        if unit_state(results, experiment, candidate).done:
            return candidate
    return None


def _check_settings(folder: Path, settings: dict) -> None:
    path = folder / CAPACITY_FILE
    if not path.is_file():
        return
    try:
        old = json.loads(read_bounded(path, 16 << 20, expect="a capacity.json e2e wrote"))
        old = {k: old.get(k) for k in settings} if isinstance(old, dict) else None
    except ValueError:
        old = None
    if old is None:
        raise ConfigError(f"{path}: unreadable; restore it or use a new --results folder")
    def steering(doc: dict, key: str):  # --repeats: how many boundary runs; free
        value = doc.get(key)
        return {k: v for k, v in value.items() if k != "repeats"} if key == "search" and \
            isinstance(value, dict) else value

    differ = [k for k in settings if steering(old, k) != steering(settings, k)]
    if differ:
        raise ConfigError(f"{path}: this folder's capacity search was made with other "
                          f"{' and '.join(differ)} ({json.dumps({k: old[k] for k in differ})}); "
                          "rerun with the same flags to resume it, or use a new --results folder")


def _replay(experiment: Experiment, results: Path, base: RunSpec, search: SearchSettings,
            objective: Objective, arm: ArmSearch, slots: int = 0) -> list[RunSpec]:
    """Walk the arm's search through the runs already made; the units its next step needs.
    A finished search also reads its extra boundary runs (duets' partners: see the module's
    docstring) and leaves the next one in ``arm.extra``."""
    observed: dict[float, dict[int, float]] = {}
    arm.runs, arm.extra = [], None

    def read(rate: float, repeat: int, extra: bool = False) -> bool:
        unit = _recorded(results, experiment.name, _unit(base, rate, repeat), slots)
        if unit is None:
            return False
        folder = unit_dir(results, experiment.name, unit)
        record = read_run(folder)
        if record.metrics is None or record.metrics.goodput_slo != str(objective.slo):
            raise ConfigError(f"{folder}: measured against goodput SLO "
                              f"{record.metrics.goodput_slo if record.metrics else None!r}, "
                              f"not {str(objective.slo)!r}; use a new --results folder")
        value = capacity_margin(record.metrics, objective)
        if not extra:
            observed.setdefault(rate, {})[repeat] = value
        arm.runs.append({"rate": rate, "repeat": repeat, "run_id": unit.run_id,
                         "margin": value, "meets": value >= 0,
                         "censored": capacity_censored(record.metrics, objective),
                         "requests": record.metrics.requests,
                         "terms": capacity_margin_terms(record.metrics, objective),
                         "goodput_share": record.metrics.goodput_share,
                         "ttft_ms_p99": record.metrics.ttft_ms_p99,
                         "tpot_ms_p99": record.metrics.tpot_ms_p99,
                         "achieved_rate": record.achieved_rate,
                         **({"duet": record.duet.id, "slot": record.duet.slot_name,
                             "partners": record.duet.partners} if record.duet else
                            {"alone": True} if slots else {}),
                         **({"extra": True} if extra else {})})
        return True

    for _ in range(MAX_ROUNDS):
        step = next_rates(observed, search)
        arm.step = step
        todo = [_unit(base, rate, repeat) for rate, repeat in step.runs
                if not read(rate, repeat)]
        if todo:
            return todo
        if not step.runs:
            if slots:
                arm.extra = _extras(step, observed, base, read)
            return todo
    raise ConfigError(f"arm {arm.arm}: the search did not settle in {MAX_ROUNDS} steps")


def _extras(step: Step, observed: dict[float, dict[int, float]], base: RunSpec,
            read: Callable[..., bool]) -> RunSpec | None:
    """Read a finished search's extra runs at its boundary rates (repeats after its own);
    return the next one: at the rate with fewer runs, ``lo`` first."""
    rates = [r for r in (step.lo, step.hi) if r is not None]
    after = {}
    for rate in rates:
        after[rate] = max(observed.get(rate, {0: 0.0})) + 1
        while read(rate, after[rate], extra=True):
            after[rate] += 1
    if not rates:
        return None
    rate = min(rates, key=lambda r: (after[r], r))
    return _unit(base, rate, after[rate])


def capacity(experiment: Experiment, results: Path, *, arms: list[str], objective: Objective,
             search: SearchSettings, baseline: str | None = None, dspark: bool = False,
             prompts: int | None = None, input_len: int | None = None,
             output_len: int | None = None, confidence: float = 0.95,
             executor: Executor | None = None, session: SessionOptions = SessionOptions(),
             max_attempts: int = 2, on_unit: OnUnit = lambda folder, record: None,
             execute: Callable | None = None) -> CapacityResult:
    """Search every arm's capacity (see the module's docstring); resumes from the folder."""
    from e2e.pipeline import execute as run_units

    execute = execute or run_units
    if not arms:
        raise ConfigError("capacity needs at least one arm (--arms)")
    baseline = baseline or arms[0]
    known_name(baseline, arms, "baseline arm", "--arms")
    experiment = experiment.override("load", slo=str(objective.slo))  # each unit sets its rate
    folder = Path(results) / experiment.name
    slots = min(len(arms), len(experiment.duet.slots)) if experiment.duet.enabled else 0
    if slots == 1:
        slots = 0  # one arm: nothing to measure beside it
    bases = {a: RunSpec.resolve(experiment, arm=a, concurrency=1, dspark=dspark, prompts=prompts,
                                input_len=input_len, output_len=output_len) for a in arms}
    windows = bases[baseline].windows
    if slots and experiment.duet.swap and windows % slots:
        raise ConfigError(f"[duet] swap: {windows} load window(s) per run cannot meet each of "
                          f"{slots} slots equally often; give --windows a multiple of {slots}, "
                          "or --no-swap")
    _check_lowest(experiment, bases, search)
    workload = bases[baseline].model_dump(mode="json", exclude={"arm", "repeat", "request_rate"})
    if slots:  # a duet side's run id ends in -d1: one name whatever round it ran in
        bases = {a: b.model_copy(update={"duet": 1}) for a, b in bases.items()}
    settings = _settings_doc(objective, search, workload, confidence,
                             experiment.duet.slot_names()[:slots] if slots else None)
    with writing(results, experiment.name, wait_s=experiment.server.lock_wait_s):
        _check_settings(folder, settings)
        atomic_write_json(folder / CAPACITY_FILE, {**settings, "arms": arms, "baseline": baseline,
                                                    "state": "searching"})
        state = {a: ArmSearch(a) for a in arms}
        ran, no_extra = 0, set()  # no_extra: arms whose extra run was given up
        for round_ in range(MAX_ROUNDS * (2 * search.repeats + 1) if slots else MAX_ROUNDS):
            todo = {a: _replay(experiment, results, bases[a], search, objective, state[a], slots)
                    for a in arms if state[a].given_up is None}
            k = round_ % len(arms)  # the arm that goes first rotates, as the arm order of a sweep
            order = arms[k:] + arms[:k]
            spare = [None if a in no_extra or state[a].given_up else state[a].extra for a in order]
            units = (round_duets([todo.get(a, []) for a in order], spare, slots)
                     if slots else interleave([todo[a] for a in order if a in todo]))
            if not units:
                break
            for a in [a for a in arms if a in todo]:
                step, mine = state[a].step, [s for u in units for s in u.sides if s.arm == a]
                if mine:
                    session.say(f"capacity {a}: {step.phase if todo[a] else 'extra'} "
                                + (f"[{step.lo:g}, {step.hi:g}] " if step.lo and step.hi else "")
                                + ", ".join(f"{u.request_rate:g} req/s r{u.repeat}" for u in mine))
            outcome = execute(experiment, units, results, executor=executor, session=session,
                              max_attempts=max_attempts, on_unit=on_unit)
            ran += len(outcome.ran)
            for unit_id in outcome.given_up:
                unit = next(u for u in units if u.unit_id == unit_id)
                for side in unit.sides:  # a duet's sides are retried together: each that failed
                    extra = state[side.arm].extra  # a partner's extra run: its search stands
                    if extra is not None and side.run_id == extra.run_id:
                        no_extra.add(side.arm)
                    elif not unit_state(results, experiment.name, side).done:
                        state[side.arm].given_up = (
                            f"{side.run_id} was given up after {max_attempts} attempt(s) (see "
                            "its run.json; rerun with a higher --max-attempts)")
            if outcome.stopped_early:
                break
        result = _finish(state, baseline, objective, folder, confidence)
        result.ran = ran
        doc = {**settings, "arms": arms, "baseline": baseline, "state": "done",
               "results": _as_json(result)}
        atomic_write_json(folder / CAPACITY_FILE, doc)
        from e2e.render import render_capacity_plot

        png = render_capacity_plot(result)
        if png is not None:
            atomic_write_bytes(folder / CAPACITY_PLOT, png)
        return result


def _check_lowest(experiment: Experiment, bases: dict[str, RunSpec],
                  search: SearchSettings) -> None:
    """Refuse, before any server starts, a search whose lowest rate would make a run longer
    than the schedule limit (``e2e.session.check_units``): the search goes down to
    ``--min-rate`` when every rate misses, and a run at 1e-6 req/s waits 11 days for its
    second request."""
    from e2e.session import check_units

    lowest = [_unit(b, round_rate(search.min_rate), 1) for b in bases.values()]
    try:
        check_units(experiment, lowest)
    except ConfigError as exc:
        raise ConfigError(f"--min-rate {search.min_rate:g} (the lowest rate the search may "
                          f"run): {exc}") from None


def round_duets(todo: list[list[RunSpec]], extra: list[RunSpec | None], slots: int) -> list:
    """A round in duets: the next unit of every arm that has one (in the round's arm order),
    ``slots`` to a duet, side i in slot i; a duet short of sides is filled with the extra runs
    of arms whose search is done, or, with none, the last one waits for the next round (a unit
    left with no partner at all runs alone)."""
    first = [units[0] for units in todo if units]
    spare = [x for units, x in zip(todo, extra) if not units and x is not None]
    groups = [first[i:i + slots] for i in range(0, len(first), slots)]
    if groups and len(groups[-1]) < slots:
        groups[-1] += spare[:slots - len(groups[-1])]
        if len(groups[-1]) == 1 and len(groups) > 1:
            groups.pop()  # it waits: the next round rotates the order
    out, named = [], set()
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        duet = DuetSpec(sides=tuple(u.model_copy(update={"slot": i}) for i, u in enumerate(group)))
        if duet.unit_id not in named:
            named.add(duet.unit_id)
            out.append(duet)
    return out


def interleave(lists: list[list]) -> list:
    """One from each list in turn (the first of every list, then the second, ...). A round's
    units run in this order, and each arm's repeats alternate between its two boundary rates
    (``_search``), so runs at one rate of one arm are not neighbours in time: the host's
    speed drifts over minutes (docs/explanation/statistics.md), and neighbours' shared drift would
    make the repeats agree more than fresh servers do and the interval too narrow
    (bench/capacity_search_simulation.py measures both orders). The exception: a widening
    step's runs are all at its one new rate, so an arm that widens while no other arm has
    units runs them in a row (seen in docs/explanation/load.md's measurement of 2026-12-03)."""
    out = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


def _finish(state: dict[str, ArmSearch], baseline: str, objective: Objective, folder: Path,
            confidence: float) -> CapacityResult:
    for arm in state.values():
        step = arm.step
        if arm.given_up or step is None or step.phase != "done":
            continue
        arm.estimate = capacity_estimate([MarginRun(x["rate"], x["margin"], x["censored"])
                                          for x in arm.runs], lo=step.lo, hi=step.hi,
                                         confidence=confidence)
    ratios = {}
    base = state[baseline].estimate
    for name, arm in state.items():
        if name != baseline and arm.estimate is not None and base is not None:
            ratios[name] = capacity_ratio(arm.estimate, base)
    return CapacityResult(arms=state, baseline=baseline, objective=objective, ratios=ratios,
                          folder=folder)


def _as_json(result: CapacityResult) -> dict:
    out = {}
    for name, arm in result.arms.items():
        est = arm.estimate
        out[name] = {
            "status": arm.status, "why": arm.given_up or (arm.step.why if arm.step else ""),
            "lo": arm.step.lo if arm.step else None, "hi": arm.step.hi if arm.step else None,
            "capacity_req_s": _finite(est.rate) if est else None,
            "low": _finite(est.low) if est else None, "high": _finite(est.high) if est else None,
            "interval": None if est is None else {
                "confidence": est.confidence, "closed": est.closed, "method": est.method,
                "runs": est.runs, "slope": est.slope, "spread": est.spread,
                "level": "the confidence holds for intervals the search closes; an open "
                         "side says the runs could not place it"},
            "runs": arm.runs}
        if name in result.ratios:
            r, lo, hi = result.ratios[name]
            out[name]["ratio_to_baseline"] = {"ratio": _finite(r), "low": _finite(lo),
                                              "high": _finite(hi)}
    return out


def _finite(x: float) -> float | None:
    """A bound as JSON: None for an open one (0 or infinity: no crossing to read)."""
    return x if 0 < x < float("inf") else None
