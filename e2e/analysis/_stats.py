"""Statistics of a report: pure functions on per-run values, no I/O.

Each function's docstring names its method. Two families live here:

**The report's comparison (``log_ratio``, ``call``; see docs/statistics.md).** An arm is
compared with the baseline of the same cell on the natural log scale, so every estimate is a
*geometric-mean ratio* arm / baseline and the point estimate and its interval estimate the same
quantity:

* **blocked (paired)**, the default whenever runs carry a block (the sweep's round, and the host
  when runs ran on several hosts): per block the log ratio ln(arm) − ln(baseline) of the two
  runs of that block; a one-sample t-interval of those ratios across blocks (n_blocks − 1
  degrees of freedom). Drift between rounds (thermal, background load) lands on both arms of a
  round alike and cancels. A block that lacks one of the two arms is dropped: for two arms that
  *is* the least-squares fit of the linear model ln y = block + arm (fixed block effects), in
  which a block with one observation only determines its own block effect;
* **unpaired Welch** for runs without partners (fewer than 2 complete blocks): the Welch
  (unequal-variance) two-sample t-interval on logs, Welch–Satterthwaite degrees of freedom;
* **noise floor**: a per-run noise below ``floor_sd`` (log units) is raised to it, so identical
  values never give a zero-width interval; the estimate says so (``floored``);
* **minimal detectable effect** at the runs made: (t_{1−α/2,df} + t_{power,df}) × se, the
  smallest true change a two-sided t-test at the report's confidence finds with 80 % power;
* **four verdicts** (``call``): a difference ("faster"/"slower" for times, "higher"/"lower"
  otherwise) when the (1 − α) interval excludes no change and the point is at least the minimum
  effect; "equivalent" when both one-sided tests of the equivalence band ±X % pass at α (TOST:
  the (1 − 2α) interval lies inside the band); otherwise "inconclusive" (with the MDE);
* **multiplicity**: ``holm`` adjusts the p-values of a report's family of comparisons.

**Adaptive repeats** (``spent_alpha``, ``look_at``; ``e2e.pipeline.sweep_until_settled``): after
each whole round the primary comparisons are looked at with the alpha a Lan–DeMets spending
function gives that look, split over the comparisons; the result is a ``Settlement``.

**The older unpaired comparison (``compare_runs``, ``verdict_for``)**, which the nightly judge
uses, is kept unchanged:

* **point estimate**: the ratio of the medians of the reported runs (so the % change agrees
  with the two ``median (range)`` cells a reader sees side by side);
* **interval**: a Welch (unequal-variance) two-sample t-interval on the natural logs of the
  per-run values, i.e. on log(geometric-mean ratio), back-transformed to a ratio; default
  confidence 95 %;
* **verdict**: a change is called only when that interval excludes "no change", the point
  estimate lies on the same side, and the point estimate is at least ``min_effect_pct`` in
  size (a documented minimum practical effect); otherwise it is "within noise".

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

__all__ = [
    "INTERVAL_METHOD",
    "Verdict",
    "MedianRange",
    "RatioEstimate",
    "median_range",
    "relative_range",
    "welch_log_ratio_interval",
    "ratio_of_medians",
    "compare_runs",
    "verdict_for",
    "Method",
    "Call",
    "METHOD_TEXT",
    "RESOLUTION_SD",
    "POOLED_FLOOR_FRACTION",
    "DEFAULT_POWER",
    "DEFAULT_EQUIVALENCE_PCT",
    "LogRatio",
    "mde_log",
    "blocked_log_ratio",
    "welch_log_ratio",
    "log_ratio",
    "pooled_noise",
    "noise_floor",
    "call",
    "is_difference",
    "holm",
    "runs_needed",
    "Settlement",
    "median_unbiased",
    "ModelRun",
]

INTERVAL_METHOD = "Welch t-interval on log values (ratio of geometric means)"

Verdict = Literal["faster", "slower", "within noise", "too few runs"]


@dataclass(frozen=True)
class MedianRange:
    """Median, minimum and maximum of a cell's reported runs."""

    median: float
    low: float
    high: float
    n: int


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
        return (math.exp(d), math.exp(d))
    df = se2**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(_sp.t.ppf(0.5 + confidence / 2.0, df)) * math.sqrt(se2)
    return (math.exp(d - half), math.exp(d + half))


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


