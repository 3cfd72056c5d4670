"""Numbers across runs: cells and comparisons (aggregate), statistics, the one headline rule,
the nightly's statistics (a night judged against its baseline night or its ratio's history,
change points over a cell's nights, what a nightly design resolves), and a capacity search's
margins and estimate. Pure functions over records already read; no I/O.
"""

from e2e.analysis.sweep.aggregate import (
    DEFAULT_CONFIDENCE, equivalence_of, estimate_of, primary_metric,
    Cell, Comparison, MAX_ACCEPTANCE_MOVE, MAX_SPREAD, METRICS, MIN_RUNS, Metric, ReportWarning,
    Summary, metric, select, summarize
)
from e2e.analysis.sweep.attribution import Attribution, attribute
from e2e.analysis.capacity.estimate import capacity_estimate, capacity_ratio
from e2e.analysis.capacity.criterion import (
    capacity_censored, capacity_margin, capacity_margin_terms, goodput_margin
)
from e2e.analysis.sweep.frame import arrival_of, run_times, runs_frame, workload_key
from e2e.analysis.outputs.gsm8k import (
    Agreement, GSM8KArm, GSM8KReport, GSM8KSection, acceptance_length, compare_verdicts,
    gsm8k_report, mcnemar_exact, summarize_gsm8k, verdict_accuracy
)
from e2e.analysis.sweep.report_warnings import WarningLine, warning_lines
from e2e.analysis.outputs.compare import (
    AA_DIVERGES, AS_AA, HIT_RATE_TOLERANCE, IDENTICAL, MORE_THAN_AA, NO_AA, NOT_RECORDED,
    CacheContrast, CellCache, Divergence, OutputAgreement, OutputComparison, OutputsSummary,
    cache_contrast, cell_caches, compare_outputs, divergence_test, first_divergence,
    outputs_of, summarize_outputs
)
from e2e.analysis.outputs.merge import AA, NOT_SAFE, NOT_SHOWN, SAFE, CellEvidence, MergeCall, merge_calls
from e2e.analysis.sweep.summary import REPORTED_POSITIONS, position_key, position_of
from e2e.analysis.estimators.components import Components, RunCost, components, run_costs
from e2e.analysis.planning.advice import Design, RunsAdvice, format_advice, parse_effect, runs_advice
from e2e.analysis.estimators.multiplicity import holm
from e2e.analysis.sweep.headline import (
    BURST_SHARE, CLIENT_VERIFY_STEP, HEADLINE, SERVER_VERIFY_STEP, burst_affected, headline_for,
    headline_metric, server_twin
)
from e2e.analysis.estimators.stats import (
    DEFAULT_SPENDING, Look, Spending, boundaries, look_at, spending_at, spent_alpha,
    DEFAULT_POWER, RESOLUTION_SD, RatioEstimate, Settlement, compare_runs, median_range,
    runs_needed, verdict_for
)
from e2e.analysis.nightly.outputs import check_outputs
from e2e.analysis.nightly.bisect import blocked_change, classify
from e2e.analysis.nightly.metrics import (
    DEFAULT_NIGHT_ALPHA, NIGHTLY_METRICS, built_arm, is_relative, judged_metrics, judged_threshold,
    nightly_metric, relative_arm
)
from e2e.analysis.nightly.judge import (
    MIN_HISTORY_NIGHTS, SUSPECT_LEVEL, HistoryFit, Rules, Samples, history_fit, history_interval,
    judge_cell, judge_night, judgement_with_changes, judgement_with_outputs, looks_changed,
    night_look, night_status, paired_change_interval, within, BLIND_NIGHTS
)
from e2e.analysis.nightly.history import (
    cell_history, night_cell, night_cells, ratio_history, select_baseline, undecided_nights
)
from e2e.analysis.nightly.changepoints import (
    MIN_SEGMENT, PENALTY_PER_LOG_N, Change, cell_series, find_changes, night_changes
)
from e2e.analysis.nightly.resolution import (
    HOST_DUETS, HOST_ONE_AT_A_TIME, MAX_ROUNDS, Noise, design_lines, noise_of, power_at,
    resolution, rounds_needed
)

__all__ = [
    "AA", "AA_DIVERGES", "AS_AA", "Agreement", "Attribution", "BLIND_NIGHTS", "BURST_SHARE",
    "CLIENT_VERIFY_STEP",
    "CacheContrast", "Cell", "CellCache", "CellEvidence", "Change", "Comparison", "Components",
    "DEFAULT_CONFIDENCE", "DEFAULT_NIGHT_ALPHA", "DEFAULT_POWER", "DEFAULT_SPENDING", "Design",
    "Divergence", "GSM8KArm", "GSM8KReport", "GSM8KSection", "HEADLINE", "HIT_RATE_TOLERANCE",
    "HOST_DUETS", "HOST_ONE_AT_A_TIME", "HistoryFit", "IDENTICAL", "Look", "MAX_ACCEPTANCE_MOVE",
    "MAX_ROUNDS", "MAX_SPREAD", "METRICS", "MIN_HISTORY_NIGHTS", "MIN_RUNS", "MIN_SEGMENT",
    "MORE_THAN_AA", "MergeCall", "Metric", "NIGHTLY_METRICS", "NOT_RECORDED", "NOT_SAFE",
    "NOT_SHOWN", "NO_AA", "Noise", "OutputAgreement", "OutputComparison", "OutputsSummary",
    "PENALTY_PER_LOG_N", "REPORTED_POSITIONS", "RESOLUTION_SD", "RatioEstimate", "ReportWarning",
    "Rules", "RunCost", "RunsAdvice", "SAFE", "SERVER_VERIFY_STEP", "SUSPECT_LEVEL", "Samples",
    "Settlement", "Spending", "Summary", "WarningLine", "acceptance_length", "arrival_of",
    "attribute", "blocked_change", "boundaries", "built_arm", "burst_affected", "cache_contrast",
    "capacity_censored", "capacity_estimate", "capacity_margin", "capacity_margin_terms",
    "capacity_ratio", "cell_caches", "cell_history", "cell_series", "check_outputs", "classify",
    "compare_outputs", "compare_runs", "compare_verdicts", "components", "design_lines",
    "divergence_test", "equivalence_of", "estimate_of", "find_changes", "first_divergence",
    "format_advice", "goodput_margin", "gsm8k_report", "headline_for", "headline_metric",
    "history_fit", "history_interval", "holm", "is_relative", "judge_cell", "judge_night",
    "judged_metrics", "judged_threshold", "judgement_with_changes", "judgement_with_outputs",
    "look_at", "looks_changed", "mcnemar_exact", "median_range", "merge_calls", "metric",
    "night_cell", "night_cells", "night_changes", "night_look", "night_status", "nightly_metric",
    "noise_of", "outputs_of", "paired_change_interval", "parse_effect", "position_key",
    "position_of", "power_at", "primary_metric", "ratio_history", "relative_arm", "resolution",
    "rounds_needed", "run_costs", "run_times", "runs_advice", "runs_frame", "runs_needed",
    "select", "select_baseline", "server_twin", "spending_at", "spent_alpha", "summarize",
    "summarize_gsm8k", "summarize_outputs", "undecided_nights", "verdict_accuracy", "verdict_for",
    "warning_lines", "within", "workload_key"
]
