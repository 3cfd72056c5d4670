"""Change points over the nightly history (e2e.analysis.nightly.changepoints.find_changes, night_changes) and the
judgement around them (e2e.nightly.assess), on hand-made histories: a slow drift that every
night-against-night verdict passes is reported at its first night and fails the night; a
one-night outlier is not a change point; a fixed step stops failing; a pinned night accepts
what came before it. Also the baseline arm by name and the headline from the server's TPOT.
Pure: no server."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, alone_nightly_raw
from e2e.analysis.nightly.changepoints import find_changes
from e2e.analysis.nightly.judge import Rules, judge_night
from e2e.nightly.assess import assess_night
from e2e.nightly.night import night_of
from e2e.results import night_rows, open_store
from e2e.render import SummaryContext, render_summary
from e2e.nightly.settings import parse_nightly
from e2e.results import Baseline, CellKey, NightCell

KEY = CellKey("load", "main", 1, "base", "server_tpot_ms_mean")  # judged at 2 % (nightly.toml)
# what the night's plan expects (nightly.night.expected_cells): the cell's headline, mean TPOT at
# concurrency 1, which nightly.toml builds from the server's TPOT: KEY is its server twin
HEADLINE = CellKey("load", "main", 1, "base", "tpot_ms_mean")


def config(**nightly):
    raw = alone_nightly_raw()
    raw["nightly"].update(nightly)
    return parse_nightly(raw)


def dates(n: int) -> list[str]:
    return [f"2026-01-{d:02d}" for d in range(1, n + 1)]


def runs(level: float, night: int) -> tuple[float, ...]:
    """Five reported runs of one night around ``level`` (±0.1 %, a quiet host)."""
    rng = np.random.default_rng(night)
    return tuple(float(level * (1 + rng.normal(0, 0.001))) for _ in range(5))


def play(tmp_path, levels, cfg=None, pinned=None):
    """Run the nights of ``levels`` through the nightly's judgement and history, as
    run_nightly does after collecting each night's cells; returns each night's judgement."""
    cfg = cfg or config()
    results = tmp_path / "results"
    out = []
    with open_store(None, results) as store:
        for i, (date, level) in enumerate(zip(dates(len(levels)), levels)):
            cell = NightCell(KEY, runs(level, i), tuple(range(2, 7)),
                             tuple(f"nightly/{date}/nightly/main-c1-base-r{k}" for k in range(2, 7)))
            night = night_of(cfg, date=date, results=results,
                             pinned=pinned if pinned and pinned < date else None)
            j = assess_night(night, [cell], expected=[HEADLINE], store=store)
            store.write_night(night_rows(
                j, experiment="nightly", config_hash=cfg.config_hash, recorded_at="t",
                cells=[cell], builds={}, arm_overrides={}, e2e_git_sha=None, host="h"))
            out.append(j)
    return out


@pytest.mark.slow
def test_slow_drift_is_a_change_point_at_its_first_night_and_a_regression(tmp_path):
    # ten steady nights, then five nights each 0.8 % slower (4 % in all)
    levels = [10.0] * 10 + [10.0 * 1.008**k for k in range(1, 6)]
    nights = play(tmp_path, levels)
    by_date = dict(zip(dates(15), nights))
    # night against night sees less than the 2 % threshold every night ...
    assert [by_date[d].verdicts[0].verdict for d in dates(14)[10:]] == ["noise"] * 4
    assert all(j.changes == () for j in nights[:12])
    # ... and from the drift's third night on the change point fails the night
    last = by_date["2026-01-13"]
    (change,) = last.changes
    assert change.start == "2026-01-11"  # the drift's first night
    assert change.worse and change.latest and change.regression and not change.caught
    assert change.pct == pytest.approx(2.0, abs=0.5)
    assert (last.status, last.exit_code) == ("regression", 1)
    assert [c.start for c in nights[-1].changes] == ["2026-01-11"]
    assert nights[-1].exit_code == 1
    text = render_summary(last, SummaryContext(experiment="nightly", config_hash="h" * 12,
                                               night_dir="n", builds={}, arm_overrides={}))
    assert "1 change point made a cell worse" in text
    assert "| main c1 base | server mean TPOT (ms) | 2026-01-11 |" in text
    assert "| no | **regression** |" in text  # night-vs-night did not catch it


@pytest.mark.slow
def test_a_one_night_outlier_is_not_a_change_point(tmp_path):
    levels = [10.0] * 6 + [10.8] + [10.0] * 6
    nights = play(tmp_path, levels)
    assert nights[6].verdicts[0].verdict == "regressed"  # that night itself fails ...
    assert all(j.changes == () for j in nights)          # ... but no level changed
    assert (nights[-1].status, nights[-1].exit_code) == ("pass", 0)


@pytest.mark.slow
def test_an_outlier_tonight_is_judged_night_against_night_only(tmp_path):
    nights = play(tmp_path, [10.0] * 9 + [10.8])
    assert nights[-1].changes == ()
    assert nights[-1].verdicts[0].verdict == "regressed" and nights[-1].exit_code == 1


@pytest.mark.slow
def test_a_fixed_step_stops_failing_and_a_pinned_night_accepts_it(tmp_path):
    fixed = play(tmp_path / "a", [10.0] * 8 + [10.6] * 4 + [10.0] * 4)
    assert [c.regression for c in fixed[-1].changes] == [False, False]
    assert fixed[-1].exit_code == 0
    kept = play(tmp_path / "b", [10.0] * 8 + [10.6] * 6, pinned="2026-01-10")
    (change,) = kept[-1].changes
    assert change.start == "2026-01-09" and change.worse and not change.regression
    assert "accepted" in change.reason and kept[-1].exit_code == 0


def test_no_change_points_on_a_noisy_flat_history():
    """Nights with 2 % noise and no change: the permutation test keeps false alarms rare
    (measured here: at most 5 of 100 histories of 15 nights at alpha 0.05)."""
    alarms = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        alarms += bool(find_changes(list(10 * (1 + rng.normal(0, 0.02, 15))), threshold_pct=2.0))
    assert alarms <= 5


def test_too_short_a_history_has_no_change_points():
    assert find_changes([10.0, 10.0, 11.0, 11.0, 11.0], threshold_pct=2.0) == []


# --- the baseline arm by name --------------------------------------------------------------

@pytest.mark.slow
def test_the_baseline_is_main_whatever_the_arm_order(tmp_path):
    from e2e.nightly.write import night_report
    from e2e.results.store import write_run
    from test_aggregate import make_record

    raw = alone_nightly_raw()
    raw["arms"] = {"pr": {"plugin": {"packing": "inplace"}}, **raw["arms"]}
    raw["nightly"]["arms"] = ["pr", "main"]
    cfg = parse_nightly(raw)
    assert cfg.arms[0] == "pr" and cfg.baseline_arm == "main"
    folder = tmp_path / "nightly" / "2026-01-01" / "nightly"
    arms = {"pr": {}, "main": {}}  # the config snapshot lists pr first, too
    for arm, tpot in (("pr", 11.0), ("main", 10.0)):
        for k in range(1, 5):
            record = make_record(arm, 1, k, tpot=tpot + 0.01 * k, experiment="nightly", arms=arms)
            write_run(folder / record.run_id, record)
    report = night_report(folder, cfg.baseline_arm, print)
    comparisons = pd.read_csv(report / "comparisons.csv")  # what the night's report says
    assert set(zip(comparisons.arm, comparisons.baseline)) == {("pr", "main")}
    (pct,) = comparisons[comparisons.metric == "tpot_ms_mean"].pct
    assert pct == pytest.approx(10.0, abs=0.5)


# --- the headline with the speculator ------------------------------------------------------

VERIFY = CellKey("load", "main", 4, "dspark", "ms_per_verify_step")
SERVER = CellKey("load", "main", 4, "dspark", "server_ms_per_verify_step")
BURST = CellKey("load", "main", 4, "dspark", "burst_share")


def _cell(key, values):
    return NightCell(key, tuple(values), tuple(range(2, 2 + len(values))))


def _nights(burst=(0.0, 0.0, 0.0)):
    # the client's figure cannot see the +10 % a per-step delay adds; the server's can
    base = [_cell(VERIFY, (12.0, 12.05, 11.95)), _cell(SERVER, (13.0, 13.05, 12.95))]
    now = [_cell(VERIFY, (12.0, 12.04, 11.96)), _cell(SERVER, (14.3, 14.35, 14.25)),
           _cell(BURST, burst)]
    return now, Baseline("2026-01-01", tuple(base), "x")


def test_verify_step_from_the_client_by_default():
    now, base = _nights()
    j = judge_night("2026-01-02", now, base, Rules({"dspark": {"ms_per_verify_step": 2.0}}))
    judged = [v for v in j.verdicts if v.verdict != "not judged"]
    assert [(v.key.metric, v.verdict) for v in judged] == [("ms_per_verify_step", "noise")]


def test_verify_step_from_the_server_when_the_config_says_so():
    now, base = _nights()
    rules = Rules({"dspark": {"ms_per_verify_step": 2.0}}, verify_step_from="server")
    j = judge_night("2026-01-02", now, base, rules)
    (v,) = [v for v in j.verdicts if v.verdict != "not judged"]
    assert (v.key.metric, v.verdict, v.threshold) == ("server_ms_per_verify_step", "regressed", 2.0)
    assert v.pct == pytest.approx(10.0) and 'verify_step_from = "server"' in v.source
    text = render_summary(j, SummaryContext(experiment="nightly", config_hash="h" * 12,
                                            night_dir="n", builds={}, arm_overrides={}))
    assert "**Judged metrics**: dspark: ms per verify step (server TPOT) (built from the " \
           "server's TPOT" in text


def test_verify_step_from_the_server_when_the_client_stream_came_in_bursts():
    now, base = _nights(burst=(0.02, 0.45, 0.03))
    j = judge_night("2026-01-02", now, base, Rules({"dspark": {"ms_per_verify_step": 2.0}}))
    (v,) = [v for v in j.verdicts if v.verdict != "not judged"]
    assert (v.key.metric, v.verdict) == ("server_ms_per_verify_step", "regressed")
    assert "burst-affected tonight (burst share up to 0.45 > 0.05)" in v.source
    assert j.exit_code == 1


def test_the_headline_function_is_server_tpot_times_acceptance():
    from e2e.metrics import metric_value as run_value
    from e2e.metrics import ms_per_verify_step
    from e2e.results.records import RunMetrics

    m = RunMetrics(requests=1, ok_requests=1, duration_s=1.0, input_tokens=1, output_tokens=2,
                   tpot_ms_mean=3.0, server_tpot_ms_mean=3.5, acceptance_length=2.0)
    assert run_value(m, "ms_per_verify_step") == 6.0
    assert run_value(m, "server_ms_per_verify_step") == 7.0 == ms_per_verify_step(3.5, 2.0)
    assert run_value(m, "burst_share") is None  # runs without the flag: ignored
