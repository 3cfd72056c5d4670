"""Judgement of one night against a baseline night: pure functions, no I/O. The records it reads
and makes (``Baseline``, ``RatioHistory``, ``CellVerdict``, ``Judgement``) are ``e2e.results``'.

A *night cell* is one metric of one (arm, concurrency, spec mode) of one night, with its
per-run values (the reported runs: valid, repeat >= report_from_run). Tonight's cell is
compared with the baseline night's cell of the same key; the rules are:

* **load metrics** (``NIGHTLY_METRICS``) with a threshold for their spec mode:
  ``e2e.analysis.estimators.median_ratio.compare_runs(tonight, baseline)`` (ratio of medians; Welch t-interval on log
  values at the configured confidence), then ``e2e.analysis.estimators.median_ratio.verdict_for`` with
  ``min_effect_pct = threshold``: **regressed** when the interval excludes 1 on the worse
  side, the point estimate is on that side and at least the threshold in size (worse:
  higher for latencies and ms per verify step, lower for throughput and acceptance);
  **improved** the same on the better side; otherwise **noise**. Fewer than 2 runs on a
  side: **too few runs**. Metrics without a threshold are recorded, **not judged**.
* **the headline** (``e2e.analysis.sweep.headline_metric``: ms per verify step with the speculator,
  mean TPOT at concurrency 1, median TPOT above; ``headline`` in the thresholds table) is
  judged from the client's TPOT, unless the rules say ``verify_step_from = "server"`` or a
  run of the cell (tonight's or the baseline's) has a ``burst_share`` above
  ``burst_share_max``: then its server-built twin (``e2e.analysis.sweep.server_twin``: the server's
  mean TPOT, or its TPOT x acceptance length) is judged with that threshold, and the verdict
  says why.
* **GSM8K strict-match**, per document: tonight's verdicts (the arm's first server) against
  the baseline night's, joined on ``doc_id`` (same prompts); b = documents right only in the
  baseline night, c = right only tonight; exact McNemar test on the b + c discordant pairs
  (``e2e.analysis.outputs.gsm8k.mcnemar_exact``) and the accuracy change (c − b) / n with
  Newcombe's paired score interval (``paired_change_interval``). **regressed** when p < ``gsm8k_alpha``
  and the drop is at least ``gsm8k_min_drop_pp``; **improved** the same upwards; else
  **noise**. Verdict files that cannot be read: **no samples**.
* **a cell relative to the reference** (``[nightly] reference``: tonight's arm ÷ the pinned
  reference, both measured tonight) is judged against its ratio's **history**
  (``e2e.results.RatioHistory``, chosen by ``e2e.analysis.nightly.ratio_history``: the first
  ``history_nights`` nights since the config's first night, a pinned baseline night or a
  confirmed improvement; full, it is the level every later night is judged against). With
  fewer than ``MIN_HISTORY_NIGHTS`` nights in it: **no baseline** (the night builds it).
  Otherwise ``history_fit``: tonight's mean log ratio against the mean of the history nights'
  means, the nights a random effect, the prediction variance of a new night's mean on n − 1
  df (``HistoryFit.var``). The night looks after its first rounds and, unresolved, again after
  more (``night_look``: a one-sided group-sequential test per side, the night's ``alpha``
  split over its judged relative cells, Pocock-type spending at the information reached).
  **regressed** when the look's p of no change on the worse side is under its level and the
  change is at least half the threshold, or when tonight and the night before each *look
  changed* (``looks_changed``: half the threshold, p under ``SUSPECT_LEVEL``); **improved**
  the same on the better side; else **noise** when the interval's worse end (the night's
  repeated interval at ``confidence``) is within the threshold ("no change beyond X %"), or
  **undecided** (X past the threshold), marked ``more`` while the night has looks left. A
  regression called on an earlier night stays **regressed** every night until it has
  returned: two nights in a row whose interval lies under half the threshold (X at most half
  of it, the smallest change a night calls), or a baseline night is pinned (hysteresis: a
  level still up, or a drift still growing, is not let go by a night that merely shows no
  change beyond the threshold). Such a night whose change is under half the threshold but
  whose interval reaches past it measures more while it has looks left.
* a load cell called **regressed** or **improved** whose median run was measured while other
  processes took at least ``[nightly] interference_max`` cores (default 0.25, where a run
  warns; ``NightCell.interference``, from each run's ``host_noise``) is **undecided** instead
  (``CellVerdict.withheld`` names the call), the interference named: on a busy host one night
  of one build was called −22.6 % so (docs/explanation/statistics.md). Interference stops a
  new call, never lifts a standing one: a relative cell regressed since an earlier night stays
  **regressed** on a busy night whatever the night shows.
* no baseline night: **no baseline**; a cell the baseline lacks: **new cell**; a planned
  cell tonight lacks (every run invalid): **missing**.

Change points over each absolute cell's history (``night_changes``) are added with
``judgement_with_changes``. The night is **regression** (exit 1) when a cell regressed or a
confirmed change point made a cell worse (and still holds tonight); else **incomplete**
(exit 2) when a judged cell is missing, has too few runs or no samples, or a run was given up;
else **blind** (exit 4) when a judged cell ended undecided at its last look on
``BLIND_NIGHTS`` nights in a row (``CellVerdict.undecided_nights``: the earlier nights counted
from the stored verdicts, ``e2e.analysis.nightly.undecided_nights``; nights measured beside other work
skipped); else **undecided** (exit 3) when a judged cell is undecided (its interval past the
threshold at its last look, or a call withheld on a busy night) or has nothing to be judged
against yet (no baseline, new cell); else **pass** (exit 0): every judged cell resolved. Only
passing nights become the default baseline (and, before one has passed, a night undecided only
for want of one: ``select_baseline``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import f as f_dist, norm, t as student_t

from e2e.analysis.estimators.median_ratio import RatioEstimate, compare_runs, verdict_for
from e2e.analysis.estimators.sequential import boundaries, spending_at
from e2e.analysis.outputs.gsm8k import compare_verdicts
from e2e.analysis.sweep.headline import BURST_SHARE, burst_affected, headline_metric, server_twin
from e2e.analysis.nightly.metrics import (DEFAULT_NIGHT_ALPHA, judged_threshold,
                                           nightly_metric as load_metric)
from e2e.results import is_relative
from e2e.errors import ResultsError
from e2e.results.records import INTERFERENCE_SHARE, WARN_SHARE
from e2e.results import (Baseline, CellKey, CellVerdict, ChangePoint, Judgement, Looks, NightCell,
                         NightStatus, RatioHistory, VerdictName)
from e2e.results.gsm8k import SampleVerdict


__all__ = ["Rules", "judge_cell", "judge_night", "night_status", "judgement_with_changes",
           "judgement_with_outputs", "paired_change_interval", "Samples", "HistoryFit",
           "history_fit", "history_interval", "within", "night_look", "MIN_HISTORY_NIGHTS",
           "SUSPECT_LEVEL", "looks_changed", "BLIND_NIGHTS", "UNJUDGED", "measured_busy",
           "busy_spread", "BUSY_SPREAD", "first_look"]

_BLOCKING: frozenset[str] = frozenset({"too few runs", "missing", "no samples"})
UNJUDGED: frozenset[str] = frozenset({"no baseline", "new cell"})
"""Verdicts of a judged cell with nothing to be judged against yet: the night resolved nothing
for it (undecided, exit 3)."""
MIN_HISTORY_NIGHTS = 3
"""Earlier nights of a relative cell before its history, not one night, is judged against."""
SUSPECT_LEVEL = 0.03
"""A night *looks changed* when its change on the worse side is at least half the threshold
and its one-sided p of no change against the history is under this level. Such a night is
held out of a history still being built, and two such nights in a row are a regression
(each alone at most 3 % of unchanged nights, and only with a change of half the threshold): a
step that one night's level does not reach is called the next night instead of joining the
history. At 0.01 a +5 % step under the embedded 7 % threshold went uncalled for three nights
in 13.8 % of series; at 0.03 in 8.8 %, for half a point more series with a false call
(docs/measurements/nightly-series.md, "At scale, and the two-night rule's level")."""

BLIND_NIGHTS = 3
"""Nights in a row a judged cell ends undecided at its last look before the night is *blind*
(exit 4): the history it is judged against no longer resolves its threshold, and more nights
of the same will not (docs/how-to/nightly.md, "What a release gate reads")."""

BUSY_SPREAD = 3.0
"""A night whose duets' variance (ln scale) is at least this many times the history nights'
pooled within-night variance, with an F test's one-sided p under ``BUSY_LEVEL``, is *busy*
(``busy_spread``): its sd at least √3 ≈ 1.7 times the usual, where three times every noise
part makes it nine times the variance; a quiet night of 8 duets reaches three times the
variance with p about 0.003, so the F test at 0.001 decides the few nights and the ratio the
many duets."""
BUSY_LEVEL = 0.001

# GSM8K verdicts per arm folder (a cell's run_dirs entry, relative to the results folder)
Samples = Mapping[str, Sequence[SampleVerdict]]


@dataclass(frozen=True)
class Rules:
    """Judging settings: thresholds in % per (spec mode, load metric), the interval's
    confidence, where ms per verify step comes from, and the GSM8K test's level and smallest
    drop (percentage points)."""

    thresholds: dict[str, dict[str, float]]
    confidence: float = 0.95
    verify_step_from: str = "client"
    burst_share_max: float = WARN_SHARE
    gsm8k_alpha: float = 0.05
    gsm8k_min_drop_pp: float = 2.0
    interference_max: float = INTERFERENCE_SHARE
    reference: str | None = None
    """With a reference arm (``[nightly] reference``) only the relative cells (arm ÷
    reference, measured the same night) are judged; the absolute ones are recorded."""
    alpha: float = DEFAULT_NIGHT_ALPHA
    """A night's chance of a false regression over its judged relative cells together."""
    looks: Looks | None = None
    """The night's looks at its relative cells (None: one, at the rounds it has)."""
    cells: int = 1
    """Judged relative cells tonight: each is called at ``alpha / cells``."""

    def threshold(self, key: CellKey) -> float | None:
        if key.kind == "gsm8k":
            return self.gsm8k_min_drop_pp
        if self.reference is not None and not is_relative(key.arm):
            return None
        return judged_threshold(self.thresholds, key.spec_mode, key.metric, key.concurrency)

    def threshold_or_headline(self, key: CellKey) -> float | None:
        """``threshold``, or for the server-built twin of a cell's headline (the metric a
        headline threshold judges when the headline is built from the server's TPOT) the
        headline's."""
        own = self.threshold(key)
        if own is not None or key.kind != "load":
            return own
        head = dataclasses.replace(key, metric=headline_metric(key.concurrency, key.spec_mode))
        return self.threshold(head) if server_twin(head.metric) == key.metric else None

    @classmethod
    def from_settings(cls, settings, looks: Looks | None = None) -> Rules:
        """The rules of a ``NightlySettings`` (the ``[nightly]`` table) and the night's
        ``looks`` (``NightlyConfig.looks``)."""
        return cls(thresholds={k: dict(v) for k, v in settings.thresholds.items()},
                   confidence=settings.confidence, verify_step_from=settings.verify_step_from,
                   burst_share_max=settings.burst_share_max,
                   interference_max=settings.interference_max,
                   gsm8k_alpha=settings.gsm8k.alpha, gsm8k_min_drop_pp=settings.gsm8k.min_drop_pp,
                   reference=settings.reference, alpha=settings.alpha, looks=looks)


