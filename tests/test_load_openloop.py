"""Open-loop load against a scripted local server: the offered rate is achieved, and the send
times follow the gamma process asked for (Kolmogorov-Smirnov against the exact distribution)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from scipy import stats
from sse_server import ScriptedServer, good, stream

from e2e.load.generator import LoadSpec, run_measured_load
from e2e.load import arrival_times

pytestmark = pytest.mark.slow  # the whole module is the slow tier


async def quick(payload, writer):
    await stream(writer, good(payload["max_tokens"]))


def open_loop(n, rate, burstiness, respond=quick, process=True, **kw):
    with ScriptedServer(respond, process=process) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[1] * 4] * n,
                        output_len=2, concurrency=1, request_rate=rate,
                        burstiness=burstiness, seed=7, **kw)
        return run_measured_load(spec, progress=False)


def send_gaps(records):
    return np.diff(np.concatenate([[0.0], np.sort([r.send_s for r in records])]))


def test_schedule_is_seeded_and_ends_at_n_over_rate():
    a = arrival_times(500, 20.0, burstiness=0.5, seed=3)
    assert np.array_equal(a, arrival_times(500, 20.0, burstiness=0.5, seed=3))
    assert not np.array_equal(a, arrival_times(500, 20.0, burstiness=0.5, seed=4))
    assert np.all(np.diff(a) >= 0) and a[-1] == pytest.approx(25.0)


def test_poisson_at_50_per_s_over_2000_requests():
    outcome = open_loop(2000, 50.0, 1.0)
    assert all(r.ok for r in outcome.records)
    assert outcome.offered_rate == 50.0
    assert abs(outcome.achieved_rate / 50.0 - 1) < 0.02, outcome.achieved_rate
    test = stats.kstest(send_gaps(outcome.records), stats.expon(scale=1 / 50.0).cdf)
    # a host that stalls the client sends overdue arrivals back to back; the client says so
    assert test.pvalue > 0.01 or outcome.client.saturated, (test, outcome.client)


@pytest.mark.parametrize("shape", [1.0, 0.5])
def test_schedule_follows_the_gamma_process(shape):
    gaps = np.diff(np.concatenate([[0.0], arrival_times(2000, 50.0, burstiness=shape, seed=11)]))
    assert stats.kstest(gaps, stats.gamma(a=shape, scale=1 / (50.0 * shape)).cdf).pvalue > 0.01
    other = 0.5 if shape == 1.0 else 1.0
    assert stats.kstest(gaps, stats.gamma(a=other, scale=1 / (50.0 * other)).cdf).pvalue < 1e-6


def test_bursty_gamma_half_as_sent():
    """A quarter of gamma(0.5) gaps at 100 req/s are under 1 ms, so the sends follow it only
    while the client is never stalled (a host with more runnable processes than cores stalls
    it for milliseconds). Either the gaps as sent pass, or the client flagged its own timing."""
    rate, shape = 100.0, 0.5
    outcome = open_loop(1000, rate, shape)
    assert all(r.ok for r in outcome.records)
    assert abs(outcome.achieved_rate / rate - 1) < 0.02, outcome.achieved_rate
    gaps = send_gaps(outcome.records)
    test = stats.kstest(gaps, stats.gamma(a=shape, scale=1 / (rate * shape)).cdf)
    assert test.pvalue > 0.01 or outcome.client.saturated, (test, outcome.client)
    # not merely "some" distribution: the exponential is rejected for these gaps
    assert stats.kstest(gaps, stats.expon(scale=1 / rate).cdf).pvalue < 1e-6


def test_max_concurrency_caps_in_flight_and_the_rate_falls_short():
    in_flight = {"now": 0, "max": 0}

    async def slow(payload, writer):
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        await asyncio.sleep(0.05)
        in_flight["now"] -= 1
        await stream(writer, good(payload["max_tokens"]))

    outcome = open_loop(60, 400.0, 1.0, respond=slow, process=False, max_concurrency=3)
    assert all(r.ok for r in outcome.records)
    assert in_flight["max"] == 3
    assert outcome.achieved_rate < 0.5 * outcome.offered_rate  # 3 in flight x 50 ms: <= 60/s
