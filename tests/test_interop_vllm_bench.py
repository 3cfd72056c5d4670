"""vllm bench serve result files <-> e2e runs (e2e.interop.vllm_bench), on two real files made
here with the CPU server (tests/data/vllm_bench, commands in docs/how-to/interop.md) and on hand-made
e2e runs. No server is started."""

from __future__ import annotations

import functools

import dataclasses

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from e2e.plan import RunSpec
from e2e.errors import ConfigError, ResultsError
from e2e.interop import importing
from e2e.interop.importing import ImportOptions
from e2e.interop.vllm_bench import METADATA_KEYS, READER, SUMMARY_KEYS, read_results, to_run
from e2e.interop.vllm_bench_writer import export_dir, to_result
from e2e.metrics import summarize_run
from e2e.results.records import RequestRecord, RunRecord, ServerInfo, SpecCounters
from e2e.render import build_report
from e2e.results.store import (REQUESTS, finalize, new_partial_dir, read_requests, read_run,
                               write_requests, write_run)

import_file = functools.partial(importing.import_file, reader=READER)

DATA = Path(__file__).parent / "data" / "vllm_bench"
BASE, DSPARK = DATA / "c1-base.json", DATA / "c1-dspark.json"
OPTS = ImportOptions(experiment="exp")


def load(path: Path) -> dict[str, Any]:
    return read_results(path)[0]


def comparable(record: RunRecord) -> dict[str, Any]:
    """A record without what names the file it came from."""
    data = record.model_dump(mode="json")
    imported = data["provenance"]["imported"]
    for key in ("source", "path", "sha256", "index", "content_sha256"):
        imported.pop(key, None)
    data["warnings"] = data["warnings"][1:]
    return data


# ----------------------------------------------------------------- import ----

def test_reference_file_maps_to_a_run() -> None:
    result = load(BASE)
    run = to_run(result, OPTS, source="c1-base.json", repeat=2)
    record, mx = run.record, run.record.metrics
    assert mx is not None and run.requests is not None
    assert record.spec == RunSpec(arm="main", concurrency=1, dspark=False, prompts=8,
                                  input_len=1031, output_len=64, seed=0, warmup_requests=0,
                                  repeat=2)
    for field, key in SUMMARY_KEYS:
        if key in result:
            assert getattr(mx, field) == result[key], field
    assert (mx.requests, mx.ok_requests) == (8, 8)
    assert mx.acceptance_length is None and mx.server_tpot_ms_mean is None
    assert record.valid, record.invalid_reasons
    assert record.warnings[0] == "imported from vllm bench serve: c1-base.json"
    # vLLM's random dataset made one 1032-token prompt: said, not hidden
    assert any("1 of 8 prompts had other than 1031 tokens (1032)" in w for w in record.warnings)
    assert any("does not record seed or warmup_requests" in w for w in record.warnings)
    assert record.provenance["imported"]["extra"]["label"] == "e2e-interop"
    assert len(run.requests) == 8 and all(r.ok for r in run.requests)
    assert [r.prompt_tokens for r in run.requests] == result["input_lens"]
    first = run.requests[0]
    assert first.send_s == 0.0 and len(first.chunk_times_s) == len(result["itls"][0]) + 1


def test_speculator_file_maps_acceptance() -> None:
    result = load(DSPARK)
    run = to_run(result, OPTS, source="c1-dspark.json", repeat=2)
    mx = run.record.metrics
    assert mx is not None
    assert run.record.spec.dspark  # from the spec-decode figures; no metadata in this file
    assert run.record.spec.arm == "e2e-interop"  # its label
    assert mx.acceptance_length == result["spec_decode_acceptance_length"]
    assert mx.acceptance_rate == pytest.approx(result["spec_decode_acceptance_rate"] / 100)
    assert mx.ms_per_verify_step == pytest.approx(result["mean_tpot_ms"] * mx.acceptance_length)
    # the speculator sends several tokens in a chunk: fewer chunks than tokens
    assert run.requests is not None
    assert any(len(r.chunk_times_s) < r.completion_tokens for r in run.requests)


