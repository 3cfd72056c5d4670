"""The nightly pipeline, one function: ``run_nightly``.

    builds -> night folder (resume check) -> sweep -> GSM8K subset -> night cells
      -> store (history) -> baseline -> judgement -> report -> store write (one
      transaction) -> trends, summary

Tonight's folder is ``<results>/nightly/<date>/``: the sweep writes its runs under
``<date>/<experiment>/<run id>/`` (so ``e2e report`` reads it as any experiment folder), the
GSM8K subset under ``<date>/<experiment>/gsm8k/``, and the night's own files beside them:

    night.json        what the night measures: config hash, build, arm overrides (resume check)
    summary.md        the Markdown summary (chat)
    summary-github.md the same as a pull-request comment / step summary (icons, < 64 KB)
    judgement.json    every cell's verdict, the baseline, the status
    trends/*.png      each metric over the history of this config
    report/           the full report of the night (``e2e report``)

A night killed midway and restarted with the same date continues: valid runs and finished
GSM8K arms are kept, and the night's rows in the store (``[nightly] store``,
``e2e.results.open_store``) are replaced in one transaction, never duplicated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e.config import Experiment
from e2e.console import Say
from e2e.errors import BuildError, E2EError, ResultsError
from e2e.nightly.assess import (assess_night, bisect_hints, git_commits, read_samples,
                                with_git_commits)
from e2e.nightly.settings import MAX_ATTEMPTS, NightlyConfig, with_arm_settings
from e2e.paths import atomic_write_bytes, atomic_write_json
from e2e.analysis import NIGHTLY_METRICS, judged_metrics, judgement_with_outputs, relative_arm
from e2e.render import SummaryContext, render_summary, render_summary_github, render_trends
from e2e.results import (GSM8K_METRIC, CellKey, Judgement, NightCell, RunRecord, night_rows,
                         open_store, resume_state, worse_end)
from e2e.results import utc_now

__all__ = ["NightlyOptions", "NightOutcome", "run_nightly", "prepare_builds", "night_dir",
           "plan_night", "night_looks", "night_outputs", "one_at_a_time", "design_lines", "judged_key", "expected_cells", "load_cells", "gsm8k_cells", "retried_attempts", "check_night",
           "night_report"]

NIGHT_FILE = "night.json"


@dataclass(frozen=True)
class NightlyOptions:
    results: Path
    date: str
    pinned: str | None = None
    arm_overrides: dict[str, Any] = field(default_factory=dict)
    link_base: str | None = None
    progress: bool = True
    executor: str | None = None  # --executor: local or ray (default: the config's)
    store: str | None = None     # --store: a database URL (default: the config's [nightly] store)


@dataclass(frozen=True)
class NightOutcome:
    judgement: Judgement
    summary: str
    folder: Path              # <results>/nightly/<date>/<experiment>
    summary_path: Path
    store: str                # the store's URL, password masked
    trend_paths: tuple[Path, ...]
    report_dir: Path | None


def night_dir(results: Path, date: str) -> Path:
    return Path(results) / "nightly" / date


def _rel(path: Path, results: Path) -> str:
    return Path(path).relative_to(results).as_posix()


def prepare_builds(experiment: Experiment, arms: tuple[str, ...], say: Say) -> dict[str, dict]:
    """Create (if managed and missing) each arm's server environment and read what it holds:
    engine version and commit, a hash of its packages, e2e's commit, the host."""
    from e2e.session import resolve_python
    from e2e.session import provenance

    seen: dict[str, dict] = {}
    out: dict[str, dict] = {}
    for arm in arms:
        build = experiment.arm(arm).build or experiment.server.build
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


def plan_night(cfg: NightlyConfig, experiment: Experiment, runs: int | None = None):
    """The night's units for ``runs`` rounds (default: the config's ``runs``, the first look)."""
    from e2e.plan import make_plan

    return make_plan(experiment, arms=list(cfg.arms), concurrencies=list(cfg.concurrencies),
                     spec_modes=[m == "dspark" for m in cfg.spec_modes], runs=runs or cfg.runs)


def night_looks(cfg: NightlyConfig) -> tuple[int, ...]:
    """The rounds (warmups included) after which the night looks at its ratio cells: the
    config's ``runs``, then as many more at a time up to ``max_runs`` while a cell is not
    resolved; one look without a reference arm or ``max_runs``."""
    if not cfg.reference or not cfg.settings.max_runs:
        return (cfg.runs,)
    return tuple(cfg.rounds_for(k) for k in cfg.looks.schedule())


