"""AIPerf's and GuideLLM's files imported as e2e runs (e2e.interop.aiperf, e2e.interop.guidellm):
the real exports in tests/data (made by each tool against e2e's CPU server; docs/how-to/interop.md has
the commands) import valid, with e2e's figures equal to the tool's own, idempotently; a file
that is not the tool's is bad input (exit 2) naming the line or key."""

from __future__ import annotations

import functools

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from e2e.errors import ConfigError
from e2e.interop import aiperf, guidellm
from e2e.interop.aiperf import read_export
from e2e.interop.importing import ImportOptions, import_file
from e2e.results.store import read_requests, read_run

import_export = functools.partial(import_file, reader=aiperf.READER)
import_report = functools.partial(import_file, reader=guidellm.READER)

DATA = Path(__file__).parent / "data"
AIPERF = DATA / "aiperf"


def test_an_aiperf_export_imports_with_aiperfs_own_figures(tmp_path):
    written = import_export(AIPERF, ImportOptions(experiment="tools", arm="main"), tmp_path)
    [(folder, record)] = written
    assert folder == tmp_path / "tools" / "main-c1-base-r2"
    assert record.valid, record.invalid_reasons
    assert record.warnings[0] == f"imported from AIPerf: {AIPERF / 'profile_export.jsonl'}"
    summary = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    m = record.metrics
    # what AIPerf defines otherwise is named in the run, with AIPerf's own figure beside e2e's
    throughput, naming = record.provenance["imported"]["definitions"]
    assert throughput["metric"] == "output_throughput_tok_s"
    assert throughput["tool_value"] == summary["output_token_throughput"]["avg"]
    assert "profiling phase's window (7.50002 s" in throughput["definition"]
    assert naming["metric"] == "tpot_ms_mean" and "inter token latency" in naming["definition"]
    assert record.warnings[1:] == [f"defined otherwise: {d['definition']}"
                                   for d in (throughput, naming)]
    # the same requests over another denominator: AIPerf's window, e2e's first send to last end
    # (start_time 02:31:38.422695 to end_time 02:31:45.922714, written to the microsecond:
    # AIPerf divided by the same window in ns, so equal to 1e-6 of a µs in 7.5 s, 2e-7)
    window = 7.500019
    for ours, theirs in (("output_throughput_tok_s", "output_token_throughput"),
                         ("request_throughput_req_s", "request_throughput")):
        assert getattr(m, ours) * m.duration_s / window == pytest.approx(
            summary[theirs]["avg"], rel=2e-7), ours
    assert (record.spec.warmup_requests, record.spec.request_rate) == (1, None)
    # 8 profiling requests of 256 prompt and 16 completion tokens (the warmup left out)
    assert (m.requests, m.ok_requests, m.input_tokens, m.output_tokens) == (8, 8, 2048, 128)
    assert record.spec.concurrency == 1 and record.spec.input_len == 256
    assert record.provenance["imported"]["warmup_records"] == 1
    for ours, theirs, stat in [("ttft_ms_mean", "time_to_first_token", "avg"),
                               ("ttft_ms_median", "time_to_first_token", "p50"),
                               ("ttft_ms_p99", "time_to_first_token", "p99"),
                               ("e2el_ms_mean", "request_latency", "avg"),
                               ("e2el_ms_p99", "request_latency", "p99"),
                               ("tpot_ms_mean", "inter_token_latency", "avg"),
                               ("itl_ms_mean", "inter_chunk_latency", "avg")]:
        assert getattr(m, ours) == pytest.approx(summary[theirs][stat], rel=1e-14), ours
    assert m.duration_s == pytest.approx(summary["benchmark_duration"]["avg"], rel=1e-6)
    requests = read_requests(folder / "requests.parquet")
    assert [r.completion_tokens for r in requests] == [16] * 8
    # one time per response AIPerf received (its inter-chunk latencies, plus the first)
    gaps = [len(d["metrics"]["inter_chunk_latency"]["value"]) for d in lines()[1:]]
    assert [len(r.chunk_times_s) for r in requests] == [g + 1 for g in gaps]
    assert read_run(folder).provenance["imported"]["content_sha256"]


