"""What e2e writes and reads back: the typed records (``run.json``, requests) and the results
store (one folder per unit, made by one atomic rename).
"""

from e2e.results._records import (
    BurstSummary, ClientStats, GPUDevice, GPUProcess, GPUState, HostNoise, Placement,
    PlacementInfo, PluginInfo, ProcessCPU, ProcessPlacement, RequestRecord, RunMetrics,
    RunRecord, ServerInfo, SpecCounters
)
from e2e.results._store import (
    load_records, resume_state,
    REQUESTS, finalize, finalize_unit, new_partial_dir, next_attempt_dir, next_repeat,
    read_requests, read_run, record_name, unit_dir, unit_state, utc_now, write_requests,
    write_run
)

__all__ = [
    "BurstSummary", "ClientStats", "GPUDevice", "GPUProcess", "GPUState", "HostNoise",
    "Placement", "PlacementInfo", "PluginInfo", "ProcessCPU", "ProcessPlacement", "REQUESTS",
    "RequestRecord", "RunMetrics", "RunRecord", "ServerInfo", "SpecCounters", "finalize",
    "finalize_unit", "load_records", "new_partial_dir", "next_attempt_dir", "next_repeat",
    "read_requests", "read_run", "record_name", "resume_state", "unit_dir", "unit_state",
    "utc_now", "write_requests", "write_run"
]
