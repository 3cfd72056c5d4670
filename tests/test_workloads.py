"""Workloads (e2e.load.draw): the shared-prefix and trace workloads draw exactly what they
say (shared prefixes token for token, lengths, send times), the same for every arm; a scheduled
load keeps its times and per-request max_tokens; a session records the workload block (hash,
cache state, prefix-cache hit rate from the counters, segments); an external server's prefix
cache is reset, or the run says it was not. A trace that is not a trace is bad input (exit 2).
The real-server measurements are in test_workloads_server.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from scripted import Scripted
from sse_server import ScriptedServer, chunk, sse, stream, usage

from e2e.plan import RunSpec
from e2e.errors import ConfigError
from e2e.load.draw import WARMUP_NOTE, traffic
from e2e.load.cache import reset_prefix_cache
from e2e.load.generator import LoadSpec, make_prompts, run_measured_load
from e2e.session import Servers, SessionOptions, run_unit
from e2e.traces import read_trace

DATA = Path(__file__).parent / "data" / "traces"
TRACE = DATA / "mooncake_small.jsonl"
SHARED = {"kind": "shared-prefix", "groups": 3, "per_group": 4, "prefix_len": 40}


def spec_of(experiment, workload, **load) -> RunSpec:
    return RunSpec.resolve(experiment.override("load", workload=workload, **load), arm="main",
                           concurrency=1, dspark=False)


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def test_shared_prefix_groups_share_exactly_their_prefix(default_experiment):
    spec = spec_of(default_experiment, SHARED, input_len=64, output_len=5)
    assert (spec.prompts, spec.cell) == (12, "main-c1-sp3x4p40-base")
    t = traffic(spec, vocab_size=500, exclude=[0, 1])
    assert [len(p) for p in t.prompts] == [64] * 12 and t.output_lens == [5] * 12
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(t.prompts):
        groups.setdefault(tuple(p[:40]), []).append(i)
    assert sorted(len(v) for v in groups.values()) == [4, 4, 4]
    for members in groups.values():  # the first sent of each group is its "first"
        assert [t.segments[i] for i in members] == ["first", "later", "later", "later"]
        suffixes = {tuple(t.prompts[i][40:]) for i in members}
        assert len(suffixes) == 4
    heads = list(groups)
    assert all(common_prefix(a, b) < 40 for a in heads for b in heads if a != b)
    assert all(0 not in p and 1 not in p for p in t.prompts)  # special tokens left out
    again = traffic(spec, vocab_size=500, exclude=[0, 1])
    assert again.sha256() == t.sha256() and again.prompts == t.prompts  # every arm alike
    other = traffic(spec.model_copy(update={"seed": 1}), vocab_size=500, exclude=[0, 1])
    assert other.sha256() != t.sha256()
    # a warmup's prompts (stream 1) share no prefix block with the measured ones
    warm = make_prompts(2, 64, vocab_size=500, exclude=[0, 1], seed=0, stream=1)
    assert max(common_prefix(w, p) for w in warm for p in t.prompts) < 8
    assert "share no prefix" in WARMUP_NOTE


def test_a_workload_that_cannot_be_sent_is_refused_before_anything_runs(default_experiment):
    with pytest.raises(ConfigError, match="prefix_len 64 must be shorter than input_len 64"):
        spec_of(default_experiment, {**SHARED, "prefix_len": 64}, input_len=64)
    with pytest.raises(ConfigError, match="multi-turn workload is a closed loop"):
        spec_of(default_experiment, MULTI, request_rate=2.0)
    with pytest.raises(ConfigError, match="no-such.jsonl"):
        spec_of(default_experiment, {"kind": "trace", "path": "no-such.jsonl"})


def test_trace_prompts_share_exact_prefixes_by_hash_id(default_experiment):
    spec = spec_of(default_experiment, {"kind": "trace", "path": str(TRACE), "speedup": 2.0})
    trace = read_trace(TRACE, block_size=512)
    assert spec.prompts == len(trace.requests) == 24
    assert spec.cell == "main-c1-trace-mooncake_smallx2-base"
    t = traffic(spec, vocab_size=32000, exclude=[0, 1, 2])
    assert t.input_lens == [r.input_length for r in trace.requests]
    assert t.output_lens == [r.output_length for r in trace.requests]
    first = trace.requests[0].timestamp
    assert t.at_s == pytest.approx([(r.timestamp - first) / 2000.0 for r in trace.requests])
    assert t.source_sha256 == trace.sha256
    checked = 0
    for i, a in enumerate(trace.requests):
        for j, b in enumerate(trace.requests[:i]):
            shared = 0
            while (shared < min(len(a.hash_ids), len(b.hash_ids))
                   and a.hash_ids[shared] == b.hash_ids[shared]):
                shared += 1
            want = min(shared * 512, a.input_length, b.input_length)
            got = common_prefix(t.prompts[i], t.prompts[j])
            # shared blocks are the same tokens; a block that differs differs at once (a
            # random token equal by chance, 1 in 32,000, moves it by a token or two)
            assert want <= got <= want + 3, (i, j, shared, got)
            checked += shared > 0
    assert checked > 20  # the trace has shared prefixes to check
    assert set(t.segments) == {f"segment {k}/4" for k in range(1, 5)}


@pytest.mark.parametrize("text, message", [
    ('{"timestamp": 1, "input_length": 10}\nnot json\n', "line 1: output_length"),
    ('{"timestamp": 1, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n[1]\n',
     "line 2: expected a JSON object"),
    ('{"timestamp": 1, "input_length": 10, "output_length": 2}\n{"timestamp": 2\n',
     "line 2 is not JSON"),
    ('{"timestamp": -1, "input_length": 10, "output_length": 2}\n', "line 1: timestamp"),
    ('{"timestamp": 1, "input_length": 0, "output_length": 2}\n', "line 1: input_length"),
    ('{"timestamp": 1, "input_length": 600, "output_length": 2, "hash_ids": [1]}\n',
     "input_length 600 is more than its 1 hash ids x 512 tokens"),
    ('\n\n', "holds no requests"),
])
def test_a_bad_trace_is_bad_input_naming_the_line(tmp_path, text, message):
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_trace(path, block_size=512)


def test_a_trace_that_is_not_text_or_too_large_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_trace(path, block_size=512)
    import e2e.traces

    path.write_text('{"timestamp": 1, "input_length": 1, "output_length": 1}\n' * 100)
    monkeypatch.setattr(e2e.traces, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(ConfigError, match="larger than"):
        read_trace(path, block_size=512)
    with pytest.raises(ConfigError, match="no-such.jsonl"):
        read_trace(tmp_path / "no-such.jsonl", block_size=512)


async def echo(payload, writer):
    """A completion of exactly ``max_tokens`` tokens whose usage counts the prompt sent."""
    n = payload["max_tokens"]
    await stream(writer, sse(*[chunk()] * n, usage(len(payload["prompt"]), n), b"[DONE]"))


def test_a_scheduled_load_keeps_its_times_and_each_max_tokens():
    at = [0.0, 0.05, 0.05, 0.12, 0.3, 0.31]
    lens = [2, 7, 3, 5, 2, 9]
    with ScriptedServer(echo) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[5] * (i + 1) for i in range(6)],
                        output_len=2, concurrency=1, output_lens=lens, at_s=at)
        outcome = run_measured_load(spec, progress=False)
        bodies = sorted(server.bodies, key=lambda b: len(b["prompt"]))
    assert [b["max_tokens"] for b in bodies] == lens
    assert [r.completion_tokens for r in outcome.records] == lens
    late = [r.send_s - t for r, t in zip(outcome.records, at)]
    assert min(late) >= 0
    # docs/explanation/load.md: sends land within ~1 ms of their time on a client that is not starved (the
    # first send of a load can be a few ms late on a busy host: the load's own start-up)
    assert np.median(late) < 0.002 or outcome.client.saturated, (late, outcome.client)
    assert outcome.offered_rate == pytest.approx(6 / 0.31)


def test_a_schedule_that_runs_backwards_is_refused():
    with pytest.raises(ConfigError, match="at_s must give every prompt"):
        LoadSpec(base_url="http://x", model="m", prompts=[[1], [1]], output_len=2,
                 concurrency=1, at_s=[0.2, 0.1])
    with pytest.raises(ConfigError, match="output_lens must give"):
        LoadSpec(base_url="http://x", model="m", prompts=[[1], [1]], output_len=2,
                 concurrency=1, output_lens=[3])


class Counters:
    """/metrics of a server whose prefix cache hits ``rate`` of what it is asked."""

    def __init__(self, rate: float):
        self.rate, self.queries = rate, 1000.0

    def __call__(self) -> str:
        text = (f"vllm:prefix_cache_queries_total{{engine=\"0\"}} {self.queries}\n"
                f"vllm:prefix_cache_hits_total{{engine=\"0\"}} {self.queries * self.rate}\n")
        self.queries += 4000.0
        return text

    def off(self) -> str:
        return "vllm:prefix_cache_queries_total 0.0\nvllm:prefix_cache_hits_total 0.0\n"


def scripted_servers(model: str, http: ScriptedServer, metrics, *, external: bool = False):
    scripted = Scripted(model=model)

    def launch(experiment, arm, *, dspark, progress=None, **kwargs):
        from dataclasses import replace

        base = scripted.launch(experiment, arm, dspark=dspark)
        return replace(base, build={"kind": "external"}) if external else base

    @contextlib.contextmanager
    def serve(launch, log_path, options):
        Path(log_path).write_text("scripted\n")
        log = None if external else Path(log_path)

        class Handle:
            base_url, model, argv, log_path = http.base_url, launch.model, ["scripted"], log

            def headers(self):
                return {}

            def alive(self):
                return True

            def scrape_metrics(self):
                return metrics()

        yield Handle()

    return Servers(launch=launch, serve=serve)


@pytest.fixture(scope="module")
def tiny() -> str:
    from e2e.session import resolve_model

    return resolve_model("e2e:tiny-llama")[0]


def test_a_trace_run_records_its_workload_segments_and_hit_rate(default_experiment, tmp_path,
                                                                tiny):
    experiment = default_experiment.override("load", warmup_requests=1, slo="ttft=10s",
                                             workload={"kind": "trace", "path": str(TRACE),
                                                       "speedup": 20.0, "max_requests": 10})
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    with ScriptedServer(echo) as http:
        options = SessionOptions(progress=False, plugin_check=False,
                                 servers=scripted_servers(tiny, http, Counters(0.25)))
        folder, record = run_unit(experiment, unit, tmp_path, options)
        sent = list(http.bodies)
    assert record.valid, record.invalid_reasons
    w = record.workload
    trace = read_trace(TRACE, block_size=512, max_requests=10)
    assert (w.kind, w.requests, w.source_sha256) == ("trace", 10, trace.sha256)
    assert w.input_tokens == sum(r.input_length for r in trace.requests)
    assert w.warmup == WARMUP_NOTE and w.cache_reset is None and "fresh server" in w.cache
    # counters scraped before and after the load: 4000 queried tokens, a quarter hit
    assert (w.prefix_cache_queries, w.prefix_cache_hits) == (4000.0, 1000.0)
    assert w.prefix_cache_hit_rate == record.metrics.prefix_cache_hit_rate == 0.25
    assert w.schedule_lateness_ms_max is not None and w.schedule_lateness_ms_p50 >= 0
    assert [s.name for s in w.segments] == [f"segment {k}/4" for k in range(1, 5)]
    assert sum(s.requests for s in w.segments) == 10
    assert all(s.goodput_share == 1.0 for s in w.segments)
    measured = sent[1:]  # the warmup first
    assert sorted(len(b["prompt"]) for b in measured) == sorted(r.input_length for r in trace.requests)
    assert sorted(b["max_tokens"] for b in measured) == sorted(r.output_length for r in trace.requests)
    from e2e.load.generator import vocabulary

    vocab, specials = vocabulary(tiny)
    t = traffic(unit, vocab_size=vocab, exclude=specials)  # the hash is of what was sent
    assert w.sha256 == t.sha256()
    assert sorted(map(tuple, t.prompts)) == sorted(tuple(b["prompt"]) for b in measured)
    saved = json.loads((folder / "run.json").read_text())
    assert saved["workload"]["sha256"] == w.sha256 and saved["spec"]["workload"]["kind"] == "trace"


def test_a_length_other_than_the_trace_says_invalidates_the_run(default_experiment, tmp_path,
                                                                tiny):
    async def short(payload, writer):
        n = max(1, payload["max_tokens"] - 1)  # one token short of what was asked
        await stream(writer, sse(*[chunk()] * n, usage(len(payload["prompt"]), n), b"[DONE]"))

    experiment = default_experiment.override("load", warmup_requests=0, workload={
        "kind": "trace", "path": str(TRACE), "speedup": 50.0, "max_requests": 4})
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    with ScriptedServer(short) as http:
        options = SessionOptions(progress=False, plugin_check=False,
                                 servers=scripted_servers(tiny, http, lambda: ""))
        _, record = run_unit(experiment, unit, tmp_path, options)
    assert not record.valid
    assert any("4 request(s) completed other than their max_tokens" in r
               for r in record.invalid_reasons), record.invalid_reasons
    assert record.workload.prefix_cache_hit_rate is None  # no counters: no rate


def test_a_server_that_queried_nothing_hit_nothing(default_experiment, tmp_path, tiny):
    """Prefix caching off: vLLM counts no queries (measured: both counters stay 0), and the
    run's hit rate is 0, not undefined."""
    experiment = default_experiment.override("load", warmup_requests=0, input_len=64,
                                             output_len=2, workload=SHARED)
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    with ScriptedServer(echo) as http:
        options = SessionOptions(progress=False, plugin_check=False,
                                 servers=scripted_servers(tiny, http, Counters(0.0).off))
        _, record = run_unit(experiment, unit, tmp_path, options)
    assert record.valid, record.invalid_reasons
    w = record.workload
    assert (w.prefix_cache_queries, w.prefix_cache_hits, w.prefix_cache_hit_rate) == (0, 0, 0.0)


