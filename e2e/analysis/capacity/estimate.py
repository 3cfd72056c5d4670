"""An arm's capacity and its interval from every run its search made, and the ratio of two
(``e2e.results``' records: ``MarginRun`` in, ``Capacity`` out).

**What is estimated.** Each run on a fresh server at offered rate r has a margin m
(``criterion.capacity_margin``: for the goodput term the probit distance Φ⁻¹(share) −
Φ⁻¹(goodput), 0 at the edge). A run's margin falls with ln r, and fresh servers (and the
host's level when each ran) shift it, so the model is one line in ln r with a per-run random
effect:

    m* = s · (ln C − ln r) + e,   e ~ N(0, σ²) per run,   s > 0

and a run meets the objective when m* ≥ 0: **C is the rate at which a typical fresh server
meets it** (half of the servers would, at the host's usual level). The margin a run reports
is censored where the share cannot move further: a run that met every request reports the
ceiling Φ⁻¹(1 − ½/n) − Φ⁻¹(goodput) (m* is at least that), one that met none the floor (m* is
at most that); the line is read near the edge, so a margin beyond ±``BAND`` counts only for its
side, censored there. The fit is the censored-normal (Tobit) maximum likelihood of (ln C, s, σ)
over **every run the search made** at every rate, so the interval carries the line's own error
(its slope and its noise), not a straight line drawn between two rates' means, whose
curvature error was in no interval.

**The interval** is the profile-likelihood interval of ln C: the rates whose signed root of
the profile deviance, r(ln C) = ±√(2(ℓ̂ − ℓ_p(ln C))), lies within Student's t quantile at
``confidence`` on a df read from the runs near the edge: those whose outcome the fitted line
leaves open (fitted margin within 2σ̂ + ``BAND`` of 0), less 2, **but at most 2·rates − 1**
(rates: the rates among them). A run far past the edge says only which side it is on, so
counting it (n − 3 df) read the deviance at the true capacity against too small a quantile:
8-14 % of searches past the 95 % one, against 0-5 % with the runs near the edge
(bench/capacity_search_simulation.py's scenarios). And repeats at one rate pin that rate's
share, not the line between the rates: the root at the truth is wider the fewer the rates
near the edge, however many runs each holds (its 95 % quantile in simulated 6-repeat searches
3.5 with one such rate, 3.2 with two, 2.6 with three, 2.1 with more; 3.0 with two rates at 3
repeats). Counting every repeat (t on 10-11 df, 2.2, at 2-3 rates) covered 89.5-90.1 %;
two df a rate (t on 4 df, 2.78, at two rates) 91.8-93.2 % for a slow arm at 3 repeats;
2·rates − 1 gives 3.18 at two rates, 2.57 at three, 2.36 at four. A side where r does not
reach the quantile within the measured rates is open (0 or ∞: the line is not extrapolated),
never a narrow guess. Where the goodput curve is flat near the objective (a plateau, then a
fall) the line through the runs off the flat stretch is too steep there, and the interval
widens to the nearest rates whose own runs meet and miss the objective (``_widen``). Its level is the stated confidence *conditional on the search closing
it*: an interval left open says the runs could not place that side. Simulated in the search's
own scenarios (docs/measurements/capacity-coverage.md, "One df fewer"), closed 95 % intervals
cover the median server's capacity 94.4-100 % of the time at 3 and 6 repeats.

**The ratio** of an arm's capacity to the baseline's draws each arm's ln C from its
confidence distribution (the ln C where r equals the t quantile of a uniform draw: the
interval's own shape, ``replicates``) and takes the tails of their difference (independent
servers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special
from scipy.stats import t as student_t

from e2e.results.capacity import Capacity, MarginRun

__all__ = ["capacity_estimate", "capacity_ratio", "REPLICATES"]

REPLICATES = 2000
"""Draws of ln C from each arm's confidence distribution (fixed quantiles: no randomness)."""
_SLOPE = (math.log(0.05), math.log(1e5))     # margin per ln rate (steep: a sharp edge)
_SIGMA = (math.log(0.005), math.log(50.0))   # a run's spread of margin
_GRID = 25
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _loglik(x0: float, log_s: float, log_sigma: float, x: np.ndarray, m: np.ndarray,
            above: np.ndarray, below: np.ndarray) -> tuple[float, np.ndarray]:
    """The censored-normal log-likelihood and its gradient in (log slope, log σ)."""
    s, sigma = math.exp(log_s), math.exp(log_sigma)
    mu = s * (x0 - x)
    z = (m - mu) / sigma
    logpdf = -0.5 * z * z - _HALF_LOG_2PI
    up = special.log_ndtr(-z)     # log P(m* >= m): above
    down = special.log_ndtr(z)    # log P(m* <= m): below
    ll = np.where(above, up, np.where(below, down, logpdf - log_sigma))
    # d ll / d mu and d ll / d sigma per run (the inverse Mills ratios for the censored ones)
    ha, hb = np.exp(logpdf - up), np.exp(logpdf - down)
    d_mu = np.where(above, ha, np.where(below, -hb, z)) / sigma
    d_sigma = np.where(above, ha * z, np.where(below, -hb * z, z * z - 1.0)) / sigma
    grad = np.array([float((d_mu * mu).sum()), float((d_sigma * sigma).sum()),
                     float(d_mu.sum()) * s])  # d/d log s, d/d log sigma, d/d x0
    return float(ll.sum()), grad


