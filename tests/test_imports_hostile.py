"""Imports keep what the tool measured, and nothing hostile gets through (issue: "numbers that
mean what they say"): hostile variants of the real GuideLLM, AIPerf and vllm bench exports in
tests/data. The seed, the arrival process (an open loop stays one), the warmup and the tool's
own throughput are kept; a figure the tool defines otherwise is named in the run and the
report; impossible request times make the run invalid and enter no figure; secrets and
terminal escapes in a file reach no record, report or terminal; bad input is exit 2 with one
line, never a traceback."""

from __future__ import annotations

import functools

import copy
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.analysis.sweep.frame import arrival_of
from e2e.cli import app
from e2e.errors import ConfigError
from e2e.interop import aiperf, guidellm, importing, vllm_bench
from e2e.interop.importing import ImportOptions
from e2e.results.store import read_requests, read_run

import_export = functools.partial(importing.import_file, reader=aiperf.READER)
import_report = functools.partial(importing.import_file, reader=guidellm.READER)
import_file = functools.partial(importing.import_file, reader=vllm_bench.READER)

DATA = Path(__file__).parent / "data"
AIPERF, GUIDELLM = DATA / "aiperf", DATA / "guidellm" / "benchmarks.json"
VLLM = DATA / "vllm_bench" / "c1-base.json"
KEY = "sk-PLANTED-4242"
ESC = "\x1b]0;owned\x07\x1b[31m"
runner = CliRunner()


def options(**more) -> ImportOptions:
    return ImportOptions(experiment="tools", arm=more.pop("arm", "main"), **more)


