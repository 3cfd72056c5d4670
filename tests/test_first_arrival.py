"""The first open-loop arrival is not charged with the event loop's start-up: the schedule's
clock starts once the client's loop runs (it started before, and two trace replays read their
first arrival 246-331 ms late); a first arrival that is still late by more than a few ms is
said in the run's warnings, which the printed summary shows."""

from __future__ import annotations

import time

import pytest
from sse_server import ScriptedServer, good, stream

from e2e.load import stream as _stream
from e2e.load.generator import LoadOutcome, LoadSpec, run_measured_load
from e2e.load.workload import FIRST_LATE_MS, first_lateness_s
from e2e.results.records import RequestRecord

SLOW_START_S = 0.3  # a loop that takes this long to start, as a busy host's did


async def _respond(payload, writer):
    await stream(writer, good(2))


def test_a_slow_loop_start_is_not_charged_to_the_first_arrival(monkeypatch):
    started = _stream._interruptible

    async def slow_to_start(coro):  # the loop runs, then takes its time before the load
        time.sleep(SLOW_START_S)
        return await started(coro)

    monkeypatch.setattr(_stream, "_interruptible", slow_to_start)
    with ScriptedServer(_respond) as server:
        spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[5, 6, 7]] * 3,
                        output_len=2, concurrency=1, at_s=[0.0, 0.05, 0.1])
        outcome = run_measured_load(spec, progress=False)
    assert outcome.scheduled_s == (0.0, 0.05, 0.1)
    first = first_lateness_s([outcome])
    # before: >= 0.3 s (the clock ran while the loop started); now the clock starts after it
    assert first is not None and first < SLOW_START_S / 2, first
    assert all(r.ok for r in outcome.records)


def _outcome(late_s: float) -> LoadOutcome:
    records = [RequestRecord(index=i, send_s=at + (late_s if i == 0 else 0.0), first_token_s=None,
                             end_s=None, chunk_times_s=(), prompt_tokens=None,
                             completion_tokens=None, status=None, error="x")
               for i, at in enumerate((0.0, 1.0))]
    return LoadOutcome(records=records, client=None, offered_rate=2.0, achieved_rate=2.0,
                       scheduled_s=(0.0, 1.0))


def test_the_first_arrivals_lateness_is_the_worst_windows():
    assert first_lateness_s([_outcome(0.004), _outcome(0.250)]) == 0.250
    closed = LoadOutcome(records=[], client=None, offered_rate=None, achieved_rate=None)
    assert first_lateness_s([closed]) is None
    assert FIRST_LATE_MS == 5.0


@pytest.mark.slow
def test_a_late_first_arrival_is_a_warning_in_the_printed_summary(default_experiment, tmp_path,
                                                                   monkeypatch):
    """A trace run whose first arrival goes out 30 ms late (a busy host, forced: its first
    wait for the schedule oversleeps) says so in run.json's warnings and the printed run."""
    from io import StringIO

    from rich.console import Console
    from test_workloads import TRACE, Counters, echo, scripted_servers

    from e2e.plan import RunSpec
    from e2e.console import print_run
    from e2e.session import SessionOptions, run_unit
    from e2e.session import resolve_model

    waits = []
    sleep_until = _stream._sleep_until

    async def oversleeps_once(deadline, spin_s=_stream._SPIN_S):
        waits.append(deadline)
        await sleep_until(deadline + (0.03 if len(waits) == 2 else 0.0), spin_s)

    monkeypatch.setattr(_stream, "_sleep_until", oversleeps_once)
    experiment = default_experiment.override("load", warmup_requests=0, workload={
        "kind": "trace", "path": str(TRACE), "speedup": 20.0, "max_requests": 4})
    unit = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    with ScriptedServer(echo) as http:
        options = SessionOptions(progress=False, plugin_check=False, servers=scripted_servers(
            resolve_model("e2e:tiny-llama")[0], http, Counters(0.0)))
        folder, record = run_unit(experiment, unit, tmp_path, options)
    said = [w for w in record.warnings if "first scheduled arrival" in w]
    assert len(said) == 1 and float(said[0].split(" sent ")[1].split(" ms")[0]) >= 30.0
    buffer = StringIO()
    print_run(folder, record, brief=True, console=Console(file=buffer, width=300))
    assert "the first scheduled arrival was sent" in buffer.getvalue()