def test_an_aiperf_export_imported_twice_is_counted_once(tmp_path):
    options = ImportOptions(experiment="tools", arm="main")
    assert len(import_export(AIPERF / "profile_export.jsonl", options, tmp_path)) == 1
    skipped = []
    assert import_export(AIPERF, options, tmp_path, on_skip=skipped.append) == []
    assert "already imported as main-c1-base-r2" in skipped[0]
    again = import_export(AIPERF, ImportOptions(experiment="tools", arm="main", force=True),
                          tmp_path)
    assert [f.name for f, _ in again] == ["main-c1-base-r2"]


def test_the_concurrency_comes_from_the_summary_or_the_flag(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(AIPERF / "profile_export.jsonl", alone)
    with pytest.raises(ConfigError, match="give --concurrency"):
        import_export(alone, ImportOptions(experiment="t", arm="main"), tmp_path / "r")
    [(_, record)] = import_export(alone, ImportOptions(experiment="t", arm="main",
                                                       concurrency=1), tmp_path / "r")
    assert record.valid and record.spec.seed == 0


def lines() -> list[dict]:
    return [json.loads(x) for x in (AIPERF / "profile_export.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("change, message", [
    (lambda d: d["metadata"].pop("request_start_ns"), "line 2: Field required at metadata"),
    (lambda d: d["metrics"]["time_to_first_token"].update(unit="s"), "line 2: metric "
     "time_to_first_token is in 's'"),
    (lambda d: d["metrics"]["request_latency"].update(value=-1), "line 2: metric "
     "request_latency = -1 is not a time"),
    (lambda d: d["metrics"]["inter_chunk_latency"].update(value=[1, "x"]), "line 2: metric "
     "inter_chunk_latency holds 'x'"),
    (lambda d: d["metrics"]["output_sequence_length"].update(value=1.5), "line 2: metric "
     "output_sequence_length = 1.5 is not a token count"),
])
def test_an_export_that_is_not_aiperfs_is_bad_input_naming_the_line(tmp_path, change, message):
    docs = lines()
    change(docs[1])
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(ConfigError, match=message):
        read_export(path)


def test_not_json_not_text_or_empty_is_refused(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    for data, message in [(b"{not json\n", "line 1: not JSON"), (b"\xff\xfe", "not UTF-8"),
                          (b"\n\n", "holds no records")]:
        path.write_bytes(data)
        with pytest.raises(ConfigError, match=message):
            read_export(path)


def test_the_command_imports_and_refuses_without_an_arm(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["import", "aiperf", str(AIPERF), "--arm", "main",
                                 "--experiment", "tools", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tools" / "main-c1-base-r2" / "run.json").exists()
    result = runner.invoke(app, ["import", "aiperf", str(AIPERF), "--experiment", "tools",
                                 "--results", str(tmp_path)])
    assert result.exit_code == 2 and "--arm" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1]\n")
    result = runner.invoke(app, ["import", "aiperf", str(bad), "--arm", "main",
                                 "--experiment", "tools", "--results", str(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output


GUIDELLM = DATA / "guidellm" / "benchmarks.json"


def test_a_guidellm_report_imports_with_guidellms_own_figures(tmp_path):

    [(folder, record)] = import_report(GUIDELLM, ImportOptions(experiment="tools", arm="main"),
                                       tmp_path)
    assert record.valid, record.invalid_reasons
    assert record.warnings[1] == "GuideLLM keeps no time per chunk: no inter-chunk latency"
    bench = json.loads(GUIDELLM.read_text())["benchmarks"][0]
    m, theirs = record.metrics, bench["metrics"]
    assert (m.requests, m.ok_requests, record.spec.concurrency) == (8, 8, 1)
    assert m.output_tokens == 8 * 16 and m.itl_ms_mean is None
    good = lambda name: theirs[name]["successful"]  # noqa: E731
    # the means are the same; medians are not (GuideLLM's percentiles are not interpolated)
    assert m.ttft_ms_mean == pytest.approx(good("time_to_first_token_ms")["mean"], rel=1e-9)
    assert m.e2el_ms_mean == pytest.approx(good("request_latency")["mean"] * 1000, rel=1e-9)
    assert m.input_tokens == sum(r["prompt_tokens"] for r in bench["requests"]["successful"])
    assert len(read_requests(folder / "requests.parquet")) == 8


def test_a_report_that_is_not_guidellms_is_bad_input(tmp_path):
    from e2e.interop.guidellm import read_report

    doc = json.loads(GUIDELLM.read_text())
    path = tmp_path / "b.json"
    for broken, message in [({"benchmarks": []}, "holds no benchmark"), ([1], "no list of benchmarks"),
                            ({"benchmarks": [{"requests": {"successful": [{"info": {}}]}}]},
                             "benchmark 1: requests.successful.0.info.timings: Field required")]:
        path.write_text(json.dumps(broken))
        with pytest.raises(ConfigError, match=message):
            read_report(path)
    doc["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]["request_start"] = -5
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="request_start"):
        read_report(path)


def test_off_length_requests_are_notes_or_with_strict_lengths_reasons():
    from types import SimpleNamespace

    from e2e.interop.importing import length_findings

    ok = [SimpleNamespace(prompt_tokens=p, completion_tokens=c)
          for p, c in ((128, 64), (129, 64), (128, 63))]
    reasons, notes = length_findings(ok, 128, 64, strict=False, why="the tool counts its own way")
    assert reasons == []
    assert notes == ["1 of 3 prompts had other than 128 tokens (129); the tool counts its own "
                     "way (--strict-lengths makes this invalid)",
                     "1 of 3 completions had other than 64 tokens (63); the tool counts its own "
                     "way (--strict-lengths makes this invalid)"]
    reasons, notes = length_findings(ok, 128, 64, strict=True, why="unused")
    assert reasons == ["1 of 3 prompts had other than 128 tokens (129)",
                       "1 of 3 completions had other than 64 tokens (63)"] and notes == []
    assert length_findings(ok[:1], 128, 64, strict=True, why="x") == ([], [])


def test_a_length_spread_is_explained_as_a_range_not_as_rounding():
    """vllm bench serve's --random-range-ratio 0.1 at 1024 tokens spreads prompts by up to
    102 tokens: a range the tool drew from, not a re-tokenized token."""
    from types import SimpleNamespace

    from e2e.interop.importing import length_findings

    ok = [SimpleNamespace(prompt_tokens=p, completion_tokens=64) for p in (940, 1024, 1108)]
    _, [note] = length_findings(ok, 1024, 64, strict=False, why="re-tokenized, a token off")
    assert "a token off" not in note
    assert ("lengths spread from 940 to 1108 around 1024 (up to 84 tokens, 8%): the tool drew "
            "each request's length from a range (vllm bench serve's --random-range-ratio") in note


def test_the_commands_are_the_registered_formats(tmp_path):
    """``e2e import <name>`` and ``e2e export --format <name>`` are the names
    ``e2e.interop.formats`` registers, each once: a format added there is a command."""
    import typer

    from e2e.interop.formats import READERS, WRITERS

    group = typer.main.get_command(app)
    assert sorted(group.commands["import"].commands) == sorted(READERS)
    for name in WRITERS:  # each writer's name is a --format the command takes
        res = CliRunner().invoke(app, ["export", str(tmp_path / "none"), "--format", name])
        assert res.exit_code == 2 and "no such results folder" in res.output, res.output
    res = CliRunner().invoke(app, ["export", str(tmp_path / "none"), "--format", "nosuch"])
    assert res.exit_code == 2 and "no such results folder" not in res.output


@pytest.mark.parametrize("name", ["vllm-bench", "aiperf", "guidellm"])
def test_every_reader_reads_utf8_text_only(tmp_path, name):
    """One bounded UTF-8 reader for every format (``_boundary.read_text``): other bytes are a
    clear error naming the byte, whichever tool's file it was meant to be."""
    from e2e.interop.formats import READERS

    reader = READERS[name]
    path = tmp_path / "profile_export.jsonl"
    path.write_bytes(b'{"benchmarks": "\xff"}\n')
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 16\): not "):
        reader.read(reader.locate(path))
