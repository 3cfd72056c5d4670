"""What e2e writes and reads back, one public module per family of records; import a name
from the module that defines it:

    records   a run's records (``run.json``: ``RunRecord``, ``RunMetrics``, ``ServerInfo``, ...;
              a request, ``RequestRecord``) and the levels a run warns at
    store     the results folder: one folder per unit, made by one atomic rename (``writing``,
              ``unit_dir``, ``read_run``, ``load_records``, ...)
    gsm8k     GSM8K's ``arm.json``, ``eval.json`` and per-sample verdicts
    capacity  capacity's objective, searches and estimates
    looks     the looks a sweep took at its cells (``looks.json``)

The nightly's records (cells, verdicts, change points, judgement), its history frame and its
store (SQLite or PostgreSQL) are still private modules: the names other stages use are
exported here.
"""

from e2e.results._nightly import (
    EXIT_CODES, GSM8K_METRIC, Baseline, CellKey, CellVerdict, ChangePoint, Judgement, Looks, NightCell,
    NightInfo, NightStatus, RatioHistory, VerdictName, worse_end, GSM8KAgreement, HistoryCell,
    StoredChangePoint, StoredNight, StoredVerdict, OutputsCheck, OutputsHistory, BisectOutcome, BlockedChange,
    MORE_THAN_HISTORY, AS_HISTORY, NEW_DIVERGENCE, FIRST_DIVERGENCE, relative_arm, is_relative,
    built_arm, IDENTICAL, AS_AA, MORE_THAN_AA, NO_AA, NOT_RECORDED, AA_DIVERGES
)
from e2e.results._nightly_history import history_frame, interference_of, night_rows
from e2e.results.nightly_store import open_store

__all__ = [
    "AA_DIVERGES", "AS_AA", "AS_HISTORY", "Baseline", "BisectOutcome", "BlockedChange", "CellKey",
    "CellVerdict", "ChangePoint", "EXIT_CODES", "FIRST_DIVERGENCE", "GSM8KAgreement",
    "GSM8K_METRIC", "HistoryCell", "IDENTICAL", "Judgement", "Looks", "MORE_THAN_AA",
    "MORE_THAN_HISTORY", "NEW_DIVERGENCE", "NOT_RECORDED", "NO_AA", "NightCell", "NightInfo",
    "NightStatus", "OutputsCheck", "OutputsHistory", "RatioHistory", "StoredChangePoint",
    "StoredNight", "StoredVerdict", "VerdictName", "built_arm", "history_frame", "interference_of",
    "is_relative", "night_rows", "open_store", "relative_arm", "worse_end"
]
