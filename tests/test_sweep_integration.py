"""`e2e sweep` as a user runs it, against the real CPU server: Ctrl-C midway leaves finished
runs intact and no server behind; the same command then finishes the remaining runs only;
`e2e report` renders what is there; the secrets planted in the config (an API key the client
sends, a token in the server's environment) are in no file and no output."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from planted import Planted
from e2e.paths import e2e_home
from e2e.session.server import group_alive

pytestmark = pytest.mark.server

CONFIG = ROOT / "configs" / "default.toml"
PLANTED = Planted("SWEEP")


def small_config(tmp_path: Path) -> Path:
    text = PLANTED.toml(CONFIG.read_text())
    text = text.split("[arms.main]")[0]  # keep server, speculator, load; replace the arms
    text = text.replace("prompts_per_concurrency = 32", "prompts_per_concurrency = 3")
    text = text.replace("output_len = 509", "output_len = 32")
    text = text.replace("warmup_requests = 2", "warmup_requests = 1")
    text = text.replace("startup_timeout_s = 300", "startup_timeout_s = 300\nlock_wait_s = 900")
    text = text.replace('name = "default"', 'name = "sweeptest"')
    text += '\n[arms.main]\n\n[arms.main-repeat]\ndescription = "A/A"\n'
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def e2e(*args, cwd):
    return [sys.executable, "-m", "e2e.cli", *args]


def test_interrupted_sweep_resumes_and_reports(tmp_path, server_python):
    config = small_config(tmp_path)
    results = tmp_path / "results"
    args = ["sweep", "--config", str(config), "--results", str(results), "--concurrency", "1",
            "--no-dspark", "--runs", "1", "-q"]
    exp = results / "sweeptest"

    proc = subprocess.Popen([sys.executable, "-m", "e2e.cli", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # a new folder draws its own order seed: either arm may go first
    names = {"main": "main-c1-base-r1", "main-repeat": "main-repeat-c1-base-r1"}
    deadline = time.monotonic() + 600
    done_first = []
    while time.monotonic() < deadline and not done_first:
        done_first = [a for a, n in names.items() if (exp / n / "run.json").exists()]
        time.sleep(1)
    assert done_first, proc.communicate(timeout=5)[0]
    first_name = names[done_first[0]]
    second_name = names["main-repeat" if done_first[0] == "main" else "main"]
    state = e2e_home() / "server.json"  # written by the lock holder while its server runs
    pgid = None
    while time.monotonic() < deadline and pgid is None:
        try:
            data = json.loads(state.read_text())
            pgid = data["pgid"] if data.get("owner") == proc.pid else None
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    assert pgid is not None, "the second run's server never started"
    time.sleep(3)  # the second run's server is starting
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    outputs = [output]
    assert proc.returncode == 130, output
    assert "interrupted" in output
    assert not group_alive(pgid), "the second run's server survived the interrupt"
    first = json.loads((exp / first_name / "run.json").read_text())
    assert first["valid"] is True
    # the interrupted run is written, as invalid, with its reason; nothing is left half-made
    second = json.loads((exp / second_name / "run.json").read_text())
    assert second["valid"] is False and "interrupted" in second["invalid_reasons"][0]
    assert not list((exp / ".partial").glob("*"))

    done = subprocess.run([sys.executable, "-m", "e2e.cli", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    outputs += [done.stdout, done.stderr]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 run(s) made, 1 already done" in done.stdout
    assert json.loads((exp / second_name / "run.json").read_text())["valid"]
    # the report came with the sweep: one run per cell is flagged, not hidden
    report = (exp / "report" / "report.md").read_text()
    assert "main-repeat" in report and "fewer than 3" in report.lower()
    assert (exp / "report" / "cells.csv").exists()
    assert first["server"]["argv"].count("--api-key") == 2  # planted: e2e's and the config's
    # the walk finds the mark where it was planted, the config, and nowhere else
    assert PLANTED.leaks(tmp_path, output="".join(outputs)) == [str(config)]
