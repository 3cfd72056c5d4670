"""What e2e writes and reads back: the typed records (``run.json``, requests; GSM8K's
``arm.json``, ``eval.json``, verdicts; the nightly's cells, verdicts, change points and
judgement, the history frame and the nightly results store (SQLite or PostgreSQL);
capacity's objective, searches and estimates; the levels a run warns at) and the
results store (one folder per unit, made by one atomic rename).
"""

from e2e.results.records import (
    BurstSummary, ClientStats, DuetInfo, GPUDevice, GPUProcess, GPUState, HostNoise, Placement,
    PlacementInfo, ServerMemory, PluginInfo, ProcessCPU, ProcessPlacement, RequestRecord, RunMetrics,
    RunRecord, SegmentMetrics, ServerInfo, SpecCounters, WorkloadInfo,
    INTERFERENCE_SHARE, WARN_SHARE
)
from e2e.results.capacity import (
    P99_FIELDS, ArmSearch, Capacity, CapacityResult, MarginRun, Objective, Step, objective_of
)
from e2e.results.gsm8k import (
    GSM8K_REFERENCE_ARM, GSM8K_SCHEMA_VERSION, VERDICTS_FILE, ArmResult, EvalInfo, Evaluation,
    SampleVerdict, arm_is_complete, eval_dir_name, gsm8k_dir, read_arm, read_eval_info,
    read_evaluations, read_verdicts, write_eval_info, write_verdicts
)
from e2e.results._nightly import (
    EXIT_CODES, GSM8K_METRIC, Baseline, CellKey, CellVerdict, ChangePoint, Judgement, Looks, NightCell,
    NightStatus, RatioHistory, VerdictName, worse_end, GSM8KAgreement, HistoryCell,
    StoredChangePoint, StoredNight, StoredVerdict, OutputsCheck, OutputsHistory, BisectOutcome, BlockedChange,
    MORE_THAN_HISTORY, AS_HISTORY, NEW_DIVERGENCE, FIRST_DIVERGENCE, relative_arm, is_relative,
    built_arm, IDENTICAL, AS_AA, MORE_THAN_AA, NO_AA, NOT_RECORDED, AA_DIVERGES
)
from e2e.results._nightly_history import (
    HISTORY_COLUMNS, HISTORY_FILE, HISTORY_SCHEMA_VERSION, history_cells, history_frame,
    history_path, interference_of, night_rows, read_history, stored_interference
)
from e2e.results._nightly_store import (
    SCHEMA_VERSION as STORE_SCHEMA_VERSION, metadata as STORE_METADATA, NightInfo, Store,
    masked_text, masked_url, open_store, resolve_url
)
from e2e.results.looks import LOOKS_FILE, last_look_confidence, read_looks, write_looks
from e2e.results.store import (
    load_records, resume_state, writing,
    REQUESTS, finalize, finalize_unit, new_partial_dir, next_attempt_dir, next_repeat,
    load_outputs, read_outputs, read_requests, read_run, record_name, unit_dir, unit_state,
    utc_now, write_requests, write_run
)

__all__ = [
    "AA_DIVERGES", "AS_AA", "AS_HISTORY", "ArmResult", "ArmSearch", "Baseline", "BisectOutcome",
    "BlockedChange", "BurstSummary", "Capacity", "CapacityResult", "CellKey", "CellVerdict",
    "ChangePoint", "ClientStats", "DuetInfo", "EXIT_CODES", "EvalInfo", "Evaluation",
    "FIRST_DIVERGENCE", "GPUDevice", "GPUProcess", "GPUState", "GSM8KAgreement", "GSM8K_METRIC",
    "GSM8K_REFERENCE_ARM", "GSM8K_SCHEMA_VERSION", "HISTORY_COLUMNS", "HISTORY_FILE",
    "HISTORY_SCHEMA_VERSION", "HistoryCell", "HostNoise", "IDENTICAL", "INTERFERENCE_SHARE",
    "Judgement", "LOOKS_FILE", "Looks", "MORE_THAN_AA", "MORE_THAN_HISTORY", "MarginRun",
    "NEW_DIVERGENCE", "NOT_RECORDED", "NO_AA", "NightCell", "NightInfo", "NightStatus",
    "Objective", "OutputsCheck", "OutputsHistory", "P99_FIELDS", "Placement", "PlacementInfo",
    "PluginInfo", "ProcessCPU", "ProcessPlacement", "REQUESTS", "RatioHistory", "RequestRecord",
    "RunMetrics", "RunRecord", "STORE_METADATA", "STORE_SCHEMA_VERSION", "SampleVerdict",
    "SegmentMetrics", "ServerInfo", "ServerMemory", "SpecCounters", "Step", "Store",
    "StoredChangePoint", "StoredNight", "StoredVerdict", "VERDICTS_FILE", "VerdictName",
    "WARN_SHARE", "WorkloadInfo", "arm_is_complete", "built_arm", "eval_dir_name",
    "finalize", "finalize_unit", "gsm8k_dir", "history_cells", "history_frame", "history_path",
    "interference_of", "is_relative", "last_look_confidence", "load_outputs", "load_records",
    "masked_text", "masked_url", "new_partial_dir", "next_attempt_dir", "next_repeat",
    "night_rows", "objective_of", "open_store", "read_arm", "read_eval_info", "read_evaluations",
    "read_history", "read_looks", "read_outputs", "read_requests", "read_run", "read_verdicts",
    "record_name", "relative_arm", "resolve_url", "resume_state", "stored_interference",
    "unit_dir", "unit_state", "utc_now", "worse_end", "write_eval_info", "write_looks",
    "write_requests", "write_run", "write_verdicts", "writing"
]
