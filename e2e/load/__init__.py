"""The load: workloads (the reference's seeded prompts, shared prefixes, trace replay), the load generator (its own HTTP/1.1 client: ``LoadSpec``, ``drive``,
``run_measured_load``, over several client processes: ``split_requests``, ``merge_shards``), the
session workload that drives it, burst detection on the streams it measured
(``burst_summary``), and the client's own cost (``client_stats``).
"""

from e2e.load._arrivals import arrival_times
from e2e.load.bursts import (SPREAD_THRESHOLD, burst_summary, decode_reference_s, decode_share,
                              stream_spread)
from e2e.load.cache import reset_prefix_cache
from e2e.load.clientstats import SATURATED_LAG_MS, LagProbe, ProcessUsage, client_stats
from e2e.load.generator import (LoadOutcome, LoadSpec, drive, make_prompts, run_measured_load,
                                 vocabulary)
from e2e.load.sse import SSEStream, StreamFailed, check_usage, output_ids
from e2e.load.draw import WARMUP_NOTE, Traffic, traffic
from e2e.load.workers import merge_shards, split_requests
from e2e.load.workload import (HOLD_S, LoadWorkload, combine_windows, hold_batch, interference,
                                retried_warning)
from e2e.results import INTERFERENCE_SHARE, WARN_SHARE  # the levels a run warns at

__all__ = [
    "HOLD_S", "INTERFERENCE_SHARE", "LagProbe", "LoadOutcome", "LoadSpec", "LoadWorkload",
    "ProcessUsage", "SATURATED_LAG_MS", "SPREAD_THRESHOLD", "SSEStream", "StreamFailed",
    "Traffic", "WARMUP_NOTE", "WARN_SHARE", "arrival_times", "burst_summary", "check_usage",
    "client_stats", "combine_windows", "decode_reference_s", "decode_share", "drive",
    "hold_batch", "interference", "make_prompts", "merge_shards", "output_ids",
    "reset_prefix_cache", "retried_warning", "run_measured_load", "split_requests",
    "stream_spread", "traffic", "vocabulary",
]