# ---------------------------------------------------------------------------------------------
# The report's comparison: blocked (paired) or Welch on logs, noise floor, MDE, four verdicts.
# ---------------------------------------------------------------------------------------------

Method = Literal["model", "blocked", "welch"]
Call = Literal["faster", "slower", "higher", "lower", "equivalent", "inconclusive", "too few runs"]
Block = Hashable

METHOD_TEXT: dict[str, str] = {
    "model": "model: OLS of ln y on round (x host) + slot + arm over every arm of the cell",
    "blocked": "blocked: paired t on per-round log ratios",
    "welch": "unpaired: Welch t on logs",
}
RESOLUTION_SD = 0.001
"""Smallest per-run noise (log units, 0.1 %) the statistics accept: no repeatability of a whole
fresh-server run better than that is believed, so identical values never claim certainty."""
POOLED_FLOOR_FRACTION = 0.5
"""A comparison without spread (below ``RESOLUTION_SD``) takes this fraction of the noise pooled
across the same metric's other comparisons as its noise (see ``pooled_noise``)."""
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
        return math.exp(self.log_ratio)

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
        return (math.exp(self.log_ratio - half), math.exp(self.log_ratio + half))

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
        return (math.exp(mde_log(se, self.df, confidence=confidence, power=power)) - 1.0) * 100.0


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _band(equivalence_pct: float) -> tuple[float, float]:
    if not 0.0 < equivalence_pct < 100.0:
        raise ValueError(f"equivalence_pct must be in (0, 100), got {equivalence_pct}")
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
    return (float(_sp.t.ppf(0.5 + confidence / 2.0, df)) + float(_sp.t.ppf(power, df))) * se


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


def pooled_noise(estimates: Sequence[LogRatio]) -> tuple[float, float] | None:
    """Pooled run-to-run noise of several comparisons: sqrt(Σ df_i · s_i² / Σ df_i) over their
    raw (unfloored) ``noise_sd`` as the sd of one run's log ratio, and Σ df_i; None when no
    estimate has a nonzero spread. Per-run noise is that value / sqrt(2)."""
    num = den = 0.0
    for e in estimates:
        if e.raw_noise_sd > 0.0:
            num += e.df * e.raw_noise_sd**2
            den += e.df
    if den == 0.0:
        return None
    return (math.sqrt(num / den), den)


def noise_floor(pooled: tuple[float, float] | None) -> tuple[float, str]:
    """Per-run noise floor (log units) and where it comes from: the larger of
    ``RESOLUTION_SD`` (0.1 %) and ``POOLED_FLOOR_FRACTION`` × the pooled per-run noise of the
    same metric across cells (``pooled_noise`` / sqrt(2))."""
    if pooled is not None:
        pooled_run = POOLED_FLOOR_FRACTION * pooled[0] / math.sqrt(2.0)
        if pooled_run > RESOLUTION_SD:
            return pooled_run, (f"half the noise pooled across the metric's comparisons "
                                f"({pooled[0] / math.sqrt(2.0) * 100:.2g} % per run)")
    return RESOLUTION_SD, f"the {RESOLUTION_SD * 100:g} % minimum per-run noise"


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


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order: sort ascending,
    p̃_(i) = max_{j<=i} min(1, (m − j + 1) · p_(j)). Controls the family-wise error rate."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return [float(x) for x in out]