def reset_answer(status: int, body: bytes):
    async def respond(payload, writer):
        writer.write(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n%s" % (status, len(body), body))
        await writer.drain()

    return respond


@pytest.mark.parametrize("status, body, reset, says", [
    (200, b'{"success": true}', True, "reset by POST /reset_prefix_cache"),
    (200, b'{"success": false}', False, "success=false"),
    (404, b'{"detail": "Not Found"}', False, "VLLM_SERVER_DEV_MODE=1"),
    (500, b"boom", False, "HTTP 500"),
])
def test_reset_prefix_cache_says_what_the_server_did(status, body, reset, says):
    with ScriptedServer(reset_answer(status, body)) as server:
        state = reset_prefix_cache(server.base_url, {})
    assert state.reset is reset and says in state.detail
    assert reset_prefix_cache("http://127.0.0.1:9", {}).reset is False  # nothing listening


def test_an_external_run_resets_the_cache_or_warns(default_experiment, tmp_path, tiny):
    experiment = default_experiment.override("load", warmup_requests=0, input_len=64,
                                             output_len=2, workload=SHARED)
    unit = RunSpec.resolve(experiment, arm="main", concurrency=2, dspark=False)

    async def both(payload, writer):  # 404 for the reset, completions otherwise
        if not payload:
            await reset_answer(404, b"{}")(payload, writer)
        else:
            await echo(payload, writer)

    with ScriptedServer(both) as http:
        options = SessionOptions(progress=False, plugin_check=False,
                                 servers=scripted_servers(tiny, http, Counters(0.5), external=True))
        _, record = run_unit(experiment, unit, tmp_path, options)
    assert record.valid, record.invalid_reasons
    assert record.workload.cache_reset is False
    assert any("VLLM_SERVER_DEV_MODE=1" in w for w in record.warnings)
    assert [s.name for s in record.workload.segments] == ["first", "later"]
    assert [s.requests for s in record.workload.segments] == [3, 9]
    assert record.metrics.prefix_cache_hit_rate == 0.5


MULTI = {"kind": "multi-turn", "sessions": 3, "turns": 3, "user_len": 10, "think_s": 0.05}


def test_a_turn_is_the_last_turn_its_reply_and_a_new_message(default_experiment):
    spec = spec_of(default_experiment, MULTI, input_len=20, output_len=4)
    assert (spec.prompts, spec.cell) == (9, "main-c1-mt3x3u10t0.05-base")
    t = traffic(spec, vocab_size=500)
    assert t.sessions == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] and t.think_s == 0.05
    assert t.input_lens == [20, 34, 48] * 3
    for turns in t.sessions:
        for a, b in zip(turns, turns[1:]):
            assert t.prompts[b][:len(t.prompts[a])] == t.prompts[a]  # the history, exactly
    assert common_prefix(t.prompts[0], t.prompts[3]) < 20  # sessions are their own
    assert t.segments[:3] == ["turn 1", "turn 2", "turn 3"]


