"""The host: the one reader of ``/proc`` and ``/sys``, CPU placement, and what else used
the host during a run.
"""

from e2e.host._procfs import cpu_model, group_members, memory_of, physical_core, runqueue_wait_s
from e2e.host.affinity import (describe_affinity, pin_process, pinned_process, repin_group,
                               spawn_pinned, spread_cores)
from e2e.host.quiet import noise, require_quiet, snapshot, with_descendants
from e2e.host._ports import port_holders, strangers

__all__ = [
    "cpu_model", "describe_affinity", "group_members", "memory_of", "noise", "physical_core",
    "pin_process", "pinned_process", "port_holders", "repin_group", "require_quiet",
    "runqueue_wait_s", "snapshot", "spawn_pinned", "spread_cores", "strangers", "with_descendants"
]
