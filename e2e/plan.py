"""The sweep plan: arms x concurrencies x spec modes x repeats, interleaved.

Round k holds run k of every cell and arm; the arm order rotates by one between rounds, so
that drift of the machine (thermal, background load) lands on every arm alike. Within a round
the arms of one cell run back to back. The plan is a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from e2e.config import Experiment, RunSpec
from e2e.errors import ConfigError
from e2e.store import RUN_JSON, experiment_dir, read_run

__all__ = ["make_plan", "RunState", "run_state"]


def make_plan(
    experiment: Experiment,
    *,
    arms: list[str] | None = None,
    concurrencies: list[int] | None = None,
    spec_modes: list[bool] | None = None,
    runs: int | None = None,
) -> list[RunSpec]:
    arms = arms or list(experiment.arms)
    for arm in arms:
        experiment.arm(arm)
    if len(set(arms)) != len(arms):
        raise ConfigError(f"--arms names an arm twice ({', '.join(arms)}); to measure noise, "
                          "add a second arm with the same settings (e.g. main-repeat)")
    concurrencies = concurrencies or list(experiment.load.concurrencies)
    spec_modes = spec_modes if spec_modes is not None else [False, True]
    runs = runs or experiment.repeats
    plan: list[RunSpec] = []
    for k in range(1, runs + 1):
        shift = (k - 1) % len(arms)
        order = arms[shift:] + arms[:shift]
        for concurrency in concurrencies:
            for dspark in spec_modes:
                for arm in order:
                    plan.append(RunSpec.resolve(experiment, arm=arm, concurrency=concurrency,
                                                dspark=dspark, repeat=k))
    return plan


@dataclass(frozen=True)
class RunState:
    """What the results folder says of one planned run."""

    done: bool          # a valid run exists: skip it
    attempts: int       # finished attempts so far (valid or not)
    last_reason: str | None = None


def run_state(results: Path, experiment: str, spec: RunSpec) -> RunState:
    root = experiment_dir(results, experiment)
    folder = root / spec.run_id
    old = len(list((root / ".attempts").glob(f"{spec.run_id}.*"))) if (root / ".attempts").is_dir() else 0
    if not (folder / RUN_JSON).is_file():
        return RunState(done=False, attempts=old)
    try:
        record = read_run(folder)
    except Exception as exc:  # an unreadable run.json is rerun, never trusted
        return RunState(done=False, attempts=old + 1, last_reason=str(exc))
    if record.spec != spec:
        return RunState(done=False, attempts=old + 1,
                        last_reason="the run on disk was made with other settings")
    reason = "; ".join(record.invalid_reasons) or None
    return RunState(done=record.valid, attempts=old + 1, last_reason=reason)
