"""A cell relative to the reference judged against its ratio's history of nights (a
prediction interval with the nights as a random effect): the interval against the textbook
formulas, its false-call rate simulated, the history's selection (its first nights, held
nights, a confirmed improvement, a pin that holds), the night's looks and their levels, what
a night says without a call, and a regression reported until it returns. Pure: no server."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from e2e.results import Baseline, CellKey, Judgement, Looks, NightCell, RatioHistory, night_rows
from e2e.results._nightly_history import history_cells
from e2e.render import SummaryContext, render_summary
from e2e.render.nightly import said
from e2e.analysis.estimators.sequential import boundaries, spending_at
from e2e.analysis.nightly.judge import Rules, history_fit, history_interval, judge_night, night_look
from e2e.analysis.nightly.history import ratio_history as ratio_of_records

REL = CellKey("load", "main-vs-reference", 1, "base", "server_tpot_ms_mean")
RULES = Rules(thresholds={"base": {"server_tpot_ms_mean": 5.0}}, reference="reference")
LOOKS = Looks(first=4, step=4, last=12)


def ratio_history(frame: pd.DataFrame, key: CellKey, *, date: str, experiment: str,
                  config_hash: str, **kw) -> RatioHistory:
    """The ratio's history over the nights in ``frame`` (night_rows' frames) as the nightly
    reads them from its store: the records of the experiment and config's nights before
    ``date`` (``Store.cells(experiment=, config_hash=, before=date)``)."""
    cells = history_cells(frame)
    return ratio_of_records([c for c in cells if c.experiment == experiment
                             and c.config_hash == config_hash and c.date < date], key, **kw)


def _night(values, date="2026-01-01", key=REL) -> NightCell:
    return NightCell(key, tuple(values), tuple(range(2, 2 + len(values))),
                     tuple(f"nightly/{date}/x/{key.arm}-r{k}" for k in range(2, 2 + len(values))))


def _steady(n: int, start: int = 1, level: float = 1.0,
            runs: tuple[float, ...] = (1.00, 1.01, 0.99, 1.005)) -> list[tuple[str, NightCell]]:
    """n nights of 4 runs around ``level`` (by default ±1 %, a night part of about 0.5 %)."""
    out = []
    for i in range(n):
        date = f"2026-01-{start + i:02d}"
        shift = level * (1 + 0.005 * math.sin(i + 1))
        out.append((date, _night([shift * x for x in runs], date)))
    return out


# --- the interval -----------------------------------------------------------------------

def test_the_interval_is_the_textbook_prediction_interval_of_a_new_nights_mean():
    # four runs a night, tonight too: mean(tonight) − mean of night means
    # ± t(n−1) · s_means · sqrt(1 + 1/n), whatever the nights' spread
    for nights in ([[1.00, 1.01, 0.99, 1.00], [1.10, 1.11, 1.09, 1.10], [0.95, 0.96, 0.94, 0.95],
                    [1.05, 1.04, 1.06, 1.05]],
                   [[1.00, 1.10, 0.90, 1.0], [1.01, 1.09, 0.91, 1.0], [1.02, 1.11, 0.92, 1.0],
                    [0.99, 1.12, 0.93, 0.98]]):
        tonight = [1.30, 1.31, 1.29, 1.30]
        est = history_interval(tonight, nights, confidence=0.95)
        means = np.array([np.log(n).mean() for n in nights])
        d = np.log(tonight).mean() - means.mean()
        s2 = means.var(ddof=1) * (1 + 1 / 4)
        msw = sum(((np.log(x) - np.log(x).mean()) ** 2).sum() for x in [*nights, tonight]) / 15
        floor = msw * (1 / 4 + (1 / 4) / 4)  # no night part: the runs' own noise
        half = student_t.ppf(0.975, 3) * math.sqrt(max(s2, floor))
        assert est.ratio == pytest.approx(math.exp(d))
        assert est.low == pytest.approx(math.exp(d - half))
        assert est.high == pytest.approx(math.exp(d + half))
        assert est.method == "history"
    assert history_fit(tonight, nights).df(4) == 3  # n − 1: not the pooled runs' 15


def test_a_night_whose_runs_spread_far_beyond_the_historys_is_busy():
    history = _steady(10)   # runs about 0.8 % apart
    assert "within-night sd" not in _judge(history, _night([1.00, 1.01, 0.99, 1.005])).reason
    v = _judge(history, _night([1.00, 1.12, 0.90, 1.08, 0.95, 1.10, 0.93, 1.04]))
    assert v.verdict == "undecided" and "within-night sd" in v.reason
    assert "not called" in v.reason and "out of the history" in v.reason
    # a spread only a little beyond the usual (sd 1.4 times) is no busy night, however
    # many runs show it
    calm = _night([1.0 + 0.012 * (-1) ** i for i in range(32)])
    assert "within-night sd" not in _judge(history, calm).reason


def test_a_busy_night_is_not_called_and_keeps_a_standing_regression():
    history = _steady(10)
    wild = _night([1.30, 1.05, 1.45, 1.10, 1.38, 1.02, 1.41, 1.20])   # +20 %, runs far apart
    v = _judge(history, wild)
    assert v.verdict == "undecided" and not v.more and v.pct > 10
    assert "not called" in v.reason and "within-night sd" in v.reason
    # interference may stop a new call, never lift a standing one
    kept = _judge(history, _night([0.90, 1.05, 0.85, 1.10, 0.92, 1.08, 0.88, 1.02]),
                  hist_kw={"regressed_since": "2026-01-15", "returning": True})
    assert kept.verdict == "regressed" and "regressed since 2026-01-15" in kept.reason


def test_one_busy_night_does_not_widen_the_history_for_good():
    # a busy night judged like any other (not called: it is busy), then quiet nights: the
    # history the later nights are judged against holds the quiet nights only, and its
    # between-night spread is theirs
    frame, _ = _nights([1.0, 1.0], start=11)
    busy = _night([1.25, 0.80, 1.30, 0.75, 1.20, 0.85, 1.28, 0.78], "2026-01-13")
    hist = ratio_history(frame, REL, date="2026-01-13", experiment="e", config_hash="h",
                         limit=20, threshold=5.0)
    j = judge_night("2026-01-13", [busy], None, RULES, histories={REL: hist})
    assert j.verdicts[0].verdict == "undecided" and "not called" in j.verdicts[0].reason
    frame = pd.concat([frame, night_rows(j, experiment="e", config_hash="h", recorded_at="t",
                                         cells=[busy], builds={}, arm_overrides={},
                                         e2e_git_sha=None, host="x")], ignore_index=True)
    frame, _ = _nights([1.0, 1.0], start=14, frame=frame)
    later = ratio_history(frame, REL, date="2026-01-16", experiment="e", config_hash="h",
                          limit=20, threshold=5.0)
    dates = [d for d, _ in later.nights]
    assert "2026-01-13" not in dates and len(dates) == 14
    quiet_only = history_fit([1.0, 1.01], [c.values for _, c in later.nights])
    assert math.sqrt(quiet_only.s2_m) < 0.01   # the steady nights' spread, not the busy one's


def test_too_little_to_judge_against_is_refused():
    with pytest.raises(ValueError):
        history_interval([1.0, 1.1], [[1.0, 1.1]])  # one night
    with pytest.raises(ValueError):
        history_interval([1.0], [[1.0], [1.1]])     # no within-night spread anywhere


@pytest.mark.parametrize("nights, spread", [(4, 0.0), (4, 2.0), (10, 1.0)])
def test_false_calls_at_or_under_nominal(nights, spread):
    # A/A nights, 4 runs a night (per-duet log-ratio sd 6 %), night-to-night sd `spread` ×
    # the sd of a night's mean: tonight's interval excludes no change in at most 5 % of
    # nights, within three Monte Carlo standard errors (1500 nights: ± 0.56 points)
    rng = np.random.default_rng(7)
    sims, k, sw = 1500, 4, 0.06
    calls = 0
    for _ in range(sims):
        level = rng.normal(0, spread * sw / math.sqrt(k), nights + 1)
        data = [np.exp(level[i] + rng.normal(0, sw, k)) for i in range(nights + 1)]
        est = history_interval(data[-1], data[:-1])
        calls += est.low > 1 or est.high < 1
    assert calls / sims <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)


@pytest.mark.slow  # 6000 simulated nights, ~3 s
def test_a_night_part_does_not_make_the_tail_of_the_call_too_thin():
    # The level a night is called at is tiny (0.25 % over its cells): where the nights'
    # means happened to spread little, the old rule switched to the pooled runs' many df and
    # called a night part of 1 % at 0.19-0.46 % for a 0.125 % level. The prediction variance
    # on n − 1 df stays at or under the level (6000 A/A nights, 10 history nights of 8 runs,
    # runs 2.7 %, a night part 1 %; ± 3 Monte Carlo standard errors).
    rng = np.random.default_rng(11)
    sims, level = 6000, 0.005
    calls = 0
    for _ in range(sims):
        data = [np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.027, 8)) for _ in range(11)]
        fit = history_fit(data[-1], data[:-1])
        calls += student_t.sf(fit.d / math.sqrt(fit.var(8)), fit.df(8)) < level
    assert calls / sims <= level + 3 * math.sqrt(level * (1 - level) / sims)


# --- the looks ----------------------------------------------------------------------------

def test_a_nights_looks_spend_its_level_pocock_style_at_the_information_reached():
    fit = history_fit([1.0] * 4 + [1.02] * 4, [[1.0, 1.02, 0.99, 1.01]] * 2 + [[1.01, 1.0, 1.03,
                                                                                  0.98]] * 3)
    alpha = 0.0025
    info = [1 / fit.var(k) for k in LOOKS.schedule()]
    t = [i / info[-1] for i in info]
    spent = [spending_at(x, alpha, spending="pocock", sides=1) for x in t]
    first = night_look(fit, 4, LOOKS, alpha=alpha, confidence=0.95)
    assert first.call_level == pytest.approx(spent[0]) and not first.last
    (c, *_), _ = boundaries(info, [spent[0], spent[1] - spent[0], spent[2] - spent[1]], sides=1)
    last = night_look(fit, 12, LOOKS, alpha=alpha, confidence=0.95)
    assert last.last and last.index == 3 and last.planned == 3
    two, _ = boundaries(info, [spent[0], spent[1] - spent[0], spent[2] - spent[1]], sides=1)
    from scipy.stats import norm
    assert last.call_level == pytest.approx(norm.sf(two[-1]))
    # the interval shown spends (1 − confidence) / 2 the same way: wider than its level alone
    assert first.show_level < 0.025


# --- what a night says ----------------------------------------------------------------------

def _judge(history, tonight, *, rules=RULES, hist_kw=None):
    hist = RatioHistory(tuple(history), **(hist_kw or {}))
    (v,) = judge_night("2026-02-01", [tonight], None, rules, histories={REL: hist}).verdicts
    return v


def test_without_a_call_a_night_says_no_change_beyond_the_intervals_worse_end():
    history = _steady(10)
    v = _judge(history, _night([1.00, 1.01, 0.99, 1.005]))
    assert v.verdict == "noise" and not v.more
    assert said(v) == f"no change beyond {v.interval[1]:+.1f} %" and v.interval[1] < 5
    assert "within the 5 % threshold" in v.reason
    # a wide night: its worse end past the threshold, and it looks again with more rounds
    # (against nights whose runs spread about as much: far wider, it would be busy)
    history = _steady(10, runs=(1.00, 1.06, 0.95, 1.03))
    wide = _night([1.00, 1.12, 0.92, 1.06])
    v = _judge(history, wide, rules=dataclasses.replace(RULES, looks=LOOKS))
    assert v.verdict == "undecided" and v.more and v.interval[1] > 5
    assert said(v).startswith("no change beyond +") and "not resolved" in said(v)
    assert "measuring more rounds tonight" in v.reason
    # at the night's last look it stays undecided, and says it stays out of the history
    v = _judge(history, wide)
    assert v.verdict == "undecided" and not v.more and "stays out of the history" in v.reason


def test_a_call_needs_the_nights_level_and_half_the_threshold():
    history = _steady(10)
    big = _judge(history, _night([1.08, 1.09, 1.07, 1.085]))
    assert big.verdict == "regressed" and big.pct > 7
    assert "p = " in big.reason and "0.002 a night over 1 cell(s)" in big.reason
    # 1 %: clearly beyond the runs' noise, but under half the 5 % threshold: not a call
    small = _judge(history, _night([1.01, 1.02, 1.00, 1.015]))
    assert small.verdict == "noise"
    down = _judge(history, _night([0.92, 0.93, 0.91, 0.925]))
    assert down.verdict == "improved"


def test_one_level_covers_a_nights_cells_together():
    # the same night's p against the level: with two judged cells each gets half
    other = dataclasses.replace(REL, concurrency=4)
    history = _steady(10)
    tonight = _night([1.045, 1.055, 1.035, 1.05])
    alone = _judge(history, tonight)
    hist = RatioHistory(tuple(history))
    both = judge_night("2026-02-01", [tonight, dataclasses.replace(tonight, key=other)], None,
                       dataclasses.replace(RULES, thresholds={"base": {
                           "server_tpot_ms_mean": 5.0}}),
                       histories={REL: hist, other: RatioHistory(tuple(
                           (d, dataclasses.replace(c, key=other)) for d, c in history))})
    assert "over 1 cell(s)" in alone.reason
    assert all("over 2 cell(s)" in v.reason for v in both.verdicts)


def test_a_history_too_short_builds_and_calls_nothing():
    tonight = _night([1.3, 1.31, 1.29, 1.3])
    v = _judge(_steady(2), tonight)
    assert v.verdict == "no baseline" and "holds 2 night(s)" in v.reason
    # an absolute cell is still judged against its baseline night (a config without a
    # reference arm)
    absolute = dataclasses.replace(REL, arm="main")
    base = Baseline("2026-01-01", (dataclasses.replace(_steady(1)[0][1], key=absolute),), "last")
    j = judge_night("2026-01-02", [dataclasses.replace(tonight, key=absolute)], base,
                    dataclasses.replace(RULES, reference=None))
    assert j.verdicts[0].verdict == "regressed"


def test_a_regression_is_reported_until_two_nights_return_under_half_the_threshold():
    history = _steady(10)
    back = _night([1.00, 1.01, 0.99, 1.005])
    first = _judge(history, back, hist_kw={"regressed_since": "2026-01-15"})
    assert first.verdict == "regressed" and "returns when the next night" in first.reason
    assert first.interval[1] <= 2.5                         # under half the 5 % threshold
    second = _judge(history, back, hist_kw={"regressed_since": "2026-01-15",
                                            "returning": True})
    assert second.verdict == "noise" and "has returned" in second.reason
    # still about 5 % up and not resolved at the last look: still regressed, since when
    still = _judge(history, _night([1.03, 1.09, 1.00, 1.06]),
                   hist_kw={"regressed_since": "2026-01-15"})
    assert still.verdict == "regressed" and still.regressed_since == "2026-01-15"
    assert said(still) == "regressed (since 2026-01-15)"
    # +2 %: no change beyond the threshold, yet its interval reaches past half of it (the
    # smallest change a night calls): not a level back, so a second such night keeps it
    up = _night([1.02, 1.03, 1.01, 1.025])
    kept = _judge(history, up, hist_kw={"regressed_since": "2026-01-15", "returning": True})
    assert 2.5 < kept.interval[1] <= 5 and kept.verdict == "regressed"
    assert "not under half the 5 % threshold" in kept.reason
    # the same night without a regression called before it is no change (noise)
    assert _judge(history, up).verdict == "noise"
    # a night with looks left whose change is under half the threshold but whose interval is
    # not measures more to see whether the level has returned
    wide = _night([0.99, 1.05, 0.97, 1.04])   # against nights that spread as much (not busy)
    looking = _judge(_steady(10, runs=(1.00, 1.06, 0.95, 1.03)), wide,
                     rules=dataclasses.replace(RULES, looks=LOOKS),
                     hist_kw={"regressed_since": "2026-01-15"})
    assert looking.verdict == "undecided" and looking.more and looking.interval[1] > 2.5
    assert "to see whether it has returned" in looking.reason


def _nights(levels, start: int = 11, frame=None, pins=None):
    """Judge nights of 4 runs at each of ``levels`` one after another, as the nightly does:
    each against the ratio's history of the frame so far (its first 10 nights), each night's
    rows added; ``pins``: date -> the baseline night pinned that night. Returns the frame and
    each night's verdict."""
    frame = frame if frame is not None else _chain(_steady(10))
    out = []
    for i, level in enumerate(levels):
        date = f"2026-01-{start + i:02d}"
        cell = _night([level * x for x in (1.00, 1.01, 0.99, 1.005)], date)
        pin = (pins or {}).get(date)
        hist = ratio_history(frame, REL, date=date, experiment="e", config_hash="h", limit=10,
                             threshold=5.0, pinned=pin)
        j = judge_night(date, [cell], Baseline(pin, (), "pinned") if pin else None, RULES,
                        histories={REL: hist})
        frame = pd.concat([frame, night_rows(j, experiment="e", config_hash="h",
                                             recorded_at="t", cells=[cell], builds={},
                                             arm_overrides={}, e2e_git_sha=None, host="x")],
                          ignore_index=True)
        out.append(j.verdicts[0])
    return frame, out


