"""The measurement-hygiene records wired into the pipeline: `--require-quiet` refuses to
start a server while a CPU hog runs, naming it, and writes nothing; a cell whose runs' client
streams came in bursts is flagged in the report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

import pytest

from conftest import ROOT
from e2e.results.records import BurstSummary
from e2e.analysis.sweep.aggregate import summarize
from e2e.cli import app
from test_cells import record

HOG = ("import sys, time\nopen('/proc/self/comm', 'w').write('e2e-cli-hog')\n"
       "deadline = time.monotonic() + 20\nwhile time.monotonic() < deadline: pass\n")


@pytest.mark.slow
def test_require_quiet_refuses_before_any_server_naming_the_hog(tmp_path):
    config = tmp_path / "c.toml"
    text = (ROOT / "configs" / "default.toml").read_text()
    head, _, rest = text.partition("[server.build]")
    rest = rest.split("\n[", 1)[1]  # drop the managed build: an existing interpreter, no build
    config.write_text(f'{head}[server.build]\npython = "{sys.executable}"\n\n[{rest}')
    # the hog is not e2e's child (a shell starts it in the background and exits), so the
    # check cannot take it for the run's own work
    shell = subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!',
                            HOG], capture_output=True, text=True, check=True)
    hog = int(shell.stdout.strip())
    try:
        time.sleep(1.0)
        result = CliRunner().invoke(app, ["run", "--config", str(config), "--results",
                                          str(tmp_path / "r"), "--require-quiet", "0.5",
                                          "--lock-wait", "900", "-q", "--prompts", "1"])
    finally:
        os.kill(hog, signal.SIGKILL)
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and result.exception is not None, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert f"pid {hog} (e2e-cli-hog) used" in said
    assert not (tmp_path / "r" / "default").exists() or not any(
        p for p in (tmp_path / "r" / "default").iterdir() if not p.name.startswith("."))


def test_a_burst_affected_cell_is_flagged_in_the_report(default_experiment):
    bursty = BurstSummary(rule="r", reference="server TPOT", threshold=0.1, warn_share=0.05,
                          held_limit=0.5, judged=8, flagged=4, share=0.5, tpot_affected=4,
                          tpot_affected_share=0.5, affected=True)
    runs = [record(default_experiment, "main", k, 3.0) for k in (2, 3)]
    runs += [record(default_experiment, "pr", 2, 2.0).model_copy(update={"bursts": bursty}),
             record(default_experiment, "pr", 3, 3.1)]
    summary = summarize(runs)
    flagged = [w for w in summary.warnings if "burst-affected" in w.message]
    assert {(w.arm, w.metric) for w in flagged} == {
        ("pr", "tpot_ms_mean"), ("pr", "tpot_ms_median"), ("pr", "ms_per_verify_step")}
    assert flagged[0].message.startswith("client TPOT burst-affected in 1 of 2 reported run(s)")


def test_a_client_figure_away_from_the_servers_is_flagged(default_experiment):
    def run(arm, k, client, server):
        r = record(default_experiment, arm, k, client)
        return r.model_copy(update={"metrics": r.metrics.model_copy(
            update={"server_tpot_ms_mean": server})})

    runs = [run("main", k, 3.0, 3.01) for k in (2, 3)] + [run("pr", k, 2.0, 3.0) for k in (2, 3)]
    flagged = [w for w in summarize(runs).warnings if "x the server's" in w.message]
    assert [(w.arm, w.metric) for w in flagged] == [("pr", "tpot_ms_mean")]
    assert flagged[0].message.startswith("the client's mean TPOT is 0.67 x the server's")
