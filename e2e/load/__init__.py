"""The load: workloads (the reference's seeded prompts, shared prefixes, trace replay), the load generator (its own HTTP/1.1 client: ``LoadSpec``, ``drive``,
``run_measured_load``), the session workload that drives it, and burst detection on the streams it measured.
"""

from e2e.load._arrivals import arrival_times
from e2e.load._bursts import WARN_SHARE
from e2e.load._cache import reset_prefix_cache
from e2e.load._generator import (LoadOutcome, LoadSpec, drive, make_prompts, run_measured_load,
                                 vocabulary)
from e2e.load._sse import SSEStream, StreamFailed, check_usage, output_ids
from e2e.load._traffic import WARMUP_NOTE, Traffic, traffic
from e2e.load._workload import INTERFERENCE_SHARE, LoadWorkload

__all__ = [
    "INTERFERENCE_SHARE", "LoadOutcome", "LoadSpec", "LoadWorkload", "SSEStream", "StreamFailed",
    "Traffic", "WARMUP_NOTE", "WARN_SHARE", "arrival_times", "check_usage", "drive",
    "make_prompts", "output_ids", "reset_prefix_cache", "run_measured_load", "traffic",
    "vocabulary",
]
