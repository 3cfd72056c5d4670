"""An arm's capacity and its interval from the runs at the boundary, and the ratio of two.

The capacity is the rate at which the SLO margin (``_criterion.margin``: the smallest log
ratio of objective to measured value, 0 at the edge) crosses zero, read by straight-line
interpolation in log rate between the two boundary rates ``lo`` < ``hi`` through their mean
margins (each the mean of ``repeats`` fresh servers):

    ln C = ln lo + (ln hi - ln lo) * m_lo / (m_lo - m_hi)

The interval comes from the sampling error of those two means. The repeats' spread is
pooled over both rates (s, with n_lo + n_hi - 2 degrees of freedom: the same servers' noise
either side of the boundary); each of ``BOOTSTRAP`` replicates draws a variance
s^2 df / chi^2_df and then each mean from a normal about the measured one with that variance
over its n (the posterior of the means under a flat prior: with 3 repeats a side the bounds
are as wide as Student's t with 4 df makes them, not as narrow as a bootstrap of 3 values),
and reads its crossing; the (1 - confidence) / 2 tails of the replicates are the bounds. A
replicate whose means do not fall from ``lo`` to ``hi`` has no crossing and counts as above
every rate if both means meet the objective and below every rate otherwise, so a boundary the
repeats cannot place shows as an open interval (an infinite bound), never a narrow one. The
ratio of an arm to the baseline pairs the two arms' replicates (independent: they ran on
separate servers) and takes the tails of C_arm / C_base.

The runs at the search's other rates (``others``: the bracketing's and bisection's first runs,
a widened boundary's repeats) take part in the replicates: each rate's mean is drawn with the
pooled variance over its own number of runs, and a replicate whose means at ``lo`` and ``hi``
do not fall across 0 walks the rates as the search's widening does (down from ``lo`` while
the means miss, up from ``hi`` while they meet) and reads its crossing between the two
neighbouring rates where they do. Only a replicate that misses at every rate measured (or
meets at every one) is open. Without ``others`` it is the two-rate estimate above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Capacity", "estimate", "ratio", "BOOTSTRAP"]

BOOTSTRAP = 4000


@dataclass(frozen=True)
class Capacity:
    """An arm's capacity (requests/s) with its interval, and its bootstrap replicates."""

    rate: float
    low: float
    high: float
    confidence: float
    lo: float
    hi: float
    replicates: tuple[float, ...]  # ln C per replicate (+-inf: no crossing)


def _crossings(lo: float, hi: float, m_lo: np.ndarray, m_hi: np.ndarray) -> np.ndarray:
    """``_crossing`` of many replicates at once."""
    fall = m_lo - m_hi
    with np.errstate(divide="ignore", invalid="ignore"):
        x = math.log(lo) + (math.log(hi) - math.log(lo)) * m_lo / fall
    open_ = np.where(np.minimum(m_lo, m_hi) >= 0, math.inf, -math.inf)
    return np.where(fall > 0, x, open_)


def _tails(values: np.ndarray, confidence: float) -> tuple[float, float]:
    ordered = np.sort(values)
    n = len(ordered)
    a = (1.0 - confidence) / 2.0
    low = ordered[max(int(math.floor(a * n)), 0)]
    high = ordered[min(int(math.ceil((1.0 - a) * n)) - 1, n - 1)]
    return float(low), float(high)


def estimate(lo: float, hi: float, at_lo: list[float], at_hi: list[float], *,
             others: dict[float, list[float]] | None = None, confidence: float = 0.95,
             seed: int = 0) -> Capacity:
    """The capacity between boundary rates ``lo`` < ``hi`` from the margins measured there
    (and at the search's ``others`` rates: see the module's docstring)."""
    if not (0 < lo < hi) or not at_lo or not at_hi:
        raise ValueError("estimate needs 0 < lo < hi and margins at both")
    runs = {float(r): np.asarray(v, float) for r, v in (others or {}).items()
            if v and r not in (lo, hi)}
    runs[lo], runs[hi] = np.asarray(at_lo, float), np.asarray(at_hi, float)
    rates = sorted(runs)
    df = sum(len(v) - 1 for v in runs.values())
    if len(at_lo) + len(at_hi) < 3 or df < 1:
        raise ValueError("estimate needs at least 3 runs at the boundary")
    pooled = sum(((v - v.mean()) ** 2).sum() for v in runs.values()) / df
    observed = np.array([[runs[r].mean()] for r in rates])
    point = _walk(rates, observed, rates.index(lo), rates.index(hi))[0]
    rng = np.random.default_rng([seed, 0xCA9A])
    var = pooled * df / rng.chisquare(df, BOOTSTRAP)
    means = np.array([runs[r].mean() + rng.standard_normal(BOOTSTRAP) * np.sqrt(var / len(runs[r]))
                      for r in rates])
    reps = _walk(rates, means, rates.index(lo), rates.index(hi))
    low, high = _tails(reps, confidence)
    return Capacity(rate=math.exp(point), low=math.exp(low), high=math.exp(high),
                    confidence=confidence, lo=lo, hi=hi, replicates=tuple(reps.tolist()))


def _walk(rates: list[float], means: np.ndarray, i_lo: int, i_hi: int) -> np.ndarray:
    """ln C per column of ``means`` (one row per rate, ascending): the crossing between lo and
    hi where their means fall across 0; else down from lo while the means miss, or up from hi
    while they meet, to the first neighbours that do; +-inf where none does."""
    m_lo, m_hi = means[i_lo], means[i_hi]
    out = _crossings(rates[i_lo], rates[i_hi], m_lo, m_hi)
    todo = m_lo < 0  # the means' edge lies below lo
    out = np.where(todo, -math.inf, out)
    for j in range(i_lo - 1, -1, -1):
        hit = todo & (means[j] >= 0)
        out = np.where(hit, _crossings(rates[j], rates[j + 1], means[j], means[j + 1]), out)
        todo &= ~hit
    todo = (m_lo >= 0) & (m_hi >= 0)  # ... above hi
    out = np.where(todo, math.inf, out)
    for j in range(i_hi + 1, len(rates)):
        hit = todo & (means[j] < 0)
        out = np.where(hit, _crossings(rates[j - 1], rates[j], means[j - 1], means[j]), out)
        todo &= ~hit
    return out


def ratio(arm: Capacity, base: Capacity, *, seed: int = 0) -> tuple[float, float, float]:
    """(C_arm / C_base, low, high) at the arms' confidence; bounds from replicates paired at
    random (an infinite replicate on either side gives an infinite or zero bound)."""
    rng = np.random.default_rng([seed, 0x7A710])
    x = np.asarray(arm.replicates)
    y = np.asarray(base.replicates)[rng.permutation(len(base.replicates))]
    with np.errstate(invalid="ignore"):
        d = x - y
    d = np.where(np.isnan(d), 0.0, d)  # inf - inf: both open the same way; no information
    low, high = _tails(d, arm.confidence)
    return _divide(arm.rate, base.rate), math.exp(low), math.exp(high)


def _divide(a: float, b: float) -> float:
    """a / b for capacities that may be open (0 or inf: no crossing); nan where both are."""
    if (a == 0 and b == 0) or (math.isinf(a) and math.isinf(b)):
        return math.nan
    return a / b if b > 0 else math.inf
