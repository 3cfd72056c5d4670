"""Headless Chromium over the DevTools protocol, for the dashboard's tests: load a page
(file:// or http://), wait for it, evaluate JavaScript in it, and collect every console
error and uncaught exception. Uses the Debian ``chromium`` binary and ``websocket-client``.

``CHROMIUM`` (env) names another binary. ``browser_or_skip()`` skips a test without one,
except under CI (``CI=true``), where a missing browser is a failure.

The DevTools client sends its own fixed ``Origin`` (``ORIGIN``) and Chromium is started with
``--remote-allow-origins`` naming just that origin: Chromium 111 and later refuse a DevTools
WebSocket from an origin they were not told to allow (Debian's 150 refused even
``http://127.0.0.1:<port>``, the client's default), and ``*`` would let any page the browser
opens drive it. ``Browser.product`` is the browser's own name and version (``/json/version``),
``DRIVEN`` every (binary, product) started, which the suite prints at its end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

DRIVEN: set[tuple[str, str]] = set()  # (binary, product) of every browser started
ORIGIN = "http://e2e-tests.localhost"  # the harness's own origin, the only one allowed
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--allow-file-access-from-files"]


def binary() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def browser_or_skip() -> str:
    found = binary()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


class Browser:
    """One headless Chromium with a remote-debugging port; ``page(url)`` opens a tab."""

    def __init__(self) -> None:
        import websocket  # websocket-client

        self._ws_mod = websocket
        self.profile = tempfile.mkdtemp(prefix="e2e-chromium-")
        self.binary = browser_or_skip()
        self.proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", f"--remote-allow-origins={ORIGIN}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools server")
            time.sleep(0.1)
        time.sleep(0.2)
        self.port = int(port_file.read_text().split()[0])
        about = json.loads(urllib.request.urlopen(
            f"http://127.0.0.1:{self.port}/json/version", timeout=30).read())
        self.product = about.get("Browser", "unknown")  # e.g. "Chrome/150.0.7871.100"
        DRIVEN.add((self.binary, self.product))

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, origin: str = ORIGIN):
        """A DevTools WebSocket to a new blank tab, sent with ``origin``."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank",
                                     method="PUT")
        target = json.loads(urllib.request.urlopen(req, timeout=30).read())
        try:
            return self._ws_mod.create_connection(target["webSocketDebuggerUrl"], timeout=60,
                                                  origin=origin)
        except self._ws_mod.WebSocketBadStatusException as exc:
            raise RuntimeError(f"{self.product} refused the DevTools connection from {origin}: "
                               f"{exc}") from exc

    def page(self, url: str, *, settle_s: float = 1.5) -> "Page":
        page = Page(self.connect())
        page.open(url, settle_s=settle_s)
        return page


class Page:
    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0
        self.errors: list[str] = []
        self.requests: list[str] = []   # the URL of every request the page made

    def _send(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p.get("request", {}).get("url", ""))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")

    def open(self, url: str, *, settle_s: float) -> None:
        self._send("Runtime.enable")
        self._send("Log.enable")
        self._send("Page.enable")
        self._send("Network.enable")
        self._send("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not finish loading")
            time.sleep(0.1)
        end = time.monotonic() + settle_s  # let plots draw and late errors arrive
        self.ws.settimeout(0.2)
        while time.monotonic() < end:
            try:
                self._event(json.loads(self.ws.recv()))
            except self._timeout():
                pass
        self.ws.settimeout(60)

    def _timeout(self):
        import websocket

        return websocket.WebSocketTimeoutException

    def eval(self, expression: str):
        result = self._send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


def screenshot(url: str, path: Path, *, width: int = 1200, height: int = 900) -> None:
    """``chromium --headless --screenshot``: a PNG of ``url``."""
    profile = tempfile.mkdtemp(prefix="e2e-chromium-")
    try:
        subprocess.run([browser_or_skip(), *FLAGS, f"--user-data-dir={profile}",
                        f"--screenshot={path}", f"--window-size={width},{height}",
                        "--virtual-time-budget=5000", "--hide-scrollbars", url],
                       check=True, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