def _chain(nights):
    frame = None
    for date, cell in nights:
        hist = ratio_history(frame, REL, date=date, experiment="e", config_hash="h", limit=10,
                             threshold=5.0) if frame is not None else ()
        j = judge_night(date, [cell], None, RULES, histories={REL: hist})
        rows = night_rows(j, experiment="e", config_hash="h", recorded_at="t", cells=[cell],
                          builds={}, arm_overrides={}, e2e_git_sha=None, host="x")
        frame = rows if frame is None else pd.concat([frame, rows], ignore_index=True)
    return frame


def test_a_drift_once_called_stays_reported_while_it_holds_and_is_released_once_back():
    # a drift called at +3 %, then nights that read +2.2 to +2.4 %: each shows no change
    # beyond the 5 % threshold, none is back under half of it; then it keeps growing
    frame, got = _nights([1.03, 1.022, 1.024, 1.03, 1.035, 1.04])
    assert [v.verdict for v in got] == ["regressed"] * 6, [(v.verdict, v.reason) for v in got]
    assert all(v.regressed_since == "2026-01-11" for v in got[1:])
    assert got[1].interval[1] <= 5 and got[2].interval[1] <= 5   # within the threshold
    assert got[1].pct < 2.5 and "not seen to return" in got[1].reason
    # the level back: the first night under half the threshold still reports it, the second
    # in a row returns it, and the night after is judged afresh
    _, back = _nights([1.0, 1.0, 1.0], start=17, frame=frame)
    assert [v.verdict for v in back] == ["regressed", "noise", "noise"]
    assert "returns when the next night is under it too" in back[0].reason
    assert "has returned" in back[1].reason and back[2].regressed_since is None
    # one night back, then up again: the two are not in a row, it stays reported
    _, again = _nights([1.0, 1.022, 1.0], start=17, frame=frame)
    assert [v.verdict for v in again] == ["regressed"] * 3