def aiperf_copy(tmp_path: Path, *, summary=None, lines=None) -> Path:
    folder = tmp_path / "aiperf-in"
    folder.mkdir(exist_ok=True)
    docs = [json.loads(x) for x in (AIPERF / "profile_export.jsonl").read_text().splitlines()]
    if lines:
        lines(docs)
    (folder / "profile_export.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    data = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    if summary:
        summary(data)
    (folder / "profile_export_aiperf.json").write_text(json.dumps(data))
    return folder


def guidellm_copy(tmp_path: Path, change) -> Path:
    doc = json.loads(GUIDELLM.read_text())
    change(doc)
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    return path


def vllm_copy(tmp_path: Path, **changes) -> Path:
    doc = json.loads(VLLM.read_text())
    doc.update(changes)
    path = tmp_path / "c1.json"
    path.write_text(json.dumps(doc))
    return path


def phase(data: dict, **fields) -> None:
    profiling = next(p for p in data["input_config"]["phases"] if p["kind"] == "profiling")
    profiling.update(fields)


# ------------------------------------------------------------------ what the tool measured ----

def test_guidellms_seed_is_kept_and_a_missing_one_is_said(tmp_path):
    def seven(doc):
        doc["config"]["spec"]["seed"] = {"kind": "static", "value": 7}
    [(_, record)] = import_report(guidellm_copy(tmp_path, seven), options(), tmp_path / "r")
    assert record.spec.seed == 7 and not record.provenance["imported"]["defaulted"]

    def none(doc):
        doc["config"]["spec"].pop("seed")
    [(_, record)] = import_report(guidellm_copy(tmp_path, none), options(), tmp_path / "r2")
    assert record.spec.seed == 0 and record.provenance["imported"]["defaulted"] == ["seed"]
    assert "GuideLLM's report records no seed; set to 0 (give --seed)" in record.warnings


def test_the_reference_guidellm_report_keeps_its_seed_and_names_its_definitions(tmp_path):
    [(_, record)] = import_report(GUIDELLM, options(), tmp_path)
    assert record.spec.seed == 0 and record.provenance["imported"]["defaulted"] == []
    bench = json.loads(GUIDELLM.read_text())["benchmarks"][0]["metrics"]
    itl, pct = record.provenance["imported"]["definitions"]
    assert itl["metric"] == "tpot_ms_mean" and "ends at the last token" in itl["definition"]
    assert itl["tool_value"] == bench["inter_token_latency_ms"]["successful"]["mean"]
    assert pct["metric"] == "tpot_ms_median" and "one sample" in pct["definition"]
    assert f"defined otherwise: {itl['definition']}" in record.warnings


@pytest.mark.parametrize("strategy, label", [
    ({"type_": "poisson", "rate": 3.0, "max_concurrency": 3, "random_seed": 5},
     "poisson 3 req/s, at most 3 in flight"),
    ({"type_": "constant", "rate": 2.5}, "constant 2.5 req/s"),
    ({"type_": "throughput", "max_concurrency": 4}, "concurrency 4")])
def test_guidellm_rate_strategies_import_as_their_arrival_process(tmp_path, strategy, label):
    def rate(doc):
        doc["benchmarks"][0]["config"]["strategy"] = strategy
    [(_, record)] = import_report(guidellm_copy(tmp_path, rate), options(), tmp_path / "r")
    expected = label.replace("concurrency 4", "closed loop")
    assert arrival_of(record) == expected
    if strategy["type_"] != "throughput":
        assert record.spec.request_rate == strategy["rate"]
    else:
        assert record.spec.concurrency == 4


@pytest.mark.parametrize("kind, more, label", [
    ("poisson", {"rate": 3.0, "concurrency": 3}, "poisson 3 req/s, at most 3 in flight"),
    ("gamma", {"rate": 3.0, "smoothness": 0.5, "concurrency": None}, "gamma 0.5 3 req/s"),
    ("constant", {"rate": 4.0, "concurrency": None}, "constant 4 req/s")])
def test_an_aiperf_open_loop_imports_as_an_open_loop(tmp_path, kind, more, label):
    folder = aiperf_copy(tmp_path, summary=lambda d: phase(d, type=kind, **more))
    [(_, record)] = import_export(folder, options(), tmp_path / "r")
    assert record.valid, record.invalid_reasons
    assert arrival_of(record) == label and record.spec.request_rate == more["rate"]
    assert record.spec.concurrency == 1  # numbers the cell only


def test_an_aiperf_phase_e2e_cannot_key_is_refused_saying_why(tmp_path):
    folder = aiperf_copy(tmp_path, summary=lambda d: phase(d, type="fixed_schedule"))
    result = runner.invoke(app, ["import", "aiperf", str(folder), "--arm", "main",
                                 "--experiment", "t", "--results", str(tmp_path / "r")])
    assert result.exit_code == 2 and "'fixed_schedule' load" in result.output, result.output


def test_aiperfs_warmup_is_kept_so_two_warmups_are_two_cells(tmp_path):
    results = tmp_path / "r"
    import_export(AIPERF, options(), results)  # its warmup phase: 1 request
    three = aiperf_copy(tmp_path, summary=lambda d: d["input_config"]["phases"][0].update(
        requests=3), lines=lambda docs: docs[1]["metadata"].update(request_start_ns=docs[1][
            "metadata"]["request_start_ns"] + 1))
    [(_, record)] = import_export(three, options(), results)
    assert record.spec.warmup_requests == 3
    result = runner.invoke(app, ["report", str(results / "tools")])
    assert result.exit_code == 1 and "differ in warmup_requests" in result.output, result.output
    result = runner.invoke(app, ["report", str(results / "tools"), "--only", "warmup_requests=1"])
    assert result.exit_code == 0, result.output


def test_a_vllm_bench_open_loop_is_imported_as_one(tmp_path):
    path = vllm_copy(tmp_path, request_rate=3.0, burstiness=0.5, max_concurrency=3)
    [(_, record)] = import_file(path, options(), tmp_path / "r")
    assert (record.spec.request_rate, record.spec.burstiness, record.spec.max_concurrency,
            record.spec.concurrency) == (3.0, 0.5, 3, 1)
    assert arrival_of(record) == "gamma 0.5 3 req/s, at most 3 in flight"
    [(_, closed)] = import_file(VLLM, options(), tmp_path / "r2")
    assert arrival_of(closed) == "closed loop" and closed.spec.concurrency == 1


def test_an_imported_runs_definitions_are_named_in_the_report(tmp_path):
    results = tmp_path / "r"
    import_export(AIPERF, options(), results)
    result = runner.invoke(app, ["report", str(results / "tools")])
    assert result.exit_code == 0, result.output
    report = (results / "tools" / "report" / "report.md").read_text()
    assert "defined otherwise by the tool that measured it: AIPerf's throughputs" in report
    assert "the tool's own figure: 17.0666 tok/s" in report
    assert "AIPerf's \"inter token latency\" is e2e's TPOT" in report
    cells = (results / "tools" / "report" / "cells.csv").read_text()
    assert "profiling phase's window" in cells


# ------------------------------------------------------------------ impossible times ----

def test_a_first_token_before_the_send_makes_the_run_invalid_and_enters_no_figure(tmp_path):
    def early(doc):
        timings = doc["benchmarks"][0]["requests"]["successful"][2]["info"]["timings"]
        timings["first_token_iteration"] = timings["request_start"] - 0.710
    [(folder, record)] = import_report(guidellm_copy(tmp_path, early), options(), tmp_path / "r")
    assert not record.valid
    assert record.invalid_reasons[0].startswith(
        "1 request(s) with impossible times, left out of every figure; first: request 2: its "
        "first token came 710.000 ms before it was sent")
    assert record.metrics.ok_requests == 7 and record.metrics.ttft_ms_mean > 0
    assert not read_requests(folder / "requests.parquet")[2].ok


def test_an_end_before_the_first_token_makes_the_run_invalid(tmp_path):
    def short(docs):
        docs[3]["metrics"]["request_latency"]["value"] = 10.0  # TTFT is ~100 ms
    [(_, record)] = import_export(aiperf_copy(tmp_path, lines=short), options(), tmp_path / "r")
    assert not record.valid and "ended" in record.invalid_reasons[0]
    assert record.metrics.tpot_ms_mean > 0 and record.metrics.ok_requests == 7


def test_vllm_bench_latency_shorter_than_ttft_is_invalid(tmp_path):
    doc = json.loads(VLLM.read_text())
    doc["latencies"][0] = doc["ttfts"][0] / 2
    [(_, record)] = import_file(vllm_copy(tmp_path, latencies=doc["latencies"]), options(),
                                tmp_path / "r")
    assert not record.valid and "impossible times" in record.invalid_reasons[0]


# ------------------------------------------------------------------ secrets and terminals ----

@pytest.mark.slow  # two imports, three reports and an export: about 2 s
def test_secrets_in_a_tools_file_reach_no_record_report_export_or_terminal(tmp_path):
    command = (f"aiperf profile --api-key {KEY} -H 'Authorization: Bearer {KEY}' "
               f"--url http://user:{KEY}@host:8000")

    def summary(data):
        data["run_info"]["cli_command"] = command

    def lines(docs):
        docs[2]["error"] = {"code": 401, "type": "Unauthorized",
                            "message": f"bad request {ESC} api_key={KEY} refused"}
    folder = aiperf_copy(tmp_path, summary=summary, lines=lines)
    results = tmp_path / "r"
    result = runner.invoke(app, ["import", "aiperf", str(folder), "--arm", "main",
                                 "--experiment", "tools", "--results", str(results)])
    assert result.exit_code == 0, result.output
    assert KEY not in result.output and "\x1b" not in result.output
    assert "\\x1b]0;owned" in result.output  # shown, not acted on
    assert runner.invoke(app, ["import", "guidellm", str(guidellm_copy(tmp_path, lambda d: d[
        "benchmarks"][0]["config"]["strategy"].update(api_key=KEY, token=KEY))), "--arm", "gl",
        "--warmup-requests", "1",  # as AIPerf's: runs of other warmups are not compared
        "--experiment", "tools", "--results", str(results)]).exit_code == 0
    report = runner.invoke(app, ["report", str(results / "tools"), "--format", "github"])
    assert report.exit_code == 0 and KEY not in report.output
    assert runner.invoke(app, ["report", str(results / "tools")]).exit_code == 0
    assert runner.invoke(app, ["export", str(results / "tools"), "--include-invalid"]
                         ).exit_code == 0
    written = [p for p in results.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"run.json", "requests.parquet", "report.md",
                                         "index.html", "cells.csv", "github.md"}
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    run = read_run(results / "tools" / "main-c1-base-r2")
    assert "--api-key ***" in run.provenance["imported"]["cli_command"]


def test_a_50_mb_string_and_a_900_deep_field_are_bounded(tmp_path):
    deep: object = 1
    for _ in range(900):
        deep = {"a": deep}

    def summary(data):
        data["run_info"]["cli_command"] = "x" * 50_000_000
        data["input_config"]["phases"][1]["extra_deep"] = deep
    folder = aiperf_copy(tmp_path, summary=summary)
    result = runner.invoke(app, ["import", "aiperf", str(folder), "--arm", "main",
                                 "--experiment", "t", "--results", str(tmp_path / "r")])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output[-2000:]
    run_json = tmp_path / "r" / "t" / "main-c1-base-r2" / "run.json"
    assert run_json.stat().st_size < 200_000


@pytest.mark.parametrize("tool", ["aiperf", "guidellm", "vllm-bench"])
def test_a_900_deep_field_in_any_import_is_no_traceback(tmp_path, tool):
    deep: object = 1
    for _ in range(900):
        deep = {"a": deep}
    if tool == "aiperf":
        path = aiperf_copy(tmp_path, lines=lambda docs: docs[1]["metadata"].update(deep=deep))
    elif tool == "guidellm":
        path = guidellm_copy(tmp_path, lambda d: d["benchmarks"][0]["config"]["strategy"]
                             .update(deep=deep))
    else:
        path = vllm_copy(tmp_path, deep=deep)
    result = runner.invoke(app, ["import", tool, str(path), "--arm", "main", "--experiment",
                                 "t", "--results", str(tmp_path / "r")])
    assert result.exit_code in (0, 2), result.output[-2000:]
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


# ------------------------------------------------------------------ small ones ----

def test_true_as_a_guidellm_length_is_refused(tmp_path):
    path = guidellm_copy(tmp_path, lambda d: d["benchmarks"][0]["requests"]["successful"][0]
                         .update(output_tokens=True))
    result = runner.invoke(app, ["import", "guidellm", str(path), "--arm", "main",
                                 "--experiment", "t", "--results", str(tmp_path / "r")])
    assert result.exit_code == 2 and "output_tokens" in result.output, result.output


def test_true_in_a_trace_is_refused(tmp_path):
    from e2e.traces import read_trace

    lines = (DATA / "traces" / "mooncake_small.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    doc["output_length"] = True
    (tmp_path / "t.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(ConfigError, match="output_length"):
        read_trace(tmp_path / "t.jsonl", block_size=512)


def test_arrays_of_unequal_length_are_exit_2_naming_them(tmp_path):
    doc = json.loads(VLLM.read_text())
    path = vllm_copy(tmp_path, ttfts=doc["ttfts"][:-1])
    result = runner.invoke(app, ["import", "vllm-bench", str(path), "--experiment", "t",
                                 "--results", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert "per-request arrays differ in length" in result.output and "ttfts 7" in result.output


def test_report_of_a_folder_without_runs_is_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["report", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no run.json" in result.output, result.output


@pytest.mark.slow  # a whole report with its plots: about 2 s
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # matplotlib's axis
def test_a_1e308_metric_in_a_report_is_no_overflow(tmp_path):
    from test_cells_workload import run
    from e2e.paths import atomic_write_json

    folder = tmp_path / "exp"
    for arm, k, t in [("main", 2, 1e308), ("main", 3, 10.0), ("pr", 2, 1e-308), ("pr", 3, 9.0)]:
        r = run(arm, k, t)
        atomic_write_json(folder / r.run_id / "run.json", r.model_dump(mode="json"))
    result = runner.invoke(app, ["report", str(folder)])
    assert result.exit_code == 0, result.output[-2000:]
