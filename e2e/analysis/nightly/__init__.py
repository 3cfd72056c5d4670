"""The night's judgement: a night against its baseline or its ratio's history, the history,
change points, the outputs check, bisect's verdicts and what a nightly design resolves."""

from __future__ import annotations

from e2e.analysis.nightly.bisect import blocked_change, classify
from e2e.analysis.nightly.changepoints import night_changes
from e2e.analysis.nightly.history import (
    cell_history, ratio_history, select_baseline, undecided_nights
)
from e2e.analysis.nightly.judge import (
    BLIND_NIGHTS, Rules, first_look, judge_night, judgement_with_changes, judgement_with_outputs
)
from e2e.analysis.nightly.metrics import (
    DEFAULT_NIGHT_ALPHA, NIGHTLY_METRICS, judged_metrics, judged_threshold, nightly_metric
)
from e2e.analysis.nightly.outputs import check_outputs
from e2e.analysis.nightly.resolution import HOST_DUETS, HOST_ONE_AT_A_TIME, design_lines, noise_of

__all__ = [
    "BLIND_NIGHTS", "DEFAULT_NIGHT_ALPHA", "HOST_DUETS", "HOST_ONE_AT_A_TIME", "NIGHTLY_METRICS",
    "Rules", "blocked_change", "cell_history", "check_outputs", "classify", "design_lines",
    "first_look", "judge_night", "judged_metrics", "judged_threshold", "judgement_with_changes",
    "judgement_with_outputs", "night_changes", "nightly_metric", "noise_of", "ratio_history",
    "select_baseline", "undecided_nights"
]
