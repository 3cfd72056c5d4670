"""Measure a night: its builds, its folder (``night.json``, the resume check), the sweep with
its looks, the GSM8K subset, and the night's cells of what was measured.

    builds -> night.json -> sweep (look after each step of rounds: stop once every ratio cell
      is resolved) -> night cells (the report's cells; each arm relative to the reference)
      -> GSM8K subset and its cells

``measure_night`` runs it; whether a look resolved the night is the caller's (``look``: the
judgement of the cells so far), so measuring knows nothing of judging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.config import BuildSpec
from e2e.console import Say
from e2e.errors import BuildError, E2EError, ResultsError
from e2e.analysis.nightly import NIGHTLY_METRICS
from e2e.results import relative_arm
from e2e.nightly.night import Night
from e2e.nightly.settings import MAX_ATTEMPTS
from e2e.paths import atomic_write_json
from e2e.results import GSM8K_METRIC, CellKey, Judgement, NightCell, worse_end
from e2e.results.records import RunRecord
from e2e.results.store import resume_state, utc_now

__all__ = ["Measured", "measure_night", "prepare_builds", "check_night", "load_cells",
           "relative_cells", "gsm8k_cells", "retried_attempts", "git_commits",
           "with_git_commits", "NIGHT_FILE"]

NIGHT_FILE = "night.json"


@dataclass(frozen=True)
class Measured:
    """What a night measured: its cells (load, relative, GSM8K), the sweep's run records, the
    problems met (runs given up, unreadable records, the GSM8K subset's), each arm's build
    (the git commit of a git-built arm added) and a note per attempt that was invalid and
    retried (``retried_attempts``)."""

    cells: tuple[NightCell, ...]
    records: tuple[RunRecord, ...]
    problems: tuple[str, ...]
    builds: dict[str, dict]
    notes: tuple[str, ...] = ()


def measure_night(night: Night, *, look: Callable[[Night, list[NightCell]], Judgement],
                  say: Say = lambda message: None,
                  on_run: Callable[[Path, RunRecord], None] = lambda folder, record: None,
                  progress: bool = True, executor: str | None = None, gsm8k_runner=None,
                  servers=None) -> Measured:
    """Measure tonight (the module docstring). ``look``: the judgement of the cells measured
    so far, after each look but the last; the night measures more rounds while a verdict
    wants more (``CellVerdict.more``). ``servers`` (an ``e2e.session.session.Servers``) and
    ``gsm8k_runner`` replace the real servers in tests."""
    from e2e.execute import executor_from
    from e2e.pipeline import execute
    from e2e.results.store import load_records
    from e2e.session import SessionOptions

    experiment, folder, prefix, looks = night.experiment, night.folder, night.prefix, night.rounds
    builds = prepare_builds(night.builds, say)
    check_night(folder, {
        "date": night.date, "experiment": experiment.name, "config_hash": night.config_hash,
        "config": night.source, "arm_overrides": night.arm_overrides,
        "packages": {arm: b.get("packages_sha256") for arm, b in builds.items()},
        "builds": builds, "started_at": utc_now()})

    say(f"night {night.date}: {len(night.plans[0])} run(s) of {', '.join(night.arms)} into "
        f"{folder}")
    runner = executor_from(experiment.executor, executor)
    session = SessionOptions(progress=progress, say=say, servers=servers)
    given_up: list[str] = []
    for i, (rounds, plan) in enumerate(zip(looks, night.plans)):
        outcome = execute(experiment, plan, night.root, session=session,
                          max_attempts=MAX_ATTEMPTS, on_unit=on_run, executor=runner)
        given_up += [u for u in outcome.given_up if u not in given_up]
        if i == len(looks) - 1:
            break
        records, _ = load_records(folder) if folder.is_dir() else ((), ())
        seen = look(night, load_cells([r for r in records if r.spec.repeat <= rounds],
                                      prefix=prefix, reference=night.reference))
        open_ = [v for v in seen.verdicts if v.more]
        if not open_:
            break
        say(f"look {i + 1} of {len(looks)} after {rounds} round(s): "
            + "; ".join(f"{v.key.label()} {v.key.metric} not resolved (no change beyond "
                        f"{worse_end(v):+.1f} % against a {v.threshold:g} % threshold)"
                        for v in open_)
            + f": measuring up to {looks[i + 1]} rounds")
    problems = [f"run {run_id} invalid after {MAX_ATTEMPTS} attempts (see "
                f"{prefix}/{run_id}/run.json)" for run_id in given_up]

    cells: list[NightCell] = []
    records: tuple[RunRecord, ...] = ()
    if folder.is_dir():
        records, unreadable = load_records(folder)
        records = tuple(r for r in records if r.spec.repeat <= rounds)
        problems += list(unreadable)
        cells += load_cells(list(records), prefix=prefix, reference=night.reference)
    builds = with_git_commits(builds, git_commits(records))
    notes = tuple(retried_attempts(folder))
    if night.gsm8k is not None:
        g_cells, g_problems = gsm8k_cells(night, say, gsm8k_runner, executor=runner)
        cells += g_cells
        problems += g_problems
    return Measured(cells=tuple(cells), records=records, problems=tuple(problems),
                    builds=builds, notes=notes)


def prepare_builds(builds: Mapping[str, BuildSpec], say: Say) -> dict[str, dict]:
    """Create (if managed and missing) each arm's server environment (``builds``: arm -> its
    build) and read what it holds: engine version and commit, a hash of its packages, e2e's
    commit, the host."""
    from e2e.session import resolve_python
    from e2e.session import provenance

    seen: dict[str, dict] = {}
    out: dict[str, dict] = {}
    for arm, build in builds.items():
        python = resolve_python(build, progress=say)
        if str(python) not in seen:
            facts = provenance(python)
            seen[str(python)] = {**facts["server_env"],
                                 "e2e_git_sha": facts["e2e"].get("git_sha"),
                                 "host": facts["host"].get("hostname")}
        out[arm] = seen[str(python)]
        if "error" in out[arm]:
            raise BuildError(f"arm {arm}: {out[arm]['error']}")
    return out


def check_night(folder: Path, state: dict[str, Any]) -> None:
    """Write ``night.json``, or on a resumed night check that it measures the same thing."""
    keys = {"config_hash": "config", "arm_overrides": "--arm-setting values",
            "packages": "server build (its packages changed)"}
    old = resume_state(folder / NIGHT_FILE, {k: state[k] for k in keys}, what=keys,
                       hint="a night measures one build and one config: give another --date "
                            "or --results, or remove that folder")
    if old is None:
        atomic_write_json(folder / NIGHT_FILE, state)


def load_cells(records: list[RunRecord], *, prefix: str,
               reference: str | None = None) -> list[NightCell]:
    """Night cells of the sweep's run records: the report's own cells (``e2e.analysis.sweep.aggregate``:
    comparable runs only, reported runs = valid with repeat >= report_from_run) for every
    metric of ``NIGHTLY_METRICS``, with the folders of the runs behind each value. With a
    ``reference`` arm, also every other arm's cells relative to it (``relative_cells``)."""
    from e2e.analysis.sweep import summarize

    if not records:
        return []
    try:
        summary = summarize(records, metrics=NIGHTLY_METRICS)
    except ValueError as exc:
        raise ResultsError(f"{prefix}: {exc}") from exc
    run_ids = {(r.spec.arm, r.spec.concurrency, r.spec.spec_mode, r.spec.repeat, r.spec.duet):
               r.run_id for r in records if r.valid}

    def folders(c) -> tuple[str, ...]:
        duets = c.duets or (None,) * len(c.values)
        return tuple(f"{prefix}/{run_ids[(c.arm, c.concurrency, c.spec_mode, k, d)]}"
                     for k, d in zip(c.repeats, duets))

    cells = sorted(summary.cells, key=lambda c: (c.arm, c.concurrency, c.spec_mode))
    out = [NightCell(key=CellKey("load", c.arm, c.concurrency, c.spec_mode, c.metric),
                     values=c.values, repeats=c.repeats, run_dirs=folders(c),
                     interference=c.interference) for c in cells]
    return out + (relative_cells(cells, reference, folders) if reference else [])


