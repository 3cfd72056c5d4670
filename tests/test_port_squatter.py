"""A server is known by its process, not its port. e2e checks that a server's port is free and
then starts the server, which binds it seconds later (vLLM loads its model first); another
program can take the port in between and answer /health, and e2e would then measure it. A
real squatter (a tiny HTTP server in its own process, answering every path) takes the port at
that moment, forced by letting e2e's own check run first: e2e must refuse the server before
any request (the squatter sees /health only, the run records why and measures nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fakevllm
from conftest import small
from e2e.errors import ServerStartError
from e2e.session import SessionOptions, run_unit, server_launch
from e2e.session import server as _server

SQUATTER = r'''
import http.server, json, sys
port, log = int(sys.argv[1]), sys.argv[2]

class Answer(http.server.BaseHTTPRequestHandler):
    def _any(self):
        with open(log, "a") as f:
            f.write(f"{self.command} {self.path}\n")
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _any
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Answer)
open(log + ".ready", "w").close()
server.serve_forever()
'''


@pytest.fixture()
def squat(tmp_path, monkeypatch):
    """Make the next server e2e starts meet a squatter: e2e's own check that the port is free
    runs, then the squatter binds it (a real process, its own session), before the server
    does. Yields (its request log: one "METHOD path" a line, its processes)."""
    script, log = tmp_path / "squatter.py", tmp_path / "squatter.log"
    script.write_text(SQUATTER)
    procs: list[subprocess.Popen] = []
    checked = _server.port_in_use

    def check_then_lose_it(host: str, port: int) -> bool:
        free = checked(host, port)
        if procs:  # stop() waits for the port too: the squatter came once
            return free
        procs.append(subprocess.Popen([sys.executable, str(script), str(port), str(log)],
                                      start_new_session=True))
        deadline = time.monotonic() + 20
        while not Path(str(log) + ".ready").exists():
            assert time.monotonic() < deadline and procs[-1].poll() is None, "no squatter"
            time.sleep(0.02)
        return free

    monkeypatch.setattr(_server, "port_in_use", check_then_lose_it)
    yield log, procs
    for proc in procs:
        proc.kill()
        proc.wait()


def _requests(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_squatter_on_the_servers_port_is_refused_before_any_request(tmp_path, squat,
                                                                       monkeypatch):
    log, squatters = squat
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    exp = fakevllm.experiment(fakevllm.install(tmp_path / "fake"), "m", start_s=30)
    launch = server_launch(exp, "main", dspark=False)
    port = _server.free_port()
    began = time.monotonic()
    with pytest.raises(ServerStartError) as refused:
        _server.start(launch, tmp_path / "server.log", startup_timeout_s=60, port=port)
    message = str(refused.value)
    assert f"port {port}" in message and "does not hold every socket" in message
    assert f"pid {squatters[0].pid} (python" in message and "sent no request" in message
    assert time.monotonic() - began < 20  # at once, not after the server's 30 s of loading
    assert _requests(log) and set(_requests(log)) == {"GET /health"}
    # and the server it started is stopped (its state file goes with it)
    assert not (tmp_path / "home" / "server.json").exists()


@pytest.mark.slow
def test_a_run_meeting_a_squatter_is_invalid_and_measures_nothing(tmp_path, squat, monkeypatch):
    """The whole session: the run is written (invalid, with the reason), no request reached
    the squatter but /health, and no request was measured."""
    from e2e.session.tinymodel import build_tiny_llama

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    exp = fakevllm.experiment(fakevllm.install(tmp_path / "fake"),
                              str(build_tiny_llama(tmp_path / "model")), start_s=30)
    port = _server.free_port()
    exp = exp.model_copy(update={"server": exp.server.model_copy(update={"port": port})})
    from e2e.plan import RunSpec

    spec = RunSpec.resolve(exp, arm="main", concurrency=1, dspark=False)
    folder, record = run_unit(exp, spec, tmp_path / "results", SessionOptions(progress=False))
    assert not record.valid
    assert any("does not hold every socket" in r for r in record.invalid_reasons), record
    assert record.metrics is None
    assert set(_requests(squat[0])) == {"GET /health"}  # no warmup, no /metrics, no load
    import pandas as pd

    assert len(pd.read_parquet(folder / "requests.parquet")) == 0


@pytest.mark.server
def test_a_real_vllm_server_meeting_a_squatter_is_refused(tmp_path, squat, default_experiment,
                                                          server_python):
    """The real server (vLLM loads for tens of seconds before it binds): refused as soon as
    the squatter answers /health, and stopped."""
    exp = small(default_experiment, prompts_per_concurrency=1)
    port = _server.free_port()
    exp = exp.model_copy(update={"server": exp.server.model_copy(update={"port": port})})
    from e2e.plan import RunSpec

    spec = RunSpec.resolve(exp, arm="main", concurrency=1, dspark=False)
    folder, record = run_unit(exp, spec, tmp_path / "results", SessionOptions(progress=False))
    assert not record.valid
    assert any("does not hold every socket" in r for r in record.invalid_reasons), record
    assert record.metrics is None and set(_requests(squat[0])) == {"GET /health"}
    assert not list((tmp_path / "results").rglob("server.json"))