def test_a_called_regression_is_released_by_a_pinned_baseline_night():
    frame, got = _nights([1.06, 1.06, 1.06])
    assert [v.verdict for v in got] == ["regressed"] * 3
    # a person accepts the new level: pins 2026-01-13; the history starts there and the
    # level is no longer reported, tonight nor the nights after
    _, pinned = _nights([1.06, 1.06, 1.06, 1.06], start=14, frame=frame,
                        pins={"2026-01-14": "2026-01-13"})
    assert [v.verdict for v in pinned] == ["no baseline", "no baseline", "noise", "noise"]
    assert all(v.regressed_since is None for v in pinned)


def test_a_change_measured_beside_other_work_is_undecided_not_called():
    history = _steady(4)
    values = (0.78, 0.66, 0.84, 0.79)
    dirs = tuple(f"d{k}" for k in range(4))
    busy = NightCell(REL, values, (2, 3, 4, 5), dirs, interference=(0.56, 0.85, 0.72, 0.35))
    quiet = NightCell(REL, values, (2, 3, 4, 5), dirs, interference=(0.01, 0.03, 0.3, 0.02))
    v = _judge(history, busy)
    assert v.verdict == "undecided" and v.pct < -15
    assert "0.64 of a core" in v.reason and "up to 0.85" in v.reason
    # one busy run of four: the median run quiet, so no interference is named; its runs
    # spread far beyond the history's, so it is busy by its own spread instead
    calm = _judge(history, quiet)
    assert calm.verdict == "undecided" and "of a core" not in calm.reason
    assert "within-night sd" in calm.reason