def relative_cells(cells, reference: str, folders) -> list[NightCell]:
    """Each arm's cells ÷ the reference arm's, measured the same night: per block the runs
    share (the same duet, or the same round of the interleaved sweep), the ratio of the two
    runs' values; a block without both is left out. The host's drift between nights, and
    within a night between blocks, moves both alike and cancels in the ratio."""
    ref = {(c.concurrency, c.spec_mode, c.metric): c for c in cells if c.arm == reference}
    out = []
    for c in cells:
        base = ref.get((c.concurrency, c.spec_mode, c.metric))
        if c.arm == reference or base is None:
            continue
        mine = dict(zip(_pair_keys(c), zip(c.values, c.repeats, folders(c), _busy(c))))
        theirs = dict(zip(_pair_keys(base), zip(base.values, _busy(base))))
        common = [k for k in mine if k in theirs and theirs[k][0] > 0]
        if not common:
            continue
        out.append(NightCell(
            key=CellKey("load", relative_arm(c.arm, reference), c.concurrency, c.spec_mode,
                        c.metric),
            values=tuple(mine[k][0] / theirs[k][0] for k in common),
            repeats=tuple(mine[k][1] for k in common),
            run_dirs=tuple(mine[k][2] for k in common),
            interference=tuple(_larger(mine[k][3], theirs[k][1]) for k in common)))
    return out