def _judge_load(key: CellKey, now: NightCell, base: NightCell, threshold: float,
                rules: Rules) -> CellVerdict:
    m = load_metric(key.metric)
    if min(now.values + base.values) <= 0:
        return CellVerdict(key, "too few runs", now, base, threshold,
                           reason="a value is zero or negative: no ratio")
    est = compare_runs(now.values, base.values, confidence=rules.confidence)
    interval = ((est.pct_low, est.pct_high)
                if est.pct_low is not None and est.pct_high is not None else None)
    verdict = verdict_for(est, higher_is_better=m.higher_is_better,
                                min_effect_pct=threshold)
    name: VerdictName = {"slower": "regressed", "faster": "improved",
                         "within noise": "noise", "too few runs": "too few runs"}[verdict]  # type: ignore[assignment]
    if name == "too few runs":
        reason = f"{len(now.values)} run(s) tonight, {len(base.values)} in the baseline: no interval"
    elif name == "noise" and interval is not None and _too_wide(interval, threshold):
        name = "undecided"
        reason = (f"the interval [{interval[0]:+.1f}, {interval[1]:+.1f}] % is wider than the "
                  f"{threshold:g} % threshold: this night could not have told a change smaller "
                  f"than {max(abs(interval[0]), abs(interval[1])):.1f} % from noise (more runs, "
                  "or a reference arm in duets, narrow it)")
    elif name == "noise" and interval is not None and (interval[0] > 0 or interval[1] < 0):
        reason = f"outside the noise interval but below the {threshold:g} % threshold"
    elif name == "noise":
        reason = "the interval includes no change"
    else:
        reason = f"the interval excludes no change and |change| >= {threshold:g} %"
    return CellVerdict(key, name, now, base, threshold, est.pct, interval, reason=reason)


