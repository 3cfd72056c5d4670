"""Several client processes: the split, the exact merge, and a real two-process load on one
clock against a scripted local server."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from sse_server import ScriptedServer, good, stream

from e2e.load.generator import LoadSpec, drive, run_measured_load
from e2e.load.workers import merge_shards, split_requests

pytestmark = pytest.mark.slow  # the whole module is the slow tier


async def fast(payload, writer):
    await stream(writer, good(payload["max_tokens"], len(payload["prompt"])), gap_s=0.001)


def test_split_closed_loop_is_proportional_to_streams():
    parts = split_requests(10, 2, streams=3, at_s=None, cap=None)
    assert [cap for _, _, cap in parts] == [2, 1]
    assert parts[0][0] == [0, 2, 3, 5, 6, 8, 9] and parts[1][0] == [1, 4, 7]
    assert sorted(i for ix, _, _ in parts for i in ix) == list(range(10))


def test_split_open_loop_keeps_the_schedule():
    at = [0.1 * i for i in range(7)]
    parts = split_requests(7, 3, streams=None, at_s=at, cap=4)
    assert [cap for _, _, cap in parts] == [2, 1, 1]
    for ix, times, _ in parts:
        assert times == [at[i] for i in ix]
    assert sorted(i for ix, _, _ in parts for i in ix) == list(range(7))


def test_merged_records_give_the_same_percentiles_as_one_process():
    with ScriptedServer(fast) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1] * 4] * 24,
                        output_len=6, concurrency=6)
        records = asyncio.run(drive(spec))
    assert all(r.ok for r in records)
    parts = split_requests(24, 3, streams=6, at_s=None, cap=None)
    shards = [[records[i] for i in ix] for ix, _, _ in parts]
    merged = merge_shards(shards[::-1])  # the order processes report in does not matter
    assert merged == records  # the very records, so every percentile computed from them agrees


def test_two_client_processes_on_one_clock():
    with ScriptedServer(fast) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1] * 4] * 40,
                        output_len=8, concurrency=8, workers=2)
        seen = []
        outcome = run_measured_load(spec, progress=False, on_done=seen.append)
    records = outcome.records
    assert [r.index for r in records] == list(range(40)) and all(r.ok for r in records)
    assert sorted(r.index for r in seen) == list(range(40))  # on_done ran in the parent
    assert outcome.client.workers == 2
    assert outcome.client.chunks == sum(len(r.chunk_times_s) for r in records) == 320
    # one clock: each process's first send is at the common start, not at its own start-up
    firsts = [min(r.send_s for r in records if r.index % 8 in slots)
              for slots in ({0, 2, 4, 6}, {1, 3, 5, 7})]
    assert all(0 <= f < 0.05 for f in firsts), firsts
    assert max(r.end_s for r in records) <= outcome.client.wall_s + 0.05


def test_open_loop_over_two_processes_sends_the_one_schedule():
    from e2e.load import arrival_times

    with ScriptedServer(fast) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1] * 4] * 200,
                        output_len=2, concurrency=1, request_rate=100.0, seed=5, workers=2)
        outcome = run_measured_load(spec, progress=False)
    assert all(r.ok for r in outcome.records) and outcome.client.workers == 2
    late = np.array([r.send_s for r in outcome.records]) - arrival_times(200, 100.0, seed=5)
    assert np.median(late) < 0.002 and late.min() > -0.0005, np.percentile(late, [0, 50, 100])
    assert abs(outcome.achieved_rate / 100.0 - 1) < 0.05
