"""``e2e bisect``'s statistics: a commit against the good build measured in the same rounds
(``blocked_change``: the per-round log ratios' mean and t-interval) and what that says
(``classify``: bad, good, or undecided: measure more rounds)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.stats import t as t_dist

from e2e.errors import ResultsError
from e2e.results import BisectOutcome, BlockedChange

__all__ = ["blocked_change", "classify"]


def blocked_change(candidate: Mapping[int, float], good: Mapping[int, float], *,
                   confidence: float = 0.95) -> BlockedChange:
    """Paired (blocked) comparison by round: log ratios log(candidate_k / good_k) of the rounds
    both have, mean and Student t-interval (n − 1 degrees of freedom) at ``confidence``;
    back-transformed to % change. Pairing by round removes the host's drift between rounds."""
    rounds = sorted(set(candidate) & set(good))
    if not rounds:
        raise ResultsError("no round has a reported run of both the good build and the commit")
    ratios = np.log([candidate[k] / good[k] for k in rounds])
    mean = float(ratios.mean())
    pct = (math.exp(mean) - 1) * 100
    if len(rounds) < 2:
        return BlockedChange(pct, None, None, len(rounds))
    half = float(t_dist.ppf(0.5 + confidence / 2, len(rounds) - 1)
                 * ratios.std(ddof=1) / math.sqrt(len(rounds)))
    return BlockedChange(pct, (math.exp(mean - half) - 1) * 100, (math.exp(mean + half) - 1) * 100,
                         len(rounds))


def classify(change: BlockedChange, *, threshold_pct: float,
             higher_is_better: bool) -> BisectOutcome | None:
    """bad: the interval lies on the worse side of no change and the change is at least
    ``threshold_pct``; good: the interval rules out a worsening of ``threshold_pct``;
    None (undecided: measure more rounds) otherwise."""
    if change.low is None or change.high is None:
        return None
    sign = -1.0 if higher_is_better else 1.0       # worse = +: slower, or less throughput
    worse, lo, hi = sign * change.pct, *sorted((sign * change.low, sign * change.high))
    if lo > 0 and worse >= threshold_pct:
        return "bad"
    if hi < threshold_pct:
        return "good"
    return None