def test_the_summary_names_the_history_and_says_what_each_night_saw():
    history = _steady(4)
    tonight = _night([1.21, 1.22, 1.20, 1.23], "2026-01-05")
    j = judge_night("2026-01-05", [tonight], None, RULES,
                    histories={REL: RatioHistory(tuple(history))})
    (v,) = j.verdicts
    assert v.verdict == "regressed" and j.status == "regression"
    assert v.history == tuple(d for d, _ in history) and len(v.baseline.values) == 16
    text = render_summary(j, SummaryContext(experiment="x", config_hash="h" * 12,
                                            night_dir="nightly/2026-01-05", builds={},
                                            arm_overrides={}, design=("a night resolves 6.5 %",)))
    assert "their ratio's history, 4 nights 2026-01-01 … 2026-01-04" in text
    assert "**What a night resolves**: a night resolves 6.5 %" in text


def test_history_dates_from_the_store_are_text_in_the_summary():
    # a store edited by hand may hold any string as a date; the summary must not carry markup
    evil = '2026-01-0<img src=x onerror=alert(1)>|"\n'
    history = [(d, _night([1.0, 1.01, 0.99, 1.0], "2026-01-01")) for d in
               ("2026-01-01", "2026-01-02", evil)]
    tonight = _night([1.0, 1.02, 0.98, 1.0], "2026-01-05")
    j = judge_night("2026-01-05", [tonight], None, RULES, histories={REL: history})
    text = render_summary(j, SummaryContext(experiment="x", config_hash="h" * 12,
                                            night_dir="nightly/2026-01-05", builds={},
                                            arm_overrides={}))
    import re

    # md_text's escapes: a backslash before every <, > and |, the newline gone
    assert "\\<img src=x onerror=alert(1)\\>\\|" in text
    assert not re.search(r"(?<!\\)<img", text) and evil not in text


