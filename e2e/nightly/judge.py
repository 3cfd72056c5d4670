"""Judgement of one night against a baseline night: pure functions, no I/O.

A *night cell* is one metric of one (arm, concurrency, spec mode) of one night, with its
per-run values (the reported runs: valid, repeat >= report_from_run). Tonight's cell is
compared with the baseline night's cell of the same key; the rules are:

* **load metrics** (``e2e.nightly.settings.NIGHTLY_METRICS``) with a threshold for their spec mode:
  ``e2e.stats.compare_runs(tonight, baseline)`` (ratio of medians; Welch t-interval on log
  values at the configured confidence), then ``e2e.stats.verdict_for`` with
  ``min_effect_pct = threshold``: **regressed** when the interval excludes 1 on the worse
  side, the point estimate is on that side and at least the threshold in size (worse:
  higher for latencies and ms per verify step, lower for throughput and acceptance);
  **improved** the same on the better side; otherwise **noise**. Fewer than 2 runs on a
  side: **too few runs**. Metrics without a threshold are recorded, **not judged**.
* **GSM8K strict-match** (one value per fresh server of the arm, fractions): drop =
  median(baseline) - median(tonight) in percentage points; noise floor = the larger spread
  (max - min) of the two nights' repeats of the arm (the repeat-of-main noise floor).
  **regressed** when drop > floor + ``drop_pp``; **improved** when -drop > floor + drop_pp;
  else **noise**. Fewer than 2 servers on a side: **too few runs**.
* no baseline night: **no baseline**; a cell the baseline lacks: **new cell**; a planned
  cell tonight lacks (every run invalid): **missing**.

The night is **regression** (exit 1) when a cell regressed; else **incomplete** (exit 2)
when a judged cell is missing or has too few runs, or a run was given up; else **pass**
(exit 0). Only passing nights become the default baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from e2e import stats
from e2e.nightly.settings import nightly_metric as load_metric

__all__ = ["CellKey", "NightCell", "Baseline", "Rules", "CellVerdict", "Judgement",
           "VerdictName", "NightStatus", "EXIT_CODES", "judge_cell", "judge_night",
           "night_status"]

VerdictName = Literal["regressed", "improved", "noise", "too few runs", "no baseline",
                      "new cell", "missing", "not judged"]
NightStatus = Literal["pass", "regression", "incomplete"]
EXIT_CODES: dict[str, int] = {"pass": 0, "regression": 1, "incomplete": 2}
_BLOCKING: frozenset[str] = frozenset({"too few runs", "missing"})


@dataclass(frozen=True, order=True)
class CellKey:
    kind: str          # "load" or "gsm8k"
    arm: str
    concurrency: int   # 0 for GSM8K
    spec_mode: str
    metric: str

    def label(self) -> str:
        if self.kind == "gsm8k":
            return f"{self.arm} GSM8K {self.spec_mode}"
        return f"{self.arm} c{self.concurrency} {self.spec_mode}"


@dataclass(frozen=True)
class NightCell:
    """One metric of one cell of one night: its reported runs' values and run folders."""

    key: CellKey
    values: tuple[float, ...]
    repeats: tuple[int, ...] = ()
    run_dirs: tuple[str, ...] = ()

    @property
    def median(self) -> float:
        return stats.median_range(self.values).median

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class Baseline:
    """The night judged against, and why it was chosen."""

    date: str
    cells: tuple[NightCell, ...]
    reason: str  # "last passing night with the same config hash" or "pinned"
    status: str = "pass"


@dataclass(frozen=True)
class Rules:
    """Judging settings: thresholds in % per (spec mode, load metric), the GSM8K margin in
    percentage points, the interval's confidence."""

    thresholds: dict[str, dict[str, float]]
    gsm8k_drop_pp: float = 0.0
    confidence: float = 0.95

    def threshold(self, key: CellKey) -> float | None:
        if key.kind == "gsm8k":
            return self.gsm8k_drop_pp
        return self.thresholds.get(key.spec_mode, {}).get(key.metric)


@dataclass(frozen=True)
class CellVerdict:
    """Tonight's cell against the baseline's. ``pct`` is the change in % (load metrics) or
    in percentage points (GSM8K); ``interval`` the change's interval in % (load metrics);
    ``floor_pp`` the GSM8K noise floor."""

    key: CellKey
    verdict: VerdictName
    tonight: NightCell | None
    baseline: NightCell | None
    threshold: float | None = None
    pct: float | None = None
    interval: tuple[float, float] | None = None
    floor_pp: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Judgement:
    date: str
    baseline: Baseline | None
    verdicts: tuple[CellVerdict, ...]
    problems: tuple[str, ...] = field(default=())
    status: NightStatus = "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def by_verdict(self, *names: str) -> tuple[CellVerdict, ...]:
        return tuple(v for v in self.verdicts if v.verdict in names)


