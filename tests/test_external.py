"""`--base-url`: measuring a server e2e did not start. A real CPU server started outside e2e
(valid run, exact lengths, spec counters, the record marked external, the report flagging
the cell), and a scripted server that rejects token-id prompts (refused, nothing sent as
text)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from typer.testing import CliRunner

from e2e.arms import environment_for
from e2e.session import server_launch
from e2e.cli import app
from e2e.session.server import free_port, server_lock, stop_group


class _TextOnly(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that lists a model but refuses token-id prompts."""

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self._send(200, {"data": [{"id": "text-only"}]})
        else:
            self._send(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).prompts.append(body["prompt"])
        self._send(400, {"error": "prompt must be a string"})


def test_a_server_that_rejects_token_ids_is_refused(tmp_path):
    _TextOnly.prompts = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _TextOnly)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}"
        result = CliRunner().invoke(app, ["run", "--base-url", url, "--results",
                                          str(tmp_path), "-q", "--prompts", "2"])
    finally:
        httpd.shutdown()
    assert result.exit_code == 2, result.output  # bad input: nothing measured, no run folder
    said = " ".join(result.output.split())
    assert "refused a prompt of token ids (HTTP 400" in said
    assert "will not send text instead" in said
    assert not (tmp_path / "default").exists()
    assert all(isinstance(p, list) for p in _TextOnly.prompts)  # only token ids were ever sent


@pytest.mark.server
def test_e2e_run_against_a_server_it_did_not_start(default_experiment, server_python, tmp_path):
    launch = server_launch(default_experiment, "main", dspark=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with server_lock(wait_s=900), open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(launch.argv(port), env=environment_for(launch), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(1)
            from e2e.host import group_members

            served = group_members(proc.pid)  # the API server and its engine process
            result = CliRunner().invoke(app, [
                "run", "--base-url", url, "--dspark", "--prompts", "3", "--output-len", "48",
                "--results", str(tmp_path / "results"), "-q", "--json"])
            assert result.exit_code == 0, result.output
            alive_after = proc.poll() is None
        finally:
            stop_group(proc.pid)
    assert alive_after, "e2e stopped a server it did not start"
    document = json.loads(result.stdout[result.stdout.index("{"):])
    assert document["valid"] and document["metrics"]["acceptance_length"] > 1.0
    folder = tmp_path / "results" / "default" / "main-c1-dspark-r1"
    record = json.loads((folder / "run.json").read_text())
    assert record["server"]["kind"] == "external" and record["server"]["argv"] == []
    assert record["provenance"]["build"]["kind"] == "external"
    assert record["provenance"]["build"]["version"] == "0.32.0"
    assert record["plugin"]["check"] == "skipped"
    assert record["counters_after"]["drafts"] > record["counters_before"]["drafts"]
    # the server under test is never interference: its processes (and its engine's) are the
    # run's own, so no warning names them as other processes
    ours = {proc.pid} | {p for p in served if p}
    assert not [p for p in record["host_noise"]["top_other"] if p["pid"] in ours]
    assert record["host_noise"]["own_cpu_s"] > 0.0
    assert not any(f"pid {proc.pid}" in w for w in record["warnings"])
    from e2e.results.store import read_requests

    requests = read_requests(folder / "requests.parquet")
    assert {r.prompt_tokens for r in requests} == {1031}
    assert {r.completion_tokens for r in requests} == {48}
    report = CliRunner().invoke(app, ["report", str(tmp_path / "results" / "default"),
                                      "--report-from-run", "1"])  # one run: report it
    assert report.exit_code == 0, report.output
    text = (tmp_path / "results" / "default" / "report" / "report.md").read_text()
    assert "reported runs not on a fresh server started by e2e" in text and "1, external" in text


def test_a_local_external_server_is_known_by_its_processes(tmp_path):
    """``local_pids``: a server on a loopback address is the process holding its port (here
    this one); one on another host has none on this host."""
    import os

    from e2e.session.external import ExternalServer

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _TextOnly)
    try:
        for host in ("127.0.0.1", "localhost"):
            local = ExternalServer(base_url=f"http://{host}:{httpd.server_port}", model="m")
            assert local.local_pids() == [os.getpid()]
        assert ExternalServer(base_url="http://192.0.2.1:8000", model="m").local_pids() == []
    finally:
        httpd.server_close()
