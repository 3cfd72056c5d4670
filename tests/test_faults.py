"""Faults and hostile input: e2e says what went wrong, leaves no process behind and loses no
finished result. Real processes wherever the fault can be made on them; a monkeypatched
``os.replace`` only for a full or read-only disk (root ignores file modes here)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import e2e.paths as paths
from conftest import ROOT
from e2e.arms import ServerLaunch
from e2e.redact import REDACTED, Redactor
from e2e.config import parse_experiment
from e2e.errors import ConfigError, ResultsError, ServerBusyError, ServerStartError
from e2e.kinds import VLLM
from e2e.session.server import group_alive, server_lock, start

pytestmark = pytest.mark.slow  # the whole module is the slow tier

DEFAULT = tomllib.loads((ROOT / "configs" / "default.toml").read_text())


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_second_e2e_is_refused_with_the_holders_pid_and_the_lock_never_goes_stale(home):
    holder = subprocess.Popen(
        [sys.executable, "-c", "from e2e.session.server import server_lock\nimport time\n"
         "with server_lock():\n    print('held', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "E2E_HOME": str(home)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ServerBusyError, match=f"pid {holder.pid}"):
            with server_lock():
                pass
    finally:
        holder.kill()  # a crash: no cleanup runs
        holder.wait()
    with server_lock():  # the kernel dropped the dead holder's lock
        pass


SLEEPER = dataclasses.replace(VLLM, entry=("-c", "import time; time.sleep(600)"))


def test_leftover_server_of_a_crashed_e2e_is_stopped(home, tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from e2e.arms import ServerLaunch
        import dataclasses
        from e2e.kinds import VLLM
        from e2e.session.server import start
        SLEEPER = dataclasses.replace(VLLM, entry=("-c", "import time; time.sleep(600)"))
        launch = ServerLaunch(arm="main", python=Path(sys.executable), args=(), kind=SLEEPER)
        start(launch, Path({str(tmp_path / 'server.log')!r}), startup_timeout_s=600)
    """)
    crashed = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                               env={**os.environ, "E2E_HOME": str(home), "PYTHONPATH": str(ROOT)})
    state = home / "server.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not state.exists():
        time.sleep(0.1)
    pgid = json.loads(state.read_text())["pgid"]
    crashed.kill()
    crashed.wait()
    assert group_alive(pgid), "the server should outlive its crashed e2e"
    with server_lock():  # the next e2e detects and stops it
        pass
    assert not group_alive(pgid)
    assert not state.exists()


def test_port_taken_by_another_program(home, tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        launch = ServerLaunch(arm="main", python=Path(sys.executable), args=(), kind=SLEEPER)
        with pytest.raises(ServerStartError, match=f"port {port} .* taken by another program"):
            start(launch, tmp_path / "server.log", startup_timeout_s=5, port=port)
    assert not (home / "server.json").exists()  # nothing was started


def test_server_that_never_gets_healthy_is_stopped(home, tmp_path):
    launch = ServerLaunch(arm="main", python=Path(sys.executable), args=(), kind=SLEEPER)
    with pytest.raises(ServerStartError, match="not healthy after 2 s"):
        start(launch, tmp_path / "server.log", startup_timeout_s=2)
    assert not (home / "server.json").exists()


@pytest.mark.parametrize(("code", "words"), [(errno.ENOSPC, "disk is full"),
                                             (errno.EROFS, "choose a writable --results")])
def test_full_or_read_only_disk_keeps_what_was_written(tmp_path, monkeypatch, code, words):
    target = tmp_path / "run.json"
    paths.atomic_write_json(target, {"valid": True, "n": 1})

    def fail(src, dst):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(paths.os, "replace", fail)
    with pytest.raises(ResultsError, match=words):
        paths.atomic_write_json(target, {"valid": False, "n": 2})
    assert json.loads(target.read_text()) == {"valid": True, "n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left


# ---- hostile and random configs: a validation error naming the key, never a traceback ----

toml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                         st.text(max_size=20))
toml_values = st.recursive(toml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))


ALL_PATHS = sorted(_paths(DEFAULT))


def _check(raw):
    try:
        parse_experiment(raw, source="fuzz.toml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml: ")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=10), toml_values, max_size=6))
def test_fuzz_any_toml_document(raw):
    _check(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_PATHS), toml_values)
def test_fuzz_one_value_of_the_default(path, value):
    raw = json.loads(json.dumps(DEFAULT))
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        parse_experiment(raw, source="fuzz.toml")
    except ConfigError as exc:
            # the message names the key that was changed (or its parent table)
        assert any(".".join(map(str, path[:n])) in str(exc) for n in range(1, len(path) + 1)) \
            or "(top level)" in str(exc), str(exc)


@pytest.mark.parametrize("name", ["../../etc", "/tmp/x", "a/../../b", "..", "é", "a b", "x\ny"])
def test_arm_names_that_escape_results_are_refused(name):
    raw = json.loads(json.dumps(DEFAULT))
    raw["arms"][name] = {}
    with pytest.raises(ConfigError, match="arm name"):
        parse_experiment(raw, source="bad.toml")


def test_secrets_are_redacted():
    env = {"HF_TOKEN": "hf_x", "OPENAI_API_KEY": "sk-1", "MY_PASSWORD": "p", "PATH": "/bin",
           "VLLM_CPU_KVCACHE_SPACE": "1"}
    pattern = r"(?i)(token|key|secret|passw|auth|credential)"
    assert Redactor(pattern).env(env) == {"HF_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED,
                                        "MY_PASSWORD": REDACTED, "PATH": "/bin",
                                        "VLLM_CPU_KVCACHE_SPACE": "1"}
    argv = ["python", "--api-key", "sk-1", "--hf-token=abc", "--model", "m",
            "--x", "prefix-sk-1-suffix"]
    assert Redactor(pattern, ["sk-1"]).argv(argv) == [
        "python", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--model", "m",
        "--x", f"prefix-{REDACTED}-suffix"]


def test_missing_model_is_a_clear_error_before_any_server(tmp_path, default_experiment):
    from e2e.plan import RunSpec
    from e2e.session import SessionOptions, run_unit

    experiment = default_experiment.model_copy(update={"server": default_experiment.server.model_copy(
        update={"model": str(tmp_path / "no-model"), "build": default_experiment.server.build.model_copy(
            update={"requirements": [], "python": sys.executable})})})
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False, prompts=1)
    with pytest.raises(ConfigError, match="cannot find tokenizer.json .* local model folder"):
        run_unit(experiment, spec, tmp_path / "results", SessionOptions(progress=False))
    assert not (tmp_path / "results").exists()
