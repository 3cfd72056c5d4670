"""Which workload a unit runs in its server session: a ``RunSpec`` is the reference load
(``e2e.load``). A feature whose units need a workload of their own hands the session its
``Workloads`` (``SessionOptions.workloads``): GSM8K's ``EvalSpec`` runs lm-eval through
``e2e.gsm8k.workload.GSM8KWorkloads``."""

from __future__ import annotations

from dataclasses import dataclass

from e2e.arms import ServerLaunch
from e2e.config import Experiment
from e2e.plan import EvalSpec, Unit
from e2e.load import LoadWorkload

__all__ = ["Workloads"]


@dataclass(frozen=True)
class Workloads:
    """Picks each unit's workload: the reference load for a load run."""

    def __call__(self, experiment: Experiment, unit: Unit, launch: ServerLaunch, options):
        if isinstance(unit, EvalSpec):
            raise TypeError("a GSM8K unit runs through e2e.gsm8k (run_gsm8k), whose session "
                            "options carry its workloads (e2e.gsm8k.workload.GSM8KWorkloads)")
        return LoadWorkload(unit, launch, experiment.load, progress=options.progress,
                            say=options.say)
