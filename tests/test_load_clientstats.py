"""Knowing when the client is the limit: the saturation rule on its own, and a load whose
client is made busy on purpose (a busy loop on its event loop) is flagged; a light one is not."""

from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import pytest
from sse_server import ScriptedServer, good, stream

from e2e.load.clientstats import SATURATED_LAG_MS, LagProbe, ProcessUsage, client_stats
from e2e.load.generator import LoadSpec, run_measured_load


def test_rule_share_and_lag():
    idle = client_stats([ProcessUsage(wall_s=10, cpu_s=1, chunks=1000, lags_s=(0.0001,) * 100)])
    assert not idle.saturated and idle.core_share == 0.1 and idle.cpu_us_per_chunk == 1000.0
    busy = client_stats([ProcessUsage(wall_s=10, cpu_s=9, chunks=1000, lags_s=(0.0001,) * 100),
                         ProcessUsage(wall_s=10, cpu_s=1, chunks=1000, lags_s=())])
    assert busy.saturated and "90% of a core" in busy.saturated_because
    assert busy.workers == 2 and busy.cpu_s == 10
    lagging = client_stats([ProcessUsage(wall_s=10, cpu_s=1, chunks=10,
                                         lags_s=(SATURATED_LAG_MS / 1000 * 2,) * 10)])
    assert lagging.saturated and "lag p99" in lagging.saturated_because


async def paced(payload, writer):
    await stream(writer, good(payload["max_tokens"]), gap_s=0.02)


def spec(url, **kw):
    return LoadSpec(base_url=url, model="m", prompts=[[1] * 4] * 8, output_len=10,
                    concurrency=4, **kw)


def _idle_lag_p99_ms(seconds=0.5) -> float:
    async def probe():
        lag = LagProbe()
        lag.start()
        await asyncio.sleep(seconds)
        await lag.stop()
        return float(np.percentile(lag.lags, 99)) * 1000

    return asyncio.run(probe())


def test_light_load_is_not_saturated():
    idle = _idle_lag_p99_ms()
    if idle > SATURATED_LAG_MS / 2:  # the rule rightly flags a starved client; no verdict here
        pytest.skip(f"this host delays even an idle event loop ({idle:.1f} ms p99): too busy")
    with ScriptedServer(paced) as server:
        outcome = run_measured_load(spec(server.base_url), progress=False)
    assert all(r.ok for r in outcome.records)
    c = outcome.client
    assert not c.saturated, c
    assert c.core_share < 0.5 and c.loop_lag_ms_p99 < SATURATED_LAG_MS and c.chunks == 80


@pytest.mark.slow
def test_busy_client_is_flagged():
    def hog(record):  # on_done runs on the client's event loop: 150 ms of CPU each
        end = time.process_time() + 0.15
        while time.process_time() < end:
            pass

    with ScriptedServer(paced) as server:
        outcome = run_measured_load(spec(server.base_url), progress=False, on_done=hog)
    c = outcome.client
    assert c.saturated, c
    assert c.loop_lag_ms_max > 100 and c.cpu_s > 8 * 0.15, c


def test_a_starved_client_is_flagged_and_said_to_be():
    starved = client_stats([ProcessUsage(wall_s=10, cpu_s=1, chunks=10, lags_s=(0.0001,) * 10,
                                         wait_s=4.0)])
    assert starved.saturated and starved.wait_share == 0.4
    assert "waiting for a core 40%" in starved.saturated_because


def test_wait_for_a_core_is_measured_on_linux():
    with ScriptedServer(paced) as server:
        outcome = run_measured_load(spec(server.base_url), progress=False)
    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("no schedstat on this system")
    assert outcome.client.wait_share is not None and 0 <= outcome.client.wait_share < 1
