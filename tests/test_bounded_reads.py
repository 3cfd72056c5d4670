"""Every whole read is bounded: an endless or huge HTTP answer (``/metrics``, ``/v1/models``,
``/version``, ``/health``, an error body, one SSE event) and an endless or huge file
(``--config``, run.json, state files) is refused with a clear message instead of filling
the host's memory; and a probe has a total deadline, so a server that drips one byte a second
cannot hold e2e past it. A scripted server forces each fault (a real one will not)."""

from __future__ import annotations

import http.server
import os
import resource
import socketserver
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.errors import ConfigError, ResultsError, ServerError
from e2e.load.conn import ERROR_BODY_KEPT, Connection
from e2e.load.sse import MAX_EVENT, SSEStream, StreamFailed
from e2e.session.external import ExternalServer, describe_server
from e2e.session.http import AnswerTooLarge, AnswerTooSlow, fetch

CHUNK = b"x" * (1 << 16)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # noqa: N802
        path = self.path.split("?")[0]
        try:
            if path.endswith(("/endless", "/metrics", "/v1/models", "/version")) and \
                    "drip" not in self.path:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()  # no length: the body runs until the server closes
                while True:
                    self.wfile.write(CHUNK)
            elif "drip" in self.path:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                while True:  # one header byte at a time, forever
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif path == "/dripbody":
                self.send_response(200)
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            else:
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@pytest.fixture(scope="module")
def hostile():
    server = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_an_endless_body_is_refused_at_its_limit(hostile):
    before = _rss_mb()
    with pytest.raises(AnswerTooLarge, match="more than 1 MiB"):
        fetch(hostile + "/endless", limit=1 << 20, timeout=10)
    assert _rss_mb() - before < 200
    assert fetch(hostile + "/ok").json() == {"ok": True}


@pytest.mark.parametrize("path", ["/drip", "/dripbody"])
def test_a_dripping_server_is_given_up_at_the_deadline(hostile, path):
    """Each byte comes well within the read timeout, so only a total deadline ends it."""
    start = time.monotonic()
    with pytest.raises(AnswerTooSlow, match="within 1 s"):
        fetch(hostile + path, timeout=10, deadline_s=1)
    assert time.monotonic() - start < 3


def test_external_probes_and_metrics_are_bounded(hostile):
    with pytest.raises(ServerError, match="more than"):
        describe_server(hostile, {})                        # /v1/models endless
    server = ExternalServer(base_url=hostile, model="m")
    with pytest.raises(ServerError, match="more than 64 MiB"):
        server.scrape_metrics()


def test_the_fresh_servers_metrics_are_bounded(hostile):
    from types import SimpleNamespace

    from e2e.session.server import Server

    host, port = hostile.rsplit(":", 1)
    server = Server(launch=SimpleNamespace(host=host.split("//")[1], api_key=None),
                    process=None, port=int(port), log_path=Path("/dev/null"), argv=[])
    with pytest.raises(ServerError, match="more than 64 MiB"):
        server.scrape_metrics(timeout_s=30)


def test_an_error_body_is_kept_to_its_start():
    conn = Connection(0.0)
    conn.status = 500
    for _ in range(100):
        conn.on_body(CHUNK)
    assert len(conn.other_body()) == ERROR_BODY_KEPT


def test_an_sse_event_that_never_ends_fails_the_stream():
    stream = SSEStream()
    big = CHUNK * 32  # 2 MiB reads
    with pytest.raises(StreamFailed, match="without ending"):
        for _ in range(MAX_EVENT // len(big) + 2):
            stream.feed(b"data: " + big, 0.0)


def test_config_from_dev_zero_is_bad_input():
    from e2e.cli import app

    start = time.monotonic()
    result = CliRunner().invoke(app, ["arms", "--config", "/dev/zero"])
    assert result.exit_code == 2, result.output
    assert "larger than 4 MiB (or endless)" in result.output
    assert time.monotonic() - start < 20


def test_a_deeply_nested_config_is_bad_input(tmp_path):
    from e2e.paths import read_toml

    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match="nest too deeply"):
        read_toml(path)


def test_a_run_json_that_is_dev_zero_is_skipped_and_named(tmp_path):
    from e2e.results.store import load_records, read_run

    run = tmp_path / "exp" / "main-c1-base-r1"
    run.mkdir(parents=True)
    os.symlink("/dev/zero", run / "run.json")
    records, problems = load_records(tmp_path / "exp")
    assert records == () and len(problems) == 1 and "a device, not a regular file" in problems[0]
    with pytest.raises(ResultsError, match="a device, not a regular file"):
        read_run(run)


def test_a_run_json_that_is_a_fifo_is_skipped_at_once(tmp_path):
    """A named pipe with no writer would block a plain open() forever: refused unread."""
    from e2e.results.store import load_records

    run = tmp_path / "exp" / "main-c1-base-r1"
    run.mkdir(parents=True)
    os.mkfifo(run / "run.json")
    records, problems = load_records(tmp_path / "exp")
    assert records == () and "a named pipe (FIFO), not a regular file" in problems[0]


def test_a_huge_server_log_tail_reads_only_its_end(tmp_path):
    from e2e.session.server import log_tail

    log = tmp_path / "server.log"
    with open(log, "wb") as handle:
        handle.truncate(8 << 30)          # 8 GiB, sparse
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nlast line\n")
    before = _rss_mb()
    assert log_tail(Path(log)).endswith("last line")
    assert _rss_mb() - before < 100
