"""The nightly pipeline, one function: ``run_nightly``, each stage called once.

    night     the config resolved once for tonight: its experiment on this host, its
              folders, the plan of each look, the cells it expects and judges
              (``e2e.nightly.night.night_of``)
    measure   builds, night.json (resume check), the sweep with its looks, the GSM8K subset,
              the night's cells (``e2e.nightly.measure.measure_night``)
    assess    against the store's history: baseline, judgement, change points, outputs,
              what the design resolves, bisect lines (``e2e.nightly.assess.assess``)
    write     the full report, the store (one transaction), trends, summaries, judgement.json
              (``e2e.nightly.write.write_night``)

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.console import Say
from e2e.nightly.assess import assess, assess_look
from e2e.nightly.measure import measure_night
from e2e.nightly.night import Night, night_of
from e2e.nightly.settings import NightlyConfig
from e2e.nightly.write import NightOutcome, write_night
from e2e.results.records import RunRecord
from e2e.results import open_store
from e2e.results.store import writing

__all__ = ["NightlyOptions", "NightOutcome", "run_nightly", "describe_night"]


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


def run_nightly(
    cfg: NightlyConfig,
    options: NightlyOptions,
    *,
    say: Say = lambda message: None,
    on_run: Callable[[Path, RunRecord], None] = lambda folder, record: None,
    gsm8k_runner=None,
    servers=None,
) -> NightOutcome:
    """Run one night end to end and judge it (see the module docstring): ``cfg`` is
    resolved once (``night_of``) and every stage reads that night. ``servers`` (an
    ``e2e.session.session.Servers``) replaces the real servers in tests."""
    night = night_of(cfg, date=options.date, results=options.results,
                     arm_overrides=options.arm_overrides, pinned=options.pinned,
                     store=options.store)
    if night.alone and cfg.experiment.duet.enabled:
        say(f"one server at a time: {night.alone}")
    with open_store(night.store, night.results):
        pass  # fail now, not after hours of runs, on a store that cannot be reached
    # the night's folder held as a sweep holds its own: night.json, the runs, the GSM8K
    # subset, the summaries and judgement.json are written by one e2e at a time
    with writing(night.root, night.experiment.name,
                 wait_s=night.experiment.server.lock_wait_s):
        measured = measure_night(night, look=assess_look, say=say, on_run=on_run,
                                 progress=options.progress, executor=options.executor,
                                 gsm8k_runner=gsm8k_runner, servers=servers)
        with open_store(night.store, night.results) as store:
            say(f"results store: {store.masked}")
            assessed = assess(night, measured, store, say=say)
            return write_night(night, measured, assessed, store,
                               link_base=options.link_base, say=say)


def describe_night(night: Night, *, executor: str | None = None) -> list[str]:
    """``e2e nightly --dry-run``: what ``night`` will do (``plan_header``), its looks, the config
    hash and the baseline night it would be judged against, what the design resolves for each
    judged ratio cell, then every unit's server command (``describe_plan``, which refuses a
    run out of bounds). Starts nothing, and creates no store that is not there."""
    from e2e.analysis.nightly import select_baseline
    from e2e.execute import describe_plan, plan_header
    from e2e.nightly.assess import design_lines

    experiment, plan, looks = night.experiment, night.plans[0], night.rounds
    units = describe_plan(experiment, plan, night.root)  # refuses a run out of bounds
    lines = plan_header(experiment, plan, night.root,
                        executor=executor or experiment.executor.kind)
    if len(looks) > 1:
        lines.append(f"looks: after {looks[0]} rounds ({looks[0] - experiment.report_from_run + 1} "
                     f"reported), then while a ratio cell is not resolved (neither a call "
                     f"nor no change beyond its threshold) up to "
                     f"{', '.join(map(str, looks[1:]))}")
    with open_store(night.store, night.results, create=False) as opened:
        history = opened.cells(experiment=experiment.name, config_hash=night.config_hash,
                               before=night.date)
        nights = opened.nights(experiment=experiment.name)
    chosen = select_baseline(history, date=night.date, experiment=experiment.name,
                             config_hash=night.config_hash, pinned=night.pinned, nights=nights)
    lines.append(f"config hash {night.config_hash[:12]}; baseline: "
                 + (f"night {chosen.date} ({chosen.reason})" if chosen else "none"))
    lines += [f"resolves: {line}" for line in design_lines(night, history)]
    return lines + [""] + units  # the header first, as the sweep's dry run
