"""The shared estimators: one comparison on the log scale, the model per cell, shared noise,
the four verdicts, Holm, power, the group-sequential boundaries, the median ratio and the
variance components. The other analysis sub-packages import the module that defines what
they use."""

from __future__ import annotations

from e2e.analysis.estimators.components import run_costs
from e2e.analysis.estimators.estimates import RESOLUTION_SD
from e2e.analysis.estimators.power import PLAN_NOISE_LEVEL
from e2e.analysis.estimators.sequential import DEFAULT_SPENDING, Look, Settlement, Spending, look_at

__all__ = [
    "DEFAULT_SPENDING", "Look", "PLAN_NOISE_LEVEL", "RESOLUTION_SD", "Settlement", "Spending",
    "look_at", "run_costs"
]