def one_at_a_time(experiment: Experiment, reference: str | None = None) -> str | None:
    """Why a night with a ``reference`` arm runs one server at a time: not in duets (``[duet]
    enabled`` false, or ``--no-duet``), or fewer than two of its ``[duet]`` slots have every
    core they name among the cores this process may use on this host. None where it runs in
    duets, or has no reference arm."""
    import os

    from e2e.names import parse_cpus

    if not experiment.duet.enabled:
        return ("not in duets: [duet] enabled is false, or --no-duet" if reference else None)
    here = os.sched_getaffinity(0)
    usable = [s for s in experiment.duet.slots
              if all(parse_cpus(c) <= here for c in (s.server_cpus, s.client_cpus) if c)]
    if len(usable) >= 2:
        return None
    return (f"this host has {len(usable)} of the config's {len(experiment.duet.slots)} duet "
            f"slots (cores {', '.join(str(c) for c in sorted(here))} here)")


def design_lines(cfg: NightlyConfig, history, *, pinned: str | None = None,
                 alone: str | None = None) -> list[str]:
    """What a night of ``cfg`` resolves for each judged ratio cell
    (``e2e.analysis.design_lines``), planned from the ratio's history in ``history`` (the
    cells of the experiment and config's nights before tonight, ``Store.cells``) where it
    holds 2 nights, else from the host's measured noise; ``alone``: why the night runs one
    server at a time."""
    from e2e.analysis import HOST_DUETS, HOST_ONE_AT_A_TIME, Rules, noise_of
    from e2e.analysis import design_lines as resolved_lines
    from e2e.analysis import ratio_history

    if not cfg.reference:
        return []
    rules = Rules.from_settings(cfg.settings, cfg.looks)
    keys = [judged_key(cfg, k) for k in expected_cells(cfg) if k.kind == "load"]
    lines = []
    for key in keys:
        threshold = rules.threshold_or_headline(key)
        if threshold is None:
            continue
        hist = ratio_history(history, key, limit=cfg.settings.history_nights,
                             threshold=threshold, since=cfg.settings.changepoints.since,
                             pinned=pinned or cfg.settings.baseline_night,
                             interference_max=rules.interference_max)
        host = HOST_ONE_AT_A_TIME if alone else HOST_DUETS
        noise = noise_of([c.values for _, c in hist.nights],
                         f"the ratio's history ({len(hist.nights)} nights)") or host
        lines += resolved_lines(
            cell=f"{key.label()} {key.metric}", threshold=threshold, looks=cfg.looks,
            runs_of=cfg.rounds_for, nights_full=cfg.settings.history_nights,
            nights_now=len(hist.nights), alpha=cfg.settings.alpha, cells=len(keys),
            noise=noise, confidence=cfg.settings.confidence, one_at_a_time=alone)
    return lines


def judged_key(cfg: NightlyConfig, key: CellKey) -> CellKey:
    """The metric a headline threshold judges in ``key``'s cell: its server-built twin where
    the config builds the headline from the server's TPOT."""
    from e2e.analysis import headline_metric, server_twin

    twin = server_twin(key.metric)
    if (cfg.settings.verify_step_from == "server" and twin
            and key.metric == headline_metric(key.concurrency, key.spec_mode)):
        return CellKey(key.kind, key.arm, key.concurrency, key.spec_mode, twin)
    return key


def expected_cells(cfg: NightlyConfig) -> list[CellKey]:
    """Every judged cell the plan should produce (so a cell whose runs all failed is seen)."""
    keys = []
    judged = ([relative_arm(a, cfg.reference) for a in cfg.arms if a != cfg.reference]
              if cfg.reference else list(cfg.arms))
    for arm in judged:
        for conc in cfg.concurrencies:
            for mode in cfg.spec_modes:
                for metric in judged_metrics(cfg.settings.thresholds, mode, conc):
                    keys.append(CellKey("load", arm, conc, mode, metric))
        if cfg.settings.gsm8k.enabled:
            mode = "dspark" if cfg.settings.gsm8k.dspark else "base"
            keys.append(CellKey("gsm8k", arm, 0, mode, GSM8K_METRIC))
    return keys


def load_cells(records: list[RunRecord], *, prefix: str,
               reference: str | None = None) -> list[NightCell]:
    """Night cells of the sweep's run records: the report's own cells (``e2e.analysis._aggregate``:
    comparable runs only, reported runs = valid with repeat >= report_from_run) for every
    metric of ``NIGHTLY_METRICS``, with the folders of the runs behind each value. With a
    ``reference`` arm, also every other arm's cells relative to it (``relative_cells``)."""
    from e2e.analysis import summarize

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