# --- the history's selection ----------------------------------------------------------------

def _history(nights: dict[str, tuple[tuple[float, ...], str]], pins: dict[str, str] | None = None
             ) -> pd.DataFrame:
    """A history frame: date -> (values, verdict of REL); ``pins``: date -> the baseline night
    that night was judged against, pinned."""
    frames = []
    for date, (values, verdict) in nights.items():
        cell = _night(values, date)
        pin = (pins or {}).get(date)
        j = Judgement(date=date, baseline=Baseline(pin, (), "pinned") if pin else None,
                      verdicts=(), status="regression" if verdict == "regressed" else "pass")
        rows = night_rows(j, experiment="e", config_hash="h", recorded_at="t", cells=[cell],
                          builds={}, arm_overrides={}, e2e_git_sha=None, host="x")
        rows["verdict"] = verdict
        logs = np.log(values)
        rows["pct"] = (math.exp(logs.mean()) - 1) * 100
        rows["pct_high"] = rows["pct"] + 2.0
        rows["pct_low"] = rows["pct"] - 2.0
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _ratio(h, date, **kw):
    return ratio_history(h, REL, date=date, experiment="e",
                         **{"config_hash": "h", "limit": 10, "threshold": 5.0, **kw})


QUIET = (1.00, 0.99, 1.01, 1.005)


