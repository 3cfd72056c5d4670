"""Numbers across runs: cells and comparisons (aggregate), statistics, and the one headline
rule. Pure functions over records already read; no I/O.
"""

from e2e.analysis._aggregate import (
    DEFAULT_CONFIDENCE, equivalence_of, estimate_of, primary_metric,
    Cell, Comparison, MAX_ACCEPTANCE_MOVE, MAX_SPREAD, METRICS, MIN_RUNS, Metric, ReportWarning,
    Summary, metric, select, summarize
)
from e2e.analysis._attribution import Attribution, attribute
from e2e.analysis._summary import REPORTED_POSITIONS, position_key, position_of
from e2e.analysis._components import Components, RunCost, components, run_costs
from e2e.analysis._planning import Design, RunsAdvice, format_advice, parse_effect, runs_advice
from e2e.analysis._headline import (
    BURST_SHARE, CLIENT_VERIFY_STEP, HEADLINE, SERVER_VERIFY_STEP, burst_affected, headline_for,
    headline_metric, server_twin
)
from e2e.analysis._stats import (
    DEFAULT_SPENDING, Look, Spending, boundaries, look_at, spending_at, spent_alpha,
    DEFAULT_POWER, RESOLUTION_SD, RatioEstimate, Settlement, compare_runs, median_range,
    runs_needed, verdict_for
)

__all__ = [
    "Attribution", "BURST_SHARE", "CLIENT_VERIFY_STEP", "Cell", "Comparison", "Components",
    "DEFAULT_CONFIDENCE", "DEFAULT_POWER", "DEFAULT_SPENDING", "Design", "HEADLINE", "Look",
    "MAX_ACCEPTANCE_MOVE", "MAX_SPREAD", "METRICS", "MIN_RUNS", "Metric", "REPORTED_POSITIONS",
    "RESOLUTION_SD", "RatioEstimate", "ReportWarning", "RunCost", "RunsAdvice",
    "SERVER_VERIFY_STEP", "Settlement", "Spending", "Summary", "attribute", "boundaries",
    "burst_affected",
    "compare_runs", "components", "equivalence_of", "estimate_of", "format_advice",
    "headline_for", "headline_metric", "look_at", "median_range", "metric", "parse_effect",
    "position_key", "position_of", "primary_metric", "run_costs", "runs_advice", "runs_needed",
    "select",
    "server_twin", "spending_at", "spent_alpha", "summarize", "verdict_for"
]
