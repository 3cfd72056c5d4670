"""The four verdicts of one comparison (``call``): a difference, equivalent, inconclusive, or
too few runs; each a pure function of its ``LogRatio`` at a confidence."""

from __future__ import annotations

from typing import Literal

from e2e.analysis.estimators.estimates import DEFAULT_EQUIVALENCE_PCT, LogRatio, _check_confidence

__all__ = ["Call", "call", "is_difference"]

Call = Literal["faster", "slower", "higher", "lower", "equivalent", "inconclusive", "too few runs"]

def call(
    est: LogRatio | None,
    *,
    time_metric: bool,
    confidence: float = 0.95,
    min_effect_pct: float = 0.0,
    equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT,
) -> Call:
    """The four verdicts (plus "too few runs" without an estimate), with α = 1 − confidence:

    * a **difference** when the two-sided (1 − α) t-interval excludes 0 and the point estimate
      is at least ``min_effect_pct`` % in size: "faster"/"slower" (lower/higher) for a time
      metric, "higher"/"lower" for any other (the value's direction, whatever is better);
    * **"equivalent"** (within ±``equivalence_pct`` %) when both one-sided t-tests against the
      band's edges reject at α (TOST; the same as the (1 − 2α) interval lying inside the band);
    * otherwise **"inconclusive"** (the data could not tell; report the MDE beside it).
    """
    if min_effect_pct < 0:
        raise ValueError("min_effect_pct must be >= 0")
    _check_confidence(confidence)
    if est is None:
        return "too few runs"
    lo, hi = est.interval(confidence)
    if (lo > 1.0 or hi < 1.0) and abs(est.pct) >= min_effect_pct:
        up = lo > 1.0
        if time_metric:
            return "slower" if up else "faster"
        return "higher" if up else "lower"
    if est.tost_p_value(equivalence_pct) < 1.0 - confidence:
        return "equivalent"
    return "inconclusive"


def is_difference(verdict: str) -> bool:
    return verdict in ("faster", "slower", "higher", "lower")