def _judge_load(key: CellKey, now: NightCell, base: NightCell, threshold: float,
                rules: Rules) -> CellVerdict:
    m = load_metric(key.metric)
    if min(now.values + base.values) <= 0:
        return CellVerdict(key, "too few runs", now, base, threshold,
                           reason="a value is zero or negative: no ratio")
    est = stats.compare_runs(now.values, base.values, confidence=rules.confidence)
    interval = ((est.pct_low, est.pct_high)
                if est.pct_low is not None and est.pct_high is not None else None)
    verdict = stats.verdict_for(est, higher_is_better=m.higher_is_better,
                                min_effect_pct=threshold)
    name: VerdictName = {"slower": "regressed", "faster": "improved",
                         "within noise": "noise", "too few runs": "too few runs"}[verdict]  # type: ignore[assignment]
    if name == "too few runs":
        reason = f"{len(now.values)} run(s) tonight, {len(base.values)} in the baseline: no interval"
    elif name == "noise" and interval is not None and (interval[0] > 0 or interval[1] < 0):
        reason = f"outside the noise interval but below the {threshold:g} % threshold"
    elif name == "noise":
        reason = "the interval includes no change"
    else:
        reason = f"the interval excludes no change and |change| >= {threshold:g} %"
    return CellVerdict(key, name, now, base, threshold, est.pct, interval, reason=reason)


def _judge_gsm8k(key: CellKey, now: NightCell, base: NightCell, margin: float) -> CellVerdict:
    if len(now.values) < 2 or len(base.values) < 2:
        return CellVerdict(key, "too few runs", now, base, margin,
                           reason="the noise floor needs at least 2 servers per night")
    drop = (base.median - now.median) * 100.0
    floor = max(now.high - now.low, base.high - base.low) * 100.0
    if drop > floor + margin:
        name: VerdictName = "regressed"
    elif -drop > floor + margin:
        name = "improved"
    else:
        name = "noise"
    reason = (f"strict-match moved {-drop:+.2f} pp; repeat-of-main noise floor {floor:.2f} pp"
              + (f" + margin {margin:g} pp" if margin else ""))
    return CellVerdict(key, name, now, base, margin, -drop, None, floor_pp=floor, reason=reason)


def judge_cell(key: CellKey, tonight: NightCell | None, baseline: NightCell | None,
               rules: Rules, *, have_baseline: bool = True) -> CellVerdict:
    """The verdict of one cell (see the module docstring for the rules)."""
    threshold = rules.threshold(key)
    if threshold is None:
        return CellVerdict(key, "not judged", tonight, baseline,
                           reason="no threshold for this metric in this spec mode")
    if tonight is None:
        return CellVerdict(key, "missing", None, baseline, threshold,
                           reason="no valid reported run tonight")
    if not have_baseline:
        return CellVerdict(key, "no baseline", tonight, None, threshold,
                           reason="no baseline night")
    if baseline is None:
        return CellVerdict(key, "new cell", tonight, None, threshold,
                           reason="the baseline night has no such cell")
    if key.kind == "gsm8k":
        return _judge_gsm8k(key, tonight, baseline, threshold)
    return _judge_load(key, tonight, baseline, threshold, rules)


def night_status(verdicts: Iterable[CellVerdict], problems: Sequence[str] = ()) -> NightStatus:
    """regression if a cell regressed; incomplete if a judged cell is missing or has too few
    runs, or ``problems`` (given-up runs, a failed GSM8K arm) is not empty; else pass."""
    verdicts = list(verdicts)
    if any(v.verdict == "regressed" for v in verdicts):
        return "regression"
    if problems or any(v.verdict in _BLOCKING for v in verdicts):
        return "incomplete"
    return "pass"


def judge_night(
    date: str,
    tonight: Sequence[NightCell],
    baseline: Baseline | None,
    rules: Rules,
    *,
    expected: Iterable[CellKey] = (),
    problems: Sequence[str] = (),
) -> Judgement:
    """Judge every cell of tonight (and every ``expected`` cell, so a cell whose runs all
    failed is *missing*, not forgotten) against ``baseline``."""
    now = {c.key: c for c in tonight}
    base = {c.key: c for c in baseline.cells} if baseline is not None else {}
    keys = sorted(set(now) | set(expected))
    verdicts = tuple(judge_cell(k, now.get(k), base.get(k), rules,
                                have_baseline=baseline is not None) for k in keys)
    return Judgement(date=date, baseline=baseline, verdicts=verdicts, problems=tuple(problems),
                     status=night_status(verdicts, problems))