@pytest.mark.parametrize("path", [BASE, DSPARK])
def test_e2e_definitions_reproduce_the_files_summary(path: Path) -> None:
    """e2e.metrics over the imported requests gives vLLM's own TTFT, TPOT, inter-chunk and
    end-to-end figures: the definitions agree (only the duration is measured differently)."""
    result = load(path)
    run = to_run(result, OPTS, source=path.name, repeat=2)
    ours = summarize_run(run.requests or ())
    for field, key in SUMMARY_KEYS:
        if field.split("_ms_")[0] in ("ttft", "tpot", "itl", "e2el"):
            assert getattr(ours, field) == pytest.approx(result[key], rel=1e-9), field
    assert ours.duration_s < result["duration"]


def test_flags_override_the_file() -> None:
    run = to_run(load(BASE), ImportOptions(experiment="exp", arm="vllm-bench", dspark=True,
                                           seed=7, warmup_requests=2, input_len=1032),
                 source="f", repeat=3)
    spec = run.record.spec
    assert (spec.arm, spec.dspark, spec.seed, spec.warmup_requests, spec.input_len) == \
        ("vllm-bench", True, 7, 2, 1032)
    assert run.record.run_id == "vllm-bench-c1-dspark-r3"
    # asked for a speculator, but the file has no spec-decode figures
    assert not run.record.valid
    assert "no spec-decode figures" in run.record.invalid_reasons[0]
    assert not any("does not record" in w for w in run.record.warnings)


def test_strict_lengths_invalidates() -> None:
    run = to_run(load(BASE), ImportOptions(experiment="exp", strict_lengths=True),
                 source="f", repeat=2)
    assert not run.record.valid
    assert run.record.invalid_reasons == ["1 of 8 prompts had other than 1031 tokens (1032)"]


def test_failed_and_missing_requests_invalidate() -> None:
    result = load(BASE)
    result["errors"][3] = "Bad Request"
    result["output_lens"][3] = 0
    result["completed"], result["failed"] = 7, 1
    result["num_prompts"] = 9
    run = to_run(result, OPTS, source="f", repeat=2)
    assert run.requests is not None and not run.requests[3].ok
    assert run.requests[3].error == "Bad Request"
    assert run.record.invalid_reasons == [
        "8 of 9 requests were measured", "1 request(s) failed; first: request 3: Bad Request"]
    assert run.record.metrics is not None and run.record.metrics.requests == 8


def test_summary_only_file() -> None:
    """Without --save-detailed: no requests; lengths from the totals or the flags."""
    result = {k: v for k, v in load(BASE).items()
              if k not in ("input_lens", "output_lens", "ttfts", "itls", "start_times",
                           "generated_texts", "errors")}
    with pytest.raises(ConfigError, match="give --input-len"):
        to_run(result, OPTS, source="f", repeat=2)  # 8249 input tokens / 8 is not whole
    run = to_run(result, ImportOptions(experiment="exp", input_len=1031), source="f", repeat=2)
    assert run.requests is None and run.record.spec.output_len == 64  # 512 / 8
    assert run.record.valid
    # vLLM keeps latencies and queue_times in a summary-only file; so does the export
    exported = to_result(run.record, run.requests)
    assert set(exported) == set(result) | {"spec_mode", "repeat", "input_len", "output_len"}
    assert exported["latencies"] == result["latencies"]


def test_bad_files_say_what_they_are(tmp_path: Path) -> None:
    # bad input is a ConfigError (exit 2)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ConfigError, match="is not JSON"):
        read_results(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"a": 1}')
    with pytest.raises(ConfigError, match="lacks completed, duration, num_prompts"):
        read_results(tmp_path / "y.json")
    result = load(BASE)
    result["max_concurrency"] = None
    with pytest.raises(ConfigError, match="give --concurrency"):
        to_run(result, OPTS, source="f", repeat=2)
    del result["arm"]
    result["label"] = None
    with pytest.raises(ConfigError, match="give --arm"):
        to_run(result, ImportOptions(experiment="exp", concurrency=1), source="f", repeat=2)