def runs_needed(
    noise_sd: float,
    target_effect_pct: float,
    *,
    method: Method = "blocked",
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
    max_runs: int = 1000,
    arms: int = 2,
    prior_df: float = 0.0,
    slot: bool = False,
    noise_df: float | None = None,
) -> int | None:
    """Fewest reported runs per arm whose MDE (``mde_log``) is at most ``target_effect_pct``.

    ``noise_sd`` is the sd of the log ratio of one arm run to one baseline run (a
    ``LogRatio.noise_sd``, e.g. from an A/A arm of a calibration); se = s/sqrt(n) in every
    design. Degrees of freedom as the test uses them: blocked (paired t) n − 1; model (``cell_model``
    over ``arms`` arms in n complete rounds) (arms − 1)(n − 1), one less with the slot term;
    Welch (equal noise on both sides) 2n − 2; plus ``prior_df`` borrowed by moderation.
    ``noise_df``: the df the noise was measured on; the noise is then made median-unbiased as
    in ``LogRatio.mde_pct`` (so the noise table's MDE and its runs needed agree). None when even
    ``max_runs`` is not enough."""
    if noise_sd <= 0:
        raise ValueError("noise_sd must be > 0 (floor it; see noise_floor)")
    if target_effect_pct <= 0:
        raise ValueError("target_effect_pct must be > 0")
    target = math.log(1.0 + target_effect_pct / 100.0)
    if noise_df is not None:
        noise_sd *= median_unbiased(noise_df)
    for n in range(2, max_runs + 1):
        df = design_df(n, method=method, arms=arms, slot=slot) + prior_df
        if df <= 0:
            continue
        if mde_log(noise_sd / math.sqrt(n), df, confidence=confidence, power=power) <= target:
            return n
    return None


def design_df(rounds: int, *, method: Method = "blocked", arms: int = 2, slot: bool = False) -> float:
    """Residual degrees of freedom of a comparison at ``rounds`` complete rounds (see
    ``runs_needed``)."""
    if method == "model":
        return float((arms - 1) * (rounds - 1) - (1 if slot else 0))
    if method == "blocked":
        return float(rounds - 1)
    return float(2 * rounds - 2)


def detectable_effect(noise_sd: float, rounds: int, *, method: Method = "blocked",
                      confidence: float = 0.95, power: float = DEFAULT_POWER, arms: int = 2,
                      prior_df: float = 0.0, slot: bool = False,
                      noise_df: float | None = None) -> float | None:
    """The effect (in %) a design detects with ``power``: the MDE at ``rounds`` complete rounds
    with the df of ``design_df`` (+ ``prior_df``); ``noise_df`` as in ``runs_needed``. None
    without degrees of freedom."""
    if noise_df is not None:
        noise_sd *= median_unbiased(noise_df)
    df = design_df(rounds, method=method, arms=arms, slot=slot) + prior_df
    if df <= 0:
        return None
    return (math.exp(mde_log(noise_sd / math.sqrt(rounds), df, confidence=confidence,
                             power=power)) - 1.0) * 100.0


# ---------------------------------------------------------------------------------------------
# Adaptive repeats: alpha spending over looks after whole rounds.
# ---------------------------------------------------------------------------------------------

SPENDING_RHO = 2.0
Decision = Literal["difference", "equivalent", "open"]


@dataclass(frozen=True)
class Settlement:
    """What a look of ``--until-settled`` decided after a round: ``decisions`` per comparison (in input order),
    ``look_confidence`` the per-look confidence 1 − α_k used, ``settled`` every comparison
    decided, ``stop`` settled or ``max_rounds`` reached."""

    rounds: int
    look_confidence: float
    decisions: tuple[Decision, ...]
    settled: bool
    stop: bool


# ---------------------------------------------------------------------------------------------
# One model per cell: ln y = block + slot + arm over every arm, the residual variance pooled.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelRun:
    """One reported run of a cell for ``cell_model``: its arm, block (round, host), position
    in its block (``slot``, 0 = first; None when unknown) and value (> 0)."""

    arm: str
    block: Block
    slot: float | None
    value: float


@dataclass(frozen=True)
class CellFit:
    """``cell_model``'s result: per arm (not the baseline) its contrast with the baseline,
    the residual variance per run (``s2``, log units) on ``df`` degrees of freedom and whether
    the slot term was in the model."""

    estimates: dict[str, LogRatio]
    s2: float
    df: float
    slot: bool
    arms: int
    runs: int


MIN_MODEL_DF = 2
"""The slot term is kept only when the model still has this many residual degrees of freedom."""


