"""Judgement of one night against a baseline night: pure functions, no I/O.

A *night cell* is one metric of one (arm, concurrency, spec mode) of one night, with its
per-run values (the reported runs: valid, repeat >= report_from_run). Tonight's cell is
compared with the baseline night's cell of the same key; the rules are:

* **load metrics** (``e2e.nightly.settings.NIGHTLY_METRICS``) with a threshold for their spec mode:
  ``e2e.analysis._stats.compare_runs(tonight, baseline)`` (ratio of medians; Welch t-interval on log
  values at the configured confidence), then ``e2e.analysis._stats.verdict_for`` with
  ``min_effect_pct = threshold``: **regressed** when the interval excludes 1 on the worse
  side, the point estimate is on that side and at least the threshold in size (worse:
  higher for latencies and ms per verify step, lower for throughput and acceptance);
  **improved** the same on the better side; otherwise **noise**. Fewer than 2 runs on a
  side: **too few runs**. Metrics without a threshold are recorded, **not judged**.
* **the headline** (``e2e.analysis.headline_metric``: ms per verify step with the speculator,
  mean TPOT at concurrency 1, median TPOT above; ``headline`` in the thresholds table) is
  judged from the client's TPOT, unless the rules say ``verify_step_from = "server"`` or a
  run of the cell (tonight's or the baseline's) has a ``burst_share`` above
  ``burst_share_max``: then its server-built twin (``e2e.analysis.server_twin``: the server's
  mean TPOT, or its TPOT x acceptance length) is judged with that threshold, and the verdict
  says why.
* **GSM8K strict-match**, per document: tonight's verdicts (the arm's first server) against
  the baseline night's, joined on ``doc_id`` (same prompts); b = documents right only in the
  baseline night, c = right only tonight; exact McNemar test on the b + c discordant pairs
  (``e2e.gsm8k.agreement.mcnemar_exact``) and the accuracy change (c − b) / n with
  Newcombe's paired score interval (``paired_change_interval``). **regressed** when p < ``gsm8k_alpha``
  and the drop is at least ``gsm8k_min_drop_pp``; **improved** the same upwards; else
  **noise**. Verdict files that cannot be read: **no samples**.
* **a cell relative to the reference** (``[nightly] reference``: tonight's arm ÷ the pinned
  reference, both measured tonight) with at least ``MIN_HISTORY_NIGHTS`` earlier passing
  nights of the same ratio is judged against that ratio's **history**, not against one night:
  ``history_interval`` (tonight's mean log ratio against the mean of the history nights' means,
  the nights a random effect: a prediction interval that spends the ratio's night-to-night
  spread once, not the noise of two nights), read with the same verdict rule. The history is
  the last ``history_nights`` passing nights, back to and including the first of the latest
  two nights in a row called improved (a new level starts only once a second night confirms
  it; ``e2e.nightly.history.cell_history``). Fewer nights: the baseline night, as above,
  but a change called against it is **undecided** (one night cannot show the ratio's
  night-to-night spread: ``_one_night``), unless that night was pinned.
* a load cell called **regressed** or **improved** whose median run was measured while other
  processes took at least ``[nightly] interference_max`` cores (default 0.25, where a run
  warns; ``NightCell.interference``, from each run's ``host_noise``) is **undecided** instead,
  the interference named: on a busy host one night of one build was called −22.6 % so
  (docs/statistics.md).
* no baseline night: **no baseline**; a cell the baseline lacks: **new cell**; a planned
  cell tonight lacks (every run invalid): **missing**.

Change points over each cell's history (``e2e.nightly.changepoints``) are added with
``Judgement.with_changes``. The night is **regression** (exit 1) when a cell regressed or a
confirmed change point made a cell worse (and still holds tonight); else **incomplete**
(exit 2) when a judged cell is missing, has too few runs or no samples, or a run was given up;
else **pass** (exit 0). Only passing nights become the default baseline.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.stats import norm, t as student_t

from e2e import analysis
from e2e.load import INTERFERENCE_SHARE, WARN_SHARE
from e2e.errors import ResultsError
from e2e.analysis import BURST_SHARE, burst_affected, headline_metric, server_twin
from e2e.gsm8k.records import SampleVerdict
from e2e.nightly.cells import CellKey, CellVerdict, NightCell, VerdictName
from e2e.nightly.changepoints import ChangePoint
from e2e.nightly.settings import is_relative, judged_threshold, nightly_metric as load_metric


__all__ = ["CellKey", "NightCell", "Baseline", "Rules", "CellVerdict", "Judgement",
           "VerdictName", "NightStatus", "EXIT_CODES", "judge_cell", "judge_night",
           "night_status", "paired_change_interval", "Samples"]

NightStatus = Literal["pass", "regression", "incomplete"]
EXIT_CODES: dict[str, int] = {"pass": 0, "regression": 1, "incomplete": 2}
_BLOCKING: frozenset[str] = frozenset({"too few runs", "missing", "no samples"})
MIN_HISTORY_NIGHTS = 3
"""Earlier nights of a relative cell before its history, not one night, is judged against."""
# GSM8K verdicts per arm folder (a cell's run_dirs entry, relative to the results folder)
Samples = Mapping[str, Sequence[SampleVerdict]]


@dataclass(frozen=True)
class Baseline:
    """The night judged against, and why it was chosen."""

    date: str
    cells: tuple[NightCell, ...]
    reason: str  # "last passing night with the same config hash" or "pinned"
    status: str = "pass"


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

    def threshold(self, key: CellKey) -> float | None:
        if key.kind == "gsm8k":
            return self.gsm8k_min_drop_pp
        if self.reference is not None and not is_relative(key.arm):
            return None
        return judged_threshold(self.thresholds, key.spec_mode, key.metric, key.concurrency)

    @classmethod
    def from_settings(cls, settings) -> Rules:
        """The rules of a ``NightlySettings`` (the ``[nightly]`` table)."""
        return cls(thresholds={k: dict(v) for k, v in settings.thresholds.items()},
                   confidence=settings.confidence, verify_step_from=settings.verify_step_from,
                   burst_share_max=settings.burst_share_max,
                   interference_max=settings.interference_max,
                   gsm8k_alpha=settings.gsm8k.alpha, gsm8k_min_drop_pp=settings.gsm8k.min_drop_pp,
                   reference=settings.reference)


@dataclass(frozen=True)
class Judgement:
    date: str
    baseline: Baseline | None
    verdicts: tuple[CellVerdict, ...]
    problems: tuple[str, ...] = field(default=())
    status: NightStatus = "pass"
    changes: tuple[ChangePoint, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def with_changes(self, changes: Sequence[ChangePoint]) -> Judgement:
        """This judgement with the change points found over the history, its status redone."""
        return dataclasses.replace(self, changes=tuple(changes), status=night_status(
            self.verdicts, self.problems, changes))

    def by_verdict(self, *names: str) -> tuple[CellVerdict, ...]:
        return tuple(v for v in self.verdicts if v.verdict in names)


def _judge_load(key: CellKey, now: NightCell, base: NightCell, threshold: float,
                rules: Rules) -> CellVerdict:
    m = load_metric(key.metric)
    if min(now.values + base.values) <= 0:
        return CellVerdict(key, "too few runs", now, base, threshold,
                           reason="a value is zero or negative: no ratio")
    est = analysis.compare_runs(now.values, base.values, confidence=rules.confidence)
    interval = ((est.pct_low, est.pct_high)
                if est.pct_low is not None and est.pct_high is not None else None)
    verdict = analysis.verdict_for(est, higher_is_better=m.higher_is_better,
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


def history_interval(tonight: Sequence[float], nights: Sequence[Sequence[float]], *,
                     confidence: float = 0.95) -> analysis.RatioEstimate:
    """Tonight's geometric mean against the history's: the ratio exp(mean ln tonight − mean of
    the nights' mean ln values), with a t prediction interval whose variance counts the
    nights as a random effect (one-way ANOVA estimates):

        V = σ̂²_b (1 + 1/n) + MSW (1/k_t + h/n),   σ̂²_b = max(0, s²_m − MSW·h)

    n history nights, s²_m the variance of their means, MSW the pooled within-night variance
    (tonight's runs included), k_t tonight's runs, h the mean of 1/k over the history nights.
    Where the nights' means spread more than their runs explain (σ̂²_b > 0) V is the
    prediction variance of a new night's mean, with Satterthwaite's df (n − 1 when tonight
    has no fewer runs than the history's nights); where they do not, the pooled within-night
    variance with its df. Simulated (``bench/nightly_history_simulation.py``, 2000 nights a
    row): A/A false calls 1.9–5.9 % over 3–10 history nights and night-to-night spreads of
    0–2× a night's own noise, where one night against another gave 3.9–30.1 %. Needs n ≥ 2
    nights and within-night spread (some night with 2 runs)."""
    logs = [np.log(np.asarray(v, dtype=float)) for v in nights if len(v)]
    t = np.log(np.asarray(tonight, dtype=float))
    n, k_t = len(logs), len(t)
    groups = [x for x in [*logs, t] if len(x) >= 2]
    df_w = sum(len(x) - 1 for x in groups)
    if n < 2 or k_t < 1 or df_w < 1:
        raise ValueError("need 2 history nights, a run tonight and a night with 2 runs")
    means = np.array([x.mean() for x in logs])
    s2_m = float(means.var(ddof=1))
    msw = float(sum(((x - x.mean()) ** 2).sum() for x in groups) / df_w)
    h = float(np.mean([1.0 / len(x) for x in logs]))
    d = float(t.mean() - means.mean())
    if s2_m > msw * h:
        c1, c2 = 1.0 + 1.0 / n, 1.0 / k_t - h
        var = c1 * s2_m + c2 * msw
        df = (var * var / ((c1 * s2_m) ** 2 / (n - 1) + (c2 * msw) ** 2 / df_w) if c2 > 0
              else float(n - 1))
    else:
        var, df = msw * (1.0 / k_t + h / n), float(df_w)
    half = float(student_t.ppf(0.5 + confidence / 2, df)) * math.sqrt(var)
    return analysis.RatioEstimate(ratio=math.exp(d), low=math.exp(d - half),
                                  high=math.exp(d + half), confidence=confidence,
                                  method="history")


def _judge_history(key: CellKey, now: NightCell, nights: Sequence[tuple[str, NightCell]],
                   threshold: float, rules: Rules) -> CellVerdict:
    """``now`` against the ratio's history (``nights``: (date, cell), oldest first)."""
    m = load_metric(key.metric)
    pooled = NightCell(key, tuple(x for _, c in nights for x in c.values),
                       run_dirs=tuple(d for _, c in nights for d in c.run_dirs))
    if min(now.values + pooled.values) <= 0:
        return CellVerdict(key, "too few runs", now, pooled, threshold,
                           reason="a value is zero or negative: no ratio")
    try:
        est = history_interval(now.values, [c.values for _, c in nights],
                               confidence=rules.confidence)
    except ValueError as exc:
        return CellVerdict(key, "too few runs", now, pooled, threshold, reason=str(exc))
    interval = (est.pct_low, est.pct_high)
    verdict = analysis.verdict_for(est, higher_is_better=m.higher_is_better,
                                   min_effect_pct=threshold)
    against = (f"against the ratio's history of {len(nights)} passing nights "
               f"({nights[0][0]} … {nights[-1][0]}; nights measured beside other work, "
               f"≥ {rules.interference_max:g} of a core, left out), a prediction interval")
    name: VerdictName = {"slower": "regressed", "faster": "improved",
                         "within noise": "noise"}[verdict]  # type: ignore[assignment]
    if name == "noise" and _too_wide(interval, threshold):
        name = "undecided"
        reason = (f"{against}: [{interval[0]:+.1f}, {interval[1]:+.1f}] % is wider than the "
                  f"{threshold:g} % threshold; this night could not have told a change smaller "
                  f"than {max(abs(interval[0]), abs(interval[1])):.1f} % from noise (more "
                  "rounds a night, or more nights of history, narrow it)")
    elif name == "noise":
        reason = f"{against}: it includes no change" if interval[0] <= 0 <= interval[1] else (
            f"{against}: outside it but below the {threshold:g} % threshold")
    else:
        reason = f"{against}: it excludes no change and |change| >= {threshold:g} %"
    return CellVerdict(key, name, now, pooled, threshold, est.pct, interval, reason=reason,
                       history=tuple(d for d, _ in nights))


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
    from e2e.gsm8k.agreement import compare

    margin = rules.gsm8k_min_drop_pp
    if not now.run_dirs or not base.run_dirs:
        return _no_samples(key, now, base, margin, "no verdict files recorded for a night")
    for which, cell in (("tonight", now), ("the baseline night", base)):
        if cell.run_dirs[0] not in samples:
            return _no_samples(key, now, base, margin,
                               f"the verdicts of {which} ({cell.run_dirs[0]}/verdicts.jsonl) "
                               "could not be read; keep the results folder between nights")
    try:
        agree = compare(samples[base.run_dirs[0]], samples[now.run_dirs[0]],
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
            floor = len(compare(samples[now.run_dirs[0]], samples[now.run_dirs[1]]).flipped) / n * 100
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
               history: Sequence[tuple[str, NightCell]] = (), pinned: bool = False) -> CellVerdict:
    """The verdict of one cell (see the module docstring for the rules). ``threshold``
    overrides the rules' (the headline's threshold judging another metric); ``history``
    holds a relative cell's earlier nights ((date, cell), oldest first): with at least
    ``MIN_HISTORY_NIGHTS`` of them the cell is judged against them, not ``baseline``;
    with fewer, a change it calls against ``baseline`` is undecided unless the user
    ``pinned`` that night."""
    threshold = threshold if threshold is not None else rules.threshold(key)
    if threshold is None:
        return CellVerdict(key, "not judged", tonight, baseline,
                           reason="no threshold for this metric in this spec mode")
    if tonight is None:
        return CellVerdict(key, "missing", None, baseline, threshold,
                           reason="no valid reported run tonight")
    if key.kind == "load" and len(history) >= MIN_HISTORY_NIGHTS:
        return _disturbed(_judge_history(key, tonight, history, threshold, rules), rules)
    if not have_baseline:
        return CellVerdict(key, "no baseline", tonight, None, threshold,
                           reason="no baseline night")
    if baseline is None:
        return CellVerdict(key, "new cell", tonight, None, threshold,
                           reason="the baseline night has no such cell")
    if key.kind == "gsm8k":
        return _judge_gsm8k(key, tonight, baseline, rules, samples or {})
    verdict = _disturbed(_judge_load(key, tonight, baseline, threshold, rules), rules)
    return _one_night(verdict, len(history)) if is_relative(key.arm) and not pinned else verdict


def _one_night(v: CellVerdict, nights: int) -> CellVerdict:
    """``v``, or undecided where a relative cell called a change against one night: its
    interval counts the two nights' runs, not how the ratio moves from night to night, which
    no single night shows (``history_interval``'s simulation: one night against another
    falsely called 3.9-30.1 % of A/A nights; measured, docs/statistics.md: +9.1 % [+0.7,
    +17.3] called on an unchanged build against one night, its runs measured alone)."""
    if v.verdict not in ("regressed", "improved"):
        return v
    return _not_called(v, f"against one night: the ratio has {nights} earlier passing night(s), "
                       f"fewer than the {MIN_HISTORY_NIGHTS} its night-to-night spread is judged "
                       f"from, and one night's runs do not show that spread, so the {v.pct:+.1f} "
                       "% is not called (the first nights of a config build its history)")


def _not_called(v: CellVerdict, but: str) -> CellVerdict:
    """``v`` (a regressed or improved call) made undecided, ``but`` saying why."""
    return dataclasses.replace(v, verdict="undecided", reason=f"{v.reason}; but {but}")


def _disturbed(v: CellVerdict, rules: Rules) -> CellVerdict:
    """``v``, or undecided where it called a change on runs measured beside other work (the
    median run's recorded interference at least ``rules.interference_max`` cores)."""
    share = v.tonight.busy_share if v.tonight else None
    if v.verdict not in ("regressed", "improved") or share is None \
            or share < rules.interference_max:
        return v
    busy = [x for x in v.tonight.interference if x is not None]
    return _not_called(v, f"other processes took {share:.2f} of a core (median of tonight's "
                       f"runs, up to {max(busy):.2f}) while it was measured, at least "
                       f"{rules.interference_max:g}: a {v.pct:+.1f} % change measured beside "
                       "other work is not called (rerun the night on a quieter host with the "
                       "same --date; its runs' warnings name the processes)")


def night_status(verdicts: Iterable[CellVerdict], problems: Sequence[str] = (),
                 changes: Iterable[ChangePoint] = ()) -> NightStatus:
    """regression if a cell regressed or a change point is a regression; incomplete if a
    judged cell is missing, has too few runs or no samples, or ``problems`` (given-up runs, a
    failed GSM8K arm) is not empty; else pass."""
    verdicts = list(verdicts)
    if any(v.verdict == "regressed" for v in verdicts) or any(c.regression for c in changes):
        return "regression"
    if problems or any(v.verdict in _BLOCKING for v in verdicts):
        return "incomplete"
    return "pass"


def _server_headline(key: CellKey, now: Mapping[CellKey, NightCell],
                     base: Mapping[CellKey, NightCell], rules: Rules) -> str:
    """Why ``key`` (the cell's headline, from the client's TPOT) is judged from the server's
    TPOT instead (``e2e.analysis.server_twin``); "" if not."""
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
    histories: Mapping[CellKey, Sequence[tuple[str, NightCell]]] | None = None,
) -> Judgement:
    """Judge every cell of tonight (and every ``expected`` cell, so a cell whose runs all
    failed is *missing*, not forgotten) against ``baseline``, or a relative cell with
    enough nights in ``histories`` (cell -> its earlier nights, oldest first) against them.
    ``samples`` holds the GSM8K verdicts of the arm folders named in the cells' ``run_dirs``
    (both nights)."""
    histories = histories or {}
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
    verdicts_t = tuple(verdicts[k] for k in sorted(verdicts))
    return Judgement(date=date, baseline=baseline, verdicts=verdicts_t, problems=tuple(problems),
                     status=night_status(verdicts_t, problems))
