"""A plan described without starting or building anything (``e2e sweep --dry-run``): each
unit's round, state, workload, server command and environment (redacted)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from e2e.session import check_units, server_launch
from e2e.config import Experiment
from e2e.plan import Unit
from e2e.results import unit_state

__all__ = ["describe_plan"]


def describe_plan(experiment: Experiment, plan: Sequence[Unit], results: Path) -> list[str]:
    """One block per planned unit: its round, state, workload, server command and environment
    (redacted). Starts and builds nothing; a plan with a run out of bounds (its schedule, prompt
    tokens or longest request: ``check_units``) is refused as the sweep would refuse it."""
    check_units(experiment, plan)
    redactor = experiment.redactor()
    lines = []
    for i, unit in enumerate(plan, 1):
        state = unit_state(results, experiment.name, unit)
        status = "done" if state.done else (f"rerun (attempt {state.attempts + 1})"
                                            if state.attempts else "to run")
        lines.append(f"[{i}/{len(plan)}] {unit.unit_id}  round {unit.repeat}  {status}")
        lines.append(f"  {unit.kind}:{' ' * (8 - len(unit.kind))}{unit.describe()}")
        if unit.kind == "duet":
            names = experiment.duet.slot_names()
            for side in unit.sides:
                lines.append(f"  slot {names[side.slot]}: {side.run_id}")
                lines += ["  " + line for line in _server_lines(
                    experiment, side, redactor, experiment.duet.slots[side.slot])]
            continue
        lines += _server_lines(experiment, unit, redactor)
    return lines


def _server_lines(experiment: Experiment, unit: Unit, redactor, slot=None) -> list[str]:
    """A unit's server command, environment and CPUs (a duet side's: its ``slot``'s)."""
    launch = server_launch(experiment, unit.arm, dspark=unit.dspark, dry=True)
    external = experiment.server.external
    port = slot.port if slot is not None else 0
    if external:
        argv = [f"(none: measures the running server at {redactor.url(external)})"]
    else:
        argv = redactor.argv(launch.argv(port))
        if not port:
            argv[-1] = "<free port>"
    lines = [f"  command: {argv[0]}" if external else f"  command: {shlex.join(argv)}"]
    shown = redactor.env({**launch.env, **(slot.env if slot is not None else {})})
    lines.append("  env:     " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items())))
    server, client = ((slot.server_cpus, slot.client_cpus) if slot is not None
                      else (experiment.server.cpus, experiment.load.cpus))
    if server or client:
        swap = ("; the sides trade CPUs between load windows ([duet] swap)"
                if slot is not None and experiment.duet.swap else "")
        lines.append(f"  cpus:    server {server or 'unpinned'}, load generator "
                     f"{client or 'unpinned'}{swap}")
    return lines