def gsm8k_cells(cfg: NightlyConfig, experiment: Experiment, root: Path, results: Path,
                say: Say, runner=None, executor=None) -> tuple[list[NightCell], list[str]]:
    """Run the GSM8K subset into ``root`` (resumable per arm) and return its cells (one value
    per fresh server of an arm) and the problems met. ``runner`` (an ``e2e.gsm8k.run.Runner``)
    replaces the real servers and lm-eval in tests."""
    from e2e.results import arm_is_complete, read_arm
    from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k

    g = cfg.settings.gsm8k
    labels = [arm for arm in cfg.arms for _ in range(g.repeats)]
    base = cfg.baseline_arm  # run_gsm8k compares verdicts with the baseline's first server
    if base in labels:
        labels = [base] * g.repeats + [a for a in labels if a != base]

    problems: list[str] = []
    plan = resolve_plan(experiment, arms=",".join(labels), dspark=g.dspark, limit=g.limit,
                        concurrency=g.concurrency, data=cfg.gsm8k_data, results=root)
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
            (result.occurrence, result.accuracy_strict, _rel(arm_dir, results)))
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


def night_outputs(cfg: NightlyConfig, folder: Path, records, store, *, experiment: str,
                  date: str, say: Say = lambda message: None) -> tuple:
    """Tonight's outputs against the reference arm's (``e2e.nightly.outputs.check_outputs``),
    the earlier nights of this config in ``store`` the yardstick where the night has no A/A
    arm; () without a reference arm."""
    from e2e.nightly.outputs import check_outputs
    from e2e.results import load_outputs

    if not cfg.reference or not records:
        return ()
    outputs, unreadable = load_outputs(folder, records)
    for line in unreadable:
        say(line)
    history = store.outputs_history(experiment=experiment, config_hash=cfg.config_hash,
                                    before=date)
    return check_outputs(records, outputs, reference=cfg.reference, history=history,
                         confidence=cfg.settings.confidence)


def night_report(folder: Path, cfg: NightlyConfig, say: Say) -> Path | None:
    """Write the night's full report (``e2e report``) against the baseline arm
    (``[nightly] baseline``, default main), whatever the order of the arms; None if there is
    no run to report."""
    from e2e.render import build_report

    try:
        return build_report(folder, baseline=cfg.baseline_arm).report_dir
    except ResultsError as exc:
        say(f"no full report: {exc}")
        return None