def cell_model(runs: Sequence[ModelRun], baseline: str, *,
               floor_sd: float = RESOLUTION_SD) -> CellFit | None:
    """Fit ln y = block + slot + arm by ordinary least squares (statsmodels ``OLS``) over
    every reported run of every arm of one cell (Jones & Kenward's model of a crossover with
    fixed period effects): block = round (× host) as a factor, slot = the run's position in its
    block as a linear term (a linear drift *within* a round; kept only when every run has a slot,
    it varies within blocks, and the model keeps ``MIN_MODEL_DF`` residual df), arm as a factor
    with the baseline as reference. Each arm's coefficient is its contrast ln(arm / baseline);
    its standard error uses the residual variance pooled over all arms and blocks (df = n − p).

    The per-run noise is floored at ``floor_sd`` (the residual sd, so identical values never give
    a zero-width interval). None when the model cannot be fitted: fewer than 2 arms, a
    rank-deficient design (an arm not estimable), or no residual degrees of freedom; the caller
    then falls back to the paired t or Welch (``log_ratio``)."""
    import pandas as pd
    import statsmodels.api as sm

    runs = [r for r in runs if r.block is not None]
    arms = sorted({r.arm for r in runs}, key=lambda a: (a != baseline, a))
    if len(arms) < 2 or arms[0] != baseline:
        return None
    y = _logs([r.value for r in runs], "cell_model")
    blocks = pd.Categorical([repr(r.block) for r in runs])
    arm_cat = pd.Categorical([r.arm for r in runs], categories=arms)
    base = pd.concat([pd.get_dummies(blocks, drop_first=False, dtype=float),
                      pd.get_dummies(arm_cat, dtype=float).iloc[:, 1:]], axis=1)
    base.columns = [f"b{i}" for i in range(len(blocks.categories))] + [f"a:{a}" for a in arms[1:]]
    slot_ok = all(r.slot is not None for r in runs)
    if slot_ok:
        slots = np.asarray([float(r.slot) for r in runs])
        within = pd.Series(slots).groupby(np.asarray(blocks.codes)).transform(lambda s: s - s.mean())
        slot_ok = bool(np.any(np.abs(within.to_numpy()) > 0))

    def fit(with_slot: bool):
        x = base.copy()
        if with_slot:
            x["slot"] = slots
        mat = x.to_numpy()
        if np.linalg.matrix_rank(mat) < mat.shape[1] or mat.shape[0] - mat.shape[1] < 1:
            return None, None
        return sm.OLS(y, mat).fit(), list(x.columns)

    res = cols = None
    used_slot = False
    if slot_ok:
        res, cols = fit(True)
        used_slot = res is not None and res.df_resid >= MIN_MODEL_DF
        if not used_slot:
            res = None
    if res is None:
        res, cols = fit(False)
    if res is None:
        return None
    df = float(res.df_resid)
    raw_s2 = float(res.ssr) / df
    raw = math.sqrt(max(raw_s2, 0.0))
    s = max(raw, floor_sd)
    counts = {a: sum(1 for r in runs if r.arm == a) for a in arms}
    block_sets = {a: {r.block for r in runs if r.arm == a} for a in arms}
    out: dict[str, LogRatio] = {}
    for a in arms[1:]:
        j = cols.index(f"a:{a}")
        c = float(res.normalized_cov_params[j, j])  # se² = c · s²
        shared = block_sets[a] & block_sets[baseline]
        common = len(shared)
        # with two arms a run in a block without the other arm only fixes its own block effect
        lone = 0 if len(arms) > 2 else sum(1 for r in runs if r.block not in shared)
        out[a] = LogRatio(method="model", log_ratio=float(res.params[j]), se=math.sqrt(c) * s,
                          df=df, noise_sd=math.sqrt(2.0) * s, raw_noise_sd=math.sqrt(2.0) * raw,
                          n_arm=counts[a], n_baseline=counts[baseline], n_blocks=common,
                          dropped=lone, floored=raw < floor_sd, floor_sd=floor_sd,
                          residual_df=df)
    return CellFit(estimates=out, s2=raw_s2, df=df, slot=bool(used_slot), arms=len(arms), runs=len(runs))


# ---------------------------------------------------------------------------------------------
# Shared noise: empirical-Bayes moderation of a variance toward the metric's other ones.
# ---------------------------------------------------------------------------------------------

