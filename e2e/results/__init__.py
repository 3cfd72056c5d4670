"""What e2e writes and reads back: the typed records (``run.json``, requests; GSM8K's
``arm.json``, ``eval.json``, verdicts; the nightly's cells, verdicts, change points and
judgement; capacity's objective, searches and estimates; the levels a run warns at) and the
results store (one folder per unit, made by one atomic rename).
"""

from e2e.results._records import (
    BurstSummary, ClientStats, DuetInfo, GPUDevice, GPUProcess, GPUState, HostNoise, Placement,
    PlacementInfo, ServerMemory, PluginInfo, ProcessCPU, ProcessPlacement, RequestRecord, RunMetrics,
    RunRecord, SegmentMetrics, ServerInfo, SpecCounters, WorkloadInfo,
    INTERFERENCE_SHARE, WARN_SHARE
)
from e2e.results._capacity import (
    P99_FIELDS, ArmSearch, Capacity, CapacityResult, MarginRun, Objective, Step, objective_of
)
from e2e.results._gsm8k import (
    GSM8K_REFERENCE_ARM, GSM8K_SCHEMA_VERSION, VERDICTS_FILE, ArmResult, EvalInfo, Evaluation,
    SampleVerdict, arm_is_complete, eval_dir_name, gsm8k_dir, read_arm, read_eval_info,
    read_evaluations, read_verdicts, write_eval_info, write_verdicts
)
from e2e.results._nightly import (
    EXIT_CODES, GSM8K_METRIC, Baseline, CellKey, CellVerdict, ChangePoint, Judgement, Looks, NightCell,
    NightStatus, RatioHistory, VerdictName, worse_end
)
from e2e.results._looks import LOOKS_FILE, last_look_confidence, read_looks, write_looks
from e2e.results._store import (
    load_records, resume_state, writing,
    REQUESTS, finalize, finalize_unit, new_partial_dir, next_attempt_dir, next_repeat,
    load_outputs, read_outputs, read_requests, read_run, record_name, unit_dir, unit_state,
    utc_now, write_requests, write_run
)

__all__ = [
    "ArmResult", "ArmSearch", "Baseline", "BurstSummary", "Capacity", "CapacityResult", "CellKey",
    "CellVerdict", "ChangePoint", "ClientStats", "DuetInfo", "EXIT_CODES", "EvalInfo", "Evaluation",
    "GPUDevice", "GPUProcess", "GPUState", "GSM8K_METRIC", "GSM8K_REFERENCE_ARM", "GSM8K_SCHEMA_VERSION",
    "HostNoise", "INTERFERENCE_SHARE", "Judgement", "LOOKS_FILE", "Looks", "MarginRun", "NightCell",
    "NightStatus", "Objective", "P99_FIELDS", "Placement", "PlacementInfo", "PluginInfo",
    "ProcessCPU", "ProcessPlacement", "REQUESTS", "RatioHistory", "RequestRecord", "RunMetrics",
    "RunRecord", "SampleVerdict", "SegmentMetrics", "ServerInfo", "ServerMemory", "SpecCounters",
    "Step", "VERDICTS_FILE", "VerdictName", "WARN_SHARE", "WorkloadInfo", "arm_is_complete",
    "eval_dir_name", "finalize", "finalize_unit", "gsm8k_dir", "last_look_confidence",
    "load_outputs", "load_records", "new_partial_dir", "next_attempt_dir", "next_repeat",
    "objective_of", "read_arm", "read_eval_info", "read_evaluations", "read_looks", "read_outputs",
    "read_requests", "read_run", "read_verdicts", "record_name", "resume_state", "unit_dir",
    "unit_state", "utc_now", "worse_end", "write_eval_info", "write_looks", "write_requests",
    "write_run", "write_verdicts", "writing"
]