@dataclass(frozen=True)
class HistoryFit:
    """Tonight's runs against the history nights', the nights a random effect (one-way ANOVA):
    ``d`` = mean ln tonight − the mean of the nights' mean ln values; ``s2_m`` the variance of
    the n nights' means, ``msw`` the pooled within-night variance (tonight's runs included) on
    ``df_w`` df, ``h`` the mean of 1/k over the history nights."""

    d: float
    n: int
    s2_m: float
    msw: float
    df_w: float
    h: float

    def var(self, k: int) -> float:
        """Variance of ``d`` with k runs tonight, the prediction variance of a new night's mean
        (the nights a random effect, σ²_b their part and σ² a run's): σ²_b + σ²/k + (σ²_b +
        σ²·h)/n, estimated without bias as (1 + 1/n)·s²_m + (1/k − h)·MSW (s²_m estimates
        σ²_b + σ²·h whatever σ²_b is: no test of whether the nights spread chooses a
        formula), and at least the variance with no night part, MSW·(1/k + h/n)."""
        pred = (1.0 + 1.0 / self.n) * self.s2_m + (1.0 / k - self.h) * self.msw
        return max(pred, self.msw * (1.0 / k + self.h / self.n))

    def df(self, k: int) -> float:
        """n − 1, the df of s²_m: where tonight has the history nights' runs (the history is
        read at each night's first look, ``first_look``), d / √var is Student's t on n − 1 df
        exactly (the textbook prediction interval); fewer runs tonight add a well-estimated
        MSW term (Satterthwaite's df, above n − 1). More runs tonight subtract an MSW term,
        and the difference left rests on s²_m alone, so n − 1 overstates its df: one night at
        32 rounds against nights of 8 was called 1.4-3.6 times the level. Satterthwaite's df
        there (about 4) were measured in the nightly's own loop and not adopted: under
        correlated duets they cut unchanged series with a false call from 7.5 % to 5.0 % (200
        series of 40 nights) and a +5 % step called within three nights from 80.5 % to 67 %,
        never in 24 nights 2.5 % to 6 % (docs/measurements/nightly-series.md). The pooled
        within-night variance's many df are not used either: choosing them where the nights'
        means happen to spread little read a night part of 1 % as none and called
        0.19-0.46 % of unchanged nights at a 0.125 % level."""
        c1, c2 = 1.0 + 1.0 / self.n, 1.0 / k - self.h
        if c2 <= 0:
            return float(self.n - 1)
        var = c1 * self.s2_m + c2 * self.msw
        return var * var / ((c1 * self.s2_m) ** 2 / (self.n - 1) + (c2 * self.msw) ** 2 / self.df_w)

    @property
    def night_sd(self) -> float:
        """The night part's sd (ln scale), 0 where the nights do not spread beyond their runs."""
        return math.sqrt(max(self.s2_m - self.msw * self.h, 0.0))

    @property
    def run_sd(self) -> float:
        """One run's (duet's) sd around its night's level (ln scale)."""
        return math.sqrt(self.msw)


def first_look(nights: Iterable[tuple[str, NightCell]],
               first: int | None) -> list[Sequence[float]]:
    """Each history night's (``(date, cell)``) runs up to its first look (``first`` rounds; all of them where
    ``first`` is None). A night measures past its first look only when that look left it
    unresolved: a night whose first rounds strayed far from the history. Its later rounds
    pull its mean back towards the history's, so the nights' means, read whole, spread less
    than a night's first look does, and a night judged against them was called 3 to 5 times
    as often as its level (bench/nightly_series_simulation.py, correlated duets). Every
    night's first look is taken whatever it saw: the history's spread read from them is the
    spread a night's first look has."""
    return [c.values[:first] if first else c.values for _, c in nights]


