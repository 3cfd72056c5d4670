"""SLOs and goodput (e2e.slo): parsing with clear errors, per-request verdicts on hand-made
records, and vLLM's own request_goodput reproduced from a real vllm bench serve file."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.errors import ConfigError
from e2e.interop.importing import ImportOptions
from e2e.interop.vllm_bench import read_results, to_run
from e2e.metrics import summarize_run
from e2e.results.records import RequestRecord
from e2e.metrics import goodput, meets
from e2e.slo import SLO, parse_slo

DATA = Path(__file__).parent / "data" / "vllm_bench"
# The objectives c1-base.json was made with: --goodput ttft:30 tpot:2.8 e2el:200 (docs/how-to/interop.md)
FIXTURE_SLO = "ttft=30ms,tpot=2.8ms,e2e=200ms"


def req(index: int, *, send: float = 0.0, ttft: float = 0.1, e2e: float = 1.0,
        tokens: int | None = 11, error: str | None = None) -> RequestRecord:
    """A request sent at ``send``: first token ``ttft`` s later, finished ``e2e`` s after send;
    TPOT = (e2e - ttft) / (tokens - 1)."""
    if error is not None:
        return RequestRecord(index=index, send_s=send, error=error)
    return RequestRecord(index=index, send_s=send, first_token_s=send + ttft, end_s=send + e2e,
                         chunk_times_s=(send + ttft, send + e2e), prompt_tokens=5,
                         completion_tokens=tokens)


def test_parse_units_and_names() -> None:
    assert parse_slo("ttft=200ms,tpot=50ms,e2e=2s") == SLO(ttft_ms=200.0, tpot_ms=50.0, e2e_ms=2000.0)
    assert parse_slo(" tpot = 500us ") == SLO(tpot_ms=0.5)
    assert parse_slo("e2el=1.5s") == SLO(e2e_ms=1500.0)  # vLLM's name for end-to-end latency
    assert parse_slo("TTFT:0.25s") == SLO(ttft_ms=250.0)
    assert str(parse_slo("ttft=200ms,e2e=2s")) == "ttft=200ms,e2e=2000ms"


@pytest.mark.parametrize("text, says", [
    ("", "empty SLO"),
    ("ttft=200", "no unit: write ttft=200ms or ttft=0.2s"),
    ("ttft=200ms,,tpot=5ms", "empty item"),
    ("latency=2s", "unknown SLO 'latency'"),
    ("ttft=2h", "unknown unit 'h'"),
    ("ttft=200ms,ttft=100ms", "names ttft twice"),
    ("ttft=0ms", "positive time"),
    ("ttft=-5ms", "cannot read SLO item"),
    ("ttft200ms", "cannot read SLO item"),
])
def test_parse_errors_say_what_to_write(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        parse_slo(text)
    assert says in str(info.value)
    assert info.value.exit_code == 2


def test_each_objective_and_failures_count() -> None:
    slo = parse_slo("ttft=200ms,tpot=50ms,e2e=1s")
    records = [
        req(0, ttft=0.1, e2e=0.5),           # meets all: TPOT 40 ms
        req(1, ttft=0.3, e2e=0.5),           # TTFT 300 ms
        req(2, ttft=0.1, e2e=0.7),           # TPOT 60 ms
        req(3, ttft=0.1, e2e=1.2, tokens=101),  # TPOT 11 ms but E2E 1.2 s
        req(4, error="HTTP 500"),            # failed: meets nothing
        req(5, ttft=0.2, e2e=0.6),           # TTFT exactly at its objective: met
    ]
    assert [meets(r, slo) for r in records] == [True, False, False, False, False, True]
    result = goodput(records, slo)
    assert (result.requests, result.met, result.share) == (6, 2, pytest.approx(2 / 6))
    assert result.missed == {"ttft": 1, "tpot": 1, "e2e": 1, "failed": 1}


def test_one_token_meets_tpot_as_in_vllm() -> None:
    """vLLM counts a single-token request's TPOT as 0 for goodput; so does e2e."""
    slo = parse_slo("tpot=1ms")
    assert meets(req(0, e2e=5.0, tokens=1), slo)
    assert not meets(req(1, e2e=5.0, tokens=2), slo)


def test_rate_uses_the_runs_duration() -> None:
    records = [req(i, send=float(i), ttft=0.1, e2e=0.5 if i % 2 == 0 else 3.0) for i in range(4)]
    result = goodput(records, parse_slo("e2e=1s"))
    duration = summarize_run(records).duration_s
    assert result.duration_s == duration == pytest.approx(6.0)  # send 0 .. end 3 + 3
    assert result.req_s == pytest.approx(2 / 6.0)
    assert goodput(records, parse_slo("e2e=1s"), duration_s=4.0).req_s == pytest.approx(0.5)


def test_no_requests() -> None:
    result = goodput([], parse_slo("ttft=1s"))
    assert (result.requests, result.met, result.share, result.req_s) == (0, 0, None, None)


def test_reproduces_vllm_request_goodput_on_its_own_file() -> None:
    """c1-base.json was made with --goodput ttft:30 tpot:2.8 e2el:200; e2e's goodput over the
    imported requests, divided by vLLM's duration, is vLLM's request_goodput."""
    result = read_results(DATA / "c1-base.json")[0]
    run = to_run(result, ImportOptions(experiment="x"), source="c1-base.json", repeat=2)
    assert run.requests is not None
    got = goodput(run.requests, parse_slo(FIXTURE_SLO), duration_s=result["duration"])
    assert 0 < got.met < got.requests  # the objectives split the requests: the check can fail
    assert got.req_s == pytest.approx(result["request_goodput"], rel=1e-12)
