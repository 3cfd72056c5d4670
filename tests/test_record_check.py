"""Results are not trusted as measured (issue 34 item 8): a valid-looking run.json whose
latencies were halved was skipped as done by a resume and reported "−49.8 % faster". Its
client figures are checked against its own requests.parquet when a report or a resume reads
it."""

from __future__ import annotations

import json

from e2e.metrics import summarize_run
from e2e.results import RequestRecord
from e2e.results import REQUESTS, load_records, unit_state, write_requests
from test_aggregate import make_record


def _requests(n: int = 8) -> list[RequestRecord]:
    out = []
    for i in range(n):
        send = i * 0.1
        chunks = tuple(send + 0.02 + 0.003 * k for k in range(10))
        out.append(RequestRecord(index=i, send_s=send, first_token_s=chunks[0], end_s=chunks[-1],
                                 chunk_times_s=chunks, prompt_tokens=1031, completion_tokens=10,
                                 status=200))
    return out


def _run(root, repeat: int):
    requests = _requests()
    record = make_record("main", 1, repeat)
    record = record.model_copy(update={"metrics": summarize_run(requests)})
    folder = root / "exp" / record.run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(record.model_dump_json())
    write_requests(folder / REQUESTS, requests)
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
