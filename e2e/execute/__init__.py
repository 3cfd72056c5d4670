"""Executors run a plan's units: locally in order or on a Ray cluster, resuming, with one
bookkeeper for both (attempts, units given up, progress and ETA for the whole plan); and the
plan described without starting anything.
"""

from e2e.execute._describe import build_line, describe_arms, describe_plan, plan_header
from e2e.execute._executor import Executor, LocalExecutor, SessionUnit
from e2e.execute._progress import OnUnit, Outcome
from e2e.execute._ray import describe_cluster_plan, executor_from

__all__ = [
    "Executor", "LocalExecutor", "OnUnit", "Outcome", "SessionUnit", "build_line",
    "describe_arms", "describe_cluster_plan", "describe_plan", "executor_from", "plan_header"
]
