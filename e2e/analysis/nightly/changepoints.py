"""Change points over a cell's nightly history: steps and slow drifts that night-against-night
judgement misses. Pure functions over a series or a history frame; no I/O. Each change point
is an ``e2e.results.ChangePoint``.

Method (``find_changes``), on one judged cell's nights (same experiment and config hash), in
date order, tonight last:

1. **Series**: x = log(median of the night's reported runs), so a step is a ratio.
2. **Noise scale**: σ = 1.4826 · median |x[i+1] − x[i]| / √2 (a robust standard deviation
   from successive differences, insensitive to a few steps), at least 0.01 %.
3. **Candidates**: ``ruptures.Pelt`` with the ``l2`` (mean shift) cost on x / σ, minimum
   segment length 2 nights (one night alone is never a segment, so a one-night outlier cannot
   make its own level) and penalty 3 · ln(n).
4. **Confirmation**, repeated until every break stands: for each break, the nights of the
   segment before against those of the segment after (the two neighbouring segments): a
   permutation test of the largest Welch t statistic over every split of those nights
   (999 permutations, a fixed seed; the maximum accounts for the split having been searched
   for, as E-divisive's permutation test does), p < ``alpha``, and a change of the medians at
   least the cell's threshold in %. The weakest break that fails (smallest change) is
   removed, its two segments merge, and the test is redone; a ramp that Pelt cut into pieces
   merges back into one change.
5. **Start**: the night the change started is the first of the last run of nights before
   the next break that all lie beyond the old level (median of the segment before) by more
   than 2 σ in the change's direction; for a slow drift that is its first night, where the
   segmentation alone would put the break in the ramp's middle.

A confirmed change point is a **regression** when it makes the cell worse, it is the latest
one (tonight belongs to the level it started), and it started after the nights the config
accepts (``[nightly.changepoints] since``; a pinned baseline night accepts what came before
it).

Why ruptures: it installs from PyPI on Python 3.11 with the project's numpy 2.x (one pure
wheel, no other dependency), while ``signal-processing-algorithms`` (MongoDB's E-divisive)
pins numpy 1.26 and pulls gevent, which would downgrade the environment vLLM and torch share.
E-divisive's permutation test is replaced here by step 4, which also gives each change a size
and an interval a nightly can threshold like its night-against-night verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from e2e.results import CellKey, CellVerdict, ChangePoint, HistoryCell, NightCell

__all__ = ["Change", "find_changes", "cell_series", "night_changes", "MIN_SEGMENT",
           "PENALTY_PER_LOG_N"]

MIN_SEGMENT = 2           # nights
PENALTY_PER_LOG_N = 3.0   # Pelt penalty = 3 ln(n) on the σ-scaled series
START_SIGMAS = 2.0
MIN_SIGMA = 1e-4          # 0.01 % in log units


@dataclass(frozen=True)
class Change:
    """One confirmed change of a series: the index of the night it started and where the
    segmentation broke, the levels before and after (medians, in the metric's units), the
    change in %, and the test's p-value."""

    start: int
    index: int
    before: float
    after: float
    pct: float
    p_value: float
    last: bool  # the latest change: the series ends at its level


def _sigma(x: np.ndarray) -> float:
    if len(x) < 2:
        return MIN_SIGMA
    diffs = np.abs(np.diff(x))
    return max(float(1.4826 * np.median(diffs) / math.sqrt(2.0)), MIN_SIGMA)


PERMUTATIONS = 999


def _split_t(rows: np.ndarray, floor: float) -> np.ndarray:
    """|Welch t| of every split (left k nights, k = MIN_SEGMENT .. m − MIN_SEGMENT) of each
    row of ``rows`` (shape P × m): shape P × splits. Variances are floored at ``floor``² so
    that segments without spread never claim certainty."""
    m = rows.shape[1]
    k = np.arange(MIN_SEGMENT, m - MIN_SEGMENT + 1)
    c1, c2 = np.cumsum(rows, axis=1), np.cumsum(rows**2, axis=1)
    s1l, s2l = c1[:, k - 1], c2[:, k - 1]
    s1r, s2r = c1[:, -1:] - s1l, c2[:, -1:] - s2l
    nl, nr = k.astype(float), (m - k).astype(float)
    ml, mr = s1l / nl, s1r / nr
    vl = np.maximum((s2l - nl * ml**2) / (nl - 1), floor**2)
    vr = np.maximum((s2r - nr * mr**2) / (nr - 1), floor**2)
    return np.abs(mr - ml) / np.sqrt(vl / nl + vr / nr)


def _test(x: np.ndarray, lo: int, mid: int, hi: int, floor: float) -> tuple[float, float]:
    """(change in % of the medians, permutation p) of x[mid:hi] against x[lo:mid]."""
    left, right = x[lo:mid], x[mid:hi]
    pct = (math.exp(float(np.median(right)) - float(np.median(left))) - 1.0) * 100.0
    seg = x[lo:hi]
    observed = _split_t(seg.reshape(1, -1), floor)[0, mid - lo - MIN_SEGMENT]
    rng = np.random.default_rng(0)
    perms = rng.permuted(np.tile(seg, (PERMUTATIONS, 1)), axis=1)
    hits = int((_split_t(perms, floor).max(axis=1) >= observed - 1e-12).sum())
    return pct, (1 + hits) / (1 + PERMUTATIONS)


def find_changes(values: Sequence[float], *, threshold_pct: float, alpha: float = 0.05,
                 min_nights: int = 6) -> list[Change]:
    """Confirmed change points of a series of positive night values, oldest first (see the
    module docstring for the method). Fewer than ``min_nights`` values: none."""
    import ruptures

    x = np.log(np.asarray(values, dtype=float))
    n = len(x)
    if n < max(min_nights, 2 * MIN_SEGMENT) or not np.all(np.isfinite(x)):
        return []
    sigma = _sigma(x)
    floor = sigma / 10.0
    algo = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit((x / sigma).reshape(-1, 1))
    breaks = [b for b in algo.predict(pen=PENALTY_PER_LOG_N * math.log(n)) if b < n]
    while breaks:
        bounds = [0, *breaks, n]
        tests = [(_test(x, bounds[i], bounds[i + 1], bounds[i + 2], floor), i)
                 for i in range(len(breaks))]
        failing = [(abs(pct), i) for (pct, p), i in tests
                   if p >= alpha or abs(pct) < threshold_pct]
        if not failing:
            break
        breaks.pop(min(failing)[1])
    out = []
    bounds = [0, *breaks, n]
    for i, b in enumerate(breaks):
        lo, hi = bounds[i], bounds[i + 2]
        pct, p = _test(x, lo, b, hi, floor)
        level = float(np.median(x[lo:b]))
        sign = 1.0 if pct > 0 else -1.0
        start = b
        while start - 1 > lo and sign * (x[start - 1] - level) > START_SIGMAS * sigma:
            start -= 1
        out.append(Change(start=start, index=b, before=math.exp(level),
                          after=math.exp(float(np.median(x[b:hi]))), pct=pct, p_value=p,
                          last=(i == len(breaks) - 1)))
    return out


def cell_series(history: Iterable[HistoryCell], key: CellKey, *,
                since: str | None = None) -> list[tuple[str, float, str]]:
    """(date, median, verdict) of every night of ``key`` in ``history`` (the cells of one
    experiment and config's nights before tonight, ``Store.cells``) on or after ``since``,
    oldest first."""
    rows = [r for r in history
            if (r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric)
            == (key.kind, key.arm, int(key.concurrency), key.spec_mode, key.metric)
            and (since is None or r.date >= since)]
    return [(str(r.date), float(r.median), str(r.verdict))
            for r in sorted(rows, key=lambda r: r.date)]


def night_changes(
    history: Sequence[HistoryCell],
    *,
    date: str,
    tonight: Sequence[NightCell],
    verdicts: Sequence[CellVerdict],
    thresholds: Mapping[CellKey, float],
    higher_is_better: Mapping[CellKey, bool],
    alpha: float = 0.05,
    min_nights: int = 6,
    since: str | None = None,
    accepted_through: str | None = None,
) -> list[ChangePoint]:
    """Change points of every judged load cell (``thresholds``: cell -> its threshold in %)
    over ``history`` (the cells of tonight's experiment and config before tonight,
    ``Store.cells``) plus tonight. Nights on or before ``accepted_through`` (a pinned
    baseline night) may hold change points, but those are not regressions."""
    now = {c.key: c for c in tonight}
    tonight_verdict = {v.key: v.verdict for v in verdicts}
    out: list[ChangePoint] = []
    for key, threshold in sorted(thresholds.items()):
        cell = now.get(key)
        if cell is None or key.kind != "load" or min(cell.values, default=0) <= 0:
            continue
        series = cell_series(history, key, since=since)
        series.append((date, cell.median, tonight_verdict.get(key, "not judged")))
        series = [s for s in series if s[1] > 0]
        dates = [s[0] for s in series]
        for ch in find_changes([s[1] for s in series], threshold_pct=threshold, alpha=alpha,
                               min_nights=min_nights):
            worse = (ch.pct < 0) if higher_is_better.get(key, False) else (ch.pct > 0)
            start = dates[ch.start]
            caught = any(s[2] == "regressed" for s in series[ch.start:])
            accepted = accepted_through is not None and start <= accepted_through
            regression = worse and ch.last and not accepted
            if regression:
                why = ("a confirmed step that makes the cell worse and still holds tonight"
                       + ("" if caught else "; night-against-night judgement missed it"))
            elif worse and ch.last:
                why = f"accepted: it started on or before the pinned baseline night {accepted_through}"
            elif not ch.last:
                why = "a later change point follows it"
            else:
                why = "an improvement"
            out.append(ChangePoint(key=key, start=start, break_date=dates[ch.index],
                                   before=ch.before, after=ch.after, pct=ch.pct,
                                   p_value=ch.p_value, worse=worse, latest=ch.last,
                                   caught=caught, regression=regression, reason=why))
    return out
