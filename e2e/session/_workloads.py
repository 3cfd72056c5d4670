"""Which workload a unit runs in its server session: a ``RunSpec`` is the reference load
(``e2e.load``), an ``EvalSpec`` a GSM8K evaluation (``e2e.gsm8k.workload``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from e2e.arms import ServerLaunch
from e2e.config import Experiment
from e2e.plan import EvalSpec, Unit
from e2e.gsm8k.workload import GSM8KWorkload
from e2e.load import LoadWorkload

__all__ = ["Workloads"]


@dataclass(frozen=True)
class Workloads:
    """Picks each unit's workload. ``lmeval`` and ``check`` reach lm-eval (replaced in tests
    by scripted ones); None means the real lm-eval."""

    lmeval: Callable | None = None
    check: Callable[[], str] | None = None

    def __call__(self, experiment: Experiment, unit: Unit, launch: ServerLaunch, options):
        if isinstance(unit, EvalSpec):
            return GSM8KWorkload(unit, launch, api_key=experiment.server.api_key,
                                 lmeval=self.lmeval, check=self.check, say=options.say)
        return LoadWorkload(unit, launch, experiment.load, progress=options.progress,
                            say=options.say)