MIN_PRIOR_UNITS = 3
"""Fewer independent variance estimates of a metric than this: no prior (nothing is borrowed)."""


@dataclass(frozen=True)
class Prior:
    """A scaled inverse-χ² prior for a metric's per-run variance: ``s2`` on ``df`` degrees of
    freedom (df 0: no prior), estimated from ``units`` variances."""

    s2: float
    df: float
    units: int


def _trigamma_inverse(x: float) -> float:
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
        d0 = 2.0 * _trigamma_inverse(evar)
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


# ---------------------------------------------------------------------------------------------
# Sequential looks: a spending function on the information fraction, looks that persist.
# ---------------------------------------------------------------------------------------------

Spending = Literal["pocock", "obrien-fleming"]
DEFAULT_SPENDING: Spending = "pocock"


def spent_alpha(fraction: float, *, confidence: float = 0.95,
                spending: Spending = DEFAULT_SPENDING) -> float:
    """Cumulative α spent at information fraction ``fraction`` (reported rounds / planned
    maximum) by Lan & DeMets' (1983) spending functions: Pocock-type α·ln(1 + (e − 1)·t), which
    spends early (so a first look can settle a large effect), or O'Brien–Fleming-type
    2 − 2Φ(z_{1−α/2} / √t), which spends almost nothing early."""
    _check_confidence(confidence)
    alpha = 1.0 - confidence
    t = min(max(fraction, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "obrien-fleming":
        return float(2.0 - 2.0 * _sp.norm.cdf(_sp.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))
    raise ValueError(f"unknown spending function {spending!r}")


@dataclass(frozen=True)
class Look:
    """One look of ``--until-settled``: after ``rounds`` reported rounds of at most
    ``max_rounds``, ``alpha`` was spent (``cumulative`` in all so far), so each comparison was
    read at ``confidence`` = 1 − alpha / the open comparisons (Bonferroni within the look)."""

    rounds: int
    max_rounds: int
    alpha: float
    cumulative: float
    confidence: float
    decisions: tuple[Decision, ...]
    stop: bool


def look_at(estimates: Sequence[LogRatio | None], *, rounds: int, max_rounds: int,
            spent_before: float = 0.0, min_rounds: int = 3, confidence: float = 0.95,
            min_effect_pct: float = 1.0, equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT,
            spending: Spending = DEFAULT_SPENDING) -> Look:
    """One look at the primary, non-A/A comparisons (the stopping set). The α of this look is
    what the spending function allows at t = rounds / max_rounds beyond ``spent_before`` (the
    looks already taken, e.g. by an earlier invocation, from ``looks.json``); it is split evenly
    (Bonferroni) over the comparisons in the set, so over all looks and comparisons the chance
    of any false call is at most α = 1 − confidence (union bound: conservative whatever the
    looks' correlation). A comparison is a "difference" when its (1 − α_k / m) interval excludes
    0 and the change is at least the minimum effect, "equivalent" when TOST passes at α_k / m,
    else "open". Stop when all are decided or ``max_rounds`` is reached. Before ``min_rounds``
    nothing is spent."""
    if not 2 <= min_rounds <= max_rounds:
        raise ValueError(f"need 2 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}")
    m = max(len(estimates), 1)
    alpha_k = 0.0
    if rounds >= min_rounds:
        alpha_k = max(0.0, spent_alpha(rounds / max_rounds, confidence=confidence,
                                       spending=spending) - spent_before)
    per = alpha_k / m
    decisions: list[Decision] = []
    for est in estimates:
        if est is None or per <= 0:
            decisions.append("open")
            continue
        v = call(est, time_metric=True, confidence=1.0 - per, min_effect_pct=min_effect_pct,
                 equivalence_pct=equivalence_pct)
        decisions.append("difference" if is_difference(v) else "equivalent" if v == "equivalent" else "open")
    done = bool(decisions) and all(d != "open" for d in decisions)
    return Look(rounds=rounds, max_rounds=max_rounds, alpha=alpha_k,
                cumulative=spent_before + alpha_k, confidence=1.0 - per if per > 0 else confidence,
                decisions=tuple(decisions), stop=done or rounds >= max_rounds)
