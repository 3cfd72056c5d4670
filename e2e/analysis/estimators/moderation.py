"""Shared noise: empirical-Bayes moderation of a variance toward others whose noise is alike
(limma's moderated t; the report borrows only within one cell, e2e.analysis.sweep.aggregate), and the
noise floor at the measurement's resolution. The floor at half the noise pooled across cells
is gone: it made the quiet cells' intervals up to 2.3x too wide where noise differs by cell."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from e2e.analysis.estimators.estimates import RESOLUTION_SD, LogRatio

__all__ = ["MIN_PRIOR_UNITS", "Prior", "fit_prior", "moderate", "floor_noise",
           "trigamma_inverse"]

MIN_PRIOR_UNITS = 3
"""Fewer independent variance estimates of a metric than this: no prior (nothing is borrowed)."""


@dataclass(frozen=True)
class Prior:
    """A scaled inverse-χ² prior for a metric's per-run variance: ``s2`` on ``df`` degrees of
    freedom (df 0: no prior), estimated from ``units`` variances."""

    s2: float
    df: float
    units: int


def trigamma_inverse(x: float) -> float:
    """Solve trigamma(y) = x by Newton's method (Smyth 2004's limma::trigammaInverse)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        dif = tri * (1.0 - tri / x) / float(polygamma(2, y))
        y += dif
        if -dif / y < 1e-8:
            break
    return y


def fit_prior(variances: Sequence[tuple[float, float]]) -> Prior:
    """Empirical-Bayes prior of (variance, df) pairs by limma's method of moments on log
    variances (``fitFDist``, Smyth 2004, §6.2): e_i = ln s_i² − ψ(d_i/2) + ln(d_i/2); the mean of
    e gives s0², its variance minus the mean of ψ′(d_i/2) gives ψ′(d0/2). Conservative where it
    cannot be estimated well: no prior (df 0) with fewer than ``MIN_PRIOR_UNITS`` positive
    variances; and d0 is never more than the df of all but the largest-df variance together (the
    prior may not claim more information than the other comparisons hold; limma's d0 = ∞, when
    the log variances spread less than sampling alone would make them, is capped the same way)."""
    from scipy.special import digamma, polygamma

    pairs = [(s2, d) for s2, d in variances if s2 > 0 and d > 0]
    g = len(pairs)
    if g < MIN_PRIOR_UNITS:
        return Prior(0.0, 0.0, g)
    s2 = np.array([p[0] for p in pairs])
    d = np.array([p[1] for p in pairs])
    e = np.log(s2) - digamma(d / 2.0) + np.log(d / 2.0)
    emean = float(e.mean())
    evar = float(((e - emean) ** 2).sum() / (g - 1)) - float(polygamma(1, d / 2.0).mean())
    cap = float(d.sum() - d.max())
    if evar > 0:
        d0 = 2.0 * trigamma_inverse(evar)
    else:
        d0 = math.inf
    d0 = min(d0, cap)
    s0 = math.exp(emean + float(digamma(d0 / 2.0)) - math.log(d0 / 2.0))
    return Prior(s0, d0, g)


def moderate(est: LogRatio, s2: float, prior: Prior, *, floor_sd: float = RESOLUTION_SD) -> LogRatio:
    """The moderated estimate (limma's moderated t): per-run variance
    s̃² = (d0·s0² + d·s²) / (d0 + d) on d + d0 degrees of freedom, with ``s2`` the estimate's own
    per-run variance on ``est.df``; se scales by s̃ / s, then the per-run floor ``floor_sd``.
    Unchanged without a prior. Welch estimates (no common per-run variance) are not moderated."""
    own_df = est.residual_df if est.residual_df is not None else est.df
    if prior.df <= 0 or est.method == "welch":
        return est
    s2_mod = (prior.df * prior.s2 + own_df * s2) / (prior.df + own_df)
    s_mod = max(math.sqrt(s2_mod), floor_sd)
    s_used = est.noise_sd / math.sqrt(2.0)  # per run, after the estimate's own floor
    factor = est.se / s_used if s_used > 0 else 0.0
    return replace(est, se=factor * s_mod, df=own_df + prior.df, noise_sd=math.sqrt(2.0) * s_mod,
                   floored=math.sqrt(s2_mod) < floor_sd, prior_df=prior.df, residual_df=own_df)


def floor_noise(est: LogRatio, floor_sd: float) -> LogRatio:
    """``est`` with its per-run noise raised to at least ``floor_sd`` (monotone: a larger raw
    noise never gives a smaller floored one). Welch: each side's sd is already floored at the
    resolution; the pair's noise is raised to sqrt(2) · ``floor_sd``."""
    s_run = est.noise_sd / math.sqrt(2.0)
    if s_run >= floor_sd or s_run <= 0:  # (never 0: every estimate is floored at resolution)
        return est
    factor = floor_sd / s_run
    return replace(est, se=est.se * factor, noise_sd=est.noise_sd * factor, floored=True,
                   floor_sd=floor_sd)