BAND = 0.5
"""The line is read near the edge, where it holds: a margin beyond ±``BAND`` (a run that met
its objective with room, or missed it by far) counts only for its side, censored there. Far
from the edge a margin's terms change (a p99's log ratio gives way to a steeper goodput
term, a share saturates), and a line drawn through those runs moved the crossing: with one
term's slope 1 near the edge and another's 3.3 at twice the capacity, all runs read the edge
6 % low, its interval excluding it."""


def _near(run: MarginRun) -> MarginRun:
    """``run`` as the line reads it: beyond ±``BAND`` (or censored past it) censored there."""
    if run.censored == "above" or run.margin >= BAND:
        return MarginRun(run.rate, min(run.margin, BAND), "above")
    if run.censored == "below" or run.margin <= -BAND:
        return MarginRun(run.rate, max(run.margin, -BAND), "below")
    return run


class _Profile:
    """ℓ_p(x0) = max over (slope, σ) of the censored-normal log-likelihood, warm-started."""

    def __init__(self, runs: Sequence[MarginRun]):
        self.x = np.log([r.rate for r in runs])
        self.m = np.array([r.margin for r in runs], dtype=float)
        self.above = np.array([r.censored == "above" for r in runs])
        self.below = np.array([r.censored == "below" for r in runs])
        free = ~(self.above | self.below)
        spread = float(np.std(self.m[free])) if free.sum() >= 2 else 1.0
        self.start = np.array([0.0, math.log(max(spread, 0.05))])
        self.cache: dict[float, tuple[float, np.ndarray]] = {}

    def _fit(self, x0: float, start: np.ndarray):
        def f(p):
            ll, g = _loglik(x0, p[0], p[1], self.x, self.m, self.above, self.below)
            return -ll, -g[:2]
        return optimize.minimize(f, start, jac=True, method="L-BFGS-B", bounds=[_SLOPE, _SIGMA])

    def best(self, starts: Sequence[np.ndarray]) -> tuple[float, np.ndarray]:
        """The maximum over (x0 within the rates measured, log slope, log σ), from
        ``starts`` ((x0, log slope, log σ) each)."""
        def f(p):
            ll, g = _loglik(p[2], p[0], p[1], self.x, self.m, self.above, self.below)
            return -ll, -g
        box = [_SLOPE, _SIGMA, (float(self.x.min()), float(self.x.max()))]
        got = min((optimize.minimize(f, np.clip(s0, [b[0] for b in box], [b[1] for b in box]),
                                     jac=True, method="L-BFGS-B", bounds=box) for s0 in starts),
                  key=lambda r: r.fun)
        return -float(got.fun), np.asarray(got.x)

    def __call__(self, x0: float) -> float:
        x0 = float(x0)
        if x0 in self.cache:
            return self.cache[x0][0]
        if self.cache:  # the nearest optimum is a good start
            best = self._fit(x0, self.cache[min(self.cache, key=lambda k: abs(k - x0))][1])
        else:
            best = min((self._fit(x0, s0) for s0 in (
                self.start, np.array([math.log(5.0), 0.0]), np.array([math.log(50.0), 1.0]))),
                key=lambda r: r.fun)
        self.cache[x0] = (-float(best.fun), np.asarray(best.x))
        return -float(best.fun)

    def params(self, x0: float) -> np.ndarray:
        self(x0)
        return self.cache[float(x0)][1]


