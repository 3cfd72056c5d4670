"""The plan: a list of units. For a sweep, arms x concurrencies x spec modes x repeats,
interleaved.

Round k holds run k of every cell and arm; the arm order rotates by one between rounds, so
that drift of the machine (thermal, background load) lands on every arm alike. Within a round
the arms of one cell run back to back. The plan is a pure function of its inputs. (GSM8K
units are planned by ``e2e.gsm8k.run.resolve_plan``; whether a unit is done is read by
``e2e.results._store.unit_state``.)
"""

from __future__ import annotations

from e2e.config import Experiment, RunSpec
from e2e.errors import ConfigError

__all__ = ["make_plan", "rounds"]


def make_plan(
    experiment: Experiment,
    *,
    arms: list[str] | None = None,
    concurrencies: list[int] | None = None,
    spec_modes: list[bool] | None = None,
    runs: int | None = None,
) -> list[RunSpec]:
    arms = arms or [name for name, arm in experiment.arms.items() if not arm.opt_in]
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


def rounds(units: list[RunSpec]) -> list[list[RunSpec]]:
    """The plan's units grouped by round (their ``repeat``), in plan order."""
    out: dict[int, list[RunSpec]] = {}
    for unit in units:
        out.setdefault(unit.repeat, []).append(unit)
    return [out[k] for k in sorted(out)]
