"""The history frame, one row per night cell, and the old ``results/nightly/history.parquet``.

The nightly keeps its nights in the results store (``e2e.results.open_store``), whose
``history()`` returns this frame (and ``cells()`` its rows as typed records). ``night_rows``
are the rows a night writes to the store. The parquet file is what nights were kept in before
the store: ``read_history`` reads one for the store's one-time import.

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

"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from e2e.errors import ResultsError
from e2e.results._nightly import HISTORY_SCHEMA_VERSION, HistoryCell, Judgement, NightCell

__all__ = ["HISTORY_SCHEMA_VERSION", "HISTORY_COLUMNS", "HISTORY_FILE", "history_path",
           "read_history", "night_rows", "history_frame", "history_cells", "interference_of",
           "stored_interference"]

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


def history_path(results: Path) -> Path:
    return Path(results) / "nightly" / HISTORY_FILE


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in HISTORY_COLUMNS})


def history_frame(cells: Sequence[HistoryCell]) -> pd.DataFrame:
    """The history frame (``HISTORY_COLUMNS``) of the store's cells, one row each."""
    if not cells:
        return _empty()
    return pd.DataFrame([c.row() for c in cells], columns=HISTORY_COLUMNS)


def history_cells(frame: pd.DataFrame) -> list[HistoryCell]:
    """The rows of a history frame (``HISTORY_COLUMNS``, e.g. ``night_rows``') as the typed
    records the store reads back (``Store.cells``), in the frame's order."""
    return [HistoryCell.from_row(row) for row in frame.to_dict("records")]


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
