"""The load: workloads (the reference's seeded prompts, shared prefixes, trace replay), the load generator (its own HTTP/1.1 client), the
session workload that drives it, and burst detection on the streams it measured.
"""

from e2e.load._arrivals import arrival_times
from e2e.load._bursts import WARN_SHARE
from e2e.load._traffic import WARMUP_NOTE, Traffic, traffic
from e2e.load._workload import INTERFERENCE_SHARE, LoadWorkload

__all__ = [
    "INTERFERENCE_SHARE", "LoadWorkload", "Traffic", "WARMUP_NOTE", "WARN_SHARE",
    "arrival_times", "traffic",
]