def capacity_estimate(runs: Sequence[MarginRun], *, lo: float, hi: float,
                      confidence: float = 0.95) -> Capacity:
    """The capacity from ``runs`` (every run of an arm's search), its interval and replicates
    (see the module's docstring); ``lo``/``hi``: the search's boundary, kept for the record."""
    measured = [r for r in runs if r.rate > 0 and math.isfinite(r.margin)]
    runs = [_near(r) for r in measured]
    if len(runs) < 3:
        raise ValueError("estimate needs at least 3 runs")
    meets = [r.margin >= 0 for r in runs]
    x = np.log([r.rate for r in runs])
    left, right = float(x.min()), float(x.max())  # no end is read beyond the rates measured
    if all(meets) or not any(meets):  # no edge among the runs: which side is known, no more
        rate = math.inf if all(meets) else 0.0
        reps = (math.inf if all(meets) else -math.inf,) * REPLICATES
        return Capacity(rate=rate, low=math.exp(float(x.max())) if all(meets) else 0.0,
                        high=math.inf if all(meets) else math.exp(float(x.min())),
                        confidence=confidence, lo=lo, hi=hi, replicates=reps, runs=len(runs))
    prof = _Profile(runs)
    grid = np.linspace(left, right, _GRID)
    values = np.array([prof(g) for g in grid])
    i = int(values.argmax())
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, _GRID - 1)]
    best = optimize.minimize_scalar(lambda v: -prof(v), bounds=(a, b), method="bounded",
                                    options={"xatol": 1e-4})
    xhat, top = float(best.x), -float(best.fun)
    if values[i] > top:
        xhat, top = float(grid[i]), float(values[i])
    slope, sigma = (math.exp(v) for v in prof.params(xhat))
    # the runs whose outcome the fitted line leaves open carry what the runs say of the edge
    # (a run far past it says only which side it is on): the t's df are theirs, less 2, but
    # at most two per rate among them, less one (repeats at one rate pin its share, not the
    # line between the rates: the root at the truth widens as the rates near the edge get
    # fewer; at two rates its 95 % quantile is 3.0-3.2, t on 3 df 3.18)
    near = np.abs(slope * (xhat - x)) < 2.0 * sigma + BAND
    open_, rates = int(near.sum()), len(np.unique(x[near]))
    df = max(min(open_ - 2, 2 * rates - 1), 1)

    def quantile(u):
        return student_t.ppf(u, df)

    def signed(v: float) -> float:
        return math.copysign(math.sqrt(max(2.0 * (top - prof(v)), 0.0)), xhat - v)

    def solve(target: float) -> float:
        """The ln C where the signed root (decreasing in ln C) is ``target``; ±inf beyond the
        rates measured."""
        if signed(left) < target:
            return -math.inf
        if signed(right) > target:
            return math.inf
        return optimize.brentq(lambda v: signed(v) - target, left, right, xtol=1e-4)

    tail = (1.0 - confidence) / 2.0
    q = float(quantile(1.0 - tail))
    low, high = solve(q), solve(-q)
    wide = _widen(measured, (low, high), sigma, q)
    # the confidence distribution: ln C where r is the law's quantile of evenly spaced
    # probabilities, read off the profile on a grid between the ends (monotone in ln C)
    pts = np.unique(np.concatenate([grid, [xhat]]))
    r = np.array([signed(v) for v in pts])  # decreasing in ln C
    u = (np.arange(REPLICATES) + 0.5) / REPLICATES
    t = np.asarray(quantile(u))
    order = np.argsort(-r)
    rs, xs = -r[order], pts[order]  # increasing -r, its ln C
    reps = np.interp(-t, rs, xs)
    reps = np.where(-t < rs[0], -math.inf, np.where(-t > rs[-1], math.inf, reps))
    reps = _stretch(reps, xhat, (low, high), wide)
    method = (f"censored line over all {len(runs)} runs, profile likelihood, t on {df} df "
              f"({open_} runs near the edge, at {rates} rates)")
    if wide != (low, high):
        method += ("; widened to the nearest rates whose runs meet and miss the objective: "
                   "the goodput curve is flat near it, so the line alone is too narrow")
    low, high = wide
    return Capacity(rate=math.exp(xhat), low=math.exp(low) if math.isfinite(low) else 0.0,
                    high=math.exp(high), confidence=confidence, lo=lo, hi=hi,
                    replicates=tuple(float(v) for v in np.sort(reps)), slope=slope,
                    spread=sigma, runs=len(runs), method=method)


