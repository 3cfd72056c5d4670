"""A results folder is locked while a sweep writes it: two sweeps into one folder at once each
decided a unit was not done, ran it and replaced the other's run (the second's invalid run
displaced the first's valid one). A second writer waits ``--lock-wait`` for the first and is
then refused naming its pid (exit 1, as the server lock); the same process re-enters."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from e2e.cli import app
from e2e.errors import ResultsBusyError
from e2e.results import writing

runner = CliRunner()

HOLDER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from e2e.results import writing
    with writing(Path(sys.argv[1]), sys.argv[2]):
        Path(sys.argv[3]).write_text("held")
        time.sleep(float(sys.argv[4]))
''')


@pytest.fixture()
def hold(tmp_path, monkeypatch):
    """``hold(results, experiment, seconds)``: another e2e process holding the folder."""
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    procs: list[subprocess.Popen] = []

    def start(results: Path, experiment: str, seconds: float) -> subprocess.Popen:
        flag = tmp_path / f"held.{len(procs)}"
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(results), experiment,
                                 str(flag), str(seconds)],
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        procs.append(proc)
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the holder never held"
            time.sleep(0.02)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("command", [["sweep", "--runs", "1", "--no-dspark"], ["run"]])
def test_a_second_writer_is_refused_naming_the_holder_and_writes_nothing(tmp_path, hold,
                                                                         command):
    results = tmp_path / "r"
    holder = hold(results, "default", 60)
    got = runner.invoke(app, [*command, "--results", str(results), "--lock-wait", "0"])
    said = " ".join(got.output.split())
    assert got.exit_code == 1, said
    assert f"another e2e (pid {holder.pid}) is writing runs into {results / 'default'}" in said
    assert "--lock-wait" in said and "Traceback" not in said
    assert not results.exists()  # no order.json, no run, no folder: nothing was started


def test_a_second_writer_waits_for_the_first_when_told_to(tmp_path, hold):
    hold(tmp_path / "r", "exp", 0.5)  # held for 0.5 s from now
    began = time.monotonic()
    with writing(tmp_path / "r", "exp", wait_s=30):
        waited = time.monotonic() - began
    assert 0.25 < waited < 30


def test_the_lock_is_per_folder_and_re_entered_by_its_holder(tmp_path, hold):
    hold(tmp_path / "r", "exp", 60)
    with writing(tmp_path / "r", "other"):  # another experiment's folder: free
        with writing(tmp_path / "r", "other"):  # the same process again: held on
            pass
    with pytest.raises(ResultsBusyError, match="is writing runs into"):
        with writing(tmp_path / "r", "exp"):
            pass
    with pytest.raises(ResultsBusyError):  # the same folder by another path
        with writing(tmp_path / "r" / ".." / "r", "exp"):
            pass


@pytest.mark.slow
def test_two_sweeps_into_one_folder_leave_the_first_ones_runs_alone(tmp_path, monkeypatch):
    """The issue's case with real processes: a sweep runs (scripted servers, 2 s each to
    start); a second sweep of the same config into the same folder is refused, and every run
    of the first is valid and the only attempt."""
    import fakevllm
    from e2e.results import load_records

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    script = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from pathlib import Path
        import fakevllm
        from e2e.pipeline import sweep
        from e2e.session import build_tiny_llama
        exp = fakevllm.experiment(Path({str(tmp_path / "fake")!r}),
                                  str(build_tiny_llama(Path({str(tmp_path / "model")!r}))),
                                  start_s=2.0)
        sweep(exp, Path({str(tmp_path / "r")!r}), arms=["main", "pr"], concurrencies=[1],
              spec_modes=[False], runs=1, report=False)
    ''')
    fakevllm.install(tmp_path / "fake")
    first = subprocess.Popen([sys.executable, "-c", script],
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "r" / "default").glob(".partial/*")):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        from e2e.pipeline import sweep
        from e2e.session import build_tiny_llama

        exp = fakevllm.experiment(tmp_path / "fake", str(build_tiny_llama(tmp_path / "m2")))
        exp = exp.model_copy(update={"server": exp.server.model_copy(update={"lock_wait_s": 0})})
        with pytest.raises(ResultsBusyError, match=f"pid {first.pid}"):
            sweep(exp, tmp_path / "r", arms=["main", "pr"], concurrencies=[1],
                  spec_modes=[False], runs=1, report=False)
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
    records, problems = load_records(tmp_path / "r" / "default")
    assert len(records) == 2 and all(r.valid for r in records) and not problems
    assert not (tmp_path / "r" / "default" / ".attempts").exists()
