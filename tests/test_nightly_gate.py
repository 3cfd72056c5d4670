"""What a release gate reads from `e2e nightly`: its exit status. A night that resolved
nothing (a judged cell undecided, a call withheld on a busy host, nothing to judge against
yet) exits 3, one whose cell ends undecided at its last look night after night against a full
history exits 4 (blind), and neither is green; a busy night never lifts a standing regression.
Each checked on the judge and end to end through the command on fabricated nights (the
measurement replaced, everything after it real: the store, the history, the judge, the
summary). No server."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from conftest import ROOT
from e2e.analysis.nightly.history import undecided_nights
from e2e.analysis.nightly.judge import BLIND_NIGHTS, Rules, judge_night, night_status
from e2e.commands import nightly_command
from e2e.render.nightly import said
from e2e.results import (EXIT_CODES, CellKey, CellVerdict, ChangePoint, Judgement, NightCell,
                         RatioHistory, night_rows)
from e2e.results._nightly_history import history_cells

REL = CellKey("load", "main-vs-reference", 1, "base", "server_tpot_ms_mean")
RULES = Rules(thresholds={"base": {"server_tpot_ms_mean": 5.0}}, reference="reference")


def _night(level: float, date: str = "2026-02-01", *, busy: float | None = None,
           n: int = 8, key: CellKey = REL) -> NightCell:
    """``n`` duets around ``level`` (±1 %); ``busy``: each duet's recorded interference."""
    values = tuple(level * (1 + 0.01 * math.sin(1.7 * i + 0.3)) for i in range(n))
    return NightCell(key, values, tuple(range(2, 2 + n)),
                     tuple(f"nightly/{date}/x/{key.arm}-r{k}" for k in range(2, 2 + n)),
                     interference=(busy,) * n if busy is not None else ())


def _steady(nights: int) -> tuple[tuple[str, NightCell], ...]:
    out = []
    for i in range(nights):
        date = f"2026-01-{i + 1:02d}"
        out.append((date, _night(1 + 0.003 * math.sin(i + 1), date)))
    return tuple(out)


def _judge(tonight: NightCell, **hist) -> CellVerdict:
    history = RatioHistory(_steady(10), full=True, **hist)
    (v,) = judge_night("2026-02-01", [tonight], None, RULES, histories={REL: history}).verdicts
    return v


# --- the status and its exit code --------------------------------------------------------

