"""The history frame, one row per night cell, and the old ``results/nightly/history.parquet``.

The nightly keeps its nights in the results store (``e2e.nightly.store``), whose ``history()``
returns this frame; selecting from it (``select_baseline``, ``night_cells``) stays here as pure
functions. The parquet file is what nights were kept in before the store: ``read_history``
reads one for the store's one-time import, ``append_night`` still writes one (tests, tools).

Columns (``HISTORY_COLUMNS``; ``schema_version`` 2 added ``build_git_commit``, 3
``interference``, each read as empty from older files):

    schema_version, date, experiment, config_hash, night_status, recorded_at
    kind, arm, concurrency, spec_mode, metric        the cell (concurrency 0 for GSM8K)
    n, median, low, high, values, repeats, run_dirs  its reported runs (run_dirs relative
                                                     to the results folder)
    interference                                     each run's recorded interference
                                                     (cores; None where none was recorded)
    verdict, pct, pct_low, pct_high, threshold,      its judgement
    floor_pp, baseline_date
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
from e2e.nightly.judge import Baseline, CellKey, Judgement, NightCell
from e2e.paths import atomic_write_bytes

__all__ = ["HISTORY_SCHEMA_VERSION", "HISTORY_COLUMNS", "HISTORY_FILE", "history_path",
           "read_history", "append_night", "night_rows", "night_cells", "select_baseline",
           "cell_history", "interference_of", "stored_interference"]

HISTORY_SCHEMA_VERSION = 3
HISTORY_FILE = "history.parquet"
HISTORY_COLUMNS = [
    "schema_version", "date", "experiment", "config_hash", "night_status", "recorded_at",
    "kind", "arm", "concurrency", "spec_mode", "metric",
    "n", "median", "low", "high", "values", "repeats", "run_dirs",
    "verdict", "pct", "pct_low", "pct_high", "threshold", "floor_pp", "baseline_date",
    "engine", "engine_version", "engine_git_sha", "packages_sha256", "build_python",
    "arm_overrides", "e2e_git_sha", "host", "build_git_commit", "interference",
]
_ADDED = {"build_git_commit", "interference"}  # columns newer than schema version 1
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


def cell_history(history: pd.DataFrame, key: CellKey, *, date: str, experiment: str,
                 config_hash: str, limit: int, since: str | None = None,
                 interference_max: float | None = None) -> list[tuple[str, NightCell]]:
    """``key``'s earlier nights to judge tonight (``date``) against, oldest first: the last
    ``limit`` passing nights of this experiment and config hash before ``date`` (on or after
    ``since``), back to and including the latest night called "improved" for ``key`` whose
    next passing night was called improved too: a new level starts only where a second night
    confirms it. One improved night alone stays one night of the history (on a busy host one
    night of one build was called −22.6 %, and the next, judged against it alone, a false
    +25.0 % regression: docs/statistics.md). A regressed night does not pass, so it is never
    in the history. With ``interference_max``, a night whose median run was measured while
    other processes took at least that many cores is left out (its spread is the other work's,
    not the ratio's: one such night widened a later interval to [−43.6, +114.9] %); nights
    stored without interference are kept."""
    rows = history[(history["experiment"] == experiment) & (history["config_hash"] == config_hash)
                   & (history["night_status"] == "pass") & (history["date"] < date)
                   & (history["kind"] == key.kind) & (history["arm"] == key.arm)
                   & (history["concurrency"].astype(int) == int(key.concurrency))
                   & (history["spec_mode"] == key.spec_mode) & (history["metric"] == key.metric)]
    if since is not None:
        rows = rows[rows["date"] >= since]
    out: list[tuple[str, NightCell]] = []
    newer_improved = False  # the night after this one (already in ``out``) was improved
    for r in rows.sort_values("date", ascending=False).itertuples(index=False):
        if len(out) >= limit:
            break
        cell = NightCell(key, tuple(float(x) for x in r.values), tuple(int(x) for x in r.repeats),
                         tuple(str(x) for x in r.run_dirs), interference_of(r.interference))
        if interference_max is not None and (cell.busy_share or 0.0) >= interference_max:
            continue
        out.append((str(r.date), cell))
        improved = str(r.verdict) == "improved"
        if improved and newer_improved:
            break
        newer_improved = improved
    return out[::-1]
