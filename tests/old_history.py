"""Old ``results/nightly/history.parquet`` files, as nights were kept before the results
store, for the tests of the store's one-time import (``e2e.results.open_store``)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from e2e.paths import atomic_write_bytes
from e2e.results._nightly_history import HISTORY_COLUMNS, read_history

_NIGHT = ["date", "experiment", "config_hash"]


def append_night(path: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Replace the night(s) of ``rows`` (``e2e.results.night_rows``' frame) in the old history
    file at ``path``, as the nightly once wrote it; returns the new table."""
    old = read_history(path)
    if len(rows) and len(old):
        nights = set(map(tuple, rows[_NIGHT].astype(str).itertuples(index=False)))
        old = old[~old[_NIGHT].astype(str).apply(tuple, axis=1).isin(nights)]
    frames = [f for f in (old, rows[HISTORY_COLUMNS]) if len(f)]
    new = (pd.concat(frames, ignore_index=True) if frames else old).sort_values(
        ["date", "experiment", "kind", "arm", "spec_mode", "concurrency", "metric"],
        kind="stable").reset_index(drop=True)
    buffer = io.BytesIO()
    new.to_parquet(buffer, index=False)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return new