def test_import_file_writes_runs_the_store_reads(tmp_path: Path) -> None:
    written = import_file(BASE, OPTS, tmp_path)
    assert [f.name for f, _ in written] == ["main-c1-base-r2"]  # numbered from report_from_run 2
    folder, record = written[0]
    assert read_run(folder) == record
    assert len(read_requests(folder / REQUESTS)) == 8
    skips: list[str] = []
    assert import_file(BASE, OPTS, tmp_path, on_skip=skips.append) == []  # the same result again
    assert len(skips) == 1 and "already imported as main-c1-base-r2" in skips[0]
    forced = import_file(BASE, dataclasses.replace(OPTS, force=True), tmp_path)
    assert [f.name for f, _ in forced] == ["main-c1-base-r2"]  # replaced in place
    assert (tmp_path / "exp" / ".attempts" / "main-c1-base-r2.1" / "run.json").is_file()
    files, _ = export_dir(tmp_path / "exp", tmp_path / "out")
    back = import_file(files[0], OPTS, tmp_path)  # an export of r2 (another file), back in
    assert back[0][0].name == "main-c1-base-r3"  # r2 is taken: not replaced
    assert import_file(files[0], ImportOptions(experiment="exp", repeat=7), tmp_path) == []
    with pytest.raises(ConfigError, match="exists; give --force"):
        export_dir(tmp_path / "exp", tmp_path / "out")
    assert export_dir(tmp_path / "exp", tmp_path / "out", force=True)[0]


def test_append_result_file_holds_several_runs(tmp_path: Path) -> None:
    second = json.loads(BASE.read_text())
    second["date"] = "20990101-000000"  # another run of the same cell (another result)
    text = BASE.read_text().strip() + "\n" + json.dumps(second) + "\n"
    (tmp_path / "appended.json").write_text(text)
    written = import_file(tmp_path / "appended.json", OPTS, tmp_path / "results")  # two results
    assert [f.name for f, _ in written] == ["main-c1-base-r2", "main-c1-base-r3"]
    assert written[1][1].warnings[0].endswith("appended.json (result 2)")
    with pytest.raises(ConfigError, match="holds 2 results and --repeat numbers one run"):
        import_file(tmp_path / "appended.json", ImportOptions(experiment="exp", repeat=5),
                    tmp_path / "results")


def test_the_same_result_is_one_run_however_it_is_written(tmp_path: Path) -> None:
    """Idempotency keys on a result's content, not the file's bytes (issue 34 item 12): the
    same result twice in one file, pretty-printed, or with its keys in another order, is
    imported once."""
    doc = json.loads(BASE.read_text())
    (tmp_path / "twice.json").write_text(json.dumps(doc) + "\n" + json.dumps(doc) + "\n")
    skips: list[str] = []
    written = import_file(tmp_path / "twice.json", OPTS, tmp_path / "r", on_skip=skips.append)
    assert [f.name for f, _ in written] == ["main-c1-base-r2"] and len(skips) == 1
    (tmp_path / "pretty.json").write_text(json.dumps(doc, indent=4))
    (tmp_path / "sorted.json").write_text(json.dumps(dict(sorted(doc.items(), reverse=True))))
    for name in ("pretty.json", "sorted.json"):
        assert import_file(tmp_path / name, OPTS, tmp_path / "r", on_skip=skips.append) == []
    assert len(skips) == 3 and all("the same result" in s for s in skips)
    assert sorted(p.parent.name for p in (tmp_path / "r" / "exp").glob("*/run.json")) == [
        "main-c1-base-r2"]


def test_imported_runs_are_numbered_from_the_folders_report_from_run(tmp_path: Path) -> None:
    (tmp_path / "exp" / "main-c4-base-r1").mkdir(parents=True)
    (tmp_path / "exp" / "main-c4-base-r1" / "run.json").write_text(
        json.dumps({"config": {"report_from_run": 3}}))
    (tmp_path / "exp" / "broken").mkdir()
    (tmp_path / "exp" / "broken" / "run.json").write_text("{")
    assert import_file(BASE, OPTS, tmp_path)[0][0].name == "main-c1-base-r3"


# ----------------------------------------------------------------- round trip ----

