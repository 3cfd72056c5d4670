"""Workloads against the real vLLM CPU server: the shared-prefix workload's later requests hit
the prefix cache (the server's own counters say so) and vLLM's /reset_prefix_cache answers as
e2e reads it; a Mooncake-format trace replays token-exact at its arrival times."""

from __future__ import annotations

import contextlib

import pytest

import e2e.session as session
from conftest import small
from e2e.config import SharedPrefix, TraceReplay
from e2e.plan import RunSpec
from e2e.load.cache import reset_prefix_cache
from e2e.results.store import read_requests
from e2e.session import Servers
from e2e.session.server import serve as real_serve
from e2e.traces import read_trace
from test_workloads import TRACE

pytestmark = pytest.mark.server


def test_shared_prefixes_hit_the_cache_and_the_cache_resets(default_experiment, server_python,
                                                            tmp_path):
    # 2 groups x 4 requests; 384 of 512 tokens shared (3 of the CPU backend's 128-token blocks)
    shape = SharedPrefix(kind="shared-prefix", groups=2, per_group=4, prefix_len=384)
    experiment = small(default_experiment, workload=shape, input_len=512, output_len=4)
    server = experiment.server.model_copy(update={
        "env": {**experiment.server.env, "VLLM_SERVER_DEV_MODE": "1"}})
    experiment = experiment.model_copy(update={"server": server})
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    resets = []

    @contextlib.contextmanager
    def serve(launch, log_path, options):  # the real server; its cache reset after the run
        with real_serve(launch, log_path, options) as handle:
            yield handle
            resets.append(reset_prefix_cache(handle.base_url, handle.headers()))

    options = session.SessionOptions(progress=False, servers=Servers(serve=serve))
    folder, record = session.run_unit(experiment, unit, tmp_path, options)
    assert record.valid, record.invalid_reasons
    w = record.workload
    # 6 later requests x 384 cached tokens of 8 x 512 queried: 0.5625 (a group's first
    # request, and every suffix, miss)
    assert w.prefix_cache_queries == 8 * 512
    assert w.prefix_cache_hits == 6 * 384
    assert record.metrics.prefix_cache_hit_rate == pytest.approx(0.5625)
    assert [s.name for s in w.segments] == ["first", "later"]
    assert {r.prompt_tokens for r in read_requests(folder / "requests.parquet")} == {512}
    assert [r.reset for r in resets] == [True], resets[0].detail


def test_a_mooncake_trace_replays_token_exact_at_its_times(default_experiment, server_python,
                                                           tmp_path):
    shape = TraceReplay(kind="trace", path=str(TRACE), speedup=2.0, max_requests=12)
    experiment = small(default_experiment, workload=shape)
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    folder, record = session.run_unit(experiment, unit, tmp_path,
                                      session.SessionOptions(progress=False))
    assert record.valid, record.invalid_reasons  # every prompt and completion its own length
    trace = read_trace(TRACE, block_size=512, max_requests=12)
    done = read_requests(folder / "requests.parquet")
    assert [r.prompt_tokens for r in done] == [q.input_length for q in trace.requests]
    assert [r.completion_tokens for r in done] == [q.output_length for q in trace.requests]
    first = trace.requests[0].timestamp
    late = [r.send_s - (q.timestamp - first) / 2000.0 for r, q in zip(done, trace.requests)]
    assert min(late) >= 0
    w = record.workload
    assert w.schedule_lateness_ms_max == pytest.approx(max(late) * 1000.0)
    # docs/explanation/load.md: sends ~1 ms late at most on a client that is not starved
    assert w.schedule_lateness_ms_p50 < 2.0 or record.client.saturated
    assert w.prefix_cache_hits > 0  # the trace's shared hash ids are shared prompt blocks
