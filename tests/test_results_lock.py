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
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import ROOT
from e2e.cli import app
from e2e.errors import ResultsBusyError
from e2e.results.store import writing

runner = CliRunner()

HOLDER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from e2e.results.store import writing
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
    from e2e.results.store import load_records

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    script = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from pathlib import Path
        import fakevllm
        from e2e.pipeline import sweep
        from e2e.session.tinymodel import build_tiny_llama
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
        from e2e.session.tinymodel import build_tiny_llama

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


def _lock_file(tmp_path: Path, results: Path, experiment: str) -> Path:
    """The results lock file ``writing`` uses for ``results/experiment`` (made by taking it)."""
    with writing(results, experiment):
        pass
    (path,) = (tmp_path / "home" / "locks").glob("results-*.lock")
    return path


def test_a_lock_file_of_any_bytes_names_its_holder_escaped(tmp_path, hold):
    """The lock file's contents are bytes anyone may write: read as text, bytes that are not
    UTF-8 ended the second writer in a traceback. They are shown escaped, never decoded and
    never sent to the terminal as they are."""
    results = tmp_path / "r"
    hold(results, "default", 60)
    (path,) = (tmp_path / "home" / "locks").glob("results-*.lock")
    path.write_bytes(b"\xff\xfe\x1b[31mred\n")  # the holder keeps its flock: only the bytes change
    got = runner.invoke(app, ["sweep", "--runs", "1", "--no-dspark", "--results", str(results),
                              "--lock-wait", "0"])
    said = got.output
    assert got.exit_code == 1, said
    assert "Traceback" not in said and "\x1b" not in said and "\xff" not in said
    assert said.count("error:") == 1
    assert "another e2e (pid \\xff\\xfe\\x1b[31mred) is writing runs into" in " ".join(said.split())
    assert not results.exists()


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_anything_but_a_regular_file_at_the_lock_path_is_refused_in_one_line(tmp_path, kind,
                                                                             monkeypatch):
    """A FIFO at the lock path ended in a traceback (a FIFO cannot be opened as a text file);
    a folder or a link there is no lock either. Each is bad input: exit 2, one line naming
    the path and what is there, nothing written, nothing waited for."""
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    results = tmp_path / "r"
    path = _lock_file(tmp_path, results, "default")
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "elsewhere")
    got = runner.invoke(app, ["sweep", "--runs", "1", "--no-dspark", "--results", str(results),
                              "--lock-wait", "30"])
    said = " ".join(got.output.split())
    assert got.exit_code == 2, said
    assert said.count("error:") == 1 and "Traceback" not in said
    what = {"fifo": "a named pipe (FIFO)", "folder": "a folder", "link": "a symbolic link"}[kind]
    assert f"refusing to lock {path}: it is {what}, not a regular file" in said
    assert not results.exists() and not (tmp_path / "elsewhere").exists()


def test_the_server_lock_refuses_a_fifo_as_the_results_lock_does(tmp_path, monkeypatch):
    """The one-server-per-host lock is taken the same way (``e2e.paths.flocked``)."""
    from e2e.errors import ConfigError
    from e2e.session.server import server_lock

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    os.mkfifo(tmp_path / "home" / "server.lock")
    with pytest.raises(ConfigError, match=r"it is a named pipe \(FIFO\), not a regular file"):
        with server_lock(wait_s=30):
            pass


DATA = ROOT / "tests" / "data"
IMPORTS = [["vllm-bench", str(DATA / "vllm_bench" / "c1-base.json")],
           ["aiperf", str(DATA / "aiperf" / "profile_export.jsonl"), "--arm", "main"],
           ["guidellm", str(DATA / "guidellm" / "benchmarks.json"), "--arm", "main"]]


def test_an_import_is_refused_while_another_e2e_writes_the_folder(tmp_path, hold):
    """`e2e import` took no lock: it wrote runs into a folder a sweep was writing, taking
    repeat numbers the sweep was about to write. Each import now holds the folder as every
    writer does: with another e2e there (and no --lock-wait) it is refused in one line naming
    the holder, nothing written."""
    results = tmp_path / "r"
    holder = hold(results, "exp", 60)
    for tool in IMPORTS:
        got = runner.invoke(app, ["import", *tool, "--experiment", "exp", "--results",
                                  str(results), "--lock-wait", "0"])
        said = " ".join(got.output.split())
        assert got.exit_code == 1, said  # as a second sweep is refused (ResultsBusyError)
        assert said.count("error:") == 1 and "Traceback" not in said
        assert f"another e2e (pid {holder.pid}) is writing runs into {results / 'exp'}" in said
        assert not results.exists(), tool  # no run, no .partial, no folder


