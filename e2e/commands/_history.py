"""``e2e history``: list the nights of the results store, or export one cell's history.

    e2e history                                         every night: date, status, cells, host
    e2e history --metric server_tpot_ms_mean --arm main --concurrency 1 --spec-mode base \\
        --format csv > tpot.csv                          one cell, one row per night

Thin: the store is ``e2e.results.Store``; the rows are the store's history frame. Exit 2 on bad
input or a store that cannot be opened.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.commands._options import StoreConfigOpt, StoreOpt, StoreResultsOpt

from e2e.console import guard, out, visible
from e2e.render import csv_safe
from e2e.errors import ConfigError

__all__ = ["history_command", "cell_history", "store_url"]

EXPORT_COLUMNS = ["date", "experiment", "config_hash", "night_status", "kind", "arm",
                  "concurrency", "spec_mode", "metric", "n", "median", "low", "high", "values",
                  "verdict", "pct", "pct_low", "pct_high", "threshold", "baseline_date",
                  "engine_version", "engine_git_sha", "build_git_commit", "host", "run_dirs"]


def store_url(store: str | None, config: Path | None) -> str | None:
    """``--store``, else the nightly config's ``[nightly] store`` (None: the default)."""
    if store:
        return store
    from e2e.nightly.settings import load_nightly

    return load_nightly(config).settings.store


def cell_history(frame, *, metric: str, arm: str | None = None, concurrency: int | None = None,
                 spec_mode: str | None = None, experiment: str | None = None):
    """The rows of one cell (one per night), oldest first; a ConfigError naming what the
    history holds when nothing matches."""
    rows = frame[frame["metric"] == metric]
    for column, value in (("arm", arm), ("concurrency", concurrency),
                          ("spec_mode", spec_mode), ("experiment", experiment)):
        if value is not None:
            rows = rows[rows[column] == value]
    if rows.empty:
        cells = sorted({f"{r.arm} c{r.concurrency} {r.spec_mode} {r.metric}"
                        for r in frame.itertuples(index=False)})
        raise ConfigError(f"no night has the cell {arm or '*'} c{concurrency or '*'} "
                          f"{spec_mode or '*'} {metric}; the store has: "
                          f"{', '.join(cells[:20]) or 'no nights'}")
    keys = rows[["experiment", "config_hash", "kind", "arm", "concurrency", "spec_mode"]
                ].drop_duplicates()
    if len(keys) > 1 and (arm is None or concurrency is None or spec_mode is None):
        found = ", ".join(f"{r.arm} c{r.concurrency} {r.spec_mode}"
                          for r in keys.itertuples(index=False))
        raise ConfigError(f"{metric}: several cells match ({found}); give --arm, "
                          "--concurrency and --spec-mode")
    return rows.sort_values(["date", "experiment"]).reset_index(drop=True)


def history_command(
    results: StoreResultsOpt = Path("results"),
    store: StoreOpt = None,
    config: StoreConfigOpt = None,
    experiment: Annotated[Optional[str], typer.Option(help="Only this experiment.")] = None,
    metric: Annotated[Optional[str], typer.Option(
        help="Export this metric's cell history (one row per night) instead of listing "
             "the nights.")] = None,
    arm: Annotated[Optional[str], typer.Option(help="The cell's arm.")] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="The cell's concurrency "
                                                             "(0 for GSM8K).", min=0)] = None,
    spec_mode: Annotated[Optional[Literal["base", "dspark"]], typer.Option(
        "--spec-mode", help="The cell's spec mode: base (no speculator) or dspark.")] = None,
    format_: Annotated[Literal["table", "csv", "json"], typer.Option(
        "--format", help="What to print.")] = "table",
    output: Annotated[Optional[Path], typer.Option(
        "--out", help="Write to this file instead of standard output.", dir_okay=False)
    ] = None,
) -> None:
    """List the nights in the results store, or export one cell's history as CSV/JSON."""
    code = guard(lambda: _history(results, store, config, experiment, metric, arm, concurrency,
                                  spec_mode, format_, output), error_exit=2, unexpected_exit=2)
    raise SystemExit(code)


def _history(results, store, config, experiment, metric, arm, concurrency, spec_mode,
             format_: str, output) -> int:
    from e2e.results import open_store

    if format_ not in ("table", "csv", "json"):
        raise ConfigError(f"--format {format_!r}: give table, csv or json")
    with open_store(store_url(store, config), results) as opened:
        if metric is None:
            nights = opened.nights(experiment=experiment)
            text = _nights_text(nights, format_)
        else:
            rows = cell_history(opened.history(experiment=experiment), metric=metric, arm=arm,
                                concurrency=concurrency, spec_mode=spec_mode)
            text = _rows_text(rows[EXPORT_COLUMNS], format_)
    if format_ != "json":  # a store's text is anyone's: a host name may hold an ESC sequence
        text = visible(text)  # (JSON escapes control characters itself)
    if output is not None:
        from e2e.paths import atomic_write_text

        atomic_write_text(output, text)
        out.print(f"written to {output}", highlight=False, markup=False)
    else:
        sys.stdout.write(text)
    return 0


Format = Literal["table", "csv", "json"]


def _nights_text(nights, format_: Format) -> str:
    from dataclasses import asdict

    records = [asdict(n) for n in nights]
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


def _rows_text(rows, format_: Format) -> str:
    frame = rows.copy()
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
