"""``e2e bisect``: thin typer command; the work is in ``e2e.nightly.bisect``.

Exit codes: 0 the first bad commit was named, 2 bad input or a failed build, 130 interrupted
(the server is stopped; the same command resumes, skipping measured commits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.commands._options import with_duet
from e2e.console import guard, out, say
from e2e.errors import ConfigError

__all__ = ["bisect_command", "load_bisect_config"]


def load_bisect_config(path: Path):
    """(experiment, [nightly] settings or None) of an experiment or nightly TOML."""
    from e2e.config import load_experiment
    from e2e.paths import read_toml
    from e2e.nightly.settings import load_nightly

    if "nightly" in read_toml(path):
        cfg = load_nightly(path)
        return cfg.experiment, cfg
    return load_experiment(path), None


def _defaults(nightly, concurrency: int, spec_mode: str, metric: str | None, runs: int | None,
              threshold: float | None, experiment) -> tuple[str, int, float]:
    """The metric, runs and threshold a nightly config judges the cell with, where not given:
    the cell's headline (``e2e.analysis.sweep.headline.headline_for``, built from the TPOT the nightly's
    ``verify_step_from`` names) unless the nightly's thresholds judge another metric."""
    from e2e.analysis.sweep import HEADLINE, headline_for, headline_metric, server_twin

    table = dict(nightly.settings.thresholds.get(spec_mode, {})) if nightly else {}
    tpot_from = nightly.settings.verify_step_from if nightly else "client"
    if metric is None:
        first = next(iter(table), HEADLINE)
        metric = (headline_for(concurrency, spec_mode, tpot_from=tpot_from) if first == HEADLINE
                  else first)
    if threshold is None:
        client = headline_metric(concurrency, spec_mode)
        threshold = table.get(metric, table.get(HEADLINE if metric in (client, server_twin(client))
                                                else metric, 2.0))
    runs = runs or (nightly.runs if nightly else experiment.repeats)
    return metric, runs, float(threshold)


def bisect_command(
    good: Annotated[str, typer.Option(help="A ref (commit, tag, branch) of the arm's git "
                                           "build that is known good.")],
    bad: Annotated[str, typer.Option(help="A later ref that is known bad (the regressed "
                                          "night's commit).")],
    arm: Annotated[str, typer.Option(help="The arm whose build is a git ref.")] = "main",
    config: Annotated[Optional[Path], typer.Option(
        "--config", "-c", help="Experiment or nightly TOML (default: the embedded nightly).",
        dir_okay=False)] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="The cell's concurrency.")] = 1,
    spec_mode: Annotated[Literal["base", "dspark"], typer.Option(
        help="The cell's spec mode: base (no speculator) or dspark (with it).")] = "base",
    metric: Annotated[Optional[str], typer.Option(
        help="Metric to judge (default: what the nightly config judges in this spec mode).")] = None,
    results: Annotated[Path, typer.Option(
        help="Results folder; the search goes to <results>/bisect/.")] = Path("results"),
    runs: Annotated[Optional[int], typer.Option(
        min=2, max=10_000, help="Rounds per measured commit, warmups included (default: the nightly's "
                    "runs, else the experiment's repeats).")] = None,
    max_runs: Annotated[Optional[int], typer.Option(
        min=2, max=10_000, help="More rounds while a verdict is undecided, up to this (default: 2 x runs).")] = None,
    threshold: Annotated[Optional[float], typer.Option(
        min=0.0, help="Smallest worsening in % that makes a commit bad (default: the "
                      "nightly's threshold for the metric, else 2).")] = None,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999)] = 0.95,
    duet: Annotated[Optional[bool], typer.Option(
        "--duet/--no-duet", help="Measure the good build and each commit together in time "
        "(the config's \\[duet] slots); default: the config's \\[duet] enabled.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Find the first commit between --good and --bad that makes a cell worse: build and
    measure midpoints (fresh servers, rounds of the good build and the commit back to back)
    until one commit is left. Every measurement is kept under <results>/bisect/ and the
    same command resumes."""
    guard(lambda: _bisect(good, bad, arm, config, concurrency, spec_mode, metric, results, runs,
                          max_runs, threshold, confidence, quiet, duet),
          error_exit=2, interrupted="the server was stopped; measured commits are kept (rerun "
                                    "the same command to resume)")


def _bisect(good, bad, arm, config, concurrency, spec_mode, metric, results, runs, max_runs,
            threshold, confidence, quiet, duet=None) -> None:
    from e2e.analysis.nightly import nightly_metric
    from e2e.nightly.bisect import BisectCell, run_bisect
    from e2e.nightly.settings import default_nightly_path

    experiment, nightly = load_bisect_config(config or default_nightly_path())
    experiment = with_duet(experiment, duet)
    metric, runs, threshold = _defaults(nightly, concurrency, spec_mode, metric, runs,
                                           threshold, experiment)
    try:
        nightly_metric(metric)
    except KeyError as exc:
        raise ConfigError(f"--metric: {exc.args[0]}") from None
    result = run_bisect(experiment, BisectCell(arm, concurrency, spec_mode, metric), good=good,
                        bad=bad, results=results, runs=runs, max_runs=max_runs or 2 * runs,
                        threshold_pct=threshold, confidence=confidence, progress=not quiet,
                        say=say)
    out.print(f"first bad commit: {result.first_bad}", highlight=False)
    out.print(f"last good commit: {result.last_good}", highlight=False)
    out.print(f"commits measured: {len(result.measured)} of {len(result.commits) - 1} "
               f"(plus the good build as reference)", highlight=False)
