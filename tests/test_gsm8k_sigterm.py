"""SIGTERM to `e2e gsm8k` on the real CPU server, while its second arm's lm-eval runs: exit
130, no server process left, the finished arm kept (valid) and the interrupted one written as
an invalid attempt that the same command redoes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import GSM8K_DATA, ROOT
from e2e.session.server import group_alive

pytestmark = pytest.mark.server


def test_sigterm_to_gsm8k_stops_the_server_and_keeps_finished_arms(server_python, tmp_path):
    if not GSM8K_DATA.is_dir():
        pytest.skip(f"no GSM8K data at {GSM8K_DATA}")
    results = tmp_path / "results"
    config = tmp_path / "c.toml"
    config.write_text((ROOT / "configs" / "default.toml").read_text().replace(
        "startup_timeout_s = 300", "startup_timeout_s = 300\nlock_wait_s = 900"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "e2e.cli", "gsm8k", "--config", str(config), "--results",
         str(results), "--arms", "main,main", "--limit", "2", "--concurrency", "2",
         "--data", str(GSM8K_DATA)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    evaluation = results / "default" / "gsm8k" / "base-n2"
    partial = results / "default" / ".partial"
    deadline = time.monotonic() + 900
    second = None
    while time.monotonic() < deadline and proc.poll() is None:
        if (evaluation / "main" / "arm.json").exists():
            logs = list(partial.glob("gsm8k-base-n2-main.r2.*/lm_eval.log"))
            if logs:  # the second server is up and lm-eval runs against it
                second = logs[0].parent
                break
        time.sleep(0.5)
    assert second is not None, proc.communicate(timeout=5)[0]
    server_log = (second / "server.log").read_text(errors="replace")
    pid = int(re.search(r"Started server process \[(\d+)\]", server_log).group(1))
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, output
    assert "interrupted" in output
    assert not group_alive(pid), "the second arm's server survived SIGTERM"
    first = json.loads((evaluation / "main" / "arm.json").read_text())
    assert first["valid"] and first["n"] == 2 and (evaluation / "main" / "verdicts.jsonl").exists()
    assert first["provenance"]["server_env"]["engine_version"] == "0.32.0"
    assert first["plugin"]["check"] == "passed" and first["plugin"]["mode"] == "inject"
    interrupted = json.loads((evaluation / "main.r2" / "arm.json").read_text())
    assert interrupted["valid"] is False
    assert any("interrupted" in r for r in interrupted["invalid_reasons"])
    assert not list(partial.glob("*"))  # nothing left half-made
