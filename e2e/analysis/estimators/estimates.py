"""The report's estimate of one comparison on the log scale (``LogRatio``): the model's
contrast (``e2e.analysis.estimators.model``), the paired t across blocks, or Welch's unpaired interval,
each the log of a geometric-mean ratio arm / baseline; its interval, its p-values (no change;
TOST for equivalence) and its minimal detectable effect; and the descriptive median (range).

Why a t-interval on logs rather than a bootstrap or a permutation test, with 3-10 runs per
arm: a bootstrap of medians from 3 values has at most 10 distinct resampled medians per arm
and its percentile interval is far too narrow (an A/A pair of arms is "significant" much more
often than the nominal 5 %); a permutation or rank (Mann-Whitney / Hodges-Lehmann) interval
on 3 vs 3 runs can only reach 90 % or 100 % confidence (C(6,3) = 20 arrangements), so at
95 % it can never detect anything and at 90 % it calls an A/A pair different 10 % of the
time. The t-interval uses the runs' spread directly, is exact under log-normal run
noise, and becomes wide on its own when there are few runs (t with 2-4
degrees of freedom), so it is not over-confident at 3 vs 3. Logs make the interval a ratio
(scale-free, symmetric for speed-ups and slow-downs).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy import stats as _sp

from e2e.config import equivalence_band

__all__ = ["Method", "Block", "METHOD_TEXT", "RESOLUTION_SD", "DEFAULT_POWER",
           "DEFAULT_EQUIVALENCE_PCT", "MedianRange", "median_range", "relative_range", "LogRatio",
           "median_unbiased", "mde_log", "blocked_log_ratio", "welch_log_ratio", "log_ratio"]


def _exp(x: float) -> float:
    """exp(x), inf where it overflows (a ratio of an absurd run's figures: 1e308 ms beside 10)."""
    return math.exp(x) if x < 709.0 else math.inf


@dataclass(frozen=True)
class MedianRange:
    """Median, minimum and maximum of a cell's reported runs."""

    median: float
    low: float
    high: float
    n: int



def _array(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values must be finite, got {list(values)!r}")
    return arr


def _positive(values: Sequence[float], what: str) -> np.ndarray:
    arr = _array(values, what)
    if np.any(arr <= 0):
        raise ValueError(f"{what}: a ratio needs positive values, got {list(values)!r}")
    return arr


def median_range(values: Sequence[float]) -> MedianRange:
    """Sample median (mean of the two middle values for an even count), minimum and maximum."""
    arr = _array(values, "median_range")
    return MedianRange(float(np.median(arr)), float(arr.min()), float(arr.max()), int(arr.size))


def relative_range(values: Sequence[float]) -> float:
    """Spread of a cell: (maximum - minimum) / median, as a fraction (0.05 = 5 %).

    0.0 for a single value; infinite when the median is 0 and the values differ."""
    arr = _array(values, "relative_range")
    width = float(arr.max() - arr.min())
    if width == 0.0:
        return 0.0
    med = float(np.median(arr))
    return math.inf if med == 0.0 else width / abs(med)



Method = Literal["model", "blocked", "welch"]

Block = Hashable

METHOD_TEXT: dict[str, str] = {
    "model": "model: OLS of ln y on block (round x host, or the duet) + slot + arm over every "
             "arm of the cell (+ recorded interference where it varied within blocks)",
    "blocked": "blocked: paired t on per-round log ratios",
    "welch": "unpaired: Welch t on logs",
}
RESOLUTION_SD = 0.001
"""Smallest per-run noise (log units, 0.1 %) the statistics accept: no repeatability of a whole
fresh-server run better than that is believed, so identical values never claim certainty."""

DEFAULT_POWER = 0.8
DEFAULT_EQUIVALENCE_PCT = 1.0


@dataclass(frozen=True)
class LogRatio:
    """An estimate of ln(arm / baseline), the log of the geometric-mean ratio.

    ``method``: "blocked" (paired across ``n_blocks`` complete blocks; ``dropped`` runs had no
    partner in their block) or "welch" (unpaired). ``se`` and ``df`` are the standard error and
    degrees of freedom of ``log_ratio`` after the noise floor. ``noise_sd`` is the run-to-run
    noise as the sd of the log ratio of one arm run to one baseline run (the "CV of the paired
    log ratio"; for Welch sqrt(s_arm² + s_base²)); ``raw_noise_sd`` before the floor;
    ``floored`` is true when the floor ``floor_sd`` (per run) replaced a smaller spread."""

    method: Method
    log_ratio: float
    se: float
    df: float
    noise_sd: float
    raw_noise_sd: float
    n_arm: int
    n_baseline: int
    n_blocks: int
    dropped: int
    floored: bool
    floor_sd: float
    prior_df: float = 0.0
    """Degrees of freedom borrowed from the metric's other comparisons (``moderate``)."""
    residual_df: float | None = None
    """The comparison's own degrees of freedom before moderation (None: ``df``)."""

    @property
    def ratio(self) -> float:
        return _exp(self.log_ratio)

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def method_text(self) -> str:
        return METHOD_TEXT[self.method]

    def interval(self, confidence: float) -> tuple[float, float]:
        """Two-sided t-interval for the ratio: exp(log_ratio ∓ t_{(1+c)/2, df} · se)."""
        _check_confidence(confidence)
        half = float(_sp.t.ppf(0.5 + confidence / 2.0, self.df)) * self.se
        return (_exp(self.log_ratio - half), _exp(self.log_ratio + half))

    def interval_pct(self, confidence: float) -> tuple[float, float]:
        lo, hi = self.interval(confidence)
        return ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)

    def p_value(self) -> float:
        """Two-sided p of the t-test of no change (log_ratio = 0)."""
        return float(2.0 * _sp.t.sf(abs(self.log_ratio) / self.se, self.df))

    def tost_p_value(self, equivalence_pct: float) -> float:
        """TOST (Schuirmann's two one-sided t-tests) p for |change| < ``equivalence_pct`` %:
        the larger of the two one-sided p-values against ln(1 − X) and ln(1 + X)."""
        lo, hi = _band(equivalence_pct)
        p_low = float(_sp.t.sf((self.log_ratio - lo) / self.se, self.df))
        p_high = float(_sp.t.cdf((self.log_ratio - hi) / self.se, self.df))
        return max(p_low, p_high)

    def mde_pct(self, confidence: float, power: float = DEFAULT_POWER) -> float:
        """Minimal detectable effect at these runs, in % (see ``mde_log``), from the
        median-unbiased noise (``median_unbiased``): the se scaled by sqrt(df / χ²_{df, 0.5}), so
        that a true effect equal to the printed MDE is found with about ``power`` (with the raw
        s, whose median lies below σ at few df, it was found less often)."""
        se = self.se * median_unbiased(self.df)
        return (_exp(mde_log(se, self.df, confidence=confidence, power=power)) - 1.0) * 100.0


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _band(equivalence_pct: float) -> tuple[float, float]:
    equivalence_band(equivalence_pct)  # the config's rule, which refused it at load: (0, 100)
    return (math.log(1.0 - equivalence_pct / 100.0), math.log(1.0 + equivalence_pct / 100.0))


def median_unbiased(df: float) -> float:
    """sqrt(df / χ²_{df, 0.5}): the factor that makes a sample sd on ``df`` degrees of freedom
    median-unbiased for σ (s²·df/σ² is χ²_df under normal noise; its median is below df)."""
    if not df > 0 or math.isinf(df):
        return 1.0
    return math.sqrt(df / float(_sp.chi2.ppf(0.5, df)))


def mde_log(se: float, df: float, *, confidence: float = 0.95, power: float = DEFAULT_POWER) -> float:
    """Minimal detectable effect on the log scale of a two-sided t-test:
    (t_{(1+confidence)/2, df} + t_{power, df}) × se (the usual normal-approximation power
    formula with t quantiles; exact power of the noncentral t differs by a few % at 2 df)."""
    _check_confidence(confidence)
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    return float(_sp.t.ppf(0.5 + confidence / 2.0, df) + _sp.t.ppf(power, df)) * se


def _logs(values: Sequence[float], what: str) -> np.ndarray:
    return np.log(_positive(values, what))


def blocked_log_ratio(
    arm: Mapping[Block, float],
    baseline: Mapping[Block, float],
    *,
    floor_sd: float = RESOLUTION_SD,
) -> LogRatio | None:
    """Blocked (paired) estimate: d_b = ln arm_b − ln baseline_b for every block b holding both
    arms; mean of d_b, se = s_d / sqrt(n), df = n − 1 (one-sample t on the paired log ratios).

    Blocks lacking an arm are dropped (for two arms this is exactly the least-squares estimate
    of the linear model with fixed block effects; ``dropped`` counts the runs left out).
    The paired noise s_d is floored at sqrt(2) × ``floor_sd`` (two runs' worth of the per-run
    floor). None with fewer than 2 complete blocks (no spread to estimate noise from)."""
    common = [b for b in arm if b in baseline]
    if len(common) < 2:
        return None
    d = _logs([arm[b] for b in common], "arm") - _logs([baseline[b] for b in common], "baseline")
    n = d.size
    raw = float(d.std(ddof=1))
    floor = math.sqrt(2.0) * floor_sd
    sd = max(raw, floor)
    return LogRatio(method="blocked", log_ratio=float(d.mean()), se=sd / math.sqrt(n), df=float(n - 1),
                    noise_sd=sd, raw_noise_sd=raw, n_arm=len(arm), n_baseline=len(baseline),
                    n_blocks=n, dropped=len(arm) + len(baseline) - 2 * n, floored=raw < floor,
                    floor_sd=floor_sd)


def welch_log_ratio(
    arm: Sequence[float], baseline: Sequence[float], *, floor_sd: float = RESOLUTION_SD
) -> LogRatio | None:
    """Unpaired estimate: mean(ln arm) − mean(ln baseline) with the Welch standard error
    sqrt(s_a²/n_a + s_b²/n_b) and Welch–Satterthwaite degrees of freedom; each side's sd is
    floored at ``floor_sd``. None when a side has fewer than 2 runs."""
    a = _logs(arm, "arm")
    b = _logs(baseline, "baseline")
    if a.size < 2 or b.size < 2:
        return None
    ra, rb = float(a.std(ddof=1)), float(b.std(ddof=1))
    sa, sb = max(ra, floor_sd), max(rb, floor_sd)
    va, vb = sa**2 / a.size, sb**2 / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return LogRatio(method="welch", log_ratio=float(a.mean() - b.mean()), se=math.sqrt(va + vb),
                    df=float(df), noise_sd=math.hypot(sa, sb), raw_noise_sd=math.hypot(ra, rb),
                    n_arm=int(a.size), n_baseline=int(b.size), n_blocks=0, dropped=0,
                    floored=ra < floor_sd or rb < floor_sd, floor_sd=floor_sd)


def log_ratio(
    arm: Sequence[tuple[Block | None, float]],
    baseline: Sequence[tuple[Block | None, float]],
    *,
    floor_sd: float = RESOLUTION_SD,
) -> LogRatio | None:
    """The report's estimate for (block, value) runs: blocked when at least 2 blocks hold both
    arms (``blocked_log_ratio``), else unpaired Welch on every run (``welch_log_ratio``).

    A block of None means the run is not blocked (added by hand). A block holding more than one
    run of a side is not a pairing the sweep makes: those runs are averaged on the log scale
    (geometric mean) before pairing."""
    def by_block(runs: Sequence[tuple[Block | None, float]], what: str) -> dict[Block, float]:
        groups: dict[Block, list[float]] = {}
        for block, value in runs:
            if block is not None:
                groups.setdefault(block, []).append(value)
        return {b: float(np.exp(_logs(v, what).mean())) for b, v in groups.items()}

    a_blocks, b_blocks = by_block(arm, "arm"), by_block(baseline, "baseline")
    common = {b for b in a_blocks if b in b_blocks}
    if len(common) >= 2:
        est = blocked_log_ratio(a_blocks, b_blocks, floor_sd=floor_sd)
        if est is not None:
            unpaired = sum(1 for blk, _ in (*arm, *baseline) if blk not in common)
            return replace(est, n_arm=len(arm), n_baseline=len(baseline), dropped=unpaired)
    return welch_log_ratio([v for _, v in arm], [v for _, v in baseline], floor_sd=floor_sd)
