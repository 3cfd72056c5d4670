"""The workload, its arrival process and the warmup are part of what a cell is keyed on, for
e2e's runs and imported ones alike: a trace replayed at 1× and at 2×, a shared-prefix run
beside a reference-load run of the same lengths, and two runs that differ only in warmup are
never averaged (the report refuses, naming the field; ``--only`` reports one kind). Records
written before these fields existed read as the reference load. The report labels an open
loop by its arrival process and shows a workload's own figures."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.frame import arrival_of, select, workload_key
from e2e.cli import app
from e2e.config import SharedPrefix, TraceReplay
from e2e.plan import RunSpec
from e2e.paths import atomic_write_json
from e2e.render.markdown import render_markdown
from e2e.results.records import RunMetrics, RunRecord, SegmentMetrics, ServerInfo, WorkloadInfo

TRACE = TraceReplay(kind="trace", path="tests/data/traces/mooncake_small.jsonl")
SHA = "a8bccbf395b8" + "0" * 52


def run(arm: str, repeat: int, tpot: float, *, workload=None, warmup: int = 2,
        rate: float | None = None, provenance: dict | None = None, info=None) -> RunRecord:
    spec = RunSpec(arm=arm, concurrency=1, dspark=False, prompts=32, input_len=1024,
                   output_len=16, seed=0, warmup_requests=warmup, repeat=repeat,
                   workload=workload, request_rate=rate)
    if info is None and isinstance(workload, TraceReplay):
        info = WorkloadInfo(kind="trace", sha256="x", requests=24, input_tokens=1,
                            output_tokens=1, source_sha256=SHA, warmup="w", cache="fresh")
    metrics = RunMetrics(requests=32, ok_requests=32, duration_s=1.0, input_tokens=0,
                         output_tokens=0, tpot_ms_mean=tpot, tpot_ms_median=tpot,
                         ttft_ms_mean=50.0)
    return RunRecord(experiment="wl", run_id=spec.run_id, spec=spec, arm_settings={},
                     config={}, server=ServerInfo(argv=[], env={}, base_url="", model="m"),
                     provenance=provenance or {}, started_at="t", finished_at="t",
                     metrics=metrics, workload=info, valid=True)


def test_a_trace_at_1x_and_at_2x_is_never_averaged():
    fast = TRACE.model_copy(update={"speedup": 2.0})
    runs = [run("main", k, 12.0, workload=TRACE) for k in (2, 3)]
    runs += [run("main", k, 9.0, workload=fast) for k in (2, 3)]
    with pytest.raises(ValueError, match=r"differ in workload \(concurrency 1, base\): "
                                         r"trace-mooncake_small-b512-a8bccbf395b8 in 2 run"):
        summarize(runs)
    assert workload_key(runs[2]) == "trace-mooncake_smallx2-b512-a8bccbf395b8"
    assert len(select(runs, {"workload": "trace-mooncake_smallx2"})) == 2  # by its tag
    summary = summarize(select(runs, {"workload": "trace-mooncake_small"}))
    assert summary.cell("main", 1, "base", "tpot_ms_mean").values == (12.0, 12.0)


def test_the_same_trace_file_elsewhere_is_the_same_workload_another_is_not():
    moved = TRACE.model_copy(update={"path": "/elsewhere/mooncake_small.jsonl"})
    runs = [run("main", 2, 12.0, workload=TRACE), run("main", 3, 12.1, workload=moved)]
    assert summarize(runs).cell("main", 1, "base", "tpot_ms_mean").n == 2
    other = run("main", 4, 12.0, workload=moved, info=WorkloadInfo(
        kind="trace", sha256="x", requests=24, input_tokens=1, output_tokens=1,
        source_sha256="f" * 64, warmup="w", cache="fresh"))
    with pytest.raises(ValueError, match="differ in workload"):
        summarize(runs + [other])


def test_a_shared_prefix_run_beside_a_reference_run_of_the_same_lengths_is_refused():
    prefix = SharedPrefix(kind="shared-prefix", groups=4, per_group=8, prefix_len=896)
    runs = [run("main", 2, 10.0), run("main", 3, 10.0),
            run("pr", 2, 9.0, workload=prefix), run("pr", 3, 9.0, workload=prefix)]
    with pytest.raises(ValueError) as caught:
        summarize(runs)
    assert "differ in workload (concurrency 1, base): reference in 2 run(s)" in str(caught.value)
    assert "sp4x8p896 in 2 run(s)" in str(caught.value)
    assert "--only workload=VALUE" in str(caught.value)
    assert [r.spec.arm for r in select(runs, {"workload": "reference"})] == ["main", "main"]


def test_two_runs_that_differ_only_in_warmup_are_refused_unless_one_is_unknown():
    runs = [run("main", 2, 10.0, warmup=2), run("main", 3, 10.0, warmup=0)]
    with pytest.raises(ValueError, match=r"differ in warmup_requests \(concurrency 1, base\): "
                                         r"0 in 1 run\(s\) \(main-c1-base-r3\); 2 in 1 run"):
        summarize(runs)
    assert len(select(runs, {"warmup_requests": "2"})) == 1
    # vllm bench records no --num-warmups: unknown is compared (and shown as unknown)
    unknown = run("vb", 2, 9.0, warmup=0,
                  provenance={"imported": {"defaulted": ["warmup_requests"]}})
    summary = summarize([runs[0], unknown])
    assert [w.warmup for w in summary.workloads] == [2, None]


def test_an_aiperf_import_made_before_its_warmup_was_kept_reads_its_warmup_records():
    old = run("ai", 2, 9.0, warmup=0, provenance={"imported": {"warmup_records": 1}})
    with pytest.raises(ValueError, match="differ in warmup_requests"):
        summarize([run("ai", 3, 9.0, warmup=0), old])


def test_open_loop_cells_are_labelled_by_their_arrival_process(tmp_path):
    runs = [run(arm, k, t, rate=3.0) for arm, t in (("main", 10.0), ("pr", 9.0))
            for k in (2, 3, 4)]
    assert arrival_of(runs[0]) == "poisson 3 req/s"
    summary = summarize(runs)
    text = render_markdown(summary)
    assert "| load | metric |" in text and "| poisson 3 req/s | mean TPOT (ms) |" in text
    assert "| 1 | mean TPOT" not in text and "· concurrency 1 ·" not in text
    fast = TRACE.model_copy(update={"speedup": 2.0})
    trace = summarize([run("main", k, 12.0, workload=fast) for k in (2, 3)])
    assert "| trace 2× | mean TPOT (ms) |" in render_markdown(trace)
    # a closed-loop report keeps its concurrency column
    closed = render_markdown(summarize([run("main", k, 10.0) for k in (2, 3)]))
    assert "| concurrency | metric |" in closed and "| 1 | mean TPOT (ms) |" in closed


def test_an_old_vllm_bench_import_of_an_open_loop_reads_as_one():
    old = run("vb", 2, 9.0, provenance={"imported": {
        "extra": {"request_rate": 3.0, "burstiness": 1.0}}})
    assert arrival_of(old) == "poisson 3 req/s, at most 1 in flight"
    closed = run("vb", 3, 9.0, provenance={"imported": {"extra": {"request_rate": "inf"}}})
    with pytest.raises(ValueError, match="differ in request_rate"):
        summarize([old, closed])


def test_the_report_shows_the_workloads_own_figures():
    prefix = SharedPrefix(kind="shared-prefix", groups=4, per_group=8, prefix_len=896)
    info = WorkloadInfo(
        kind="shared-prefix", sha256="x", requests=32, input_tokens=1, output_tokens=1,
        warmup="w", cache="fresh", prefix_cache_hit_rate=0.7656,
        schedule_lateness_ms_p50=0.1, schedule_lateness_ms_p99=1.6, schedule_lateness_ms_max=1.9,
        segments=[SegmentMetrics(name="first", requests=4, ok_requests=4, ttft_ms_mean=114.8),
                  SegmentMetrics(name="later", requests=28, ok_requests=28, ttft_ms_mean=58.0)])
    runs = [run("main", k, 10.0, workload=prefix, info=info) for k in (2, 3)]
    text = render_markdown(summarize(runs))
    assert "## Workload" in text
    assert "| 1 | base | main | sp4x8p896 | 2 | 0.766 | 0.10 / 1.60 / 1.90 | 2 |" in text
    assert "| 1 | base | main | first | 2 | 114.8 |" in text
    assert "| 1 | base | main | later | 2 | 58.00 |" in text


def test_a_segment_name_from_a_run_json_is_text_in_the_workload_table():
    """A run.json's segment names are its writer's text: escaped (``md_text``) before they
    enter a table row, so a '|' cannot add a column or a '*' start emphasis."""
    prefix = SharedPrefix(kind="shared-prefix", groups=4, per_group=8, prefix_len=896)
    info = WorkloadInfo(
        kind="shared-prefix", sha256="x", requests=32, input_tokens=1, output_tokens=1,
        warmup="w", cache="fresh", prefix_cache_hit_rate=0.5,
        segments=[SegmentMetrics(name="a|b *c*", requests=4, ok_requests=4, ttft_ms_mean=1.0)])
    text = render_markdown(summarize([run("main", k, 10.0, workload=prefix, info=info)
                                      for k in (2, 3)]))
    assert r"| 1 | base | main | a\\|b \*c\* | 2 | 1.00 |" in text


def test_report_only_selects_a_workload_from_the_command_line(tmp_path):
    folder = tmp_path / "wl"
    prefix = SharedPrefix(kind="shared-prefix", groups=4, per_group=8, prefix_len=896)
    for r in [run("main", 2, 10.0), run("main", 3, 10.0), run("main", 4, 9.0, workload=prefix)]:
        atomic_write_json(folder / r.run_id / "run.json", r.model_dump(mode="json"))
    result = CliRunner().invoke(app, ["report", str(folder)])
    assert result.exit_code != 0 and "differ in workload" in result.output
    result = CliRunner().invoke(app, ["report", str(folder), "--only", "workload=reference"])
    assert result.exit_code == 0, result.output