@pytest.mark.parametrize("path", [BASE, DSPARK])
def test_export_of_an_imported_run_reads_back_identically(path: Path, tmp_path: Path) -> None:
    first = import_file(path, OPTS, tmp_path / "a")[0]
    files, skipped = export_dir(tmp_path / "a" / "exp", tmp_path / "out")
    assert skipped == [] and len(files) == 1
    second = import_file(files[0], OPTS, tmp_path / "b")[0]
    assert comparable(second[1]) == comparable(first[1])
    assert read_requests(second[0] / REQUESTS) == read_requests(first[0] / REQUESTS)


@pytest.mark.parametrize("path", [BASE, DSPARK])
def test_exported_keys_and_values_match_the_reference(path: Path) -> None:
    reference = load(path)
    run = to_run(reference, OPTS, source=path.name, repeat=2)
    exported = json.loads(json.dumps(to_result(run.record, run.requests)))
    added = {"arm", "spec_mode", "repeat", "input_len", "output_len"}  # seed, warmups unknown
    assert set(exported) == set(reference) | added
    for key, value in reference.items():
        if key in ("start_times", "queue_times", "generated_texts"):
            continue  # rebased to the first send / e2e's closed-loop wait / not kept
        assert exported[key] == value, key
    assert exported["start_times"][0] == 0.0
    assert [b - a for a, b in zip(exported["start_times"], exported["start_times"][1:])] == \
        pytest.approx([b - a for a, b in zip(reference["start_times"], reference["start_times"][1:])])


def e2e_run(dspark: bool = False) -> tuple[RunRecord, list[RequestRecord]]:
    """A hand-made e2e run of 4 requests of 5 tokens, one failed, as the runner writes it."""
    spec = RunSpec(arm="pr", concurrency=2, dspark=dspark, prompts=4, input_len=7,
                   output_len=5, seed=3, warmup_requests=1, repeat=2)
    requests = [
        RequestRecord(index=i, send_s=0.5 * i, first_token_s=0.5 * i + 0.1,
                      end_s=0.5 * i + 0.5, chunk_times_s=tuple(0.5 * i + 0.1 * k for k in (1, 2, 3, 4)),
                      prompt_tokens=7, completion_tokens=5, status=200)
        for i in range(3)
    ] + [RequestRecord(index=3, send_s=1.0, status=500, error="HTTP 500: boom")]
    before = SpecCounters(accepted=10, drafts=10, draft_tokens=30)
    after = SpecCounters(accepted=22, drafts=18, draft_tokens=54) if dspark else before
    metrics = summarize_run(requests, counters_before=before if dspark else None,
                            counters_after=after if dspark else None, server_tpot_s=0.09)
    record = RunRecord(
        experiment="exp", run_id=spec.run_id, spec=spec, arm_settings={}, config={},
        server=ServerInfo(argv=["vllm"], env={}, base_url="http://127.0.0.1:1", model="/m/tiny"),
        provenance={}, started_at="2026-11-30T04:00:00+00:00",
        finished_at="2026-11-30T04:00:03+00:00", counters_before=before, counters_after=after,
        metrics=metrics, valid=False, invalid_reasons=["1 request(s) failed"])
    return record, requests


@pytest.mark.parametrize("dspark, path", [(False, BASE), (True, DSPARK)])
def test_export_of_an_e2e_run(dspark: bool, path: Path) -> None:
    record, requests = e2e_run(dspark)
    doc = json.loads(json.dumps(to_result(record, requests)))
    assert set(doc) == set(load(path)) | set(METADATA_KEYS)
    assert doc["date"] == "20261130-040003" and doc["label"] == "pr"
    assert (doc["completed"], doc["failed"], doc["max_concurrency"], doc["num_prompts"]) == (3, 1, 2, 4)
    assert doc["output_lens"] == [5, 5, 5, 0] and doc["errors"][3] == "HTTP 500: boom"
    assert doc["itls"][0] == pytest.approx([0.1, 0.1, 0.1])
    assert doc["mean_tpot_ms"] == record.metrics.tpot_ms_mean  # type: ignore[union-attr]
    assert doc["std_ttft_ms"] == pytest.approx(0.0, abs=1e-9)
    assert (doc["max_output_tokens_per_s"], doc["max_concurrent_requests"]) == (8.0, 2)
    if dspark:
        assert (doc["spec_decode_num_drafts"], doc["spec_decode_draft_tokens"],
                doc["spec_decode_accepted_tokens"]) == (8, 24, 12)
        assert doc["spec_decode_acceptance_length"] == pytest.approx(2.5)
        assert doc["spec_decode_acceptance_rate"] == pytest.approx(50.0)
    # and back: the spec and the requests survive; status is not in vLLM's format
    back = to_run(doc, OPTS, source="f")
    assert back.record.spec == record.spec
    assert back.requests is not None
    ok_back = [r.model_copy(update={"status": 200}) for r in back.requests if r.ok]
    assert ok_back == [r for r in requests if r.ok]
    assert back.requests[3].error == "HTTP 500: boom"
    assert back.record.invalid_reasons == ["1 request(s) failed; first: request 3: HTTP 500: boom"]
    for field, _ in SUMMARY_KEYS:
        assert getattr(back.record.metrics, field) == getattr(record.metrics, field), field


