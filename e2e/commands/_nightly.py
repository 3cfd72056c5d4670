"""``e2e nightly``: thin typer command; the work is in ``e2e.nightly.run``.

Exit codes (``e2e.results.EXIT_CODES``): 0 every judged cell resolved, nothing regressed;
1 a regression; 2 the night could not run or could not be judged (bad config, build failure,
runs invalid after a retry, a cell without runs); 3 undecided: a judged cell not resolved
tonight (its interval past the threshold at the last look, or a call withheld on a busy
host); 4 blind: a judged cell undecided at its last look several nights in a row; 130
interrupted (the server is stopped; the same command with the same --date resumes).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.console import guard, out, print_run, say
from e2e.errors import ConfigError
from e2e.names import check_link

__all__ = ["nightly_command"]


def _today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def nightly_command(
    config: Annotated[Optional[Path], typer.Option(
        "--config", "-c", help="Nightly config: an experiment TOML plus a nightly table. "
                               "Default: the embedded configs/nightly.toml.",
        dir_okay=False)] = None,
    results: Annotated[Path, typer.Option(
        "--results", help="Results folder; the night goes to <results>/nightly/<date>/ and "
                          "the history to the store (default <results>/nightly/history.db).")
    ] = Path("results"),
    store: Annotated[Optional[str], typer.Option(
        "--store", help="The results store, a database URL (default: the config's "
                        "\\[nightly] store, else sqlite:///nightly/history.db under --results); "
                        "e.g. postgresql+psycopg://e2e@db/e2e with PGPASSWORD set.")] = None,
    date: Annotated[Optional[str], typer.Option(
        help="The night's date, YYYY-MM-DD (default: today, UTC). The same date resumes a "
             "night; a new date starts a fresh one.")] = None,
    baseline: Annotated[Optional[str], typer.Option(
        "--baseline-night", metavar="YYYY-MM-DD",
        help="Judge against this night instead of the last passing night with the same "
             "config hash; overrides the config's nightly.baseline_night.")] = None,
    arm_setting: Annotated[Optional[list[str]], typer.Option(
        "--arm-setting", help="KEY=VALUE merged into the plugin settings of every nightly arm "
                              "(e.g. step_delay_us=500, the calibration delay); recorded as "
                              "build provenance, not part of the config hash. Repeatable.")] = None,
    link_base: Annotated[Optional[str], typer.Option(
        help="URL the summary's links start with (e.g. where CI keeps results/): an http(s) "
             "URL or a relative path; default: paths relative to --results.")] = None,
    executor: Annotated[Optional[Literal["local", "ray"]], typer.Option(
        "--executor", help="Where the night's units run: local or ray (a Ray cluster, one "
                           "server per host; docs/how-to/cluster.md). Default: the config's.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan, the config hash and the baseline; start nothing.")] = False,
    duet: Annotated[Optional[bool], typer.Option(
        "--duet/--no-duet", help="Measure the night's arms together in time (the config's "
        "\\[duet] slots), e.g. tonight's build beside nightly.reference; default: the "
        "config's \\[duet] enabled.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """The nightly benchmark job: prepare the build(s), run the configured sweep (and GSM8K
    subset), append every cell to the history, judge the night against the last passing
    night (or a pinned one) and write a Markdown summary, trend plots and the full report.
    Exit 0: every judged cell resolved, nothing regressed; 1: a regression; 2: the night could
    not run or be judged; 3: undecided (a judged cell not resolved tonight); 4: blind (one
    undecided at its last look several nights in a row)."""
    code = guard(lambda: _nightly(config, results, date, baseline, arm_setting or [], link_base,
                                  dry_run, quiet, executor, store, duet),
                 error_exit=2, unexpected_exit=2,
                 interrupted="the server was stopped; finished runs are kept (rerun with the "
                             "same --date to resume)")
    raise SystemExit(code)


def _nightly(config, results, date, baseline, arm_setting, link_base, dry_run, quiet,
             executor=None, store=None, duet=None) -> int:
    from e2e.nightly.run import NightlyOptions, run_nightly
    from e2e.nightly.settings import load_nightly, parse_arm_settings
    from e2e.config import parse_date

    date = _today() if date is None else date  # an empty --date is not today
    for value, flag in ((date, "--date"), (baseline, "--baseline-night")):
        if value is not None:
            try:
                parse_date(value)
            except ValueError as exc:
                raise ConfigError(f"{flag} {exc}") from None
    cfg = load_nightly(config)
    if duet is not None:  # how the night runs, not what it measures: the config hash stays
        import dataclasses

        exp = cfg.experiment
        cfg = dataclasses.replace(cfg, experiment=exp.model_copy(
            update={"duet": exp.duet.model_copy(update={"enabled": duet})}))
    overrides = parse_arm_settings(arm_setting)
    options = NightlyOptions(results=results, date=date, pinned=baseline,
                             arm_overrides=overrides, progress=not quiet,
                             link_base=check_link(link_base, "--link-base"),
                             executor=executor, store=store)
    if dry_run:  # the plan, the config hash, the baseline and what the design resolves
        from e2e.nightly.night import night_of
        from e2e.nightly.run import describe_night

        night = night_of(cfg, date=date, results=results, arm_overrides=overrides,
                         pinned=baseline, store=store)
        for line in describe_night(night, executor=executor):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
        return 0

    outcome = run_nightly(cfg, options, say=say,
                          on_run=lambda folder, record: print_run(folder, record, brief=True))
    out.print(outcome.summary, highlight=False, markup=False, soft_wrap=True)
    say(f"summary: {outcome.summary_path}; store: {outcome.store}")
    return outcome.judgement.exit_code