def test_the_history_is_its_first_nights_and_never_absorbs_a_later_change():
    h = _history({**{f"2026-01-{d:02d}": (QUIET, "noise") for d in range(1, 6)},
                  **{f"2026-01-{d:02d}": ((1.1, 1.1, 1.11, 1.09), "regressed")
                     for d in range(6, 9)}})
    got = _ratio(h, "2026-01-09", limit=4)
    assert [d for d, _ in got.nights] == ["2026-01-01", "2026-01-02", "2026-01-03",
                                          "2026-01-04"] and got.full
    assert got.regressed_since == "2026-01-06" and not got.returning
    assert _ratio(h, "2026-01-09", config_hash="other").nights == ()
    # a night within the threshold while still regressed is returning; the next returns it
    h2 = pd.concat([h, _history({"2026-01-09": (QUIET, "regressed")})], ignore_index=True)
    assert _ratio(h2, "2026-01-10").returning
    h3 = pd.concat([h2, _history({"2026-01-10": (QUIET, "noise")})], ignore_index=True)
    assert _ratio(h3, "2026-01-11").regressed_since is None


def test_a_night_that_looks_changed_waits_and_one_that_does_not_joins():
    nights = {f"2026-01-{d:02d}": (QUIET, "no baseline") for d in range(1, 4)}
    nights["2026-01-04"] = ((1.00, 1.02, 0.98, 1.01), "undecided")   # wide, not changed: joins
    nights["2026-01-05"] = ((1.08, 1.09, 1.07, 1.08), "undecided")   # +8 %, p tiny: waits
    got = _ratio(_history(nights), "2026-01-06")
    assert [d for d, _ in got.nights] == ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
    assert got.suspect == "2026-01-05"  # if tonight looks changed too, the two are a call