def test_export_skips_invalid_runs_unless_asked(tmp_path: Path) -> None:
    record, requests = e2e_run()
    partial = new_partial_dir(tmp_path, "exp", record.run_id)
    write_requests(partial / REQUESTS, requests)
    write_run(partial, record)
    finalize(partial, tmp_path, "exp", record.run_id)
    files, skipped = export_dir(tmp_path / "exp", tmp_path / "out")
    assert files == [] and "invalid" in skipped[0]
    files, skipped = export_dir(tmp_path / "exp", tmp_path / "out", include_invalid=True)
    assert [f.name for f in files] == ["pr-c2-base-r2.json"] and skipped == []
    with pytest.raises(ResultsError, match="no such results folder"):
        export_dir(tmp_path / "nope", tmp_path / "out")


# ----------------------------------------------------------------- report ----

def write_e2e_run(results: Path, repeat: int, tpot: float) -> None:
    """A hand-made e2e run of main at concurrency 1 (run 1 a warmup, as the config says)."""
    spec = RunSpec(arm="main", concurrency=1, dspark=False, prompts=8, input_len=1031,
                   output_len=64, seed=0, warmup_requests=2, repeat=repeat)
    requests = [RequestRecord(index=i, send_s=0.2 * i, first_token_s=0.2 * i + 0.011,
                              end_s=0.2 * i + 0.011 + 63 * tpot / 1000,
                              chunk_times_s=(0.2 * i + 0.011,), prompt_tokens=1031,
                              completion_tokens=64, status=200) for i in range(8)]
    record = RunRecord(
        experiment="exp", run_id=spec.run_id, spec=spec, arm_settings={},
        config={"name": "exp", "report_from_run": 2, "arms": {"main": {}}},
        server=ServerInfo(argv=["vllm"], env={}, base_url="http://127.0.0.1:1", model="/m"),
        provenance={}, started_at="2026-11-30T04:00:00+00:00",
        finished_at="2026-11-30T04:00:02+00:00", metrics=summarize_run(requests), valid=True)
    partial = new_partial_dir(results, "exp", spec.run_id)
    write_run(partial, record)
    finalize(partial, results, "exp", spec.run_id)


@pytest.mark.slow
def test_report_renders_an_imported_run_beside_e2e_runs(tmp_path: Path) -> None:
    for repeat, tpot in ((1, 9.0), (2, 2.5), (3, 2.6)):
        write_e2e_run(tmp_path, repeat, tpot)
    import_file(BASE, ImportOptions(experiment="exp", arm="vllm-bench"), tmp_path)
    output = build_report(tmp_path / "exp")
    summary = output.summary
    assert summary.arms == ("main", "vllm-bench")
    imported = summary.cell("vllm-bench", 1, "base", "tpot_ms_mean")
    assert imported is not None and imported.values == (load(BASE)["mean_tpot_ms"],)
    assert summary.cell("main", 1, "base", "tpot_ms_mean").repeats == (2, 3)  # type: ignore[union-attr]
    assert summary.comparison("vllm-bench", 1, "base", "tpot_ms_mean") is not None
    assert "vllm-bench" in output.markdown and "vllm-bench vs main" in output.markdown


