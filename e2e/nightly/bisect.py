"""``e2e bisect``: name the first commit that made a cell worse.

    good ref, bad ref (an arm whose build is a git ref)
      -> the commits between them (``git rev-list --ancestry-path``)
      -> binary search (``search_first_bad``, pure) over a ``measure(commit)`` callback:
           build the commit (a managed environment per commit, as any git build)
           -> runs of the good build and of the commit in rounds (a fresh server each run,
              the two arms back to back in every round, in the plan's balanced order: ``e2e.plan`` and
              ``e2e.execute.describe``)
           -> the cell's metric per round, the commit against the good build of the same
              round (``e2e.analysis.nightly.bisect.blocked_change``) -> good / bad (``classify``), more
              rounds while undecided
      -> the first bad commit

Everything is kept under ``<results>/bisect/<search>/``: ``bisect.json`` (the search: cell,
refs, commits, every measurement) and one experiment folder per measured commit with its runs
(``<sha12>/good-c1-base-r1/`` ...). Rerunning the same command skips measured commits and,
inside an interrupted measurement, runs already made.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e.analysis.nightly import blocked_change, classify
from e2e.console import Say
from e2e.config import BuildSpec, Experiment, GitSource
from e2e.errors import BuildError, ConfigError, ResultsError
from e2e.paths import atomic_write_json
from e2e.results import BisectOutcome as Outcome
from e2e.results.store import resume_state

__all__ = ["Outcome", "BisectResult", "BisectCell", "Measurement", "search_first_bad",
           "commits_between", "bisect_experiment", "run_bisect", "BISECT_FILE"]

BISECT_FILE = "bisect.json"
BISECT_SCHEMA_VERSION = 1


# --- the search: pure ----------------------------------------------------------------------

@dataclass(frozen=True)
class BisectResult:
    """The first bad commit, the last good one before it, and what was measured (in order)."""

    first_bad: str
    last_good: str
    commits: tuple[str, ...]          # good ref's commit first, bad ref's commit last
    measured: tuple[str, ...]         # commits measured by the search (midpoints), in order
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)


def search_first_bad(commits: Sequence[str], measure: Callable[[str], Outcome]) -> BisectResult:
    """Binary search for the first bad commit of ``commits`` (oldest first; the first is known
    good, the last known bad), calling ``measure`` on midpoints only: at most
    ⌈log2(len(commits) − 1)⌉ calls. Assumes one change from good to bad, as git bisect does."""
    if len(commits) < 2:
        raise ValueError("need the good commit and at least one later commit")
    lo, hi = 0, len(commits) - 1
    measured: list[str] = []
    outcomes: dict[str, Outcome] = {}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        outcome = measure(commits[mid])
        if outcome not in ("good", "bad"):
            raise ValueError(f"measure({commits[mid]}) returned {outcome!r}, not good or bad")
        measured.append(commits[mid])
        outcomes[commits[mid]] = outcome
        if outcome == "good":
            lo = mid
        else:
            hi = mid
    return BisectResult(first_bad=commits[hi], last_good=commits[lo], commits=tuple(commits),
                        measured=tuple(measured), outcomes=outcomes)


# --- the measurement: builds and runs ------------------------------------------------------

@dataclass(frozen=True)
class BisectCell:
    """What is measured: one metric of one (arm, concurrency, spec mode)."""

    arm: str
    concurrency: int
    spec_mode: str
    metric: str

    def label(self) -> str:
        return f"{self.arm} c{self.concurrency} {self.spec_mode} {self.metric}"


@dataclass(frozen=True)
class Measurement:
    commit: str
    outcome: Outcome
    pct: float
    low: float | None
    high: float | None
    rounds: int
    decided: bool       # False: still undecided at the most rounds, decided on the estimate
    folder: str         # relative to the bisect folder


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        raise BuildError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """[good, ..., bad]: the good commit and every commit on the ancestry path to bad."""
    path = _git(repo, "rev-list", "--ancestry-path", "--reverse", f"{good}..{bad}").split()
    if not path or path[-1] != bad:
        raise ConfigError(f"the bad ref ({bad[:12]}) does not descend from the good ref "
                          f"({good[:12]}); give --good an ancestor of --bad")
    return [good, *path]


def _git_build(experiment: Experiment, arm: str) -> BuildSpec:
    settings = experiment.arm(arm)
    build = settings.build or experiment.server.build
    if build.git is None:
        raise ConfigError(f"arm {arm!r} is not built from a git ref (its build is "
                          f"{build.kind!r}); bisect needs build.git = {{repo, ref}} on the arm "
                          "or in [server.build]")
    return build


def bisect_experiment(experiment: Experiment, arm: str, *, good: str, candidate: str) -> Experiment:
    """The experiment of one measurement: arms ``good`` and ``candidate``, both ``arm`` with
    its build's git ref set to a commit (``Experiment.model_copy``); named after the
    candidate commit."""
    build = _git_build(experiment, arm)
    base = experiment.arm(arm)

    def at(commit: str):
        git = GitSource(repo=build.git.repo, ref=commit)
        return base.model_copy(update={"build": build.model_copy(update={"git": git})})

    return experiment.model_copy(update={"name": candidate[:12],
                                         "arms": {"good": at(good), "candidate": at(candidate)}})


def _by_round(records, cell: BisectCell, start: int) -> tuple[dict[int, float], dict[int, float]]:
    """The cell's metric per round (repeat) of the candidate's and the good build's reported
    runs: the report's own cells (``e2e.analysis.sweep.aggregate.summarize``, with the nightly's metrics)."""
    from e2e.analysis.nightly import NIGHTLY_METRICS
    from e2e.analysis.sweep import summarize

    try:
        summary = summarize(records, baseline="good", report_from_run=start,
                            metrics=NIGHTLY_METRICS)
    except ValueError as exc:  # runs the report refuses to put in one cell
        raise ResultsError(str(exc)) from None

    def rounds(arm: str) -> dict[int, float]:
        found = summary.cell(arm, cell.concurrency, cell.spec_mode, cell.metric)
        return dict(zip(found.repeats, found.values)) if found else {}

    return rounds("candidate"), rounds("good")


def _state(folder: Path, header: dict) -> dict:
    state = resume_state(folder / BISECT_FILE, header, what={"cell": "cell", "good": "good commit",
                                                             "bad": "bad commit", "repo": "repo"})
    return state or {"schema_version": BISECT_SCHEMA_VERSION, **header, "measurements": {}}


def run_bisect(
    experiment: Experiment,
    cell: BisectCell,
    *,
    good: str,
    bad: str,
    results: Path,
    runs: int,
    max_runs: int,
    threshold_pct: float,
    confidence: float = 0.95,
    max_attempts: int = 2,
    progress: bool = True,
    say: Say = lambda message: None,
) -> BisectResult:
    """Bisect ``cell`` between the ``good`` and ``bad`` refs of ``cell.arm``'s git build (see
    the module docstring). ``runs`` rounds per measurement (warmups included), up to
    ``max_runs`` while the verdict is undecided."""
    from e2e.session import resolve_git
    from e2e.analysis.nightly import nightly_metric
    from e2e.plan import make_plan
    from e2e.session import plugin_check
    from e2e.results.store import load_records
    from e2e.pipeline import execute
    from e2e.session import SessionOptions

    build = _git_build(experiment, cell.arm)
    if cell.spec_mode not in ("base", "dspark"):
        raise ConfigError(f"--spec-mode {cell.spec_mode!r}: give base or dspark")
    higher_is_better = nightly_metric(cell.metric).higher_is_better
    start = experiment.report_from_run
    if runs - start + 1 < 2 or max_runs < runs:
        raise ConfigError(f"--runs {runs} leaves {runs - start + 1} reported round(s) after "
                          f"{start - 1} warmup(s); give at least {start + 1}, and --max-runs "
                          ">= --runs")
    repo, good_commit = resolve_git(GitSource(repo=build.git.repo, ref=good))
    _, bad_commit = resolve_git(GitSource(repo=build.git.repo, ref=bad))
    commits = commits_between(repo, good_commit, bad_commit)
    name = f"{experiment.name}-{cell.arm}-c{cell.concurrency}-{cell.spec_mode}-{cell.metric}"
    folder = Path(results) / "bisect" / f"{name}-{good_commit[:12]}-{bad_commit[:12]}"
    state = _state(folder, {"cell": asdict(cell), "good": good_commit, "bad": bad_commit,
                            "repo": build.git.repo})
    state.update(commits=commits, runs=runs, max_runs=max_runs, threshold_pct=threshold_pct,
                 confidence=confidence)
    atomic_write_json(folder / BISECT_FILE, state)
    say(f"bisect {cell.label()}: {len(commits) - 1} commit(s) after {good_commit[:12]}, "
        f"at most {math.ceil(math.log2(len(commits) - 1)) if len(commits) > 2 else 0} to "
        f"measure; folder {folder}")

    def measure(commit: str) -> Outcome:
        done = state["measurements"].get(commit)
        if done is not None:
            say(f"{commit[:12]}: {done['outcome']} (measured before: {done['pct']:+.1f} %)")
            return done["outcome"]
        exp = bisect_experiment(experiment, cell.arm, good=good_commit, candidate=commit)
        n = runs
        while True:
            plan = make_plan(exp, arms=["good", "candidate"], concurrencies=[cell.concurrency],
                             spec_modes=[cell.spec_mode == "dspark"], runs=n)
            say(f"{commit[:12]}: {n} round(s) of the good build and this commit")
            execute(exp, plan, folder, max_attempts=max_attempts,
                    session=SessionOptions(plugin_check=plugin_check, progress=progress, say=say))
            records, _ = load_records(folder / exp.name)
            change = blocked_change(*_by_round(records, cell, start), confidence=confidence)
            outcome = classify(change, threshold_pct=threshold_pct,
                               higher_is_better=higher_is_better)
            if outcome is not None or n >= max_runs:
                break
            n = min(max_runs, n + 2)
        decided = outcome is not None
        if outcome is None:  # still undecided at the most rounds: the estimate decides
            sign = -1.0 if higher_is_better else 1.0
            outcome = "bad" if sign * change.pct >= threshold_pct / 2 else "good"
        m = Measurement(commit, outcome, change.pct, change.low, change.high, change.rounds,
                        decided, exp.name)
        state["measurements"][commit] = asdict(m)
        atomic_write_json(folder / BISECT_FILE, state)
        interval = (f" ({change.low:+.1f} … {change.high:+.1f} %)"
                    if change.low is not None else "")
        say(f"{commit[:12]}: {outcome}: {change.pct:+.1f} %{interval} against the good build, "
            f"{change.rounds} round(s)" + ("" if decided else "; undecided, by the estimate"))
        return outcome

    result = search_first_bad(commits, measure)
    state["result"] = {"first_bad": result.first_bad, "last_good": result.last_good,
                       "measured": list(result.measured)}
    atomic_write_json(folder / BISECT_FILE, state)
    return result