def test_one_improved_night_alone_does_not_start_a_new_level():
    h = _history({"2026-12-01": ((0.95, 0.66, 1.07, 0.99), "no baseline"),
                  "2026-12-02": ((1.01, 0.86, 1.12, 1.00), "no baseline"),
                  "2026-12-03": ((0.78, 0.66, 0.84, 0.79), "improved")})
    got = _ratio(h, "2026-12-04")
    assert [d for d, _ in got.nights] == ["2026-12-01", "2026-12-02"]  # a call never joins
    # a second improved night confirms it: the history starts at the first of the two
    h2 = _history({**{d: ((1.0, 1.01), "noise") for d in ("2026-12-01", "2026-12-02")},
                   "2026-12-03": ((0.8, 0.81), "improved"),
                   "2026-12-04": ((0.8, 0.79), "improved"),
                   "2026-12-05": ((0.8, 0.8), "noise")})
    got = _ratio(h2, "2026-12-06")
    assert [d for d, _ in got.nights] == ["2026-12-03", "2026-12-04", "2026-12-05"]
    assert "confirmed improvement" in got.why


def test_a_pinned_baseline_night_starts_the_history_and_holds_for_later_nights():
    nights = {**{f"2026-01-{d:02d}": (QUIET, "noise") for d in range(1, 5)},
              "2026-01-05": ((1.1, 1.1, 1.11, 1.09), "regressed"),
              "2026-01-06": ((1.1, 1.12, 1.1, 1.09), "regressed")}
    h = _history(nights)
    assert _ratio(h, "2026-01-07").regressed_since == "2026-01-05"
    pinned = _ratio(h, "2026-01-07", pinned="2026-01-06")   # --baseline 2026-01-06 tonight
    assert [d for d, _ in pinned.nights] == ["2026-01-06"] and pinned.regressed_since is None
    assert pinned.why == "since 2026-01-06, the baseline night pinned"
    # the next night runs without --baseline: the pin recorded with night 7 still holds
    h2 = pd.concat([h, _history({"2026-01-07": ((1.1, 1.1, 1.1, 1.1), "no baseline")},
                                pins={"2026-01-07": "2026-01-06"})], ignore_index=True)
    later = _ratio(h2, "2026-01-08")
    assert [d for d, _ in later.nights] == ["2026-01-06", "2026-01-07"]
    assert later.regressed_since is None


