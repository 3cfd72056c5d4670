"""The plan: a list of units (what one fresh server does), made from an experiment and a
command's flags in rounds and a balanced arm order, the same on every resume.
"""

from e2e.plan._units import (GSM8K_CONCURRENCY, DuetSpec, EvalSpec, RunSpec, Unit,
                             comparable_settings, pinned_of)
from e2e.plan.plan import (FolderOrder, claim_order, describe_order, folder_order, make_plan,
                           record_order)

__all__ = [
    "DuetSpec", "EvalSpec", "FolderOrder", "GSM8K_CONCURRENCY", "RunSpec", "Unit", "claim_order",
    "comparable_settings", "describe_order", "folder_order", "make_plan", "pinned_of",
    "record_order"
]