def test_a_session_sends_its_turns_in_order_after_the_think_time(default_experiment, tmp_path,
                                                                 tiny):
    experiment = default_experiment.override("load", warmup_requests=0, input_len=20,
                                             output_len=4, workload=MULTI)
    unit = RunSpec.resolve(experiment, arm="main", concurrency=2, dspark=False)
    with ScriptedServer(echo) as http:
        options = SessionOptions(progress=False, plugin_check=False,
                                 servers=scripted_servers(tiny, http, lambda: ""))
        folder, record = run_unit(experiment, unit, tmp_path, options)
    assert record.valid, record.invalid_reasons
    from e2e.results.store import read_requests

    done = {r.index: r for r in read_requests(folder / "requests.parquet")}
    assert [done[i].prompt_tokens for i in range(9)] == [20, 34, 48] * 3
    for s in range(3):
        for k in (1, 2):
            before, after = done[3 * s + k - 1], done[3 * s + k]
            assert after.send_s >= before.end_s + 0.05  # in order, after the think time
    w = record.workload
    assert [(g.name, g.requests) for g in w.segments] == [("turn 1", 3), ("turn 2", 3),
                                                          ("turn 3", 3)]
    assert w.kind == "multi-turn"


def test_a_multi_turn_load_refuses_what_it_cannot_keep():
    with pytest.raises(ConfigError, match="one client process"):
        LoadSpec(base_url="http://x", model="m", prompts=[[1], [1]], output_len=2,
                 concurrency=1, sessions=[[0, 1]], workers=2)
    with pytest.raises(ConfigError, match="every prompt index exactly once"):
        LoadSpec(base_url="http://x", model="m", prompts=[[1], [1]], output_len=2,
                 concurrency=1, sessions=[[0, 0]])
