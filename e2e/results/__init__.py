"""What e2e writes and reads back: the typed records (``run.json``, requests) and the results
store (one folder per unit, made by one atomic rename).
"""

from e2e.results._records import (
    BurstSummary, ClientStats, DuetInfo, GPUDevice, GPUProcess, GPUState, HostNoise, Placement,
    PlacementInfo, ServerMemory, PluginInfo, ProcessCPU, ProcessPlacement, RequestRecord, RunMetrics,
    RunRecord, SegmentMetrics, ServerInfo, SpecCounters, WorkloadInfo
)
from e2e.results._looks import LOOKS_FILE, last_look_confidence, read_looks, write_looks
from e2e.results._store import (
    load_records, resume_state, writing,
    REQUESTS, finalize, finalize_unit, new_partial_dir, next_attempt_dir, next_repeat,
    read_requests, read_run, record_name, unit_dir, unit_state, utc_now, write_requests,
    write_run
)

__all__ = [
    "BurstSummary", "ClientStats", "DuetInfo", "GPUDevice", "GPUProcess", "GPUState", "HostNoise",
    "LOOKS_FILE", "Placement", "PlacementInfo", "PluginInfo", "ProcessCPU", "ProcessPlacement",
    "REQUESTS", "RequestRecord", "RunMetrics", "RunRecord", "SegmentMetrics", "ServerInfo",
    "ServerMemory", "SpecCounters", "WorkloadInfo", "finalize", "finalize_unit", "last_look_confidence", "load_records",
    "new_partial_dir", "next_attempt_dir", "next_repeat", "read_looks", "read_requests",
    "read_run", "record_name", "resume_state", "unit_dir", "unit_state", "utc_now",
    "write_looks", "write_requests", "write_run", "writing"
]
