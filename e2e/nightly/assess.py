"""Judge a night whose cells are collected: everything between "tonight's cells" and "append
them to the history".

    history -> baseline night (last passing, or pinned) -> GSM8K verdict files of both nights
      -> night-against-night judgement -> change points over each judged cell's history
      -> bisect command lines for regressed git-built arms

``assess_night`` reads the history and the verdict files (the only I/O); the judgement itself
is ``e2e.analysis.judge_night`` and ``e2e.analysis.night_changes`` (pure).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.analysis import (Rules, built_arm, is_relative, judge_night, judgement_with_changes,
                          night_changes, nightly_metric, ratio_history, select_baseline)
from e2e.errors import ResultsError
from e2e.nightly.settings import NightlyConfig
from e2e.results import CellKey, HistoryCell, Judgement, NightCell

__all__ = ["read_samples", "git_commits", "with_git_commits", "assess_night", "bisect_hints"]


def read_samples(results: Path, run_dirs: Iterable[str]) -> dict[str, tuple]:
    """The GSM8K verdicts (``verdicts.jsonl``) of each arm folder in ``run_dirs`` (relative
    to ``results``) that can be read; a folder that cannot is left out (its cell is then
    judged "no samples", with the path named)."""
    from e2e.results import VERDICTS_FILE, read_verdicts

    out: dict[str, tuple] = {}
    for rel in dict.fromkeys(run_dirs):
        path = Path(results) / rel / VERDICTS_FILE
        if path.is_file():
            try:
                out[rel] = read_verdicts(path)
            except ResultsError:
                continue
    return out


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


def assess_night(
    cfg: NightlyConfig,
    *,
    results: Path,
    date: str,
    experiment: str,
    cells: Sequence[NightCell],
    expected: Iterable[CellKey] = (),
    problems: Sequence[str] = (),
    pinned: str | None = None,
    history: Sequence[HistoryCell] | None = None,
    store=None,
) -> Judgement:
    """Judge tonight's ``cells``: baseline night (``pinned`` or ``[nightly] baseline_night``,
    else the last passing night with this config hash), night-against-night verdicts (GSM8K
    per document; a cell relative to the reference against its ratio's history,
    ``e2e.analysis.ratio_history``), then change points over the history of the other
    judged load cells (``[nightly.changepoints]``).

    ``history``: the cells of this experiment and config's nights before tonight; None reads
    them from ``store`` (an ``e2e.results.Store``; None opens the config's ``[nightly] store``
    for this call). GSM8K verdict files that are gone (a wiped runner) are read from
    ``store``."""
    if history is None and store is None:
        from e2e.results import open_store

        with open_store(cfg.settings.store, results) as opened:
            return assess_night(cfg, results=results, date=date, experiment=experiment,
                                cells=cells, expected=expected, problems=problems,
                                pinned=pinned, store=opened)
    if history is None:
        history = store.cells(experiment=experiment, config_hash=cfg.config_hash, before=date)
    pinned = pinned or cfg.settings.baseline_night
    baseline = select_baseline(history, date=date, experiment=experiment,
                               config_hash=cfg.config_hash, pinned=pinned,
                               nights=store.nights(experiment=experiment)
                               if pinned and store is not None else ())
    rules = Rules.from_settings(cfg.settings, cfg.looks)
    gsm8k_dirs = [d for c in list(cells) + list(baseline.cells if baseline else ())
                  if c.key.kind == "gsm8k" for d in c.run_dirs]
    samples = read_samples(results, gsm8k_dirs)
    gone = [d for d in gsm8k_dirs if d not in samples]
    if gone and store is not None:  # the store keeps every night's documents
        samples.update(store.gsm8k_documents(gone))
    cp = cfg.settings.changepoints
    histories = {
        c.key: ratio_history(history, c.key, limit=cfg.settings.history_nights,
                             threshold=rules.threshold_or_headline(c.key), since=cp.since, pinned=pinned,
                             interference_max=rules.interference_max,
                             confidence=rules.confidence)
        for c in cells if c.key.kind == "load" and rules.reference and is_relative(c.key.arm)}
    judgement = judge_night(date, cells, baseline, rules, expected=expected, problems=problems,
                            samples=samples, histories=histories)
    if not cp.enabled:
        return judgement
    # a relative cell's own history judges steps and drift against the level before them
    judged = {v.key: float(v.threshold) for v in judgement.verdicts
              if v.key.kind == "load" and v.threshold is not None and v.verdict != "not judged"
              and not is_relative(v.key.arm)}
    changes = night_changes(
        history, date=date, tonight=cells,
        verdicts=judgement.verdicts, thresholds=judged,
        higher_is_better={k: nightly_metric(k.metric).higher_is_better for k in judged},
        alpha=cp.alpha, min_nights=cp.min_nights, since=cp.since, accepted_through=pinned)
    return judgement_with_changes(judgement, changes)


def _commit_on(history: Sequence[HistoryCell], *, date: str, arm: str) -> str | None:
    commits = [r.build_git_commit for r in history if r.date == date and r.arm == arm
               and isinstance(r.build_git_commit, str) and r.build_git_commit]
    return commits[0] if commits else None


def bisect_hints(cfg: NightlyConfig, judgement: Judgement, history: Sequence[HistoryCell], *,
                 builds: Mapping[str, Mapping[str, Any]], results: Path) -> list[str]:
    """An ``e2e bisect`` command line for each regressed load cell of a git-built arm whose
    commit changed since the good night (the baseline night, or the night before a change
    point started), from ``history`` (the cells of this experiment and config's nights before
    tonight). Its ``--threshold`` is half the change seen (at least the cell's threshold): a
    commit is bad when it holds at least half of the regression."""
    wanted: list[tuple[CellKey, str, float]] = []
    for v in judgement.by_verdict("regressed"):
        if v.key.kind == "load" and judgement.baseline is not None and v.pct is not None:
            wanted.append((v.key, judgement.baseline.date, max(v.threshold or 0, abs(v.pct) / 2)))
    for ch in judgement.changes:
        if ch.regression:
            earlier = sorted({r.date for r in history if r.date < ch.start})
            if earlier:
                threshold = 0.0
                for v in judgement.verdicts:
                    if v.key == ch.key and v.threshold is not None:
                        threshold = v.threshold
                wanted.append((ch.key, earlier[-1], max(threshold, abs(ch.pct) / 2)))
    lines: list[str] = []
    for key, good_night, threshold in wanted:
        name = built_arm(key.arm)  # a cell relative to the reference bisects its arm's build
        arm = cfg.experiment.arm(name)
        build = arm.build or cfg.experiment.server.build
        bad = builds.get(name, {}).get("git_commit")
        good = _commit_on(history, date=good_night, arm=name)
        if build.git is None or not bad or not good or good == bad:
            continue
        argv = ["e2e", "bisect", "--config", cfg.source, "--arm", name,
                "--concurrency", str(key.concurrency), "--spec-mode", key.spec_mode,
                "--metric", key.metric, "--threshold", f"{threshold:.1f}", "--good", good,
                "--bad", bad, "--results", str(results)]
        line = shlex.join(argv)
        if line not in lines:
            lines.append(line)
    return lines