def _busy(cell) -> tuple[float | None, ...]:
    """Each run's recorded interference, None where a run recorded none."""
    return cell.interference or (None,) * len(cell.values)


def _larger(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else max(x for x in (a, b) if x is not None)


def _pair_keys(cell) -> list[tuple]:
    """What pairs a run with the reference's: (round, duet) for a run measured in a duet (with
    more arms than slots, only the reference's run of the same duet), else its round."""
    return [tuple(b[:1]) + tuple(b[2:]) if len(b) > 2 else tuple(b[:1]) for b in cell.blocks()]


def gsm8k_cells(night: Night, say: Say, runner=None,
                executor=None) -> tuple[list[NightCell], list[str]]:
    """Run the GSM8K subset into the night's folder (resumable per arm) and return its cells
    (one value per fresh server of an arm) and the problems met. ``runner`` (an
    ``e2e.gsm8k.run.Runner``) replaces the real servers and lm-eval in tests."""
    from e2e.results.gsm8k import arm_is_complete, read_arm
    from e2e.gsm8k.run import Runner, run_gsm8k

    plan = night.gsm8k  # the night's plan, resolved with it (``gsm8k_plan``)
    problems: list[str] = []
    try:
        run_gsm8k(plan, runner or Runner(log=say), max_attempts=MAX_ATTEMPTS, executor=executor)
    except E2EError as exc:
        problems.append(f"GSM8K subset failed: {exc}")
    by_arm: dict[str, list[tuple[int, float, str]]] = {}
    for label in plan.labels:
        arm_dir = plan.eval_dir / label
        if not arm_is_complete(arm_dir):
            if not problems:
                problems.append(f"GSM8K arm {label} did not finish")
            continue
        result = read_arm(arm_dir)
        if not result.valid:  # kept with its reasons; not an accuracy to judge
            problems.append(f"GSM8K arm {label} is invalid: {'; '.join(result.invalid_reasons)}")
            continue
        by_arm.setdefault(result.arm, []).append(
            (result.occurrence, result.accuracy_strict,
             Path(arm_dir).relative_to(night.results).as_posix()))
    cells = []
    for arm, items in by_arm.items():
        items.sort()
        cells.append(NightCell(key=CellKey("gsm8k", arm, 0, plan.spec_mode, GSM8K_METRIC),
                               values=tuple(i[1] for i in items),
                               repeats=tuple(i[0] for i in items),
                               run_dirs=tuple(i[2] for i in items)))
    return cells, problems


def retried_attempts(folder: Path) -> list[str]:
    """One line per invalid attempt kept in ``<folder>/.attempts/`` (a run that was retried)."""
    import json

    notes = []
    attempts = folder / ".attempts"
    for path in sorted(attempts.glob("*/run.json")) if attempts.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        reasons = "; ".join(record.get("invalid_reasons") or []) or "invalid"
        notes.append(f"{record.get('run_id', path.parent.name)}: an attempt was invalid and "
                     f"retried ({reasons})")
    return notes


def git_commits(records: Iterable[Any]) -> dict[str, str]:
    """Arm -> the commit its git build was made from, from the runs' provenance (``build``
    of ``run.json``); arms not built from git are left out."""
    out: dict[str, str] = {}
    for r in records:
        build = (r.provenance or {}).get("build") or {}
        if build.get("kind") == "git" and build.get("git_commit"):
            out.setdefault(r.spec.arm, str(build["git_commit"]))
    return out


def with_git_commits(builds: Mapping[str, Mapping[str, Any]],
                     commits: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``builds`` (arm -> facts) with each git-built arm's ``git_commit`` added."""
    return {arm: {**facts, **({"git_commit": commits[arm]} if arm in commits else {})}
            for arm, facts in builds.items()}