def history_fit(tonight: Sequence[float], nights: Sequence[Sequence[float]]) -> HistoryFit:
    """``HistoryFit`` of tonight's values against the history nights'. Needs n ≥ 2 nights and
    within-night spread (some night with 2 runs); ValueError otherwise."""
    logs = [np.log(np.asarray(v, dtype=float)) for v in nights if len(v)]
    t = np.log(np.asarray(tonight, dtype=float))
    n, k_t = len(logs), len(t)
    groups = [x for x in [*logs, t] if len(x) >= 2]
    df_w = sum(len(x) - 1 for x in groups)
    if n < 2 or k_t < 1 or df_w < 1:
        raise ValueError("need 2 history nights, a run tonight and a night with 2 runs")
    means = np.array([x.mean() for x in logs])
    return HistoryFit(d=float(t.mean() - means.mean()), n=n, s2_m=float(means.var(ddof=1)),
                      msw=float(sum(((x - x.mean()) ** 2).sum() for x in groups) / df_w),
                      df_w=float(df_w), h=float(np.mean([1.0 / len(x) for x in logs])))


def history_interval(tonight: Sequence[float], nights: Sequence[Sequence[float]], *,
                     confidence: float = 0.95) -> RatioEstimate:
    """Tonight's geometric mean against the history's: the ratio exp(mean ln tonight − mean of
    the nights' mean ln values), with a t prediction interval whose variance counts the
    nights as a random effect (``HistoryFit.var``, one-way ANOVA estimates):

        V = σ̂²_b (1 + 1/n) + MSW (1/k_t + h/n),   σ̂²_b = max(0, s²_m − MSW·h)

    n history nights, s²_m the variance of their means, MSW the pooled within-night variance
    (tonight's runs included), k_t tonight's runs, h the mean of 1/k over the history nights.
    Where the nights' means spread more than their runs explain (σ̂²_b > 0) V is the
    prediction variance of a new night's mean, with Satterthwaite's df (n − 1 when tonight
    has no fewer runs than the history's nights); where they do not, the pooled within-night
    variance with its df. Needs n ≥ 2 nights and within-night spread (some night with 2
    runs)."""
    fit = history_fit(tonight, nights)
    k_t = len(tonight)
    half = float(student_t.ppf(0.5 + confidence / 2, fit.df(k_t))) * math.sqrt(fit.var(k_t))
    return RatioEstimate(ratio=math.exp(fit.d), low=math.exp(fit.d - half),
                               high=math.exp(fit.d + half), confidence=confidence,
                               method="history")


def within(tonight: Sequence[float], nights: Sequence[Sequence[float]], threshold: float, *,
           higher_is_better: bool, confidence: float = 0.95) -> bool:
    """Whether ``tonight``'s runs show no change beyond ``threshold`` % against ``nights``:
    the worse end of the ``history_interval`` at ``confidence`` lies within it (a night held
    out of a ratio's history joins it once this holds against the history grown since)."""
    try:
        est = history_interval(tonight, nights, confidence=confidence)
    except ValueError:
        return False
    return (-est.pct_low if higher_is_better else est.pct_high) <= threshold


def looks_changed(tonight: Sequence[float], nights: Sequence[Sequence[float]], threshold: float,
                  *, higher_is_better: bool) -> bool:
    """Whether ``tonight`` looks changed against ``nights`` (``SUSPECT_LEVEL``): at least half
    ``threshold`` % on the worse side with a one-sided p of no change under the level."""
    try:
        fit = history_fit(tonight, nights)
    except ValueError:
        return False
    sign = -1.0 if higher_is_better else 1.0
    k = len(tonight)
    p = float(student_t.sf(sign * fit.d / math.sqrt(fit.var(k)), fit.df(k)))
    return sign * math.expm1(fit.d) * 100.0 >= threshold / 2.0 and p < SUSPECT_LEVEL


def busy_spread(tonight: Sequence[float], nights: Sequence[Sequence[float]]) -> str:
    """Why ``tonight``'s runs spread far beyond the history ``nights``' usual within-night
    spread (``BUSY_SPREAD``, ``BUSY_LEVEL``), or "" when they do not or cannot be compared
    (fewer than 2 runs tonight, no history night with 2). Such a night is not called and does
    not join a ratio's history: a busy host that no recorded interference names reads as a
    night whose duets scatter, and its mean is as noisy as its spread."""
    t = np.log(np.asarray(tonight, dtype=float))
    logs = [np.log(np.asarray(v, dtype=float)) for v in nights if len(v) >= 2]
    df_h = sum(len(x) - 1 for x in logs)
    if len(t) < 2 or df_h < 1:
        return ""
    usual = sum(((x - x.mean()) ** 2).sum() for x in logs) / df_h
    ratio = float(t.var(ddof=1)) / usual if usual > 0 else math.inf
    p = float(f_dist.sf(ratio, len(t) - 1, df_h))
    if ratio < BUSY_SPREAD or p >= BUSY_LEVEL:
        return ""
    return (f"tonight's {len(t)} runs spread {math.sqrt(ratio):.1f} times the history's usual "
            f"within-night sd ({math.sqrt(t.var(ddof=1)) * 100:.1f} % against "
            f"{math.sqrt(usual) * 100:.1f} %; variance ratio {ratio:.1f}, F test p = {p:.2g}): "
            "a night this noisy is not called and stays out of the history (rerun it on a "
            "quieter host with the same --date)")


@dataclass(frozen=True)
class NightLook:
    """One look at a relative cell tonight: its nominal one-sided levels (the call's, and
    each end of the interval shown), whether a later look may follow, and its place."""

    call_level: float
    show_level: float
    last: bool
    index: int
    planned: int