def test_joining_a_cell_of_e2e_runs_is_said(tmp_path: Path) -> None:
    write_e2e_run(tmp_path, 2, 2.5)
    (_, joined), = import_file(BASE, ImportOptions(experiment="exp"), tmp_path)  # arm main
    assert joined.run_id == "main-c1-base-r3"
    assert joined.warnings[-1].startswith("joins cell main-c1-base with e2e's own runs "
                                          "(main-c1-base-r2)")
    # the same result again under another arm: --force moves it (one copy, in cell vb)
    (_, apart), = import_file(BASE, ImportOptions(experiment="exp", arm="vb", force=True),
                              tmp_path)
    assert not any("joins cell" in w for w in apart.warnings)
    assert not (tmp_path / "exp" / "main-c1-base-r3").exists()
    assert (tmp_path / "exp" / ".attempts" / "main-c1-base-r3.1").is_dir()
    other = tmp_path / "copy.json"
    other.write_text(json.dumps({**json.loads(BASE.read_text()), "date": "20990101-000000"}))
    # another result (the same one rewritten is the same result: skipped, test above)
    (_, again), = import_file(other, ImportOptions(experiment="exp", arm="vb"), tmp_path)
    assert not any("joins cell" in w for w in again.warnings)  # only imported runs there


# ----------------------------------------------------------------- command line ----

def test_commands(tmp_path: Path) -> None:
    from e2e.cli import app

    runner = CliRunner()
    got = runner.invoke(app, ["import", "vllm-bench", str(BASE), str(DSPARK), "--arm",
                              "vllm-bench", "--experiment", "exp", "--results", str(tmp_path)])
    assert got.exit_code == 0, got.output
    assert "vllm-bench-c1-base-r2: valid" in got.output
    assert "vllm-bench-c1-dspark-r2: valid" in got.output
    got = runner.invoke(app, ["export", str(tmp_path / "exp"), "--out", str(tmp_path / "out")])
    assert got.exit_code == 0, got.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "vllm-bench-c1-base-r2.json", "vllm-bench-c1-dspark-r2.json"]
    got = runner.invoke(app, ["export", str(tmp_path / "exp"), "--format", "csv"])
    assert got.exit_code == 2 and "'csv' is not one of 'vllm-bench'" in got.output  # a choice: --help lists it
    got = runner.invoke(app, ["import", "vllm-bench", str(tmp_path / "missing.json"),
                              "--results", str(tmp_path)])
    assert got.exit_code == 2 and "cannot read" in got.output


@pytest.mark.parametrize("path, peaks", [(BASE, (350.0, 6)), (DSPARK, (247.0, 6))])
def test_peaks_by_vllms_formula_match_its_files(path: Path, peaks: tuple[float, int]) -> None:
    """The keys e2e computes for its own runs (max_output_tokens_per_s,
    max_concurrent_requests) from a file's per-request arrays give the file's own values."""
    doc = load(path)
    assert (doc["max_output_tokens_per_s"], doc["max_concurrent_requests"]) == peaks
    run = to_run(doc, OPTS, source=path.name, repeat=2)
    measured = run.record.model_copy(update={"provenance": {}})  # as e2e's own: computed
    exported = to_result(measured, run.requests)
    assert (exported["max_output_tokens_per_s"], exported["max_concurrent_requests"]) == peaks


def test_export_of_an_open_loop_run() -> None:
    """An open loop's cap (not the closed loop's streams) is vLLM's max_concurrency, and a
    queue time runs from the request's arrival in the seeded schedule to its send."""
    from e2e.load import arrival_times

    record, requests = e2e_run()
    spec = record.spec.model_copy(update={"request_rate": 2.0, "burstiness": 0.5,
                                          "max_concurrency": 3})
    at = arrival_times(4, 2.0, burstiness=0.5, seed=3)
    sent = [r.model_copy(update={"send_s": float(at[r.index]) + 0.01 * r.index}) for r in requests]
    doc = to_result(record.model_copy(update={"spec": spec}), sent)
    assert (doc["max_concurrency"], doc["request_rate"], doc["burstiness"]) == (3, 2.0, 0.5)
    assert doc["queue_times"] == pytest.approx([0.0, 0.01, 0.02, 0.03])
    closed = to_result(record, requests)
    assert closed["max_concurrency"] == 2 and closed["queue_times"] == [r.send_s for r in requests]
