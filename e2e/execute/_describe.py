"""A plan described without starting or building anything (``e2e sweep --dry-run``): each
unit's round, state, workload, server command and environment (redacted)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from e2e.session import server_launch
from e2e.config import Experiment, Unit
from e2e.results import unit_state

__all__ = ["describe_plan"]


def describe_plan(experiment: Experiment, plan: Sequence[Unit], results: Path) -> list[str]:
    """One block per planned unit: its round, state, workload, server command and environment
    (redacted). Starts and builds nothing."""
    redactor = experiment.redactor()
    lines = []
    for i, unit in enumerate(plan, 1):
        state = unit_state(results, experiment.name, unit)
        status = "done" if state.done else (f"rerun (attempt {state.attempts + 1})"
                                            if state.attempts else "to run")
        launch = server_launch(experiment, unit.arm, dspark=unit.dspark, dry=True)
        external = experiment.server.external
        if external:
            argv = [f"(none: measures the running server at {redactor.url(external)})"]
        else:
            argv = redactor.argv(launch.argv(0))
            argv[-1] = "<free port>"
        lines.append(f"[{i}/{len(plan)}] {unit.unit_id}  round {unit.repeat}  {status}")
        lines.append(f"  {unit.kind}:{' ' * (8 - len(unit.kind))}{unit.describe()}")
        lines.append(f"  command: {argv[0]}" if external else
                     f"  command: {shlex.join(argv)}")
        env = redactor.env(launch.env)
        lines.append("  env:     " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())))
        if experiment.server.cpus or experiment.load.cpus:
            lines.append(f"  cpus:    server {experiment.server.cpus or 'unpinned'}, load "
                         f"generator {experiment.load.cpus or 'unpinned'}")
    return lines