def _widen(runs: Sequence[MarginRun], profile: tuple[float, float], sigma: float,
           q: float) -> tuple[float, float]:
    """The profile interval (ln C), widened where the goodput curve is flat near the objective.

    Per measured rate, its own runs read with the line's spread σ: *on a flat stretch* when
    none is censored or beyond ±``BAND``, their mean margin is within q·σ/√n of 0 and that is
    narrower than the band (the runs place the curve there within the band the line reads:
    where the spread is wider, as on a clean edge whose servers differ, a rate's runs alone
    say too little to keep it in); *meets* (or *misses*) when the mean is above q·σ/√n (below
    −q·σ/√n). Where a rate on a flat stretch lies outside the profile interval, the line drawn
    through the runs off it (a steep fall past a plateau) is narrower than the runs on it
    allow, and each end moves out to the nearest measured rate beyond it that its runs say
    meets (below) or misses (above), open (±inf) where none does."""
    by: dict[float, list[float]] = {}
    clean: dict[float, bool] = {}
    for r in runs:
        x = math.log(r.rate)
        by.setdefault(x, []).append(r.margin)
        clean[x] = clean.get(x, True) and not r.censored and abs(r.margin) < BAND
    half = {x: q * sigma / math.sqrt(len(m)) for x, m in by.items()}
    z = {x: sum(m) / len(m) / half[x] for x, m in by.items()}
    flat = [x for x, v in z.items() if clean[x] and abs(v) <= 1.0 and half[x] < BAND]
    low, high = profile
    if all(low <= x <= high for x in flat):
        return profile
    flat += [low, high]
    meets = [x for x, v in z.items() if v > 1.0 and x < min(flat)]
    misses = [x for x, v in z.items() if v < -1.0 and x > max(flat)]
    return (max(meets) if meets else -math.inf, min(misses) if misses else math.inf)


def _stretch(reps: np.ndarray, xhat: float, profile: tuple[float, float],
             wide: tuple[float, float]) -> np.ndarray:
    """The confidence distribution's draws, each side of ``xhat`` stretched so that the
    profile's ends land on the widened ones (beyond an end made open: ±inf)."""
    out = reps.copy()
    for end, to, side in ((profile[0], wide[0], reps < xhat), (profile[1], wide[1], reps > xhat)):
        if to == end or not math.isfinite(end):
            continue
        if not math.isfinite(to):
            beyond = side & ((reps < end) if to < 0 else (reps > end))
            out[beyond] = to
            continue
        out[side] = xhat + (reps[side] - xhat) * (to - xhat) / (end - xhat)
    return out


def _tails(values: np.ndarray, confidence: float) -> tuple[float, float]:
    ordered = np.sort(values)
    n = len(ordered)
    a = (1.0 - confidence) / 2.0
    low = ordered[max(int(math.floor(a * n)), 0)]
    high = ordered[min(int(math.ceil((1.0 - a) * n)) - 1, n - 1)]
    return float(low), float(high)


def capacity_ratio(arm: Capacity, base: Capacity, *, seed: int = 0) -> tuple[float, float, float]:
    """(C_arm / C_base, low, high) at the arms' confidence: each arm's replicates (its
    confidence distribution) paired at random, the tails of their difference in ln C (an
    infinite replicate on either side gives an infinite or zero bound)."""
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
