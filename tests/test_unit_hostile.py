"""``e2e unit`` under a signal and a config from elsewhere (issue 34 item 13): a SIGINT or
SIGTERM sent to e2e alone stops its pytest child and everything that started (exit 130), and
a config's ``[unit] tests`` may not point outside the current folder and e2e's repository."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from e2e.commands._unit import _test_paths
from e2e.errors import ConfigError

SLEEPER = '''
import os, pathlib, time
def test_sleeps():
    pathlib.Path(os.environ["E2E_T_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(120)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_e2e_alone_stops_its_pytest_child(tmp_path, sig):
    test = tmp_path / "test_sleeper.py"
    test.write_text(SLEEPER)
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-m", "e2e.cli", "unit", "--arms", "main",
                             "--tests", str(test), "--out", str(tmp_path / "out")],
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 "E2E_T_PIDFILE": str(pidfile)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        child = int(pidfile.read_text())
        proc.send_signal(sig)      # to e2e alone, not its group
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        end = time.monotonic() + 15
        while _alive(child) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _alive(child), "the pytest child outlived e2e"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_configs_tests_outside_the_project_are_refused(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere" / "test_x.py"
    outside.parent.mkdir()
    outside.write_text("def test_x(): pass\n")
    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError, match="outside the current folder"):
        _test_paths([str(outside)], confined=True)
    with pytest.raises(ConfigError, match="outside the current folder"):
        _test_paths([os.path.relpath(outside, ROOT)], confined=True)   # ../ out of it
    assert _test_paths(["tests/test_plugin_arm.py"], confined=True)
    assert _test_paths([str(outside)]) == [str(outside)]   # --tests: the user's own choice


STUBBORN = '''
import os, pathlib, signal, time
def test_ignores_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pathlib.Path(os.environ["E2E_T_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(120)
'''


@pytest.mark.slow
def test_a_second_ctrl_c_does_not_cut_the_stop_short(tmp_path):
    """A test that ignores SIGTERM, and a second SIGINT to e2e while it waits for the child
    to stop: the wait was cut short before its SIGKILL and the pytest outlived e2e."""
    test = tmp_path / "test_stubborn.py"
    test.write_text(STUBBORN)
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-m", "e2e.cli", "unit", "--arms", "main",
                             "--tests", str(test), "--out", str(tmp_path / "out")],
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 "E2E_T_PIDFILE": str(pidfile)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)
    child = None
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        child = int(pidfile.read_text())
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)            # e2e is waiting for the child, which ignores SIGTERM
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        end = time.monotonic() + 15
        while _alive(child) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _alive(child), "the pytest child outlived e2e"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
