"""The statistics of a report, gathered: pure functions on per-run values, no I/O, one module
per rule (each docstring names its method; see docs/explanation/statistics.md):

* ``_estimates``: one comparison on the log scale (``LogRatio``: model contrast, paired t or
  Welch), its interval, p-values, TOST and MDE; median (range);
* ``_model``: one model per cell (``cell_model``, OLS of ln y on block + slot + arm);
* ``_moderation``: shared noise (limma's moderated t, only among variances whose noise is
  alike) and the noise floor at the measurement's resolution;
* ``_verdicts``: the four verdicts (``call``);
* ``_multiplicity``: the family-wise rules (Holm; both hypotheses of every comparison);
* ``_power``: runs needed and the effect a design detects;
* ``_sequential``: ``--until-settled``'s exact group-sequential boundaries (Lan–DeMets);
* ``_median_ratio``: the older unpaired comparison the nightly judge uses.

This module only re-exports their names, so ``from e2e.analysis import stats`` reads
``stats.call``, ``stats.look_at`` and so on; nothing is defined here.
"""

from __future__ import annotations

from e2e.analysis.estimators.estimates import (
    DEFAULT_EQUIVALENCE_PCT, DEFAULT_POWER, METHOD_TEXT, RESOLUTION_SD, Block, LogRatio,
    MedianRange, Method, _check_confidence, _band, _logs, blocked_log_ratio, log_ratio, mde_log,
    median_range, median_unbiased, relative_range, welch_log_ratio
)
from e2e.analysis.estimators.median_ratio import (
    INTERVAL_METHOD, RatioEstimate, Verdict, compare_runs, ratio_of_medians, verdict_for,
    welch_log_ratio_interval
)
from e2e.analysis.estimators.model import (
    AR1_GRID, CALIBRATED_AR1_RHO, MIN_FOLDER_AR1_DF, MIN_MODEL_DF, CellFit, ModelRun, cell_model,
    folder_rho
)
from e2e.analysis.estimators.moderation import (
    MIN_PRIOR_UNITS, Prior, _trigamma_inverse, fit_prior, floor_noise, moderate
)
from e2e.analysis.estimators.multiplicity import holm, paired_holm
from e2e.analysis.estimators.power import (
    PLAN_NOISE_LEVEL, design_df, detectable_effect, duet_se_factor, duet_shape, runs_needed,
    upper_noise
)
from e2e.analysis.estimators.sequential import (
    DEFAULT_SPENDING, Decision, Look, Settlement, Spending, boundaries, look_at, spending_at,
    spent_alpha
)
from e2e.analysis.estimators.verdicts import Call, call, is_difference

__all__ = [
    "AR1_GRID", "Block", "CALIBRATED_AR1_RHO", "Call", "CellFit", "DEFAULT_EQUIVALENCE_PCT", "DEFAULT_POWER", "DEFAULT_SPENDING",
    "Decision", "INTERVAL_METHOD", "LogRatio", "Look", "METHOD_TEXT", "MIN_FOLDER_AR1_DF", "MIN_MODEL_DF",
    "MIN_PRIOR_UNITS", "MedianRange", "Method", "ModelRun", "PLAN_NOISE_LEVEL", "Prior",
    "RESOLUTION_SD", "RatioEstimate", "Settlement", "Spending", "Verdict", "blocked_log_ratio",
    "boundaries", "call", "cell_model", "folder_rho", "compare_runs", "design_df", "detectable_effect", "fit_prior",
    "floor_noise", "holm", "is_difference", "paired_holm", "log_ratio", "look_at", "mde_log", "median_range",
    "median_unbiased", "moderate", "ratio_of_medians",
    "relative_range", "duet_se_factor", "duet_shape", "runs_needed", "spending_at", "spent_alpha", "upper_noise", "verdict_for", "welch_log_ratio",
    "welch_log_ratio_interval",
]
_PRIVATE_FOR_TESTS = (_check_confidence, _band, _logs, _trigamma_inverse)
