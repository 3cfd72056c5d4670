"""Each measured request's output is recorded: the load generator asks for vLLM's token ids
(``return_token_ids``), keeps the completion's and checks the echoed prompt; a server that
sends none records none (never an error); requests.parquet keeps them as list<int32> and
reads files written before the column as "not recorded"."""

from __future__ import annotations

import asyncio

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sse_server import ScriptedServer, good, sse, stream, usage

from e2e.load.generator import LoadSpec, drive, run_measured_load
from e2e.load.sse import SSEStream, output_ids
from e2e.results.records import RequestRecord
from e2e.results.store import read_requests, write_requests

PROMPT = [5, 6, 7]


def vllm_chunks(payload, completion, *, echo=None):
    """What vLLM 0.32 streams for ``payload``: one chunk per token, each with its new token
    id when ``return_token_ids`` was asked, the first also with the whole prompt (``echo``
    replaces the prompt the server claims it saw)."""
    ask = payload.get("return_token_ids")
    out = []
    for k, token in enumerate(completion):
        choice = {"index": 0, "text": f" t{token}", "logprobs": None, "finish_reason": None,
                  "stop_reason": None,
                  "prompt_token_ids": ((echo or payload["prompt"]) if ask and k == 0 else None),
                  "token_ids": [token] if ask else None}
        out.append({"id": "cmpl-1", "object": "text_completion", "model": "m",
                    "choices": [choice]})
    return sse(*out, usage(len(payload["prompt"]), len(completion)), b"[DONE]")


def answer(completion_of, **kw):
    async def respond(payload, writer):
        await stream(writer, vllm_chunks(payload, completion_of(payload["prompt"]), **kw))
    return respond


def greedy(prompt):  # a deterministic "model": the answer depends on the prompt
    return [(prompt[0] * 7 + k) % 1000 for k in range(3)]


def load(respond, prompts, **kw):
    with ScriptedServer(respond) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=prompts, output_len=3,
                        concurrency=2, **kw)
        records = asyncio.run(drive(spec))
    return records, server.bodies


def test_a_vllm_like_server_s_token_ids_are_each_request_s_output():
    prompts = [[i, 6, 7] for i in range(1, 6)]
    records, bodies = load(answer(greedy), prompts)
    assert all(b["return_token_ids"] is True for b in bodies)
    assert all(r.ok for r in records)
    assert [r.output_token_ids for r in records] == [tuple(greedy(p)) for p in prompts]


def test_recording_off_asks_for_nothing_and_records_nothing():
    records, bodies = load(answer(greedy), [PROMPT] * 2, record_outputs=False)
    assert all("return_token_ids" not in b for b in bodies)
    assert all(r.ok and r.output_token_ids is None for r in records)


def test_a_server_that_sends_no_token_ids_records_none_and_fails_nothing():
    async def plain(payload, writer):  # the scripted servers' stream: text only
        await stream(writer, good(3))
    records, _ = load(plain, [PROMPT] * 3)
    assert all(r.ok and r.output_token_ids is None for r in records)


def test_a_prompt_echoed_otherwise_fails_the_request_naming_where():
    records, _ = load(answer(greedy, echo=[5, 9, 7]), [PROMPT])
    (r,) = records
    assert not r.ok and r.output_token_ids is None
    assert "another prompt than the one sent" in r.error and "from position 1" in r.error


@pytest.mark.slow  # spawns two client processes
def test_several_client_processes_bring_the_outputs_back():
    prompts = [[i, 6, 7] for i in range(1, 9)]
    with ScriptedServer(answer(greedy)) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=prompts, output_len=3,
                        concurrency=4, workers=2)
        outcome = run_measured_load(spec, progress=False)
    assert [r.output_token_ids for r in outcome.records] == [tuple(greedy(p)) for p in prompts]


def _stream(*chunks, prompt=None):
    s = SSEStream()
    for k, ids in enumerate(chunks):
        choice = {"index": 0, "text": "x"}
        if ids is not None:
            choice["token_ids"] = ids
        if k == 0 and prompt is not None:
            choice["prompt_token_ids"] = prompt
        s.feed(sse({"choices": [choice]})[0], 0.1 * k)
    return s


@pytest.mark.parametrize("chunks, completion, expected", [
    (([1, 2], [3]), 3, (1, 2, 3)),            # a speculator's chunk carries several tokens
    (([1], None, [3]), 3, None),              # one chunk without token_ids: not the output
    (([1], [2]), 3, None),                    # fewer ids than usage counts
    (([1], [2], [3], [4]), 3, None),          # more
    (([1], ["2"], [3]), 3, None),             # not token ids
    (([1], [-2], [3]), 3, None),
    (([1], [2**31], [3]), 3, None),           # past int32
    (([1], [2], [3]), None, None),            # no usage count to check against
])
def test_output_ids_are_the_whole_completion_or_nothing(chunks, completion, expected):
    assert output_ids(_stream(*chunks, prompt=PROMPT), PROMPT, completion) == expected


def test_a_prompt_echo_that_is_not_token_ids_records_nothing():
    s = _stream([1], [2], prompt="5 6 7")
    assert output_ids(s, PROMPT, 2) is None and len(s.chunk_times) == 2


def _records():
    return [RequestRecord(index=0, send_s=0.0, first_token_s=0.1, end_s=0.2,
                          chunk_times_s=(0.1, 0.2), prompt_tokens=3, completion_tokens=2,
                          status=200, output_token_ids=(7, 2**31 - 1)),
            RequestRecord(index=1, send_s=0.0, error="boom")]


def test_outputs_round_trip_as_an_int32_list_column(tmp_path):
    path = tmp_path / "requests.parquet"
    write_requests(path, _records())
    kind = pq.read_schema(path).field("output_token_ids").type
    assert kind.value_type == pa.int32()
    assert read_requests(path) == _records()
    assert [r.output_token_ids for r in read_requests(path, outputs=False)] == [None, None]


def test_a_file_written_before_outputs_reads_as_not_recorded(tmp_path):
    path = tmp_path / "requests.parquet"
    old = [r.model_dump(exclude={"output_token_ids"}) for r in _records()]
    frame = pd.DataFrame(old)
    frame["chunk_times_s"] = frame["chunk_times_s"].map(list)
    frame.to_parquet(path, index=False)  # as e2e wrote it before the column
    back = read_requests(path)
    assert [r.output_token_ids for r in back] == [None, None]
    assert [r.model_dump(exclude={"output_token_ids"}) for r in back] == old
