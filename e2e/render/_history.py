"""``e2e history``'s text: the store's nights, and one cell's history a night a row, as a
table, CSV or JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Literal

from e2e.render.markup import csv_safe
from e2e.results import HistoryCell, history_frame

__all__ = ["history_nights_text", "cell_history_text", "EXPORT_COLUMNS"]

EXPORT_COLUMNS = ["date", "experiment", "config_hash", "night_status", "kind", "arm",
                  "concurrency", "spec_mode", "metric", "n", "median", "low", "high", "values",
                  "verdict", "pct", "pct_low", "pct_high", "threshold", "baseline_date",
                  "engine_version", "engine_git_sha", "build_git_commit", "host", "run_dirs"]
"""The columns ``e2e history --metric`` exports, in order."""

Format = Literal["table", "csv", "json"]


def history_nights_text(nights, format_: Format) -> str:
    """``e2e history``'s list of the store's nights (``StoredNight`` records) as an aligned
    table, CSV (cells a spreadsheet would run are defused: ``csv_safe``) or JSON."""
    records = [n.row() for n in nights]
    if format_ == "json":
        return json.dumps(records, indent=2) + "\n"
    if format_ == "csv":
        import pandas as pd

        cols = ["date", "experiment", "config_hash", "status", "cells", "regressed", "host",
                "recorded_at", "baseline_date"]
        return csv_safe(pd.DataFrame(records, columns=cols)).to_csv(index=False)
    if not records:
        return "no nights in the store\n"
    lines = [f"{'date':<10}  {'experiment':<16}  {'config':<12}  {'status':<10}  "
             f"{'cells':>5}  {'regr.':>5}  {'baseline':<10}  host"]
    for n in nights:
        lines.append(f"{n.date:<10}  {n.experiment:<16}  {n.config_hash[:12]:<12}  "
                     f"{n.status:<10}  {n.cells:>5}  {n.regressed:>5}  "
                     f"{n.baseline_date or '—':<10}  {n.host or '?'}")
    return "\n".join(lines) + "\n"


def cell_history_text(rows: Sequence[HistoryCell], format_: Format) -> str:
    """``e2e history --metric``'s export of one cell's night cells (``e2e.analysis.nightly.history.cell_history``),
    a row a night, as an aligned table, CSV or JSON (NaN as null)."""
    frame = history_frame(list(rows))[EXPORT_COLUMNS].copy()
    for column in ("values", "run_dirs"):
        frame[column] = [list(x) for x in frame[column]]
    if format_ == "json":
        import math

        records = frame.to_dict(orient="records")
        for r in records:
            for k, v in r.items():
                if isinstance(v, float) and math.isnan(v):
                    r[k] = None
        return json.dumps(records, indent=2, default=str) + "\n"
    if format_ == "csv":
        frame["values"] = [" ".join(f"{x:g}" for x in v) for v in frame["values"]]
        frame["run_dirs"] = [" ".join(v) for v in frame["run_dirs"]]
        buf = io.StringIO()
        csv_safe(frame).to_csv(buf, index=False)
        return buf.getvalue()
    lines = [f"{'date':<10}  {'median':>10}  {'low':>10}  {'high':>10}  {'n':>3}  verdict"]
    for r in frame.itertuples(index=False):
        lines.append(f"{r.date:<10}  {r.median:>10.4g}  {r.low:>10.4g}  {r.high:>10.4g}  "
                     f"{r.n:>3}  {r.verdict}")
    return "\n".join(lines) + "\n"
