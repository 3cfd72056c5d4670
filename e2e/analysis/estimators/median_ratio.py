"""The older unpaired comparison, which the nightly judge uses (``compare_runs``,
``verdict_for``), kept unchanged:

* **point estimate**: the ratio of the medians of the reported runs (so the % change agrees
  with the two ``median (range)`` cells a reader sees side by side);
* **interval**: a Welch (unequal-variance) two-sample t-interval on the natural logs of the
  per-run values, i.e. on log(geometric-mean ratio), back-transformed to a ratio; default
  confidence 95 %;
* **verdict**: a change is called only when that interval excludes "no change", the point
  estimate lies on the same side, and the point estimate is at least ``min_effect_pct`` in
  size (a documented minimum practical effect); otherwise it is "within noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _sp

from e2e.analysis.estimators.estimates import _positive

__all__ = ["INTERVAL_METHOD", "Verdict", "RatioEstimate", "ratio_of_medians",
           "welch_log_ratio_interval", "compare_runs", "verdict_for"]

INTERVAL_METHOD = "Welch t-interval on log values (ratio of geometric means)"

Verdict = Literal["faster", "slower", "within noise", "too few runs"]


def _exp(x: float) -> float:
    """exp(x), inf where it overflows (a ratio of an absurd run's figures: 1e308 ms beside 10)."""
    return math.exp(x) if x < 709.0 else math.inf


@dataclass(frozen=True)
class RatioEstimate:
    """An arm's value relative to a baseline's: ``ratio`` = arm / baseline (1.0 = no change).

    ``low``/``high`` bound the ratio at ``confidence``; both are None when either side has
    fewer than 2 runs (no spread to estimate noise from)."""

    ratio: float
    low: float | None
    high: float | None
    confidence: float
    method: str

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def pct_low(self) -> float | None:
        return None if self.low is None else (self.low - 1.0) * 100.0

    @property
    def pct_high(self) -> float | None:
        return None if self.high is None else (self.high - 1.0) * 100.0



def ratio_of_medians(arm: Sequence[float], baseline: Sequence[float]) -> float:
    """Point estimate of a change: median(arm) / median(baseline)."""
    a = _positive(arm, "arm")
    b = _positive(baseline, "baseline")
    return float(np.median(a) / np.median(b))


def welch_log_ratio_interval(
    arm: Sequence[float], baseline: Sequence[float], *, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Welch two-sample t-interval for mean(log arm) - mean(log baseline), exponentiated.

    Method: d = mean(ln a) - mean(ln b); se = sqrt(s_a^2/n_a + s_b^2/n_b) with sample
    variances (ddof 1); degrees of freedom by Welch-Satterthwaite; the interval is
    exp(d -/+ t_{(1+confidence)/2, df} * se), a confidence interval for the ratio of the
    geometric means. Returns None when either side has fewer than 2 values. When both sides
    have zero spread the interval collapses to the point exp(d).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    a = np.log(_positive(arm, "arm"))
    b = np.log(_positive(baseline, "baseline"))
    if a.size < 2 or b.size < 2:
        return None
    d = float(a.mean() - b.mean())
    va = float(a.var(ddof=1)) / a.size
    vb = float(b.var(ddof=1)) / b.size
    se2 = va + vb
    if se2 == 0.0:
        return (_exp(d), _exp(d))
    df = se2**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(_sp.t.ppf(0.5 + confidence / 2.0, df)) * math.sqrt(se2)
    return (_exp(d - half), _exp(d + half))


def compare_runs(
    arm: Sequence[float], baseline: Sequence[float], *, confidence: float = 0.95
) -> RatioEstimate:
    """Ratio of medians (point) with a Welch t-interval on log values (interval)."""
    interval = welch_log_ratio_interval(arm, baseline, confidence=confidence)
    low, high = interval if interval is not None else (None, None)
    return RatioEstimate(
        ratio=ratio_of_medians(arm, baseline),
        low=low,
        high=high,
        confidence=confidence,
        method=INTERVAL_METHOD,
    )


def verdict_for(
    estimate: RatioEstimate, *, higher_is_better: bool, min_effect_pct: float = 0.0
) -> Verdict:
    """Read a change as "faster", "slower", "within noise", or "too few runs".

    A change is called when the interval excludes a ratio of 1, the point estimate is on
    the same side of 1 as the interval, and |point estimate| >= ``min_effect_pct`` %.
    "faster" means better in the metric's own direction: lower for latencies and ms per
    verify step, higher for throughput and acceptance length (more tokens per verify step).
    """
    if min_effect_pct < 0:
        raise ValueError("min_effect_pct must be >= 0")
    if estimate.low is None or estimate.high is None:
        return "too few runs"
    if estimate.low > 1.0 and estimate.ratio > 1.0:
        up = True
    elif estimate.high < 1.0 and estimate.ratio < 1.0:
        up = False
    else:
        return "within noise"
    if abs(estimate.pct) < min_effect_pct:
        return "within noise"
    return "faster" if up == higher_is_better else "slower"
