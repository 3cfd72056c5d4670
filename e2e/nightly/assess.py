"""Judge a night whose cells are collected: everything between "tonight's cells" and "write
the night".

    history (the store's records of this config's earlier nights) -> what the design resolves
      -> baseline night (last passing, or pinned) -> GSM8K verdict files of both nights
      -> night-against-night judgement -> change points over each judged cell's history
      -> outputs against the reference's -> the night's rows -> bisect command lines for
      regressed git-built arms

``assess`` runs it once for the night and returns everything the writes need
(``Assessment``); ``assess_night`` is its judgement (a look during the night is one). The
reads are the store's and the verdict files'; the judgement itself is ``e2e.analysis``'s
(``select_baseline``, ``ratio_history``, ``judge_night``, ``night_changes``: pure).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from e2e.analysis.nightly import (
    BLIND_NIGHTS, HOST_DUETS, HOST_ONE_AT_A_TIME, Rules, check_outputs, first_look, judge_night,
    judgement_with_changes, judgement_with_outputs, night_changes, nightly_metric, noise_of,
    ratio_history, select_baseline, undecided_nights
)
from e2e.analysis.nightly import design_lines as resolved_lines
from e2e.console import Say
from e2e.errors import ResultsError
from e2e.nightly.measure import Measured
from e2e.nightly.night import Night
from e2e.results import CellKey, HistoryCell, Judgement, NightCell, RatioHistory, night_rows
from e2e.results.store import load_outputs, utc_now
from e2e.results import built_arm, is_relative

__all__ = ["Assessment", "assess", "read_samples", "assess_night", "assess_look", "design_lines",
           "night_outputs", "bisect_hints"]


def read_samples(results: Path, run_dirs: Iterable[str]) -> dict[str, tuple]:
    """The GSM8K verdicts (``verdicts.jsonl``) of each arm folder in ``run_dirs`` (relative
    to ``results``) that can be read; a folder that cannot is left out (its cell is then
    judged "no samples", with the path named)."""
    from e2e.results.gsm8k import VERDICTS_FILE, read_verdicts

    out: dict[str, tuple] = {}
    for rel in dict.fromkeys(run_dirs):
        path = Path(results) / rel / VERDICTS_FILE
        if path.is_file():
            try:
                out[rel] = read_verdicts(path)
            except ResultsError:
                continue
    return out


@dataclass(frozen=True)
class Assessment:
    """A night assessed (``assess``): its judgement (outputs checks included), what its design
    resolves, the bisect command lines, tonight's GSM8K documents by arm folder and the rows
    the night writes to the store (``night_rows``)."""

    judgement: Judgement
    design: tuple[str, ...]
    bisect: tuple[str, ...]
    samples: dict[str, tuple]
    rows: pd.DataFrame


def assess(night: Night, measured: Measured, store, *,
           say: Say = lambda message: None) -> Assessment:
    """Assess tonight (``measured``) against the history ``store`` (an
    ``e2e.results.nightly_store.Store``) holds: the module docstring, once."""
    history = store.cells(experiment=night.experiment.name, config_hash=night.config_hash,
                          before=night.date)
    design = design_lines(night, history)
    judgement = assess_night(night, measured.cells, store=store, history=history,
                             problems=measured.problems)
    judgement = judgement_with_outputs(
        judgement, night_outputs(night, measured.records, store, say=say),
        fail=night.settings.outputs_fail)
    some = next(iter(measured.builds.values()), {})
    rows = night_rows(judgement, experiment=night.experiment.name, config_hash=night.config_hash,
                      recorded_at=utc_now(), cells=measured.cells, builds=measured.builds,
                      arm_overrides=night.arm_overrides, e2e_git_sha=some.get("e2e_git_sha"),
                      host=str(some.get("host")))
    g_dirs = [d for c in measured.cells if c.key.kind == "gsm8k" for d in c.run_dirs]
    return Assessment(judgement=judgement, design=tuple(design),
                      bisect=tuple(bisect_hints(night, judgement, history,
                                                builds=measured.builds)),
                      samples=read_samples(night.results, g_dirs), rows=rows)


def assess_night(night: Night, cells: Sequence[NightCell], *, store=None,
                 history: Sequence[HistoryCell] | None = None, problems: Sequence[str] = (),
                 expected: Iterable[CellKey] | None = None) -> Judgement:
    """Judge tonight's ``cells``: baseline night (the night's pinned one, else the last
    passing night with this config hash), night-against-night verdicts (GSM8K per document;
    a cell relative to the reference against its ratio's history,
    ``e2e.analysis.nightly.history.ratio_history``), then change points over the history of the other
    judged load cells (``[nightly.changepoints]``). ``expected``: the cells that must be
    there (None: the night's, ``Night.expected``; a look during the night gives ()).

    ``history``: the cells of this experiment and config's nights before tonight; None reads
    them from ``store`` (an ``e2e.results.nightly_store.Store``). GSM8K verdict files that are gone (a wiped
    runner) are read from ``store``."""
    date, experiment, pinned, rules = (night.date, night.experiment.name, night.pinned,
                                       night.rules)
    if history is None:
        history = store.cells(experiment=experiment, config_hash=night.config_hash,
                              before=date)
    baseline = select_baseline(history, date=date, experiment=experiment,
                               config_hash=night.config_hash, pinned=pinned,
                               nights=store.nights(experiment=experiment)
                               if pinned and store is not None else ())
    gsm8k_dirs = [d for c in list(cells) + list(baseline.cells if baseline else ())
                  if c.key.kind == "gsm8k" for d in c.run_dirs]
    samples = read_samples(night.results, gsm8k_dirs)
    gone = [d for d in gsm8k_dirs if d not in samples]
    if gone and store is not None:  # the store keeps every night's documents
        samples.update(store.gsm8k_documents(gone))
    cp = night.settings.changepoints
    histories = {
        c.key: ratio_history(history, c.key, limit=night.settings.history_nights,
                             threshold=rules.threshold_or_headline(c.key), since=cp.since,
                             pinned=pinned,
                             interference_max=rules.interference_max,
                             confidence=rules.confidence, first=night.looks.first)
        for c in cells if c.key.kind == "load" and rules.reference and is_relative(c.key.arm)}
    undecided = {c.key: _streak(history, c.key, histories.get(c.key), rules, pinned=pinned)
                 for c in cells if c.key.kind == "load"}
    judgement = judge_night(date, cells, baseline, rules,
                            expected=night.expected if expected is None else expected,
                            problems=problems,
                            samples=samples, histories=histories, undecided=undecided)
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


def assess_look(night: Night, cells: Sequence[NightCell]) -> Judgement:
    """The judgement of a look during the night: the cells measured so far against the
    store's history (``assess_night``; no cell is missing yet)."""
    from e2e.results import open_store

    with open_store(night.store, night.results) as store:
        return assess_night(night, cells, store=store, expected=())


def _streak(history: Sequence[HistoryCell], key: CellKey, hist: RatioHistory | None,
            rules: Rules, *, pinned: str | None) -> int:
    """The nights in a row before tonight ``key`` ended undecided at its last look
    (``undecided_nights``): for a ratio cell, only the nights judged against its history once
    full (``hist``; a history still being built leaves nights undecided that later nights
    resolve, and counts none); for another cell, the nights after the pinned baseline night."""
    if hist is not None and not hist.full:
        return 0
    after = max(d for d, _ in hist.nights) if hist is not None else pinned
    first = rules.looks.first if rules.looks is not None else None
    usual = first_look(hist.nights, first) if hist is not None else ()
    return undecided_nights(history, key, interference_max=rules.interference_max, after=after,
                            usual=usual)


def _commit_on(history: Sequence[HistoryCell], *, date: str, arm: str) -> str | None:
    commits = [r.build_git_commit for r in history if r.date == date and r.arm == arm
               and isinstance(r.build_git_commit, str) and r.build_git_commit]
    return commits[0] if commits else None


def bisect_hints(night: Night, judgement: Judgement, history: Sequence[HistoryCell], *,
                 builds: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
        bad = builds.get(name, {}).get("git_commit")
        good = _commit_on(history, date=good_night, arm=name)
        if night.builds[name].git is None or not bad or not good or good == bad:
            continue
        argv = ["e2e", "bisect", "--config", night.source, "--arm", name,
                "--concurrency", str(key.concurrency), "--spec-mode", key.spec_mode,
                "--metric", key.metric, "--threshold", f"{threshold:.1f}", "--good", good,
                "--bad", bad, "--results", str(night.results)]
        line = shlex.join(argv)
        if line not in lines:
            lines.append(line)
    return lines


def design_lines(night: Night, history) -> list[str]:
    """What ``night`` resolves for each judged ratio cell (``e2e.analysis.nightly.resolution.design_lines``),
    planned from the ratio's history in ``history`` (the cells of the experiment and config's
    nights before tonight, ``Store.cells``) where it holds 2 nights, else from the host's
    measured noise (one server at a time where the night runs so, ``Night.alone``)."""
    if not night.reference:
        return []
    rules, settings, keys = night.rules, night.settings, night.judged
    lines = []
    for key in keys:
        threshold = rules.threshold_or_headline(key)
        if threshold is None:
            continue
        hist = ratio_history(history, key, limit=settings.history_nights,
                             threshold=threshold, since=settings.changepoints.since,
                             pinned=night.pinned, interference_max=rules.interference_max,
                             first=night.looks.first)
        host = HOST_ONE_AT_A_TIME if night.alone else HOST_DUETS
        noise = noise_of(first_look(hist.nights, night.looks.first),
                         f"the ratio's history ({len(hist.nights)} nights)") or host
        lines += resolved_lines(
            cell=f"{key.label()} {key.metric}", threshold=threshold, looks=night.looks,
            runs_of=night.rounds_for, nights_full=settings.history_nights,
            nights_now=len(hist.nights), alpha=settings.alpha, cells=len(keys),
            noise=noise, confidence=settings.confidence, one_at_a_time=night.alone)
        stuck = _streak(history, key, hist, rules, pinned=night.pinned)
        if stuck:
            lines.append(f"{key.label()} {key.metric}: undecided at its last look on the "
                         f"{stuck} night(s) before tonight, in a row (at {BLIND_NIGHTS} in a "
                         "row a night is blind, exit 4)")
    return lines


def night_outputs(night: Night, records, store, *, say: Say = lambda message: None) -> tuple:
    """Tonight's outputs against the reference arm's (``e2e.analysis.nightly.outputs.check_outputs``),
    the earlier nights of this config in ``store`` the yardstick where the night has no A/A
    arm; () without a reference arm."""
    if not night.reference or not records:
        return ()
    outputs, unreadable = load_outputs(night.folder, records)
    for line in unreadable:
        say(line)
    history = store.outputs_history(experiment=night.experiment.name,
                                    config_hash=night.config_hash, before=night.date)
    return check_outputs(records, outputs, reference=night.reference, history=history,
                         confidence=night.settings.confidence)
