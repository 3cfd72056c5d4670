"""``e2e sweep``: run a plan, one fresh server per run, saving each run as it ends.

Rerunning the same sweep skips runs already done and valid, and reruns invalid ones until
``max_attempts`` is spent. Ctrl-C stops the server, keeps every finished run, and leaves a
sweep that the same command resumes.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from e2e.arms import redact_argv, redact_env, server_launch
from e2e.config import Experiment, RunSpec
from e2e.plan import run_state
from e2e.records import RunRecord
from e2e.runner import PluginCheck, run_one

__all__ = ["SweepOutcome", "run_sweep", "describe_plan"]


@dataclass
class SweepOutcome:
    ran: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)       # done and valid already
    given_up: list[str] = field(default_factory=list)      # invalid after max attempts
    stopped_early: bool = False                             # --fail-fast stopped the sweep

    @property
    def invalid(self) -> list[RunRecord]:
        return [r for r in self.ran if not r.valid]


def describe_plan(experiment: Experiment, plan: list[RunSpec], results: Path) -> list[str]:
    """One block per planned run: its state, server command and environment (redacted).
    Starts and builds nothing."""
    pattern = experiment.server.secret_pattern
    lines = []
    for i, spec in enumerate(plan, 1):
        state = run_state(results, experiment.name, spec)
        status = "done" if state.done else (f"rerun (attempt {state.attempts + 1})"
                                            if state.attempts else "to run")
        launch = server_launch(experiment, spec.arm, dspark=spec.dspark, dry=True)
        argv = redact_argv(launch.argv(0), pattern, [launch.api_key or ""])
        argv[-1] = "<free port>"
        lines.append(f"[{i}/{len(plan)}] {spec.run_id}  round {spec.repeat}  {status}")
        lines.append(f"  load:    {spec.prompts} prompts x {spec.input_len} in / "
                     f"{spec.output_len} out, concurrency {spec.concurrency}, seed {spec.seed}, "
                     f"{spec.warmup_requests} warmup")
        lines.append(f"  command: {shlex.join(argv)}")
        env = redact_env(launch.env, pattern)
        lines.append("  env:     " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())))
    return lines


def run_sweep(
    experiment: Experiment,
    plan: list[RunSpec],
    results: Path,
    *,
    max_attempts: int = 2,
    progress: bool = True,
    say: Callable[[str], None] = lambda message: None,
    on_run: Callable[[Path, RunRecord], None] = lambda folder, record: None,
    plugin_check: PluginCheck | None = None,
    fail_fast: bool = False,
) -> SweepOutcome:
    """Run every planned run not yet done; with ``fail_fast`` stop at the first run that is
    still invalid after ``max_attempts`` (else give it up and move on)."""
    outcome = SweepOutcome()
    for i, spec in enumerate(plan, 1):
        state = run_state(results, experiment.name, spec)
        if state.done:
            outcome.skipped.append(spec.run_id)
            continue
        attempts = state.attempts
        while attempts < max_attempts:
            attempts += 1
            say(f"[{i}/{len(plan)}] {spec.run_id} (attempt {attempts} of {max_attempts})")
            folder, record = run_one(experiment, spec, results, progress=progress, say=say,
                                     plugin_check=plugin_check)
            outcome.ran.append(record)
            on_run(folder, record)
            if record.valid:
                break
        else:
            if not run_state(results, experiment.name, spec).done:
                outcome.given_up.append(spec.run_id)
                if fail_fast:
                    outcome.stopped_early = True
                    break
    return outcome
