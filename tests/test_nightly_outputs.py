"""A night's outputs against the reference's (e2e.analysis.nightly.check_outputs): the same greedy answers
are no finding; a divergence is a finding where the night's A/A, or else the earlier nights,
say it is more than they show; it leads the night's summary, is kept in judgement.json and
the store, and fails the night only where [nightly] outputs_fail says so. The last test runs
whole nights against real server processes (the scripted vLLM of tests/fakevllm.py, whose
`perturb` setting changes some prompts' answers)."""

from __future__ import annotations

import json

import pytest

from e2e.analysis.nightly.judge import (
    Rules, judge_night, judgement_with_changes, judgement_with_outputs
)
from e2e.results import MORE_THAN_AA
from e2e.errors import ConfigError
from e2e.results import CellKey, NightCell
from e2e.analysis.nightly.outputs import check_outputs
from e2e.results import AS_HISTORY, FIRST_DIVERGENCE, MORE_THAN_HISTORY, NEW_DIVERGENCE
from e2e.render import SummaryContext, render_summary, render_summary_github
from e2e.nightly.settings import parse_nightly
from test_outputs_compare import N, diverged, outs, runs

CTX = SummaryContext(experiment="x", config_hash="h" * 12, night_dir="nightly/2026-01-05",
                     builds={}, arm_overrides={})
KEY = ("pr", 1, "base")


def _night(records, change=None, **kw):
    return check_outputs(records, outs(records, change), reference="main", **kw)


def _some(k):  # tonight's arm answers the first k prompts otherwise from token 2
    return lambda run, i: diverged(i, 2) if run.spec.arm == "pr" and i < k else None


def test_an_unchanged_night_says_identical_and_finds_nothing():
    (check,) = _night(runs("main") + runs("pr"))
    assert not check.finding and check.compared == check.diverged + N == N
    assert check.line() == ("pr-vs-main c=1 base: outputs identical to the reference "
                            f"({N} of {N} prompts)")


def test_a_first_divergence_is_a_finding_with_its_positions():
    (check,) = _night(runs("main") + runs("pr"), _some(3))
    assert check.finding and check.verdict == FIRST_DIVERGENCE
    assert (check.diverged, check.position_min, check.position_max) == (3, 2, 2)
    assert f"on 3 of {N} prompts (first divergent token at 2)" in check.line()
    # earlier nights that were identical: still a finding, and it says so
    (check,) = _night(runs("main") + runs("pr"), _some(3),
                      history={KEY: [("2026-01-01", N, 0), ("2026-01-02", N, 0)]})
    assert check.finding and check.verdict == NEW_DIVERGENCE
    assert check.line().endswith(": diverges (the 2 earlier night(s) were identical)")


def test_earlier_nights_that_diverged_too_are_the_yardstick():
    history = {KEY: [("2026-01-01", N, 3), ("2026-01-02", N, 2)]}
    (same,) = _night(runs("main") + runs("pr"), _some(3), history=history)
    assert not same.finding and same.verdict == AS_HISTORY and same.p_value > 0.05
    (more,) = _night(runs("main") + runs("pr"), _some(N), history=history)
    assert more.finding and more.verdict == MORE_THAN_HISTORY and more.p_value < 0.05


def test_with_an_aa_arm_in_the_night_its_verdict_decides():
    records = runs("main") + runs("main-repeat") + runs("pr")
    checks = {c.arm: c for c in _night(records, _some(N))}
    assert checks["pr"].finding and checks["pr"].verdict == MORE_THAN_AA
    assert "the night's A/A arm main-repeat" in checks["pr"].line()
    assert not checks["main-repeat"].finding  # the yardstick, identical


def test_runs_without_outputs_say_not_recorded():
    records = runs("main") + runs("pr")
    (check,) = check_outputs(records, {}, reference="main")
    assert not check.finding and check.line() == "pr-vs-main c=1 base: outputs not recorded"


CELL = NightCell(CellKey("load", "pr-vs-main", 1, "base", "tpot_ms_mean"), (1.0, 1.01), (2, 3),
                 ("n/a", "n/b"))


def _judged(checks, fail):
    j = judge_night("2026-01-05", [CELL], None,
                    Rules(thresholds={}, reference="main"))
    return judgement_with_outputs(j, checks, fail=fail)


def test_a_finding_leads_the_summary_and_fails_the_night_as_configured():
    finding = _night(runs("main") + runs("pr"), _some(3))
    j = _judged(finding, fail=True)
    assert j.status == "regression" and j.exit_code == 1
    text = render_summary(j, CTX)
    head = text.splitlines()
    assert head[0].endswith("REGRESSION (exit 1): outputs differ from the reference")
    assert head[2].startswith("- **Outputs: finding** — pr-vs-main c=1 base: outputs differ "
                              f"from the reference on 3 of {N} prompts")
    assert "(the night is a regression)" in head[2]
    assert "**Outputs: finding**" in render_summary_github(j, CTX)
    reported = _judged(finding, fail=False)
    assert reported.status == "pass" and reported.exit_code == 0
    assert "(reported only: outputs_fail = false)" in render_summary(reported, CTX)
    # a change point recomputed afterwards keeps the finding's status
    assert judgement_with_changes(_judged(finding, fail=True), ()).status == "regression"
    same = _judged(_night(runs("main") + runs("pr")), fail=True)
    assert same.status == "pass"
    assert (f"- **Outputs**: pr-vs-main c=1 base: outputs identical to the reference "
            f"({N} of {N} prompts)") in render_summary(same, CTX)


