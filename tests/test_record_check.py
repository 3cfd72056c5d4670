"""Results are not trusted as measured (issue 34 item 8): a valid-looking run.json whose
latencies were halved was skipped as done by a resume and reported "−49.8 % faster". Its
client figures are checked against its own requests.parquet when a report or a resume reads
it."""

from __future__ import annotations

import json

import pytest

from e2e.metrics import summarize_run
from e2e.results.records import RequestRecord
from e2e.results.store import REQUESTS, load_records, unit_state, write_requests
from test_aggregate import make_record


def _requests(n: int = 8) -> list[RequestRecord]:
    out = []
    for i in range(n):
        send = i * 0.1
        chunks = tuple(send + 0.02 + 0.003 * k for k in range(10))
        out.append(RequestRecord(index=i, send_s=send, first_token_s=chunks[0], end_s=chunks[-1],
                                 chunk_times_s=chunks, prompt_tokens=1031, completion_tokens=10,
                                 status=200, output_token_ids=tuple(range(i, i + 10))))
    return out


def _run(root, repeat: int, arm: str = "main"):
    requests = _requests()
    record = make_record(arm, 1, repeat)
    folder = root / "exp" / record.run_id
    folder.mkdir(parents=True)
    digest = write_requests(folder / REQUESTS, requests)  # as e2e writes a run: the file,
    record = record.model_copy(update={"metrics": summarize_run(requests),  # then its record
                                       "outputs_sha256": digest})
    (folder / "run.json").write_text(record.model_dump_json())
    return folder, record


def test_a_run_whose_figures_match_its_requests_is_read(tmp_path):
    _run(tmp_path, 1)
    records, problems = load_records(tmp_path / "exp")
    assert len(records) == 1 and problems == ()


def test_an_edited_run_json_is_skipped_by_the_report_and_redone_by_a_resume(tmp_path):
    folder, record = _run(tmp_path, 2)
    _run(tmp_path, 3)
    data = json.loads((folder / "run.json").read_text())
    data["metrics"]["tpot_ms_mean"] /= 2
    data["metrics"]["ttft_ms_mean"] /= 2
    (folder / "run.json").write_text(json.dumps(data))
    records, problems = load_records(tmp_path / "exp")
    assert [r.run_id for r in records] == ["main-c1-base-r3"]
    assert len(problems) == 1 and "requests.parquet" in problems[0] and "changed" in problems[0]
    state = unit_state(tmp_path, "exp", record.spec)
    assert not state.done and "requests.parquet" in state.last_reason
    assert unit_state(tmp_path, "exp", records[0].spec).done


def _replace_outputs(path, outputs) -> None:
    """requests.parquet with its output_token_ids column replaced, every other column kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    table = table.set_column(table.column_names.index("output_token_ids"), "output_token_ids",
                             pa.array(outputs, type=pa.list_(pa.int32())))
    pq.write_table(table, path)


def test_an_edited_outputs_column_is_refused_as_an_edited_metric_is(tmp_path):
    """Replacing a run's output_token_ids (pr's by main's turned "diverges more than A/A"
    into "identical") changed nothing the metrics' check reads: run.json's digest of the
    outputs now refuses it, in the report and in a resume alike."""
    folder, record = _run(tmp_path, 2)
    _run(tmp_path, 3)
    _replace_outputs(folder / REQUESTS, [list(range(100 + i, 110 + i)) for i in range(8)])
    records, problems = load_records(tmp_path / "exp")
    assert [r.run_id for r in records] == ["main-c1-base-r3"]
    (problem,) = problems
    assert problem.startswith("skipped main-c1-base-r2/run.json: its requests.parquet's "
                              "output_token_ids (sha256 ")
    assert "are not the outputs run.json recorded" in problem and "changed" in problem
    state = unit_state(tmp_path, "exp", record.spec)
    assert not state.done and "output_token_ids" in state.last_reason


@pytest.mark.parametrize("edit", ["one token", "not recorded", "column dropped", "rows swapped"])
def test_every_edit_of_the_outputs_is_seen(tmp_path, edit):
    import pyarrow.parquet as pq

    folder, _ = _run(tmp_path, 2)
    path = folder / REQUESTS
    outputs = [list(range(i, i + 10)) for i in range(8)]
    if edit == "one token":
        outputs[5][9] += 1
        _replace_outputs(path, outputs)
    elif edit == "not recorded":  # a null reads as "not recorded", never as a divergence
        _replace_outputs(path, [None] * 8)
    elif edit == "column dropped":
        pq.write_table(pq.read_table(path).drop_columns(["output_token_ids"]), path)
    else:
        _replace_outputs(path, outputs[1:2] + outputs[:1] + outputs[2:])
    records, problems = load_records(tmp_path / "exp")
    assert records == () and len(problems) == 1 and "output_token_ids" in problems[0]


def test_the_same_outputs_written_again_are_read(tmp_path):
    """The digest is of the outputs, not of the file's bytes: the same ids written again
    (here as list<int64>, another compression) read as before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder, _ = _run(tmp_path, 2)
    table = pq.read_table(folder / REQUESTS)
    ids = table.column("output_token_ids").cast(pa.list_(pa.int64()))
    table = table.set_column(table.column_names.index("output_token_ids"), "output_token_ids", ids)
    pq.write_table(table, folder / REQUESTS, compression="gzip")
    records, problems = load_records(tmp_path / "exp")
    assert len(records) == 1 and problems == ()


def test_a_record_without_the_digest_is_refused_unless_it_is_older_than_the_digest(tmp_path):
    """A record of schema 7 with a requests.parquet and no outputs_sha256 was changed (e2e
    writes one beside every requests.parquet); a record of schema 6 or older has none to
    check: its outputs read unchecked, as they did."""
    folder, _ = _run(tmp_path, 2)
    data = json.loads((folder / "run.json").read_text())
    del data["outputs_sha256"]
    (folder / "run.json").write_text(json.dumps(data))
    records, problems = load_records(tmp_path / "exp")
    assert records == () and "records no outputs_sha256" in problems[0]

    data["schema_version"] = 6  # as an e2e before the digest wrote it
    (folder / "run.json").write_text(json.dumps(data))
    _replace_outputs(folder / REQUESTS, [[7] * 10] * 8)
    records, problems = load_records(tmp_path / "exp")
    assert len(records) == 1 and problems == ()
    assert records[0].schema_version == 6 and records[0].outputs_sha256 is None