def night_look(fit: HistoryFit, k_t: int, looks: Looks | None, *, alpha: float,
               confidence: float) -> NightLook:
    """The levels of tonight's look after ``k_t`` runs: a group-sequential one-sided test per
    side, Lan–DeMets Pocock-type spending over the night's looks (``looks.schedule()``) at
    information I_k = 1 / ``fit.var(k)`` (so the night part, which more runs do not shrink,
    is in it: corr(Z_i, Z_j) = √(I_i / I_j) still holds), the boundaries exact for the looks
    made (``e2e.analysis.estimators.sequential.boundaries``), recomputed at each look from the noise
    estimated then. ``alpha``: the call's level for the night (per side); the interval shown
    spends (1 − confidence) / 2 per side the same way. t statistics are read at the
    boundary's nominal level (the significance-level approach)."""
    sched = looks.schedule() if looks is not None else (k_t,)
    earlier = [k for k in sched if k < k_t]
    later = [k for k in sched if k > k_t]
    done = earlier + [k_t]
    info = [1.0 / fit.var(k) for k in done]
    top = 1.0 / fit.var(later[-1] if later else k_t)
    fractions = [min(i / top, 1.0) for i in info]

    def level(a: float) -> float:
        spent = [spending_at(f, a, spending="pocock", sides=1) for f in fractions]
        incs = [spent[0]] + [y - x for x, y in zip(spent, spent[1:])]
        if len(info) == 1:  # the first look: its increment is its level
            return incs[0]
        return float(norm.sf(boundaries(info, incs, sides=1)[0][-1]))

    return NightLook(call_level=level(alpha), show_level=level((1.0 - confidence) / 2.0),
                     last=not later, index=len(done), planned=len(done) + len(later))


def _judge_ratio(key: CellKey, now: NightCell, hist: RatioHistory, threshold: float,
                 rules: Rules) -> CellVerdict:
    """``now`` (a relative cell) against its ratio's history ``hist`` (see the module's
    docstring): a call when the night's look crosses its boundary on one side and the change
    is at least half the threshold; else "no change beyond X" (X the interval's reach on the
    worse side) — resolved (noise) when X is within the threshold, else undecided, measuring
    more where the night has looks left. A regression called on an earlier night stays
    regressed until two nights in a row show it returned: X under half the threshold."""
    m = load_metric(key.metric)
    nights = hist.nights
    pooled = NightCell(key, tuple(x for _, c in nights for x in c.values),
                       run_dirs=tuple(d for _, c in nights for d in c.run_dirs))
    base = dict(tonight=now, baseline=pooled, threshold=threshold,
                higher_is_better=m.higher_is_better, history=tuple(d for d, _ in nights),
                regressed_since=hist.regressed_since)
    if min(now.values + pooled.values) <= 0:
        return CellVerdict(key, "too few runs", reason="a value is zero or negative: no ratio",
                           **base)
    first = rules.looks.first if rules.looks is not None else None
    usual = first_look(nights, first)   # the history nights' runs, each at its first look
    try:
        fit = history_fit(now.values, usual)
    except ValueError as exc:
        return CellVerdict(key, "too few runs", reason=str(exc), **base)
    k_t = len(now.values)
    look = night_look(fit, k_t, rules.looks, alpha=rules.alpha / max(rules.cells, 1),
                      confidence=rules.confidence)
    se, df = math.sqrt(fit.var(k_t)), fit.df(k_t)
    z = fit.d / se
    half = float(student_t.isf(look.show_level, df)) * se
    pct = (math.exp(fit.d) - 1.0) * 100.0
    interval = ((math.exp(fit.d - half) - 1.0) * 100.0, (math.exp(fit.d + half) - 1.0) * 100.0)
    sign = -1.0 if m.higher_is_better else 1.0           # +: the worse direction
    p_worse = float(student_t.sf(sign * z, df))
    p_better = float(student_t.sf(-sign * z, df))
    big = abs(pct) >= threshold / 2.0
    worse = interval[0] if m.higher_is_better else interval[1]
    resolved = sign * worse <= threshold
    back = sign * worse <= threshold / 2.0   # a called regression's level shown returned
    since = hist.since or nights[0][0]
    against = (f"against the ratio's history, {len(nights)} nights {nights[0][0]} … "
               f"{nights[-1][0]} ({hist.why or 'since ' + since})")
    at = (f"{k_t} rounds, look {look.index} of {look.planned}" if look.planned > 1
          else f"{k_t} rounds")
    seen = f"{pct:+.1f} % [{interval[0]:+.1f}, {interval[1]:+.1f}]"
    level = (f"p = {min(p_worse, p_better):.2g} against the night's level "
             f"{look.call_level:.2g} ({rules.alpha:g} a night over {rules.cells} cell(s), "
             "spent over its looks)")
    more = not look.last
    suspect = p_worse < SUSPECT_LEVEL / max(rules.cells, 1) and big
    # a busy night calls nothing and lifts no standing regression; where its runs' recorded
    # interference already says so (``_disturbed``), that names the processes
    recorded = (now.busy_share or 0.0) >= rules.interference_max
    busy = "" if recorded else busy_spread(now.values, usual)
    if busy:
        name = "regressed" if hist.regressed_since else "undecided"
        reason = (f"{against}: {seen} at {at}; {busy}"
                  + (f"; regressed since {hist.regressed_since}" if hist.regressed_since
                     else ""))
        more = False
    elif p_worse < look.call_level and big:
        name: VerdictName = "regressed"
        reason = f"{against}: {seen} at {at}; {level}"
        if hist.regressed_since:
            reason += f"; regressed since {hist.regressed_since}"
        more = False
    elif suspect and hist.suspect and not hist.regressed_since:
        name, more = "regressed", False
        reason = (f"{against}: {seen} at {at}, p = {p_worse:.2g}; the night before "
                  f"({hist.suspect}) looked changed too: two nights in a row at least half the "
                  f"{threshold:g} % threshold with p under {SUSPECT_LEVEL:g} (over "
                  f"{rules.cells} cell(s)) each")
    elif p_better < look.call_level and big:
        name, more = "improved", False
        reason = f"{against}: {seen} at {at}; {level}"
    elif hist.regressed_since:
        # hysteresis: a call needs a change of at least half the threshold, so a called
        # regression returns only when the night's interval lies under half the threshold
        # ("no change beyond" at most half of it), two nights in a row (as a new level needs
        # two improved nights): a level that still holds, or a drift still growing, is no
        # longer let go by a night that merely shows no change beyond the threshold
        name, more = "regressed", False
        if back and hist.returning:
            name = "noise"
            reason = (f"no change beyond {worse:+.1f} % (under half the {threshold:g} % "
                      f"threshold), {against}: {seen} at {at}; the regression called on "
                      f"{hist.regressed_since} has returned (the second night in a row under "
                      "half the threshold)")
        elif back:
            reason = (f"regressed since {hist.regressed_since}; tonight no change beyond "
                      f"{worse:+.1f} %, under half the {threshold:g} % threshold ({against}: "
                      f"{seen} at {at}): it returns when the next night is under it too")
        elif sign * pct < threshold / 2.0 and not look.last:
            name, more = "undecided", True
            reason = (f"regressed since {hist.regressed_since}; tonight no change beyond "
                      f"{worse:+.1f} %, not under half the {threshold:g} % threshold "
                      f"({against}: {seen} at {at}): measuring more rounds tonight to see "
                      "whether it has returned")
        else:
            reason = (f"regressed since {hist.regressed_since}, not seen to return: no change "
                      f"beyond {worse:+.1f} % is all tonight shows, not under half the "
                      f"{threshold:g} % threshold ({against}: {seen} at {at}); it is reported "
                      "until two nights in a row show no change beyond half the threshold, or "
                      "a baseline night is pinned")
    elif resolved:
        name, more = "noise", False
        reason = (f"no change beyond {worse:+.1f} % (within the {threshold:g} % threshold), "
                  f"{against}: {seen} at {at}")
    else:
        name = "undecided"
        reason = (f"no change beyond {worse:+.1f} %: wider than the {threshold:g} % threshold, "
                  f"{against}: {seen} at {at}"
                  + ("; measuring more rounds tonight" if more else
                     "; the night's last look (it stays out of the history: more rounds a "
                     "night, or max_runs, narrow it)"))
    return CellVerdict(key, name, pct=pct, interval=interval, reason=reason, more=more, **base)