def test_a_night_measured_beside_other_work_is_left_out_of_the_history():
    # set 2 of docs/explanation/statistics.md: night 3 (0.78, beside the other set: 0.64 of a core) in
    # the history widened night 4's interval to [-43.6, +114.9] %. Stored with its runs'
    # interference, it is left out, and the limit counts only nights kept.
    quiet = ((1.00, 0.98, 1.02, 1.01), "noise")
    h = _history({"2026-12-01": quiet, "2026-12-02": quiet,
                  "2026-12-03": ((0.78, 0.66, 0.84, 0.79), "noise"),
                  "2026-12-04": quiet, "2026-12-05": quiet})
    shares = {"2026-12-03": [0.56, 0.85, 0.72, 0.35], "2026-12-04": [0.3, 0.01, 0.02, None]}
    h["interference"] = [shares.get(d) for d in h["date"]]
    keep = dict(interference_max=0.25)
    assert [d for d, _ in _ratio(h, "2026-12-06", **keep).nights] == [
        "2026-12-01", "2026-12-02", "2026-12-04", "2026-12-05"]   # 12-04's median run: quiet
    assert [d for d, _ in _ratio(h, "2026-12-06", limit=3, **keep).nights] == [
        "2026-12-01", "2026-12-02", "2026-12-04"]
    # without the rule, its spread (sd 7.5 % against about 1.6 %) leaves it out all the same
    assert "2026-12-03" not in dict(_ratio(h, "2026-12-06").nights)
    got = dict(_ratio(h, "2026-12-06", interference_max=0.9).nights)
    assert got["2026-12-04"].interference == (0.3, 0.01, 0.02, None)
    assert got["2026-12-01"].interference == ()                     # none recorded


@pytest.mark.parametrize("p, called", [(0.005, True), (0.02, True), (0.045, False)])
def test_two_nights_in_a_row_that_look_changed_are_a_regression(p, called):
    # a history whose nights spread 2 %: tonight's change is set where its p lies between
    # the night's own level (0.002, spent over one look) and the 3 % of "looks changed"
    # (SUSPECT_LEVEL; at 1 % a +5 % step under a 7 % threshold went uncalled for three nights
    # in 14 % of simulated series), or past it
    rng = np.random.default_rng(3)
    history = [(f"2026-01-{d:02d}", _night(np.exp(rng.normal(0, 0.02) + rng.normal(0, 0.01, 4)),
                                          f"2026-01-{d:02d}")) for d in range(1, 11)]
    base = np.array([1.0, 1.01, 0.99, 1.0])
    fit = history_fit(base, [c.values for _, c in history])
    se, df = math.sqrt(fit.var(4)), fit.df(4)
    shift = float(student_t.isf(p, df)) * se - fit.d  # p on the worse side
    tonight = _night(base * math.exp(shift))
    rules = dataclasses.replace(RULES, alpha=0.002, thresholds={"base": {"server_tpot_ms_mean": 4.0}})
    alone = _judge(history, tonight, rules=rules)
    assert alone.verdict == "undecided" and alone.pct >= 2.0  # not called on its own
    pair = _judge(history, tonight, rules=rules, hist_kw={"suspect": "2026-01-11"})
    assert (pair.verdict == "regressed") is called
    if called:
        assert "the night before (2026-01-11) looked changed too" in pair.reason


def test_the_history_is_read_at_each_nights_first_look():
    # nights that measured past their first look did so because their first rounds strayed;
    # their later rounds pull their means back: read whole, the history spreads too little
    from e2e.analysis.nightly.judge import first_look

    pairs = [("2026-01-01", _night([1.0, 1.1, 0.9])), ("2026-01-02", _night([1.2]))]
    assert first_look(pairs, 2) == [(1.0, 1.1), (1.2,)]
    assert first_look(pairs, None) == [(1.0, 1.1, 0.9), (1.2,)]
    nights = []
    for i in range(10):
        stray = 1.0 + 0.03 * (-1) ** i            # the first 8 rounds off by 3 %
        runs = [stray * (1 + 0.01 * math.sin(j + i)) for j in range(8)]
        runs += [(2.0 - stray) * (1 + 0.01 * math.sin(j)) for j in range(8)]  # pulled back
        nights.append((f"2026-01-{i + 1:02d}", NightCell(REL, tuple(runs))))
    hist = RatioHistory(tuple(nights), full=True)
    tonight = _night([1.0 + 0.01 * math.sin(j) for j in range(8)], "2026-02-01")
    rules = dataclasses.replace(RULES, looks=Looks(first=8, step=8, last=16))
    (v,) = judge_night("2026-02-01", [tonight], None, rules, histories={REL: hist}).verdicts
    (whole,) = judge_night("2026-02-01", [tonight], None, dataclasses.replace(rules, looks=None),
                           histories={REL: hist}).verdicts
    assert v.interval[1] - v.interval[0] > 2 * (whole.interval[1] - whole.interval[0])