def _v(verdict: str, **kw) -> CellVerdict:
    return CellVerdict(REL, verdict, None, None, 5.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("verdicts, status", [
    ([_v("noise"), _v("improved")], "pass"),
    ([_v("noise"), _v("undecided", undecided_nights=1)], "undecided"),
    ([_v("noise"), _v("no baseline")], "undecided"),            # nothing judged yet
    ([_v("undecided", undecided_nights=BLIND_NIGHTS)], "blind"),
    ([_v("undecided", undecided_nights=BLIND_NIGHTS), _v("missing")], "incomplete"),
    ([_v("undecided", undecided_nights=BLIND_NIGHTS), _v("too few runs"), _v("regressed")],
     "regression"),
])
def test_each_status_has_its_own_exit_code(verdicts, status):
    assert night_status(verdicts) == status
    j = Judgement("2026-02-01", None, tuple(verdicts), status=night_status(verdicts))
    assert j.exit_code == {"pass": 0, "regression": 1, "incomplete": 2, "undecided": 3,
                           "blind": 4}[status]
    assert sorted(EXIT_CODES.values()) == [0, 1, 2, 3, 4]   # none is Ctrl-C's 130


def test_a_change_point_still_fails_an_undecided_night():
    step = ChangePoint(REL, "2026-01-05", "2026-01-06", 1.0, 1.1, 10.0, 0.01, worse=True,
                       latest=True, caught=False, regression=True)
    assert night_status([_v("undecided", undecided_nights=1)], changes=[step]) == "regression"


# --- a busy night stops a new call, never lifts a standing one -------------------------

def test_a_new_call_on_a_busy_night_is_withheld_and_not_green():
    v = _judge(_night(1.2, busy=0.8))
    assert (v.verdict, v.withheld) == ("undecided", "regressed")
    assert "0.80 of a core" in v.reason and v.undecided_nights == 0  # busy: not a blind night
    assert said(v) == f"undecided: regressed {v.pct:+.1f} %, not called (measured beside other " \
                      "work)"                             # what the summary's table says
    j = judge_night("2026-02-01", [_night(1.2, busy=0.8)], None, RULES,
                    histories={REL: RatioHistory(_steady(10), full=True)})
    assert (j.status, j.exit_code) == ("undecided", 3)
    assert _judge(_night(1.2)).verdict == "regressed"          # the same night quiet: called


@pytest.mark.parametrize("level, quiet", [
    (1.0, "noise"),     # back under half the threshold the second night in a row: returned
    (0.8, "improved"),  # called improved
    (1.2, "regressed"),
])
def test_a_busy_night_does_not_lift_a_standing_regression(level, quiet):
    standing = dict(regressed_since="2026-01-20", returning=True)
    assert _judge(_night(level), **standing).verdict == quiet
    v = _judge(_night(level, busy=0.8), **standing)
    assert v.verdict == "regressed" and v.regressed_since == "2026-01-20" and not v.withheld
    if quiet != "regressed":
        assert "not lifted" in v.reason and f"would read {quiet}" in v.reason


def test_a_busy_night_does_not_stop_to_measure_whether_a_regression_returned():
    from e2e.results import Looks

    rules = dataclasses.replace(RULES, looks=Looks(first=4, step=4, last=12))
    # tonight spreads a little more than the history's nights (sd 5 % against 3 %: not busy
    # by its own spread), its interval reaching past half the threshold
    wide = NightCell(REL, (0.96, 1.06, 0.97, 1.05), (2, 3, 4, 5), interference=(0.8,) * 4)
    nights = tuple((f"2026-01-{i + 1:02d}",
                    NightCell(REL, tuple(1 + 0.04 * math.sin(1.7 * j + i) for j in range(8))))
                   for i in range(10))
    hist = RatioHistory(nights, full=True, regressed_since="2026-01-20")
    quiet = dataclasses.replace(wide, interference=())
    (looking,) = judge_night("2026-02-01", [quiet], None, rules, histories={REL: hist}).verdicts
    assert looking.verdict == "undecided" and looking.more   # quiet: it measures more
    (busy,) = judge_night("2026-02-01", [wide], None, rules, histories={REL: hist}).verdicts
    assert busy.verdict == "regressed" and not busy.more     # busy: nothing to learn


# --- undecided at the last look, night after night -----------------------------------------

def _rows(date: str, verdict: str, *, busy: float | None = None) -> pd.DataFrame:
    cell = _night(1.0, date, busy=busy)
    j = Judgement(date, None, (CellVerdict(REL, verdict, cell, None, 5.0),),  # type: ignore[arg-type]
                  status="undecided")
    return night_rows(j, experiment="e", config_hash="h", recorded_at="t", cells=[cell],
                      builds={}, arm_overrides={}, e2e_git_sha=None, host="x")


def test_the_undecided_nights_in_a_row_are_counted_from_the_stored_verdicts():
    nights = [("2026-01-01", "noise", None), ("2026-01-02", "undecided", None),
              ("2026-01-03", "undecided", 0.9),     # busy: skipped, as the history skips it
              ("2026-01-04", "undecided", None), ("2026-01-05", "undecided", None)]
    history = history_cells(pd.concat([_rows(d, v, busy=b) for d, v, b in nights]))
    assert undecided_nights(history, REL, interference_max=0.25) == 3
    assert undecided_nights(history, REL, interference_max=0.25, after="2026-01-04") == 1
    other = dataclasses.replace(REL, metric="tpot_ms_mean")
    assert undecided_nights(history, other, interference_max=0.25) == 0
    # tonight adds one when it ends undecided on a quiet night, and none when busy
    wide = _night(1.0, n=2)
    wide = dataclasses.replace(wide, values=(0.8, 1.25))
    hist = {REL: RatioHistory(_steady(10), full=True)}
    (v,) = judge_night("2026-02-01", [wide], None, RULES, histories=hist,
                       undecided={REL: 2}).verdicts
    assert (v.verdict, v.undecided_nights) == ("undecided", 3)
    busy = dataclasses.replace(wide, interference=(0.9, 0.9))
    j = judge_night("2026-02-01", [busy], None, RULES, histories=hist, undecided={REL: 2})
    assert (j.verdicts[0].undecided_nights, j.status) == (0, "undecided")


# --- end to end through `e2e nightly` ------------------------------------------------------

@pytest.fixture
def nightly(tmp_path, monkeypatch):
    """The embedded nightly (its history 3 nights, one look of 8 duets) whose measurement
    gives the ratio cell 8 duets at a level: ``before((date, level, busy), ...)`` judges those
    nights as the nightly does (``assess_night`` against the history so far) and stores them
    in one transaction; ``night(date, level, busy=None)`` runs `e2e nightly` for one night
    (the CliRunner result); ``dry(date)`` its --dry-run."""
    from e2e.nightly.assess import assess_night
    from e2e.nightly.measure import Measured
    from e2e.nightly.night import night_of
    from e2e.nightly.settings import load_nightly
    from e2e.results import open_store

    text = (ROOT / "configs" / "nightly.toml").read_text()
    assert "history_nights = 20" in text and "max_runs = 33" in text
    config = tmp_path / "nightly.toml"
    config.write_text(text.replace("history_nights = 20", "history_nights = 3")
                      .replace("max_runs = 33", "max_runs = 9"))
    results = tmp_path / "results"

    def cells(date, level, busy):
        return tuple(dataclasses.replace(_night(level, date, busy=busy), key=k)
                     for k in (REL, dataclasses.replace(REL, metric="tpot_ms_mean")))

    def before(*nights):
        cfg, history, frames = load_nightly(config), [], []
        for date, level, busy in nights:
            measured = cells(date, level, busy)
            j = assess_night(night_of(cfg, date=date, results=results), measured,
                             history=history)
            frames.append(night_rows(j, experiment=cfg.experiment.name,
                                     config_hash=cfg.config_hash, recorded_at="t",
                                     cells=measured, builds={}, arm_overrides={},
                                     e2e_git_sha=None, host="h"))
            history += history_cells(frames[-1])
        with open_store(None, results) as store:
            store.write_night(pd.concat(frames, ignore_index=True))
        return [f.loc[f["metric"] == REL.metric, "verdict"].iloc[0] for f in frames]

    tonight: dict = {}

    def measure(night, **kw):
        return Measured(cells=cells(night.date, tonight["level"], tonight["busy"]), records=(),
                        problems=(), builds={})

    monkeypatch.setattr("e2e.nightly.run.measure_night", measure)
    monkeypatch.setattr("e2e.nightly.write.render_trends", lambda *a, **k: {})  # no plots
    monkeypatch.setattr("e2e.nightly.write.night_report", lambda *a, **k: None)
    app = typer.Typer()
    app.command("nightly")(nightly_command)
    app.command("other")(lambda: None)
    base = ["nightly", "--config", str(config), "--results", str(results), "-q"]

    def night(date, level, busy=None):
        tonight.update(level=level, busy=busy)
        return CliRunner().invoke(app, [*base, "--date", date])

    def dry(date):
        return CliRunner().invoke(app, [*base, "--date", date, "--dry-run"])

    return before, night, dry


def _title(result) -> str:
    return next(line for line in result.output.splitlines() if line.startswith("# Nightly"))


def _said(tmp_path, date: str) -> str:
    return (tmp_path / "results" / "nightly" / date / "nightly" / "judgement.json").read_text()


def test_a_first_night_has_nothing_to_judge_against_and_is_not_green(nightly, tmp_path):
    _, night, _ = nightly
    first = night("2026-01-01", 1.0)
    assert first.exit_code == 3, first.output
    assert _title(first).endswith("UNDECIDED (exit 3): 1 of 1 judged cells have nothing to be "
                                  "judged against yet")
    assert '"status": "undecided"' in _said(tmp_path, "2026-01-01")


def test_a_history_too_wide_for_the_threshold_is_undecided_then_blind(nightly, tmp_path):
    before, night, dry = nightly
    # a full history whose nights spread ±12 %: it cannot show a 7 % change
    assert before(("2026-01-01", 0.88, None), ("2026-01-02", 1.0, None),
                  ("2026-01-03", 1.12, None)) == ["no baseline"] * 3
    first = night("2026-01-04", 1.0)
    assert first.exit_code == 3, first.output
    assert _title(first).endswith("UNDECIDED (exit 3): 1 of 1 judged cells not resolved")
    assert "its history is full (3 nights, no later night joins it) and no longer resolves " \
           "the 7 % threshold" in first.output            # what a night resolves, every night
    assert night("2026-01-05", 1.0).exit_code == 3
    plan = dry("2026-01-06")
    assert plan.exit_code == 0, plan.output
    assert "no longer resolves the 7 % threshold" in plan.output
    assert "undecided at its last look on the 2 night(s) before tonight, in a row" in plan.output
    blind = night("2026-01-06", 1.0)
    assert blind.exit_code == 4, blind.output
    assert "BLIND (exit 4): 1 of 1 judged cells not resolved; main-vs-reference c1 base" \
           in _title(blind)
    assert f"undecided at its last look {BLIND_NIGHTS} nights in a row" in _title(blind)
    assert '"status": "blind"' in _said(tmp_path, "2026-01-06")
    assert '"exit_code": 4' in _said(tmp_path, "2026-01-06")


def test_a_busy_night_withholds_a_new_call(nightly):
    before, night, _ = nightly
    before(("2026-01-01", 1.0, None), ("2026-01-02", 1.0, None), ("2026-01-03", 1.0, None))
    busy = night("2026-01-04", 1.2, busy=0.8)   # +20 % beside other work: not called
    assert busy.exit_code == 3, busy.output
    assert "1 call withheld: measured beside other work" in _title(busy)
    called = night("2026-01-05", 1.2)           # the same on a quiet host: called
    assert called.exit_code == 1 and "REGRESSION (exit 1)" in _title(called)


def test_a_busy_night_never_lifts_a_standing_regression(nightly, tmp_path):
    before, night, _ = nightly
    assert before(("2026-01-01", 1.0, None), ("2026-01-02", 1.0, None),
                  ("2026-01-03", 1.0, None), ("2026-01-04", 1.2, None),
                  ("2026-01-05", 1.0, None))[3:] == ["regressed", "regressed"]  # back once
    held = night("2026-01-06", 1.0, busy=0.8)   # back again, but busy: it does not return it
    assert held.exit_code == 1, held.output
    assert "not lifted" in _said(tmp_path, "2026-01-06")
    back = night("2026-01-07", 1.0)             # the second quiet night back returns it
    assert back.exit_code == 0, back.output
    assert _title(back).endswith("PASS (exit 0)")


def test_a_night_busy_by_its_own_spread_is_skipped_when_undecided_nights_are_counted():
    # the same nights as the stored-verdict count above, the third busy by its spread alone
    # (no interference recorded): it neither counts nor ends the count
    usual = [c.values for _, c in _steady(10)]
    rows = []
    for d, v in [("2026-01-01", "noise"), ("2026-01-02", "undecided"), ("2026-01-03", "undecided"),
                 ("2026-01-04", "undecided")]:
        cell = _night(1.0, d) if d != "2026-01-03" else NightCell(
            REL, (0.85, 1.15, 0.88, 1.12, 0.86, 1.14, 0.9, 1.1), tuple(range(2, 10)))
        j = Judgement(d, None, (CellVerdict(REL, v, cell, None, 5.0),),  # type: ignore[arg-type]
                      status="undecided")
        rows.append(night_rows(j, experiment="e", config_hash="h", recorded_at="t", cells=[cell],
                               builds={}, arm_overrides={}, e2e_git_sha=None, host="x"))
    history = history_cells(pd.concat(rows))
    assert undecided_nights(history, REL, interference_max=0.25) == 3
    assert undecided_nights(history, REL, interference_max=0.25, usual=usual) == 2
