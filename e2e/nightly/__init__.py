"""``e2e nightly``: the reference matrix every night, judged against the last passing night.

    settings  the nightly config: an experiment TOML plus a [nightly] table; the config hash
    headline  which ms-per-verify-step figure is judged (client or server TPOT), burst rule
    judge     pure: a night's cells against a baseline night's -> verdicts, status, exit code
              (GSM8K per document: exact McNemar)
    changepoints  pure: steps in a cell's history (ruptures Pelt + permutation confirmation)
    assess    baseline night, verdict files, judgement, change points (after the cells)
    history   the history frame (one row per night cell), baseline selection; the old
              history.parquet (imported once into the store)
    store     the results store: every night in SQLite (default) or PostgreSQL, one
              transaction per night, versioned migrations (SQLAlchemy)
    dashboard pure: the store's rows -> a static site (plotly), e2e dashboard writes it
    render    pure: the Markdown summary and the trend plots (bytes)
    run       the pipeline (builds -> plan -> executor -> GSM8K -> assess -> store -> outputs)
    command   the typer command (registered by e2e.cli as ``nightly``)
"""

from e2e.nightly.judge import (EXIT_CODES, Baseline, CellKey, CellVerdict, Judgement, NightCell,
                               Rules, judge_cell, judge_night, night_status)
from e2e.nightly.settings import NightlyConfig, NightlySettings, load_nightly, parse_nightly

__all__ = ["EXIT_CODES", "Baseline", "CellKey", "CellVerdict", "Judgement", "NightCell",
           "Rules", "judge_cell", "judge_night", "night_status", "NightlyConfig",
           "NightlySettings", "load_nightly", "parse_nightly"]
