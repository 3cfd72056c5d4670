"""The sweep's comparison: run records -> comparable cells -> blocked comparisons, noise,
attribution, warnings and the one headline rule."""

from __future__ import annotations

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.attribution import Attribution
from e2e.analysis.sweep.compare import estimate_of, primary_metric
from e2e.analysis.sweep.frame import equivalence_of, select
from e2e.analysis.sweep.headline import HEADLINE, headline_for, headline_metric, server_twin
from e2e.analysis.sweep.report_warnings import WarningLine, warning_lines
from e2e.analysis.sweep.summary import (
    DEFAULT_CONFIDENCE, MAX_ACCEPTANCE_MOVE, MAX_SPREAD, MIN_RUNS, Cell, Comparison, Metric,
    ReportWarning, Summary, metric
)

__all__ = [
    "Attribution", "Cell", "Comparison", "DEFAULT_CONFIDENCE", "HEADLINE", "MAX_ACCEPTANCE_MOVE",
    "MAX_SPREAD", "MIN_RUNS", "Metric", "ReportWarning", "Summary", "WarningLine", "equivalence_of",
    "estimate_of", "headline_for", "headline_metric", "metric", "primary_metric", "select",
    "server_twin", "summarize", "warning_lines"
]