def run_nightly(
    cfg: NightlyConfig,
    options: NightlyOptions,
    *,
    say: Say = lambda message: None,
    on_run: Callable[[Path, RunRecord], None] = lambda folder, record: None,
    gsm8k_runner=None,
    servers=None,
) -> NightOutcome:
    """Run one night end to end and judge it (see the module docstring). ``servers``
    (an ``e2e.session._session.Servers``) replaces the real servers in tests."""
    from e2e.pipeline import execute
    from e2e.results import load_records
    from e2e.session import SessionOptions

    results = Path(options.results)
    experiment = with_arm_settings(cfg.experiment, cfg.built_arms, options.arm_overrides)
    alone = one_at_a_time(experiment, cfg.reference)
    if alone and experiment.duet.enabled:  # the host lacks a slot: one server at a time
        say(f"one server at a time: {alone}")
        experiment = experiment.model_copy(update={"duet": experiment.duet.model_copy(
            update={"enabled": False})})
    root = night_dir(results, options.date)
    folder = root / experiment.name
    prefix = _rel(folder, results)
    plan = plan_night(cfg, experiment)

    with open_store(options.store or cfg.settings.store, results):
        pass  # fail now, not after hours of runs, on a store that cannot be reached
    builds = prepare_builds(experiment, cfg.arms, say)
    check_night(folder, {
        "date": options.date, "experiment": experiment.name, "config_hash": cfg.config_hash,
        "config": cfg.source, "arm_overrides": options.arm_overrides,
        "packages": {arm: b.get("packages_sha256") for arm, b in builds.items()},
        "builds": builds, "started_at": utc_now()})

    say(f"night {options.date}: {len(plan)} run(s) of {', '.join(cfg.arms)} into {folder}")
    from e2e.execute import executor_from

    runner = executor_from(cfg.experiment.executor, options.executor)
    session = SessionOptions(progress=options.progress, say=say, servers=servers)
    looks = night_looks(cfg)
    given_up: list[str] = []
    for i, rounds in enumerate(looks):
        if i:
            plan = plan_night(cfg, experiment, runs=rounds)
        outcome = execute(experiment, plan, root, session=session, max_attempts=MAX_ATTEMPTS,
                          on_unit=on_run, executor=runner)
        given_up += [u for u in outcome.given_up if u not in given_up]
        if i == len(looks) - 1:
            break
        records, _ = load_records(folder) if folder.is_dir() else ((), ())
        look = load_cells([r for r in records if r.spec.repeat <= rounds], prefix=prefix,
                          reference=cfg.reference)
        with open_store(options.store or cfg.settings.store, results) as store:
            seen = assess_night(cfg, results=results, date=options.date,
                                experiment=experiment.name, cells=look, pinned=options.pinned,
                                store=store)
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
        cells += load_cells(list(records), prefix=prefix, reference=cfg.reference)
    if cfg.settings.gsm8k.enabled:
        g_cells, g_problems = gsm8k_cells(cfg, experiment, root, results, say, gsm8k_runner,
                                          executor=runner)
        cells += g_cells
        problems += g_problems

    builds = with_git_commits(builds, git_commits(records))
    with open_store(options.store or cfg.settings.store, results) as store:
        say(f"results store: {store.masked}")
        design = design_lines(cfg, store.cells(experiment=experiment.name,
                                               config_hash=cfg.config_hash, before=options.date),
                              pinned=options.pinned, alone=alone)
        judgement = assess_night(cfg, results=results, date=options.date,
                                 experiment=experiment.name, cells=cells,
                                 expected=expected_cells(cfg), problems=problems,
                                 pinned=options.pinned, store=store)
        judgement = judgement_with_outputs(
            judgement, night_outputs(cfg, folder, records, store, experiment=experiment.name,
                                     date=options.date, say=say),
            fail=cfg.settings.outputs_fail)
        some = next(iter(builds.values()), {})
        rows = night_rows(judgement, experiment=experiment.name, config_hash=cfg.config_hash,
                          recorded_at=utc_now(), cells=cells, builds=builds,
                          arm_overrides=options.arm_overrides,
                          e2e_git_sha=some.get("e2e_git_sha"), host=str(some.get("host")))
        report_dir = night_report(folder, cfg, say)
        g_dirs = [d for c in cells if c.key.kind == "gsm8k" for d in c.run_dirs]
        store.write_night(rows, judgement=judgement, samples=read_samples(results, g_dirs),
                          paths={"night_dir": prefix,
                                 "report_path": (_rel(report_dir / "report.md", results)
                                                 if report_dir else None),
                                 "summary_path": f"{prefix}/summary.md"})
        before = store.cells(experiment=experiment.name, config_hash=cfg.config_hash,
                             before=options.date)
        history = store.history(experiment=experiment.name)
        store_name = store.masked

    trend_paths = []
    for name, data in render_trends(history, experiment=experiment.name,
                                    config_hash=cfg.config_hash).items():
        atomic_write_bytes(folder / "trends" / name, data)
        trend_paths.append(folder / "trends" / name)

    ctx = SummaryContext(
        experiment=experiment.name, config_hash=cfg.config_hash, night_dir=prefix,
        builds=builds, arm_overrides=options.arm_overrides,
        report_path=_rel(report_dir / "report.md", results) if report_dir else None,
        trends_dir=_rel(folder / "trends", results) if trend_paths else None,
        link_base=options.link_base, confidence=cfg.settings.confidence,
        notes=tuple(retried_attempts(folder)), design=tuple(design),
        bisect=tuple(bisect_hints(cfg, judgement, before, builds=builds, results=results)))
    text = render_summary(judgement, ctx)
    summary_path = folder / "summary.md"
    atomic_write_bytes(summary_path, text.encode("utf-8"))
    atomic_write_bytes(folder / "summary-github.md",
                       render_summary_github(judgement, ctx).encode("utf-8"))
    atomic_write_json(folder / "judgement.json", _judgement_json(judgement, cfg))
    return NightOutcome(judgement=judgement, summary=text, folder=folder,
                        summary_path=summary_path, store=store_name,
                        trend_paths=tuple(trend_paths), report_dir=report_dir)


def _judgement_json(judgement: Judgement, cfg: NightlyConfig) -> dict[str, Any]:
    return {
        "date": judgement.date, "status": judgement.status, "exit_code": judgement.exit_code,
        "config_hash": cfg.config_hash,
        "baseline": None if judgement.baseline is None else {
            "date": judgement.baseline.date, "reason": judgement.baseline.reason,
            "status": judgement.baseline.status},
        "problems": list(judgement.problems),
        "outputs_fail": judgement.outputs_fail,
        "outputs": [c.to_json() for c in judgement.outputs],
        "changes": [{**asdict(c.key), "start": c.start, "break_date": c.break_date,
                     "before": c.before, "after": c.after, "pct": c.pct, "p_value": c.p_value,
                     "worse": c.worse, "latest": c.latest, "caught": c.caught,
                     "regression": c.regression, "reason": c.reason}
                    for c in judgement.changes],
        "verdicts": [{**asdict(v.key), "verdict": v.verdict, "pct": v.pct,
                      "interval": v.interval, "threshold": v.threshold, "floor_pp": v.floor_pp,
                      "p_value": v.p_value, "source": v.source, "reason": v.reason,
                      "tonight": list(v.tonight.values) if v.tonight else None,
                      "baseline": list(v.baseline.values) if v.baseline else None,
                      "history": list(v.history)}
                     for v in judgement.verdicts],
    }
