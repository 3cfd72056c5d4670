"""Advice before a sweep: the runs a design needs for the effect asked."""

from __future__ import annotations

from e2e.analysis.planning.advice import format_advice, parse_effect, runs_advice

__all__ = [
    "format_advice", "parse_effect", "runs_advice"
]
