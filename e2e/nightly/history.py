"""The history frame, one row per night cell, and the old ``results/nightly/history.parquet``.

The nightly keeps its nights in the results store (``e2e.nightly.store``), whose ``history()``
returns this frame; selecting from it (``select_baseline``, ``night_cells``) stays here as pure
functions. The parquet file is what nights were kept in before the store: ``read_history``
reads one for the store's one-time import, ``append_night`` still writes one (tests, tools).

Columns (``HISTORY_COLUMNS``; ``schema_version`` 2 added ``build_git_commit``, 3
``interference``, 4 ``baseline_reason``, each read as empty from older files):

    schema_version, date, experiment, config_hash, night_status, recorded_at
    kind, arm, concurrency, spec_mode, metric        the cell (concurrency 0 for GSM8K)
    n, median, low, high, values, repeats, run_dirs  its reported runs (run_dirs relative
                                                     to the results folder)
    interference                                     each run's recorded interference
                                                     (cores; None where none was recorded)
    verdict, pct, pct_low, pct_high, threshold,      its judgement
    floor_pp, baseline_date, baseline_reason         (the night's baseline and why: "pinned"
                                                     for one a person chose)
    engine, engine_version, engine_git_sha,          build provenance of the cell's arm
    packages_sha256, build_python, arm_overrides,
    e2e_git_sha, host, build_git_commit              (the commit of a git-built arm)

``run_dirs`` of a GSM8K cell are its arm folders (``verdicts.jsonl`` inside): the per-document
judgement of a later night reads the baseline night's verdicts from there.

``append_night`` replaces the rows of the same (date, experiment, config_hash) and writes the
whole table atomically (read, concat, write a temporary file, rename) under an flock, so a
rerun of a night never duplicates it and a crash leaves the old table or the new one.
Reading and selecting (``select_baseline``, ``night_cells``) are pure functions of a frame.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from e2e.errors import ConfigError, ResultsError
from e2e.analysis import looks_changed, nightly_metric, within
from e2e.results import Baseline, CellKey, Judgement, NightCell, RatioHistory
from e2e.paths import atomic_write_bytes

__all__ = ["HISTORY_SCHEMA_VERSION", "HISTORY_COLUMNS", "HISTORY_FILE", "history_path",
           "read_history", "append_night", "night_rows", "night_cells", "select_baseline",
           "ratio_history", "interference_of", "stored_interference"]

HISTORY_SCHEMA_VERSION = 4
HISTORY_FILE = "history.parquet"
HISTORY_COLUMNS = [
    "schema_version", "date", "experiment", "config_hash", "night_status", "recorded_at",
    "kind", "arm", "concurrency", "spec_mode", "metric",
    "n", "median", "low", "high", "values", "repeats", "run_dirs",
    "verdict", "pct", "pct_low", "pct_high", "threshold", "floor_pp", "baseline_date",
    "engine", "engine_version", "engine_git_sha", "packages_sha256", "build_python",
    "arm_overrides", "e2e_git_sha", "host", "build_git_commit", "interference",
    "baseline_reason",
]
_ADDED = {"build_git_commit", "interference", "baseline_reason"}  # newer than version 1
_NIGHT = ["date", "experiment", "config_hash"]


def history_path(results: Path) -> Path:
    return Path(results) / "nightly" / HISTORY_FILE


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in HISTORY_COLUMNS})


def read_history(path: Path) -> pd.DataFrame:
    """The history table (an empty one with every column if the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return _empty()
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise ResultsError(f"cannot read the nightly history {path}: {exc}; move it aside "
                           "to start a new history") from exc
    for column in _ADDED - set(frame.columns):
        frame[column] = None
    missing = [c for c in HISTORY_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsError(f"{path}: not an e2e nightly history (missing columns "
                           f"{', '.join(missing)})")
    return frame


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a+")
    except OSError as exc:
        raise ResultsError(f"cannot create {lock}: {exc}") from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def append_night(path: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Replace the night(s) in ``rows`` in the history at ``path``; returns the new table."""
    path = Path(path)
    with _locked(path):
        old = read_history(path)
        if len(rows):
            nights = set(map(tuple, rows[_NIGHT].astype(str).itertuples(index=False)))
            keep = ~old[_NIGHT].astype(str).apply(tuple, axis=1).isin(nights) if len(old) else []
            old = old[keep] if len(old) else old
        frames = [f for f in (old, rows[HISTORY_COLUMNS]) if len(f)]
        new = pd.concat(frames, ignore_index=True) if frames else _empty()
        new = new.sort_values(["date", "experiment", "kind", "arm", "spec_mode", "concurrency",
                               "metric"], kind="stable").reset_index(drop=True)
        buffer = io.BytesIO()
        new.to_parquet(buffer, index=False)
        atomic_write_bytes(path, buffer.getvalue())
    return new


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def night_rows(
    judgement: Judgement,
    *,
    experiment: str,
    config_hash: str,
    recorded_at: str,
    cells: Sequence[NightCell],
    builds: Mapping[str, Mapping[str, Any]],
    arm_overrides: Mapping[str, Any],
    e2e_git_sha: str | None,
    host: str,
) -> pd.DataFrame:
    """Tonight's rows: every cell (judged or recorded) with its verdict and provenance."""
    verdicts = {v.key: v for v in judgement.verdicts}
    rows = []
    for cell in sorted(cells, key=lambda c: c.key):
        v = verdicts.get(cell.key)
        build = builds.get(cell.key.arm, {})
        rows.append({
            "schema_version": HISTORY_SCHEMA_VERSION,
            "date": judgement.date, "experiment": experiment, "config_hash": config_hash,
            "night_status": judgement.status, "recorded_at": recorded_at,
            "kind": cell.key.kind, "arm": cell.key.arm, "concurrency": int(cell.key.concurrency),
            "spec_mode": cell.key.spec_mode, "metric": cell.key.metric,
            "n": len(cell.values), "median": cell.median, "low": cell.low, "high": cell.high,
            "values": [float(x) for x in cell.values], "repeats": [int(r) for r in cell.repeats],
            "run_dirs": list(cell.run_dirs),
            "interference": stored_interference(cell.interference),
            "verdict": v.verdict if v else "not judged",
            "pct": _num(v.pct if v else None),
            "pct_low": _num(v.interval[0] if v and v.interval else None),
            "pct_high": _num(v.interval[1] if v and v.interval else None),
            "threshold": _num(v.threshold if v else None),
            "floor_pp": _num(v.floor_pp if v else None),
            "baseline_date": judgement.baseline.date if judgement.baseline else None,
            "baseline_reason": judgement.baseline.reason if judgement.baseline else None,
            "engine": build.get("engine_distribution"),
            "engine_version": build.get("engine_version"),
            "engine_git_sha": build.get("engine_git_sha"),
            "packages_sha256": build.get("packages_sha256"),
            "build_python": build.get("python_path"),
            "arm_overrides": json.dumps(dict(arm_overrides), sort_keys=True),
            "e2e_git_sha": e2e_git_sha, "host": host,
            "build_git_commit": build.get("git_commit"),
        })
    frame = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    return frame if len(frame) else _empty()


def night_cells(history: pd.DataFrame, *, date: str, experiment: str,
                config_hash: str) -> tuple[NightCell, ...]:
    """The cells of one night of the history."""
    rows = history[(history["date"] == date) & (history["experiment"] == experiment)
                   & (history["config_hash"] == config_hash)]
    return tuple(
        NightCell(key=CellKey(str(r.kind), str(r.arm), int(r.concurrency), str(r.spec_mode),
                              str(r.metric)),
                  values=tuple(float(x) for x in r.values),
                  repeats=tuple(int(x) for x in r.repeats),
                  run_dirs=tuple(str(x) for x in r.run_dirs),
                  interference=interference_of(r.interference))
        for r in rows.itertuples(index=False))


def stored_interference(values: Any) -> list[float | None] | None:
    """Per-run interference as the history stores it: None where no run recorded any."""
    got = interference_of(values)
    return list(got) if any(x is not None for x in got) else None


def interference_of(stored: Any) -> tuple[float | None, ...]:
    """The stored per-run interference back as a tuple; () for a night stored without it."""
    if stored is None or (isinstance(stored, float) and math.isnan(stored)):
        return ()
    return tuple(None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)
                 for x in stored)


def select_baseline(history: pd.DataFrame, *, date: str, experiment: str, config_hash: str,
                    pinned: str | None = None) -> Baseline | None:
    """The night tonight (``date``) is judged against.

    Default: the latest night before ``date`` of the same experiment and config hash whose
    status is ``pass``; None when there is none. ``pinned``: that night, whatever its status;
    a ConfigError when it is tonight, absent, or was made with another config hash."""
    same = history[history["experiment"] == experiment]
    if pinned is not None:
        if pinned == date:
            raise ConfigError(f"the pinned baseline {pinned} is tonight itself; pin an earlier night")
        night = same[same["date"] == pinned]
        if night.empty:
            dates = sorted(set(same["date"]))
            raise ConfigError(f"the pinned baseline night {pinned} is not in the history of "
                              f"{experiment!r} (nights: {', '.join(dates) or 'none'})")
        hashes = set(night["config_hash"])
        if config_hash not in hashes:
            raise ConfigError(
                f"the pinned baseline night {pinned} was made with config "
                f"{', '.join(h[:12] for h in sorted(hashes))}, tonight's is {config_hash[:12]}: "
                "their cells do not measure the same thing; pin a night of this config")
        status = str(night[night["config_hash"] == config_hash]["night_status"].iloc[0])
        return Baseline(pinned, night_cells(history, date=pinned, experiment=experiment,
                                            config_hash=config_hash), "pinned", status)
    ok = same[(same["config_hash"] == config_hash) & (same["night_status"] == "pass")
              & (same["date"] < date)]
    if ok.empty:
        return None
    chosen = str(ok["date"].max())
    return Baseline(chosen, night_cells(history, date=chosen, experiment=experiment,
                                        config_hash=config_hash),
                    "last passing night with the same config hash")


def ratio_history(history: pd.DataFrame, key: CellKey, *, date: str, experiment: str,
                  config_hash: str, limit: int, threshold: float | None = None,
                  since: str | None = None, pinned: str | None = None,
                  interference_max: float | None = None,
                  confidence: float = 0.95) -> RatioHistory:
    """A relative cell's history to judge tonight (``date``) against: the first ``limit``
    nights of this experiment and config hash since the history started that joined it.

    A night joins when its verdict for ``key`` said no change within ``threshold`` ("noise")
    or there was nothing to judge it against yet ("no baseline"); one whose interval reached
    past the threshold ("undecided") joins unless it looks changed (``e2e.analysis.looks_changed``), and a
    night that looks changed is held out until it shows no change beyond the threshold
    against the history as it has grown since (``e2e.analysis.within``). A call (regressed or
    improved) never joins, nor a night measured beside other work (its median run's recorded
    interference at least ``interference_max`` cores; nights stored without interference are
    kept). Once it holds ``limit`` nights it is full: later nights are judged against it and
    never join, so a step or a slow drift is judged against the level before it and never
    absorbed.

    The history starts at the latest of: ``since`` (``changepoints.since``), the baseline
    night a person pinned (``pinned`` tonight, else the latest pin an earlier night was judged
    with: a pin holds for the nights after it, and that night joins whatever its verdict),
    and the first of two nights in a row called improved (a new level starts only where a
    second night confirms it). Also found: a regression called since the start and not seen
    to return (``regressed_since``; a night judged "noise" or "improved" closes it),
    whether the last night, still regressed, showed no change beyond half the threshold
    (``returning``: the interval's worse end under the smallest change a night calls; a
    second such night in a row returns it), and whether the last night, not called, looked
    changed (``suspect``: a second such night in a row is a regression)."""
    rows = history[(history["experiment"] == experiment) & (history["config_hash"] == config_hash)
                   & (history["date"] < date)]
    anchors = [(since, f"since {since} (changepoints.since)")] if since else []
    pins = [pinned] if pinned else [
        d for d in rows.loc[rows["baseline_reason"] == "pinned", "baseline_date"]
        if isinstance(d, str)]
    if pins:
        pin = max(pins)
        anchors.append((pin, f"since {pin}, the baseline night pinned"))
    start, why = max(anchors) if anchors else (None, "")
    mine = rows[(rows["kind"] == key.kind) & (rows["arm"] == key.arm)
                & (rows["concurrency"].astype(int) == int(key.concurrency))
                & (rows["spec_mode"] == key.spec_mode) & (rows["metric"] == key.metric)]
    if start is not None:
        mine = mine[mine["date"] >= start]
    better = nightly_metric(key.metric).higher_is_better if key.kind == "load" else False
    sign = -1.0 if better else 1.0
    window: list[tuple[str, NightCell]] = []
    held: list[tuple[str, NightCell]] = []   # nights that looked changed, waiting
    regressed: str | None = None
    returning = False
    suspect: str | None = None  # the night before, if it looked changed
    last_improved: tuple[str, NightCell] | None = None  # the night before, if called improved

    def admit(night: tuple[str, NightCell]) -> None:
        window.append(night)
        for waiting in list(held):  # the grown history may now show a held night's level
            if len(window) < limit and threshold is not None and within(
                    waiting[1].values, [c.values for _, c in window], threshold,
                    higher_is_better=better, confidence=confidence):
                held.remove(waiting)
                window.append(waiting)

    def changed(cell: NightCell) -> bool:
        return threshold is not None and len(window) >= 2 and looks_changed(
            cell.values, [c.values for _, c in window], threshold, higher_is_better=better)

    mine = mine.sort_values("date")
    for day, verdict, values, repeats, run_dirs, busy, low, high in zip(
            mine["date"].astype(str), mine["verdict"].astype(str), mine["values"],
            mine["repeats"], mine["run_dirs"], mine["interference"], mine["pct_low"],
            mine["pct_high"]):
        cell = NightCell(key, tuple(float(x) for x in values), tuple(int(x) for x in repeats),
                         tuple(str(x) for x in run_dirs), interference_of(busy))
        if interference_max is not None and (cell.busy_share or 0.0) >= interference_max:
            last_improved = suspect = None
            continue
        suspect = day if verdict == "undecided" and changed(cell) else None
        if verdict == "improved" and last_improved is not None:
            window, held, regressed = [last_improved, (day, cell)], [], None  # a new level
            start, why = last_improved[0], f"since {last_improved[0]}, a confirmed improvement"
            last_improved, returning = None, False
            continue
        last_improved = (day, cell) if verdict == "improved" else None
        pin = day == start and why.endswith("pinned")
        if verdict == "regressed" and not pin:
            worse = low if better else high
            returning = (regressed is not None and threshold is not None and worse is not None
                         and not math.isnan(float(worse))
                         and sign * float(worse) <= threshold / 2.0)
            regressed = regressed or day
        elif verdict in ("noise", "improved") or pin:
            regressed, returning = None, False
        if len(window) >= limit:
            continue
        if pin or verdict in ("no baseline", "noise", "new cell"):
            admit((day, cell))
        elif verdict == "undecided":
            if suspect:
                held.append((day, cell))
            else:
                admit((day, cell))
    return RatioHistory(nights=tuple(window), since=start, why=why or "since the first night",
                        full=len(window) >= limit, regressed_since=regressed,
                        returning=returning, suspect=suspect)
