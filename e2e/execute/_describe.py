"""``e2e sweep``'s plan, described without starting anything (``--dry-run``), and
``run_sweep``: a plan of load units through the local executor (``e2e.pipeline.execute``).

Rerunning the same sweep skips runs already done and valid, and reruns invalid ones until
``max_attempts`` is spent. Ctrl-C stops the server, keeps every finished run, and leaves a
sweep that the same command resumes.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from e2e.arms import redact_argv, redact_env, server_launch
from e2e.config import Experiment, Unit
from e2e.execute._executor import Outcome
from e2e.pipeline import execute
from e2e.session._session import Servers, SessionOptions
from e2e.results._store import unit_state

__all__ = ["describe_plan", "run_sweep", "SweepOutcome"]

SweepOutcome = Outcome


def describe_plan(experiment: Experiment, plan: Sequence[Unit], results: Path) -> list[str]:
    """One block per planned unit: its round, state, workload, server command and environment
    (redacted). Starts and builds nothing."""
    pattern = experiment.server.secret_pattern
    lines = []
    for i, unit in enumerate(plan, 1):
        state = unit_state(results, experiment.name, unit)
        status = "done" if state.done else (f"rerun (attempt {state.attempts + 1})"
                                            if state.attempts else "to run")
        launch = server_launch(experiment, unit.arm, dspark=unit.dspark, dry=True)
        argv = redact_argv(launch.argv(0), pattern, [launch.api_key or ""])
        argv[-1] = "<free port>"
        lines.append(f"[{i}/{len(plan)}] {unit.unit_id}  round {unit.repeat}  {status}")
        lines.append(f"  {unit.kind}:{' ' * (8 - len(unit.kind))}{unit.describe()}")
        lines.append(f"  command: {shlex.join(argv)}")
        env = redact_env(launch.env, pattern)
        lines.append("  env:     " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())))
        if experiment.server.cpus or experiment.load.cpus:
            lines.append(f"  cpus:    server {experiment.server.cpus or 'unpinned'}, load "
                         f"generator {experiment.load.cpus or 'unpinned'}")
    return lines


def run_sweep(experiment: Experiment, plan: Sequence[Unit], results: Path, *,
              max_attempts: int = 2, progress: bool = True,
              say: Callable[[str], None] = lambda message: None,
              on_run: Callable = lambda folder, record: None, fail_fast: bool = False,
              plugin_check: bool = True, servers: Servers | None = None) -> Outcome:
    """Run every planned unit not yet done on this host (see ``e2e.pipeline.execute``)."""
    session = SessionOptions(plugin_check=plugin_check, progress=progress, say=say,
                             servers=servers)
    return execute(experiment, plan, results, session=session, max_attempts=max_attempts,
                   fail_fast=fail_fast, on_unit=on_run)
