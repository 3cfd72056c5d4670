"""Executors run a plan's units: locally in order or on a Ray cluster, resuming, with one
bookkeeper for both (attempts, units given up, progress and ETA for the whole plan); and the
plan described without starting anything.
"""

from e2e.execute.describe import build_line, describe_arms, describe_plan, plan_header
from e2e.execute.executor import Executor, LocalExecutor, SessionUnit, blocks
from e2e.execute.progress import OnUnit, Outcome, format_eta
from e2e.execute.ray import (FAILURE_JSON, RayExecutor, check_host_plugin, describe_cluster_plan,
                              driver_plugin, executor_from, keep_failed_attempt)

__all__ = [
    "Executor", "FAILURE_JSON", "LocalExecutor", "OnUnit", "Outcome", "RayExecutor",
    "SessionUnit", "blocks", "build_line", "check_host_plugin", "describe_arms",
    "describe_cluster_plan", "describe_plan", "driver_plugin", "executor_from", "format_eta",
    "keep_failed_attempt", "plan_header"
]