def test_outputs_fail_is_a_boolean_and_defaults_to_true(tmp_path):
    import fakevllm

    raw = fakevllm.experiment(fakevllm.install(tmp_path / "fake"), "m", name="nd").model_dump(
        mode="json", exclude_none=True)
    raw["nightly"] = {"arms": ["main"], "spec_modes": ["base"]}
    assert parse_nightly(raw).settings.outputs_fail is True
    raw["nightly"]["outputs_fail"] = False
    assert parse_nightly(raw).settings.outputs_fail is False
    raw["nightly"]["outputs_fail"] = "no"
    with pytest.raises(ConfigError, match="outputs_fail"):
        parse_nightly(raw)


def test_the_store_keeps_each_night_s_checks_for_the_next(tmp_path):
    from e2e.results import night_rows, open_store

    finding = _night(runs("main") + runs("pr"), _some(3))
    j = _judged(finding, fail=True)
    rows = night_rows(j, experiment="x", config_hash="H", recorded_at="2026-01-05T03:00Z",
                      cells=[CELL], builds={}, arm_overrides={}, e2e_git_sha=None, host="h")
    with open_store(None, tmp_path) as store:
        store.write_night(rows, judgement=j)
        assert store.outputs_history(experiment="x", config_hash="H", before="2026-01-06") == {
            KEY: [("2026-01-05", N, 3)]}
        assert store.outputs_history(experiment="x", config_hash="H", before="2026-01-05") == {}
        assert store.outputs_history(experiment="x", config_hash="other",
                                     before="2026-01-06") == {}


@pytest.mark.slow  # two nights of real server processes
def test_a_perturbed_night_reports_its_outputs_and_an_unchanged_one_does_not(tmp_path,
                                                                             monkeypatch):
    from e2e.session.tinymodel import build_tiny_llama
    from e2e.nightly.run import NightlyOptions, run_nightly
    from test_nightly_duet import _raw

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    raw = _raw(tmp_path, str(build_tiny_llama(tmp_path / "model")))
    raw["repeats"] = raw["nightly"]["runs"] = 2
    raw["duet"] = {"enabled": False}
    cfg = parse_nightly(raw)
    results = tmp_path / "results"

    def night(date, **overrides):
        return run_nightly(cfg, NightlyOptions(results=results, date=date, progress=False,
                                               arm_overrides=overrides))

    same = night("2026-01-01")
    (check,) = same.judgement.outputs
    assert not check.finding and check.compared > 0 and check.diverged == 0
    assert "outputs identical to the reference" in same.summary
    assert same.judgement.status == "undecided"  # the first night: nothing to judge against
    bad = night("2026-01-02", perturb=0.01)
    (check,) = bad.judgement.outputs
    assert check.finding and check.verdict == NEW_DIVERGENCE and 0 < check.diverged
    assert check.position_min == 3
    assert bad.judgement.exit_code == 1
    assert "**Outputs: finding**" in bad.summary.splitlines()[2]
    stored = json.loads((bad.folder / "judgement.json").read_text())
    assert stored["outputs"][0]["finding"] is True and stored["exit_code"] == 1
    github = (bad.folder / "summary-github.md").read_text()
    assert "**Outputs: finding**" in github


def test_the_dashboard_shows_the_finding_and_escapes_the_stored_line(tmp_path):
    import dataclasses

    from typer.testing import CliRunner

    from e2e.cli import app
    from e2e.results import night_rows, open_store

    (finding,) = _night(runs("main") + runs("pr"), _some(3))
    hostile = dataclasses.replace(finding, arm="<b>pr</b>")  # any writer may fill the store
    j = _judged((hostile,), fail=True)
    rows = night_rows(j, experiment="x", config_hash="H", recorded_at="2026-01-05T03:00Z",
                      cells=[CELL], builds={}, arm_overrides={}, e2e_git_sha=None, host="h")
    with open_store(None, tmp_path) as store:
        store.write_night(rows, judgement=j)
    made = CliRunner().invoke(app, ["dashboard", "--results", str(tmp_path), "--out",
                                    str(tmp_path / "site")])
    assert made.exit_code == 0, made.output
    index = (tmp_path / "site" / "index.html").read_text()
    regressions = index.split("id='regressions'", 1)[1].split("</ul>", 1)[0]
    assert "outputs: &lt;b&gt;pr&lt;/b&gt;-vs-main c=1 base: outputs differ" in regressions
    assert "<b>pr</b>" not in index
    assert "id='outputs'" in index and "1 finding</span>" in index