def _too_wide(interval: tuple[float, float], threshold: float) -> bool:
    """An interval that holds no change and yet reaches past the threshold on either side:
    a change of the threshold's size would have read the same, so "noise" would overclaim."""
    return interval[0] <= 0 <= interval[1] and (interval[1] > threshold or -interval[0] > threshold)


def _wilson(x: int, n: int, z: float) -> tuple[float, float]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def paired_change_interval(both: int, lost: int, gained: int, neither: int,
                           confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the paired accuracy change (gained − lost) / n in percentage points, by
    Newcombe's hybrid score method for paired proportions (Newcombe 1998, method 10): Wilson
    intervals of both accuracies combined with the phi correlation of the 2×2 table
    (``both`` right, ``lost`` = right only in the baseline, ``gained`` = right only tonight,
    ``neither``). Unconditional: one flipped document of 50 does not bound the change at
    −2 pp."""
    n = both + lost + gained + neither
    if n <= 0 or min(both, lost, gained, neither) < 0:
        raise ValueError(f"need non-negative counts with n > 0, got {both, lost, gained, neither}")
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p1, p2 = (both + lost) / n, (both + gained) / n      # baseline, tonight
    l1, u1 = _wilson(both + lost, n, z)
    l2, u2 = _wilson(both + gained, n, z)
    denom = (both + lost) * (gained + neither) * (both + gained) * (lost + neither)
    cross = both * neither - lost * gained      # Newcombe's corrected phi numerator
    cross = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = 0.0 if denom == 0 else cross / math.sqrt(denom)
    d = p2 - p1
    delta = math.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    eps = math.sqrt(max((u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2, 0.0))
    return (max(d - delta, -1.0) * 100.0, min(d + eps, 1.0) * 100.0)


def _no_samples(key: CellKey, now: NightCell, base: NightCell, margin: float,
                reason: str) -> CellVerdict:
    return CellVerdict(key, "no samples", now, base, margin, reason=reason)


def _judge_gsm8k(key: CellKey, now: NightCell, base: NightCell, rules: Rules,
                 samples: Samples) -> CellVerdict:
    margin = rules.gsm8k_min_drop_pp
    if not now.run_dirs or not base.run_dirs:
        return _no_samples(key, now, base, margin, "no verdict files recorded for a night")
    for which, cell in (("tonight", now), ("the baseline night", base)):
        if cell.run_dirs[0] not in samples:
            return _no_samples(key, now, base, margin,
                               f"the verdicts of {which} ({cell.run_dirs[0]}/verdicts.jsonl) "
                               "could not be read; keep the results folder between nights")
    try:
        agree = compare_verdicts(samples[base.run_dirs[0]], samples[now.run_dirs[0]],
                                 reference_name="the baseline night", arm_name="tonight")
    except ResultsError as exc:
        return _no_samples(key, now, base, margin, str(exc))
    b, c, n = len(agree.reference_only_correct), len(agree.arm_only_correct), agree.n
    if n == 0:
        return _no_samples(key, now, base, margin, "no documents")
    change = (c - b) / n * 100.0
    tonight_right = {v.doc_id for v in samples[now.run_dirs[0]] if v.strict}
    both = sum(1 for v in samples[base.run_dirs[0]] if v.strict and v.doc_id in tonight_right)
    interval = paired_change_interval(both, b, c, n - both - b - c, rules.confidence)
    floor = None
    if len(now.run_dirs) > 1 and now.run_dirs[1] in samples:
        try:
            flips = compare_verdicts(samples[now.run_dirs[0]], samples[now.run_dirs[1]]).flipped
            floor = len(flips) / n * 100
        except ResultsError:
            floor = None
    significant = agree.p_value < rules.gsm8k_alpha
    if significant and -change >= margin:
        name: VerdictName = "regressed"
    elif significant and change >= margin:
        name = "improved"
    else:
        name = "noise"
    reason = (f"{b} of {n} documents lost, {c} gained against the baseline night; exact "
              f"McNemar p = {agree.p_value:.3g} (level {rules.gsm8k_alpha:g}); change "
              f"{change:+.2f} pp, smallest that counts {margin:g} pp")
    return CellVerdict(key, name, now, base, margin, change, interval, floor_pp=floor,
                       reason=reason, p_value=agree.p_value)


def judge_cell(key: CellKey, tonight: NightCell | None, baseline: NightCell | None,
               rules: Rules, *, have_baseline: bool = True, samples: Samples | None = None,
               threshold: float | None = None,
               history: RatioHistory | Sequence[tuple[str, NightCell]] = (),
               pinned: bool = False) -> CellVerdict:
    """The verdict of one cell (see the module docstring for the rules). ``threshold``
    overrides the rules' (the headline's threshold judging another metric). A relative cell
    (``<arm>-vs-<reference>``) is judged against its ratio's ``history`` (a ``RatioHistory``,
    or its nights as (date, cell), oldest first) once it holds ``MIN_HISTORY_NIGHTS`` nights,
    and before that builds it; ``baseline`` and ``pinned`` are for the other cells."""
    threshold = threshold if threshold is not None else rules.threshold(key)
    if threshold is None:
        return CellVerdict(key, "not judged", tonight, baseline,
                           reason="no threshold for this metric in this spec mode")
    if tonight is None:
        return CellVerdict(key, "missing", None, baseline, threshold,
                           reason="no valid reported run tonight")
    if key.kind == "load" and is_relative(key.arm):
        hist = history if isinstance(history, RatioHistory) else RatioHistory(tuple(history))
        if len(hist.nights) >= MIN_HISTORY_NIGHTS:
            return _disturbed(_judge_ratio(key, tonight, hist, threshold, rules), rules)
        held = len(hist.nights)
        return CellVerdict(key, "no baseline", tonight, None, threshold,
                           higher_is_better=load_metric(key.metric).higher_is_better,
                           history=tuple(d for d, _ in hist.nights),
                           reason=f"the ratio's history holds {held} night(s)"
                           + (f" ({hist.why})" if hist.why else "")
                           + f", fewer than the {MIN_HISTORY_NIGHTS} it is judged from: one "
                           "night's runs do not show how the ratio moves from night to night, "
                           "so tonight builds the history")
    if not have_baseline:
        return CellVerdict(key, "no baseline", tonight, None, threshold,
                           reason="no baseline night")
    if baseline is None:
        return CellVerdict(key, "new cell", tonight, None, threshold,
                           reason="the baseline night has no such cell")
    if key.kind == "gsm8k":
        return _judge_gsm8k(key, tonight, baseline, rules, samples or {})
    return _disturbed(_judge_load(key, tonight, baseline, threshold, rules), rules)


def measured_busy(cell: NightCell | None, interference_max: float) -> bool:
    """Whether ``cell`` was measured beside other work: its median run's recorded
    interference at least ``interference_max`` cores (a cell that recorded none is quiet)."""
    share = cell.busy_share if cell is not None else None
    return share is not None and share >= interference_max


def _not_called(v: CellVerdict, but: str) -> CellVerdict:
    """``v`` (a regressed or improved call) made undecided, ``but`` saying why."""
    return dataclasses.replace(v, verdict="undecided", withheld=v.verdict,
                               reason=f"{v.reason}; but {but}")


def _disturbed(v: CellVerdict, rules: Rules) -> CellVerdict:
    """``v``, where tonight's runs were measured beside other work (``measured_busy``): a new
    call is not made (undecided), and a regression standing since an earlier night
    (``regressed_since``) stays regressed whatever tonight shows: a busy night neither calls
    nor lifts one."""
    if not measured_busy(v.tonight, rules.interference_max):
        return v
    share = v.tonight.busy_share
    top = max(x for x in v.tonight.interference if x is not None)
    busy = (f"other processes took {share:.2f} of a core (median of tonight's runs, up to "
            f"{top:.2f}) while it was measured, at least {rules.interference_max:g}")
    if v.regressed_since and v.verdict in ("noise", "improved", "undecided"):
        return dataclasses.replace(
            v, verdict="regressed", more=False,
            reason=f"regressed since {v.regressed_since}, not lifted: {busy}, and a night "
                   f"measured beside other work does not return a standing regression (tonight "
                   f"alone would read {v.verdict}: {v.reason})")
    if v.verdict not in ("regressed", "improved") or v.regressed_since:
        return v
    return _not_called(v, f"{busy}: a {v.pct:+.1f} % change measured beside other work is not "
                       "called (rerun the night on a quieter host with the same --date; its "
                       "runs' warnings name the processes)")


def night_status(verdicts: Iterable[CellVerdict], problems: Sequence[str] = (),
                 changes: Iterable[ChangePoint] = ()) -> NightStatus:
    """regression if a cell regressed or a change point is a regression; incomplete if a
    judged cell is missing, has too few runs or no samples, or ``problems`` (given-up runs, a
    failed GSM8K arm) is not empty; blind if a judged cell ended undecided at its last look
    ``BLIND_NIGHTS`` nights in a row; undecided if a judged cell is undecided or has nothing to
    be judged against yet (``UNJUDGED``); else pass."""
    verdicts = list(verdicts)
    if any(v.verdict == "regressed" for v in verdicts) or any(c.regression for c in changes):
        return "regression"
    if problems or any(v.verdict in _BLOCKING for v in verdicts):
        return "incomplete"
    if any(v.undecided_nights >= BLIND_NIGHTS for v in verdicts):
        return "blind"
    if any(v.verdict == "undecided" or v.verdict in UNJUDGED for v in verdicts):
        return "undecided"
    return "pass"


def _with_outputs_status(j: Judgement, status: NightStatus) -> NightStatus:
    return "regression" if j.outputs_fail and j.output_findings else status


def judgement_with_changes(j: Judgement, changes: Sequence[ChangePoint]) -> Judgement:
    """``j`` with the change points found over the history, its status redone."""
    return dataclasses.replace(j, changes=tuple(changes), status=_with_outputs_status(
        j, night_status(j.verdicts, j.problems, changes)))


def judgement_with_outputs(j: Judgement, checks: Sequence, *, fail: bool) -> Judgement:
    """``j`` with tonight's outputs checks; a finding makes it a regression where ``fail``
    (``[nightly] outputs_fail``)."""
    done = dataclasses.replace(j, outputs=tuple(checks), outputs_fail=fail)
    return dataclasses.replace(done, status=_with_outputs_status(done, j.status))


def _server_headline(key: CellKey, now: Mapping[CellKey, NightCell],
                     base: Mapping[CellKey, NightCell], rules: Rules) -> str:
    """Why ``key`` (the cell's headline, from the client's TPOT) is judged from the server's
    TPOT instead (``e2e.analysis.sweep.server_twin``); "" if not."""
    if key.metric != headline_metric(key.concurrency, key.spec_mode) or not server_twin(key.metric):
        return ""
    if rules.verify_step_from == "server":
        return 'built from the server\'s TPOT: the config says verify_step_from = "server"'
    burst = dataclasses.replace(key, metric=BURST_SHARE)
    for which, cells in (("tonight", now), ("in the baseline night", base)):
        cell = cells.get(burst)
        if cell is not None and burst_affected(cell.values, rules.burst_share_max):
            return (f"built from the server's TPOT: the client's TPOT is burst-affected {which} "
                    f"(burst share up to {max(cell.values):.2f} > {rules.burst_share_max:g})")
    return ""


def judge_night(
    date: str,
    tonight: Sequence[NightCell],
    baseline: Baseline | None,
    rules: Rules,
    *,
    expected: Iterable[CellKey] = (),
    problems: Sequence[str] = (),
    samples: Samples | None = None,
    histories: Mapping[CellKey, RatioHistory | Sequence[tuple[str, NightCell]]] | None = None,
    undecided: Mapping[CellKey, int] | None = None,
) -> Judgement:
    """Judge every cell of tonight (and every ``expected`` cell, so a cell whose runs all
    failed is *missing*, not forgotten) against ``baseline``, a relative cell against its
    ratio's history in ``histories`` (a ``RatioHistory``, or its earlier nights oldest first);
    the judged relative cells share the night's ``rules.alpha`` evenly.
    ``samples`` holds the GSM8K verdicts of the arm folders named in the cells' ``run_dirs``
    (both nights); ``undecided`` the nights in a row before tonight each cell ended undecided
    (``undecided_nights``): a cell undecided tonight on a quiet night adds one
    (``CellVerdict.undecided_nights``)."""
    histories, undecided = histories or {}, undecided or {}
    now = {c.key: c for c in tonight}
    base = {c.key: c for c in baseline.cells} if baseline is not None else {}
    keys = sorted(set(now) | set(expected))
    have = baseline is not None
    pinned = have and baseline.reason == "pinned"  # the user's own choice of one night
    headline: dict[CellKey, tuple[float, str]] = {}  # server key -> (threshold, why)
    replaced: dict[CellKey, CellKey] = {}  # client headline -> the server twin judged instead
    for k in keys:
        threshold = rules.threshold(k)
        source = _server_headline(k, now, base, rules) if threshold is not None else ""
        if not source:
            continue
        server = dataclasses.replace(k, metric=server_twin(k.metric))
        if rules.threshold(server) is None:
            headline[server] = (threshold, source)
            replaced[k] = server
    judged = [k for k in set(keys) | set(headline) if k not in replaced and k.kind == "load"
              and is_relative(k.arm) and (k in headline or rules.threshold(k) is not None)]
    rules = dataclasses.replace(rules, cells=max(len(judged), 1))  # one level per night
    verdicts: dict[CellKey, CellVerdict] = {}
    for k in sorted(set(keys) | set(headline)):
        if k in headline:
            threshold, source = headline[k]
            v = judge_cell(k, now.get(k), base.get(k), rules, have_baseline=have,
                           threshold=threshold, history=histories.get(k, ()), pinned=pinned)
            verdicts[k] = dataclasses.replace(v, source=source)
        elif k in replaced:
            verdicts[k] = CellVerdict(k, "not judged", now.get(k), base.get(k),
                                      reason=f"the headline is {replaced[k].metric}, built from "
                                             "the server's TPOT")
        else:
            verdicts[k] = judge_cell(k, now.get(k), base.get(k), rules, have_baseline=have,
                                     samples=samples, history=histories.get(k, ()),
                                     pinned=pinned)
    for k, v in verdicts.items():
        if v.verdict == "undecided" and not measured_busy(v.tonight, rules.interference_max):
            verdicts[k] = dataclasses.replace(v, undecided_nights=undecided.get(k, 0) + 1)
    verdicts_t = tuple(verdicts[k] for k in sorted(verdicts))
    return Judgement(date=date, baseline=baseline, verdicts=verdicts_t, problems=tuple(problems),
                     status=night_status(verdicts_t, problems))
