"""The load, one public module per part: workloads drawn before anything is sent (``draw``:
the reference's seeded prompts, shared prefixes, trace replay), the load generator (its own
HTTP/1.1 client, ``generator``: ``LoadSpec``, ``drive``, ``run_measured_load``; over several
client processes, ``workers``), the session workload that drives it (``workload``:
``LoadWorkload``), burst detection on the streams it measured (``bursts``), and the client's
own cost (``clientstats``).
"""

from e2e.load._arrivals import arrival_times
from e2e.load.workload import LoadWorkload

__all__ = [
    "LoadWorkload", "arrival_times"
]
