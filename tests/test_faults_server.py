"""Faults made on the real CPU server: a hang (SIGSTOP) mid-load, and SIGTERM to `e2e run`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import e2e.session.server as server_mod
import e2e.session.session as session
import e2e.load.workload as workload
from conftest import ROOT, small
from e2e.plan import RunSpec
from e2e.session.server import group_alive
from e2e.results.store import read_requests

pytestmark = pytest.mark.server
OPTIONS = session.SessionOptions(progress=False)


def test_hung_server_times_out_within_bounds(default_experiment, server_python, tmp_path,
                                             monkeypatch):
    """SIGSTOP the whole server after the first measured request: the rest time out after
    load.stall_timeout_s, the run is invalid with that reason, the finished request is kept,
    and the stopped group is still taken down."""
    experiment = small(default_experiment, stall_timeout_s=4.0, request_timeout_s=30.0)
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False, prompts=3,
                           output_len=64)
    seen = {}
    real_serve, real_load = server_mod.serve, workload.run_measured_load

    class Spy:
        def __init__(self, cm):
            self.cm = cm

        def __enter__(self):
            seen["server"] = self.cm.__enter__()
            return seen["server"]

        def __exit__(self, *exc):
            return self.cm.__exit__(*exc)

    def stopping_load(load_spec, *, on_done=None, **kwargs):
        if on_done is None:
            return real_load(load_spec, **kwargs)

        def hook(record):
            on_done(record)
            if record.index == 0:
                os.killpg(seen["server"].pgid, signal.SIGSTOP)

        return real_load(load_spec, on_done=hook, **kwargs)

    monkeypatch.setattr(workload, "run_measured_load", stopping_load)
    started = time.monotonic()
    folder, record = session.run_unit(experiment, spec, tmp_path, session.SessionOptions(
        progress=False, servers=session.Servers(serve=lambda *a, **k: Spy(real_serve(*a, **k)))))
    assert not record.valid
    assert any("no data for 4 s" in r or "timed out" in r for r in record.invalid_reasons), \
        record.invalid_reasons
    requests = read_requests(folder / "requests.parquet")
    assert [r.ok for r in requests] == [True, False, False]
    assert not group_alive(seen["server"].pgid)
    # two stalled requests at 4 s each, plus start and stop: bounded, not the 30 s timeouts
    assert time.monotonic() - started < 240


def test_sigterm_during_e2e_run(server_python, tmp_path):
    results = tmp_path / "results"
    config = tmp_path / "c.toml"
    config.write_text((ROOT / "configs" / "default.toml").read_text().replace(
        "startup_timeout_s = 300", "startup_timeout_s = 300\nlock_wait_s = 900"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "e2e.cli", "run", "--config", str(config), "--results",
         str(results), "--prompts", "50", "--output-len", "256", "-q"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    partial = results / "default" / ".partial"
    deadline = time.monotonic() + 600
    log = None
    while time.monotonic() < deadline:
        logs = list(partial.glob("*/server.log")) if partial.exists() else []
        if logs and "Application startup complete" in logs[0].read_text(errors="replace"):
            log = logs[0]
            break
        time.sleep(1)
    assert log is not None, proc.communicate(timeout=5)[0]
    # some measured requests finish: uvicorn logs a request as its stream starts, and at
    # concurrency 1 a request starts when the one before it ended, so the 5th line (after 2
    # warmups) means a measured request has finished, however busy the host is
    while time.monotonic() < deadline and log.read_text(errors="replace").count(
            "POST /v1/completions") < 5:
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    runs = [p for p in (results / "default").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 1
    record = json.loads((runs[0] / "run.json").read_text())
    assert record["valid"] is False
    assert any("interrupted" in r for r in record["invalid_reasons"])
    kept = read_requests(runs[0] / "requests.parquet")
    assert kept and all(r.ok for r in kept)  # what finished before the signal is kept
    import re

    server_pid = int(re.search(r"Started server process \[(\d+)\]",
                               (runs[0] / "server.log").read_text()).group(1))
    assert not group_alive(server_pid), "the server's process group survived SIGTERM"
