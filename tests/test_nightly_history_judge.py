"""A cell relative to the reference judged against its ratio's history of nights (a
prediction interval with the nights as a random effect), not against one night: the interval
against the textbook formulas, its false-call rate simulated, the history's selection, and
the judge's choice between history and baseline night. Pure: no server."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from e2e.nightly.history import append_night, cell_history, night_rows
from e2e.nightly.judge import (Baseline, CellKey, Judgement, NightCell, Rules, history_interval,
                               judge_night)
from e2e.nightly.render import SummaryContext, render_summary

REL = CellKey("load", "main-vs-reference", 1, "base", "server_tpot_ms_mean")
RULES = Rules(thresholds={"base": {"server_tpot_ms_mean": 2.0}}, reference="reference")


def _night(values, date="2026-01-01", key=REL) -> NightCell:
    return NightCell(key, tuple(values), tuple(range(2, 2 + len(values))),
                     tuple(f"nightly/{date}/x/{key.arm}-r{k}" for k in range(2, 2 + len(values))))


def test_nights_that_spread_more_than_their_runs_give_the_prediction_interval_of_a_night():
    # four runs a night, tonight too: the interval is mean(tonight) − mean of night means
    # ± t(n−1) · s_means · sqrt(1 + 1/n), the textbook prediction interval of a new mean
    nights = [[1.00, 1.01, 0.99, 1.00], [1.10, 1.11, 1.09, 1.10], [0.95, 0.96, 0.94, 0.95],
              [1.05, 1.04, 1.06, 1.05]]
    tonight = [1.30, 1.31, 1.29, 1.30]
    est = history_interval(tonight, nights, confidence=0.95)
    means = np.array([np.log(n).mean() for n in nights])
    d = np.log(tonight).mean() - means.mean()
    half = student_t.ppf(0.975, 3) * means.std(ddof=1) * math.sqrt(1 + 1 / 4)
    assert est.ratio == pytest.approx(math.exp(d))
    assert est.low == pytest.approx(math.exp(d - half))
    assert est.high == pytest.approx(math.exp(d + half))
    assert est.method == "history"


def test_nights_alike_pool_their_runs_noise():
    # the nights' means spread less than their runs explain: the pooled within-night
    # variance, its df, and tonight's mean against the history's mean of means
    nights = [[1.00, 1.10, 0.90], [1.01, 1.09, 0.91], [0.99, 1.11, 0.92]]
    tonight = [1.00, 1.12, 0.90]
    est = history_interval(tonight, nights, confidence=0.9)
    logs = [np.log(x) for x in [*nights, tonight]]
    msw = sum(((x - x.mean()) ** 2).sum() for x in logs) / 8
    d = logs[-1].mean() - np.mean([x.mean() for x in logs[:-1]])
    half = student_t.ppf(0.95, 8) * math.sqrt(msw * (1 / 3 + (1 / 3) / 3))
    assert est.low == pytest.approx(math.exp(d - half))
    assert est.high == pytest.approx(math.exp(d + half))


def test_too_little_to_judge_against_is_refused():
    with pytest.raises(ValueError):
        history_interval([1.0, 1.1], [[1.0, 1.1]])  # one night
    with pytest.raises(ValueError):
        history_interval([1.0], [[1.0], [1.1]])     # no within-night spread anywhere


@pytest.mark.parametrize("nights, spread", [(4, 0.0), (4, 2.0), (10, 1.0)])
def test_false_calls_at_or_under_nominal(nights, spread):
    # A/A nights, 4 runs a night (per-duet log-ratio sd 6 %, as measured), night-to-night sd
    # `spread` × the sd of a night's mean: tonight's interval excludes no change in at most
    # 5 % of nights, within three Monte Carlo standard errors (1500 nights: ± 0.56 points)
    rng = np.random.default_rng(7)
    sims, k, sw = 1500, 4, 0.06
    calls = 0
    for _ in range(sims):
        level = rng.normal(0, spread * sw / math.sqrt(k), nights + 1)
        data = [np.exp(level[i] + rng.normal(0, sw, k)) for i in range(nights + 1)]
        est = history_interval(data[-1], data[:-1])
        calls += est.low > 1 or est.high < 1
    assert calls / sims <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)


def _history(nights: dict[str, tuple[tuple[float, ...], str, str]]) -> pd.DataFrame:
    """A history frame: date -> (values, verdict of REL, night status)."""
    frames = []
    for date, (values, verdict, status) in nights.items():
        cell = _night(values, date)
        j = Judgement(date=date, baseline=None, verdicts=(), status=status)  # type: ignore[arg-type]
        rows = night_rows(j, experiment="e", config_hash="h", recorded_at="t", cells=[cell],
                          builds={}, arm_overrides={}, e2e_git_sha=None, host="x")
        rows["verdict"] = verdict
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def test_the_history_is_the_latest_passing_nights_back_to_a_confirmed_improvement():
    h = _history({"2026-01-01": ((1.0, 1.0), "noise", "pass"),
                  "2026-01-02": ((0.9, 0.9), "improved", "pass"),
                  "2026-01-03": ((0.9, 0.91), "improved", "pass"),
                  "2026-01-04": ((1.3, 1.3), "regressed", "regression"),
                  "2026-01-05": ((0.9, 0.92), "noise", "pass"),
                  "2026-01-06": ((0.9, 0.92), "noise", "pass")})
    got = cell_history(h, REL, date="2026-01-06", experiment="e", config_hash="h", limit=10)
    assert [d for d, _ in got] == ["2026-01-02", "2026-01-03", "2026-01-05"]
    assert got[-1][1].values == (0.9, 0.92)
    assert [d for d, _ in cell_history(h, REL, date="2026-01-06", experiment="e",
                                       config_hash="h", limit=2)] == ["2026-01-03", "2026-01-05"]
    assert cell_history(h, REL, date="2026-01-06", experiment="e", config_hash="other",
                        limit=10) == []


def test_one_improved_night_alone_does_not_start_a_new_level():
    # set 2 of docs/statistics.md: night 3 of one build called improved beside other work;
    # night 4 was then judged against night 3 alone and falsely regressed. Unconfirmed, night
    # 3 stays one night of the history and night 4 meets all three.
    h = _history({"2026-12-01": ((0.95, 0.66, 1.07, 0.99), "no baseline", "pass"),
                  "2026-12-02": ((1.01, 0.86, 1.12, 1.00), "undecided", "pass"),
                  "2026-12-03": ((0.78, 0.66, 0.84, 0.79), "improved", "pass")})
    got = cell_history(h, REL, date="2026-12-04", experiment="e", config_hash="h", limit=10)
    assert [d for d, _ in got] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    j = judge_night("2026-12-04", [_night([0.975, 0.918, 0.994, 0.98], "2026-12-04")],
                    None, RULES, histories={REL: got})
    assert j.verdicts[0].verdict != "regressed" and j.status == "pass"
    # a second improved night confirms it: the level starts at the first of the two
    h2 = _history({**{d: ((1.0, 1.01), "noise", "pass") for d in ("2026-12-01", "2026-12-02")},
                   "2026-12-03": ((0.8, 0.81), "improved", "pass"),
                   "2026-12-04": ((0.8, 0.79), "improved", "pass"),
                   "2026-12-05": ((0.8, 0.8), "noise", "pass")})
    assert [d for d, _ in cell_history(h2, REL, date="2026-12-06", experiment="e",
                                       config_hash="h", limit=10)] == [
        "2026-12-03", "2026-12-04", "2026-12-05"]


def test_a_night_measured_beside_other_work_is_left_out_of_the_history():
    # set 2 of docs/statistics.md: night 3 (0.78, beside the other set: 0.64 of a core) passed
    # undecided and, in the history, widened night 4's interval to [-43.6, +114.9] %. Stored
    # with its runs' interference, it is left out, and the limit counts only nights kept.
    quiet = ((1.00, 0.98, 1.02, 1.01), "noise", "pass")
    h = _history({"2026-12-01": quiet, "2026-12-02": quiet,
                  "2026-12-03": ((0.78, 0.66, 0.84, 0.79), "undecided", "pass"),
                  "2026-12-04": quiet, "2026-12-05": quiet})
    shares = {"2026-12-03": [0.56, 0.85, 0.72, 0.35], "2026-12-04": [0.3, 0.01, 0.02, None]}
    h["interference"] = [shares.get(d) for d in h["date"]]
    keep = dict(date="2026-12-06", experiment="e", config_hash="h")
    assert [d for d, _ in cell_history(h, REL, **keep, limit=10, interference_max=0.25)] == [
        "2026-12-01", "2026-12-02", "2026-12-04", "2026-12-05"]   # 12-04's median run: quiet
    assert [d for d, _ in cell_history(h, REL, **keep, limit=3, interference_max=0.25)] == [
        "2026-12-02", "2026-12-04", "2026-12-05"]
    assert len(cell_history(h, REL, **keep, limit=10)) == 5        # without the rule: all
    got = cell_history(h, REL, **keep, limit=10, interference_max=0.9)
    assert dict(got)["2026-12-03"].interference == (0.56, 0.85, 0.72, 0.35)
    assert dict(got)["2026-12-01"].interference == ()              # none recorded
    # the judge's interval without the busy night is narrower, and says the rule
    tonight = _night([1.00, 1.01, 0.99, 1.02], "2026-12-06")
    kept = cell_history(h, REL, **keep, limit=10, interference_max=0.25)
    (v,) = judge_night("2026-12-06", [tonight], None, RULES, histories={REL: kept}).verdicts
    (w,) = judge_night("2026-12-06", [tonight], None, RULES,
                       histories={REL: cell_history(h, REL, **keep, limit=10)}).verdicts
    assert v.interval[1] - v.interval[0] < (w.interval[1] - w.interval[0]) / 2
    assert "beside other work, ≥ 0.25 of a core, left out" in v.reason


def test_a_change_measured_beside_other_work_is_undecided_not_called():
    history = [(f"2026-01-0{d}", _night(v, f"2026-01-0{d}")) for d, v in
               [(1, [1.00, 1.01, 0.99, 1.00]), (2, [1.03, 1.02, 1.04, 1.03]),
                (3, [0.98, 0.99, 0.97, 0.98])]]
    values = (0.78, 0.66, 0.84, 0.79)
    dirs = tuple(f"d{k}" for k in range(4))
    busy = NightCell(REL, values, (2, 3, 4, 5), dirs, interference=(0.56, 0.85, 0.72, 0.35))
    quiet = NightCell(REL, values, (2, 3, 4, 5), dirs, interference=(0.01, 0.03, 0.3, 0.02))
    (v,) = judge_night("2026-01-04", [busy], None, RULES, histories={REL: history}).verdicts
    assert v.verdict == "undecided" and v.pct < -15
    assert "0.64 of a core" in v.reason and "up to 0.85" in v.reason
    (q,) = judge_night("2026-01-04", [quiet], None, RULES, histories={REL: history}).verdicts
    assert q.verdict == "improved"  # one busy run of four: the median run was quiet
    # against one baseline night too, and a regression the same (an absolute cell: a
    # relative one is not called against one night at all, below)
    absolute = dataclasses.replace(REL, arm="main")
    base = Baseline("2026-01-03", (dataclasses.replace(history[-1][1], key=absolute),), "last")
    up = NightCell(absolute, (1.3, 1.31, 1.29, 1.3), (2, 3, 4, 5), dirs, interference=(0.5,) * 4)
    alone = dataclasses.replace(RULES, reference=None)  # a nightly without a reference arm
    j = judge_night("2026-01-04", [up], base, alone)
    assert j.verdicts[0].verdict == "undecided" and j.status == "pass"
    j = judge_night("2026-01-04", [dataclasses.replace(up, interference=(0.1,) * 4)], base, alone)
    assert j.verdicts[0].verdict == "regressed" and j.status == "regression"


def test_a_relative_cell_is_not_called_against_one_night():
    """Set 5 of docs/statistics.md: night 2 of one build, measured alone (0.02 of a core),
    against night 1 alone: +9.1 % [+0.7, +17.3] called regressed before this rule."""
    dirs = tuple(f"d{k}" for k in range(4))
    night1 = NightCell(REL, (1.0192, 0.9674, 0.9752, 0.9117), (2, 3, 4, 5), dirs)
    night2 = NightCell(REL, (0.9931, 1.098, 1.0565, 1.0626), (2, 3, 4, 5), dirs,
                       interference=(0.02,) * 4)
    base = Baseline("2026-12-01", (night1,), "last")
    history = [("2026-12-01", night1)]
    j = judge_night("2026-12-02", [night2], base, RULES, histories={REL: history})
    (v,) = j.verdicts
    assert v.verdict == "undecided" and j.status == "pass" and v.pct > 5
    assert "against one night" in v.reason and "1 earlier passing night" in v.reason
    pinned = judge_night("2026-12-02", [night2], dataclasses.replace(base, reason="pinned"),
                         RULES)  # a night the user chose: called against it, as before
    assert pinned.verdicts[0].verdict == "regressed" and pinned.status == "regression"
    absolute = dataclasses.replace(REL, arm="main")  # the rule is the relative cells'
    j = judge_night("2026-12-02", [dataclasses.replace(night2, key=absolute)],
                    Baseline("2026-12-01", (dataclasses.replace(night1, key=absolute),), "last"),
                    dataclasses.replace(RULES, reference=None))
    assert j.verdicts[0].verdict == "regressed" and 8 < j.verdicts[0].pct < 10


def test_a_relative_cell_with_enough_nights_is_judged_against_them():
    base = Baseline("2026-01-04", (_night([1.02, 1.01, 1.03, 1.02], "2026-01-04"),), "last")
    history = [(f"2026-01-0{d}", _night(v, f"2026-01-0{d}")) for d, v in
               [(1, [1.00, 1.01, 0.99, 1.00]), (2, [1.03, 1.02, 1.04, 1.03]),
                (3, [0.98, 0.99, 0.97, 0.98]), (4, [1.02, 1.01, 1.03, 1.02])]]
    tonight = _night([1.21, 1.22, 1.20, 1.23], "2026-01-05")
    j = judge_night("2026-01-05", [tonight], base, RULES, histories={REL: history})
    (v,) = j.verdicts
    assert v.verdict == "regressed" and j.status == "regression"
    assert v.history == ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04")
    assert "history of 4 passing nights" in v.reason
    assert len(v.baseline.values) == 16  # the history's runs, pooled for the table
    text = render_summary(j, SummaryContext(experiment="x", config_hash="h" * 12,
                                            night_dir="nightly/2026-01-05", builds={},
                                            arm_overrides={}))
    assert "history" in text and "2026-01-01 … 2026-01-04" in text
    # two nights are not enough: the baseline night, and a change against it not called
    j2 = judge_night("2026-01-05", [tonight], base, RULES, histories={REL: history[2:]})
    (v2,) = j2.verdicts
    assert v2.history == () and "history of" not in v2.reason
    assert v2.verdict == "undecided" and "2 earlier passing night(s)" in v2.reason


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
