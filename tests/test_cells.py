"""Cells are keyed by everything that must be equal to compare runs: runs of unlike workloads
or server settings in one results folder are never averaged together -- the report refuses,
naming the field, and ``--only`` reports one kind."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from e2e.analysis.sweep.aggregate import summarize
from e2e.cli import app
from e2e.plan import RunSpec
from e2e.errors import ResultsError
from e2e.paths import atomic_write_json
from e2e.results.records import RunMetrics, RunRecord, ServerInfo
from e2e.render import build_report
from e2e.session.session import redacted_config


def record(experiment, arm: str, repeat: int, tpot: float, **spec) -> RunRecord:
    s = RunSpec.resolve(experiment, arm=arm, concurrency=1, dspark=False, repeat=repeat, **spec)
    metrics = RunMetrics(requests=s.prompts, ok_requests=s.prompts, duration_s=1.0,
                         input_tokens=0, output_tokens=0, tpot_ms_mean=tpot,
                         tpot_ms_median=tpot)
    return RunRecord(experiment=experiment.name, run_id=s.run_id, spec=s, arm_settings={},
                     config=redacted_config(experiment),
                     server=ServerInfo(argv=["x"], env={}, base_url="http://h", model="m"),
                     provenance={}, started_at="t", finished_at="t", metrics=metrics,
                     valid=True)


def write(folder, rec: RunRecord, name: str | None = None) -> None:
    atomic_write_json(folder / (name or rec.run_id) / "run.json", rec.model_dump(mode="json"))


@pytest.fixture
def mixed(default_experiment, tmp_path):
    """main and pr at 509 output tokens (3 runs each), plus a `e2e run --output-len 128`."""
    folder = tmp_path / "default"
    for k in (1, 2, 3):
        write(folder, record(default_experiment, "main", k, 3.0 + k / 100))
        write(folder, record(default_experiment, "pr", k, 3.1 + k / 100))
    write(folder, record(default_experiment, "main", 4, 1.5, output_len=128), "main-short")
    return folder


def test_two_output_lengths_are_refused_naming_the_field(mixed):
    with pytest.raises(ResultsError) as err:
        build_report(mixed)
    message = str(err.value)
    assert "differ in output_len (concurrency 1, base)" in message
    assert "509 in 6 run(s)" in message and "128 in 1 run(s) (main-c1-base-r4)" in message
    assert "--only output_len=VALUE" in message


@pytest.mark.slow
def test_only_reports_one_workload_and_never_mixes(mixed):
    long = build_report(mixed, only={"output_len": "509"}).summary
    short = build_report(mixed, only={"output_len": "128"}).summary
    assert long.cell("main", 1, "base", "tpot_ms_mean").values == (3.02, 3.03)
    assert short.cell("main", 1, "base", "tpot_ms_mean").values == (1.5,)
    result = CliRunner().invoke(app, ["report", str(mixed), "--only", "output_len=128"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(mixed)])
    assert result.exit_code == 1 and "differ in output_len" in result.output
    result = CliRunner().invoke(app, ["report", str(mixed), "--only", "colour=red"])
    assert result.exit_code == 1 and "not a field runs can be selected by" in result.output


def test_server_settings_and_arm_settings_must_match(default_experiment):
    other_server = default_experiment.model_copy(update={"server": default_experiment.server.model_copy(
        update={"args": [*default_experiment.server.args, "--max-num-seqs", "8"]})})
    runs = [record(default_experiment, "main", 2, 3.0), record(other_server, "pr", 2, 3.1)]
    with pytest.raises(ValueError, match=r"differ in server settings \(server.args\)"):
        summarize(runs)
    # only operational keys differ (timeouts, lock wait): still comparable
    patient = default_experiment.override("server", lock_wait_s=900, startup_timeout_s=30)
    summarize([record(default_experiment, "main", 2, 3.0), record(patient, "pr", 2, 3.1)])
    pr = default_experiment.arms["pr"].model_copy(update={"plugin": {"packing": "fused"}})
    changed = default_experiment.model_copy(update={"arms": {**default_experiment.arms, "pr": pr}})
    runs = [record(default_experiment, "pr", 2, 3.0), record(changed, "pr", 3, 3.1)]
    with pytest.raises(ValueError) as err:
        summarize(runs)
    assert ('differ in arms.pr settings (plugin.draft_update, plugin.packing) (arm pr): '
            'plugin.draft_update=true, plugin.packing="inplace" in 1 run(s) (pr-c1-base-r2); '
            'plugin.draft_update=null, plugin.packing="fused" in 1 run(s) (pr-c1-base-r3)'
            ) in str(err.value)


def test_a_run_without_known_settings_is_compared_and_flagged(default_experiment):
    """An imported vllm bench result has no config snapshot: its settings are unknown (not
    refused), so is its warmup (vllm bench records no --num-warmups), and the report says its
    cell is not a fresh e2e server."""
    runs = [record(default_experiment, "main", k, 3.0) for k in (2, 3)]
    imported = record(default_experiment, "pr", 2, 2.9)
    imported = imported.model_copy(update={
        "config": {}, "provenance": {"imported": {"file": "x.json",
                                                  "defaulted": ["warmup_requests"]}},
        "spec": imported.spec.model_copy(update={"arm": "vb", "warmup_requests": 0}),
        "run_id": "vb-c1-base-r2"})
    summary = summarize(runs + [imported])
    assert summary.comparison("vb", 1, "base", "tpot_ms_mean") is not None
    (warning,) = [w for w in summary.warnings if w.arm == "vb" and "fresh" in w.message]
    assert warning.message.startswith("1 reported run(s) not on a fresh server started by e2e "
                                      "(imported)")
    assert not [w for w in summary.warnings if w.arm == "main" and "fresh" in w.message]


def test_open_and_closed_loop_runs_are_different_cells(default_experiment):
    open_loop = default_experiment.override("load", request_rate=50.0, burstiness=0.5)
    spec = RunSpec.resolve(open_loop, arm="main", concurrency=1, dspark=False)
    assert (spec.request_rate, spec.burstiness, spec.cell) == (50.0, 0.5, "main-c1-rate50-base")
    assert "open loop 50 req/s (burstiness 0.5)" in spec.describe()
    runs = [record(default_experiment, "main", 2, 3.0), record(open_loop, "main", 3, 3.1)]
    with pytest.raises(ValueError) as err:
        summarize(runs)
    assert ("differ in request_rate (concurrency 1, base): 50.0 in 1 run(s) "
            "(main-c1-rate50-base-r3); none in 1 run(s) (main-c1-base-r2)") in str(err.value)


def test_goodput_against_two_slos_is_not_compared(default_experiment):
    def with_slo(arm, k, slo):
        r = record(default_experiment, arm, k, 3.0)
        return r.model_copy(update={"metrics": r.metrics.model_copy(
            update={"goodput_slo": slo, "goodput_req_s": 1.0 + k})})

    mixed = summarize([with_slo("main", 2, "ttft=20ms"), with_slo("pr", 2, "ttft=25ms")])
    assert mixed.cell("main", 1, "base", "goodput_req_s") is None  # never averaged across SLOs
    assert mixed.cell("main", 1, "base", "tpot_ms_mean") is not None  # the rest still is
    assert any("different SLOs (ttft=20ms; ttft=25ms)" in w.message for w in mixed.warnings)
    same = summarize([with_slo("main", 2, "ttft=20ms"), with_slo("pr", 2, "ttft=20ms")])
    assert same.cell("pr", 1, "base", "goodput_req_s").values == (3.0,)