SWEEP_LIKE = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from e2e.results.store import writing
    results, flag, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    with writing(results, "exp"):
        flag.write_text("held")
        time.sleep(seconds)  # measuring main's run 2 ...
        run = results / "exp" / "main-c1-base-r2"  # ... and writing it, as a sweep does last
        run.mkdir(parents=True)
        (run / "run.json").write_text("the sweep's")
''')


def test_an_import_with_lock_wait_waits_and_takes_a_repeat_the_writer_left_free(tmp_path,
                                                                               monkeypatch):
    """With --lock-wait the import waits for the writer, then numbers its run after what the
    writer wrote: main's run 2 stays the sweep's (without the lock the import took r2 while
    the sweep was measuring it)."""
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    results, flag = tmp_path / "r", tmp_path / "held"
    sweep = subprocess.Popen([sys.executable, "-c", SWEEP_LIKE, str(results), str(flag), "1.0"],
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert sweep.poll() is None and time.monotonic() < deadline, "never held"
            time.sleep(0.02)
        got = runner.invoke(app, ["import", *IMPORTS[0], "--experiment", "exp", "--results",
                                  str(results), "--lock-wait", "30"])
        assert got.exit_code == 0, got.output
        assert sweep.wait(timeout=30) == 0
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert (results / "exp" / "main-c1-base-r2" / "run.json").read_text() == "the sweep's"
    assert (results / "exp" / "main-c1-base-r3" / "run.json").is_file()  # the import's
    assert not (results / "exp" / ".attempts").exists()


def test_gsm8k_holds_the_folder_before_it_writes_its_evaluation(tmp_path, hold):
    """GSM8K wrote eval.json (read, merged with the arms asked, written) before it took the
    folder: two evaluations at once could each drop the other's arms. Refused, it writes
    nothing."""
    from e2e.config import load_experiment
    from e2e.gsm8k.run import resolve_plan, run_gsm8k
    from test_gsm8k_run import Fake

    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.jsonl", "test.jsonl"):
        (data / name).write_text('{"question": "q", "answer": "#### 1"}\n')
    results = tmp_path / "results"
    holder = hold(results, "default", 60)
    plan = resolve_plan(load_experiment(None), arms="main,pr", dspark=False, limit=12,
                        concurrency=4, data=data, results=results)
    fake = Fake(["main.jsonl", "pr.jsonl"])
    with pytest.raises(ResultsBusyError, match=f"pid {holder.pid}"):
        run_gsm8k(plan, fake.runner(), progress=False)
    assert not results.exists() and fake.served == []


def test_a_night_holds_its_folder_before_it_writes_night_json(tmp_path, hold):
    """The nightly wrote night.json (and, after its runs, its summaries and judgement.json)
    outside the folder's lock; now the whole night holds it, so a second nightly of the same
    date is refused before it builds, measures or writes anything."""
    from conftest import alone_nightly_raw
    from e2e.nightly.run import NightlyOptions, run_nightly
    from e2e.nightly.settings import parse_nightly

    raw = alone_nightly_raw()
    raw["server"]["lock_wait_s"] = 0  # the nightly's 900 s: refused at once here
    cfg = parse_nightly(raw)
    results = tmp_path / "results"
    root = results / "nightly" / "2026-01-01"
    holder = hold(root, cfg.experiment.name, 60)
    with pytest.raises(ResultsBusyError, match=f"pid {holder.pid}"):
        run_nightly(cfg, NightlyOptions(results=results, date="2026-01-01", progress=False))
    assert not root.exists()


@settings(max_examples=200, deadline=None)
@given(contents=st.binary(max_size=48))
def test_any_bytes_in_a_held_lock_file_name_the_holder_in_printable_ascii(tmp_path_factory,
                                                                          contents):
    """Whatever bytes a held lock file holds, the busy message names them in printable ASCII
    (a pid as it is; anything else escaped) and flocked neither decodes nor acts on them."""
    import fcntl

    from e2e.paths import flocked

    path = tmp_path_factory.mktemp("lock") / "x.lock"
    path.write_bytes(contents)
    with open(path, "rb") as other:  # another open file: its flock conflicts, even in-process
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.raises(LookupError) as got:
            with flocked(path, deadline=0.0, busy=LookupError):
                pass
    holder = got.value.args[0]
    assert holder and holder.isascii() and holder.isprintable(), holder
    shown = contents[:32].strip()  # what flocked reads: the first 32 bytes
    if shown.isdigit():
        assert holder == shown.decode()
    elif not shown:
        assert holder == "unknown"
    else:  # the escapes read back as the bytes (32 at most)
        assert holder.encode("ascii").decode("unicode_escape").encode("latin-1") == shown
    assert path.read_bytes() == contents  # refused: the file is not rewritten
