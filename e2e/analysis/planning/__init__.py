"""Advice before a sweep: the runs a design needs for the effect asked."""

from __future__ import annotations

from e2e.analysis.planning.advice import (
    DESIGN_ROUNDS, RunsAdvice, parse_effect, planned_floor, runs_advice
)

__all__ = [
    "DESIGN_ROUNDS", "RunsAdvice", "parse_effect", "planned_floor", "runs_advice"
]
