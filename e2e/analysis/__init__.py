"""Numbers across runs: cells and comparisons (aggregate), statistics, the one headline
rule, and a capacity search's margins and estimate. Pure functions over records already read;
no I/O.
"""

from e2e.analysis._aggregate import (
    DEFAULT_CONFIDENCE, equivalence_of, estimate_of, primary_metric,
    Cell, Comparison, MAX_ACCEPTANCE_MOVE, MAX_SPREAD, METRICS, MIN_RUNS, Metric, ReportWarning,
    Summary, metric, select, summarize
)
from e2e.analysis._attribution import Attribution, attribute
from e2e.analysis._capacity import estimate, ratio
from e2e.analysis._capacity_criterion import censored, goodput_margin, margin, margin_terms
from e2e.analysis._compare import run_times
from e2e.analysis._frame import arrival_of, runs_frame, workload_key
from e2e.analysis._gsm8k import (
    Agreement, GSM8KArm, GSM8KReport, GSM8KSection, acceptance_length, compare_verdicts,
    gsm8k_report, mcnemar_exact, summarize_gsm8k, verdict_accuracy
)
from e2e.analysis._warnings import WarningLine, warning_lines
from e2e.analysis._outputs import (
    AA_DIVERGES, AS_AA, HIT_RATE_TOLERANCE, IDENTICAL, MORE_THAN_AA, NO_AA, NOT_RECORDED,
    CacheContrast, CellCache, Divergence, OutputAgreement, OutputComparison, OutputsSummary,
    cache_contrast, cell_caches, compare_outputs, divergence_test, first_divergence,
    outputs_of, summarize_outputs
)
from e2e.analysis._merge import AA, NOT_SAFE, NOT_SHOWN, SAFE, CellEvidence, MergeCall, merge_calls
from e2e.analysis._summary import REPORTED_POSITIONS, position_key, position_of
from e2e.analysis._components import Components, RunCost, components, run_costs
from e2e.analysis._planning import Design, RunsAdvice, format_advice, parse_effect, runs_advice
from e2e.analysis._multiplicity import holm
from e2e.analysis._headline import (
    BURST_SHARE, CLIENT_VERIFY_STEP, HEADLINE, SERVER_VERIFY_STEP, burst_affected, headline_for,
    headline_metric, server_twin
)
from e2e.analysis.stats import (
    DEFAULT_SPENDING, Look, Spending, boundaries, look_at, spending_at, spent_alpha,
    DEFAULT_POWER, RESOLUTION_SD, RatioEstimate, Settlement, compare_runs, median_range,
    runs_needed, verdict_for
)

__all__ = [
    "AA", "AA_DIVERGES", "AS_AA", "Agreement", "Attribution", "BURST_SHARE", "CLIENT_VERIFY_STEP",
    "CacheContrast", "Cell", "CellCache", "CellEvidence", "Comparison", "Components",
    "DEFAULT_CONFIDENCE", "DEFAULT_POWER", "DEFAULT_SPENDING", "Design", "Divergence", "GSM8KArm",
    "GSM8KReport", "GSM8KSection", "HEADLINE", "HIT_RATE_TOLERANCE", "IDENTICAL", "Look",
    "MAX_ACCEPTANCE_MOVE", "MAX_SPREAD", "METRICS", "MIN_RUNS", "MORE_THAN_AA", "MergeCall",
    "Metric", "NOT_RECORDED", "NOT_SAFE", "NOT_SHOWN", "NO_AA", "OutputAgreement",
    "OutputComparison", "OutputsSummary", "REPORTED_POSITIONS", "RESOLUTION_SD", "RatioEstimate",
    "ReportWarning", "RunCost", "RunsAdvice", "SAFE", "SERVER_VERIFY_STEP", "Settlement",
    "Spending", "Summary", "WarningLine", "acceptance_length", "arrival_of", "attribute",
    "boundaries", "burst_affected", "cache_contrast", "cell_caches", "censored", "compare_outputs",
    "compare_runs", "compare_verdicts", "components", "divergence_test", "equivalence_of",
    "estimate", "estimate_of", "first_divergence", "format_advice", "goodput_margin",
    "gsm8k_report", "headline_for", "headline_metric", "holm", "look_at", "margin", "margin_terms",
    "mcnemar_exact", "median_range", "merge_calls", "metric", "outputs_of", "parse_effect",
    "position_key", "position_of", "primary_metric", "ratio", "run_costs", "run_times",
    "runs_advice", "runs_frame", "runs_needed", "select", "server_twin", "spending_at",
    "spent_alpha", "summarize", "summarize_gsm8k", "summarize_outputs", "verdict_accuracy",
    "verdict_for", "warning_lines", "workload_key"
]
