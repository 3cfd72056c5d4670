"""``e2e history``: list the nights of the results store, or export one cell's history.

    e2e history                                         every night: date, status, cells, host
    e2e history --metric server_tpot_ms_mean --arm main --concurrency 1 --spec-mode base \\
        --format csv > tpot.csv                          one cell, one row per night

Thin: the store is ``e2e.results.nightly_store.Store``; the rows are the store's history
frame. Exit 2 on bad input or a store that cannot be opened.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.commands._options import StoreConfigOpt, StoreOpt, StoreResultsOpt

from e2e.console import guard, out, visible
from e2e.errors import ConfigError

__all__ = ["history_command", "store_url"]

def store_url(store: str | None, config: Path | None) -> str | None:
    """``--store``, else the nightly config's ``[nightly] store`` (None: the default)."""
    if store:
        return store
    from e2e.nightly.settings import load_nightly

    return load_nightly(config).settings.store


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
    from e2e.analysis.nightly import cell_history
    from e2e.render import cell_history_text, history_nights_text
    from e2e.results import open_store

    if format_ not in ("table", "csv", "json"):
        raise ConfigError(f"--format {format_!r}: give table, csv or json")
    with open_store(store_url(store, config), results, create=False) as opened:
        if metric is None:
            nights = opened.nights(experiment=experiment)
            text = history_nights_text(nights, format_)
        else:
            rows = cell_history(opened.cells(experiment=experiment), metric=metric, arm=arm,
                                concurrency=concurrency, spec_mode=spec_mode)
            text = cell_history_text(rows, format_)
    if format_ != "json":  # a store's text is anyone's: a host name may hold an ESC sequence
        text = visible(text)  # (JSON escapes control characters itself)
    if output is not None:
        from e2e.paths import atomic_write_text

        atomic_write_text(output, text)
        out.print(f"written to {output}", highlight=False, markup=False)
    else:
        sys.stdout.write(text)
    return 0
