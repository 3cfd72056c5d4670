"""Executors run a plan's units: locally in order or on a Ray cluster, resuming, with one
bookkeeper for both (attempts, units given up, progress and ETA for the whole plan); and the
plan described without starting anything.
"""

from e2e.execute.describe import describe_arms, describe_plan, plan_header
from e2e.execute.executor import Executor, LocalExecutor, SessionUnit
from e2e.execute.progress import OnUnit, Outcome
from e2e.execute.ray import describe_cluster_plan, executor_from

__all__ = [
    "Executor", "LocalExecutor", "OnUnit", "Outcome", "SessionUnit", "describe_arms",
    "describe_cluster_plan", "describe_plan", "executor_from", "plan_header"
]
