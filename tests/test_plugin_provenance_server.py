"""Issue 27 on real vLLM CPU servers: the code inside the server is the code you ran.

Two clones of e2e on one machine share one managed server environment (which here even has
an e2e installed editable from yet another checkout). The second clone changes a kernel
file. Each clone's ``e2e run`` loads its own plugin (the applied line and run.json's
``plugin`` block say so, with the hash of its own sources), and the second still runs after
the first is deleted. An existing environment (``python = ...``) that puts another e2e
ahead of the one e2e gives it is refused, naming the folder its plugin came from."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import e2e
from conftest import small
from e2e.config import BuildSpec
from e2e.plan import RunSpec
from e2e.plugin.source import plugin_sha256
from e2e.session import SessionOptions, run_unit
from e2e.session.plugin_copy import plugin_tree

pytestmark = pytest.mark.server
ROOT = Path(e2e.__file__).resolve().parent.parent
MARKER = "e2e-test: clone B's kernels imported"


def clone(target: Path) -> Path:
    """A copy of this checkout's source (what ``git clone`` would give, without history)."""
    target.mkdir(parents=True)
    shutil.copytree(ROOT / "e2e", target / "e2e", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def change_a_kernel(checkout: Path) -> None:
    """A change to the kernels that shows in the server log when the worker imports them."""
    kernel = checkout / "e2e" / "kernels" / "reference.py"
    kernel.write_text(kernel.read_text() + f"\nprint({MARKER!r}, flush=True)\n")


def e2e_run(checkout: Path, results: Path) -> dict:
    """``python -m e2e.cli run`` from ``checkout`` with its own PYTHONPATH; its run.json."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-m", "e2e.cli", "run", "--arm", "pr", "--prompts", "2",
         "--output-len", "16", "--input-len", "128", "--results", str(results),
         "--lock-wait", "900"], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=1800)
    runs = list(results.glob("*/*/run.json"))
    assert done.returncode == 0 and len(runs) == 1, (done.stdout[-3000:], done.stderr[-3000:])
    return {"record": json.loads(runs[0].read_text()),
            "log": (runs[0].parent / "server.log").read_text(errors="replace")}


def applied(log: str) -> list[tuple[str, str]]:
    return re.findall(r"e2e-plugin: applied in worker .* \| plugin_sha256=([0-9a-f]{64}) "
                      r"source=(.+)$", log, re.M)


def test_two_clones_each_run_their_own_plugin_and_the_second_outlives_the_first(
        server_python, tmp_path):
    first, second = clone(tmp_path / "a"), clone(tmp_path / "b")
    change_a_kernel(second)
    sha_a, sha_b = plugin_sha256(first / "e2e"), plugin_sha256(second / "e2e")
    assert sha_a == plugin_sha256() and sha_a != sha_b
    home = Path(os.environ.get("E2E_HOME", Path.home() / ".cache" / "e2e"))

    a = e2e_run(first, tmp_path / "results-a")
    plugin = a["record"]["plugin"]
    assert a["record"]["valid"], a["record"]["invalid_reasons"]
    assert plugin["check"] == "passed"
    assert plugin["plugin_sha256"] == plugin["expected_sha256"] == sha_a
    assert plugin["copied_from"] == str((first / "e2e").resolve())
    assert Path(plugin["source"]) == home / "plugin" / sha_a[:16] / "e2e"
    assert a["record"]["provenance"]["e2e"]["plugin_sha256"] == sha_a
    assert a["record"]["server"]["env"]["PYTHONPATH"].startswith(
        str(home / "plugin" / sha_a[:16]))
    assert applied(a["log"]) and all(sha == sha_a for sha, _ in applied(a["log"]))
    assert MARKER not in a["log"]

    shutil.rmtree(first)  # the first clone is gone: nothing of the second depends on it
    b = e2e_run(second, tmp_path / "results-b")
    plugin = b["record"]["plugin"]
    assert b["record"]["valid"], b["record"]["invalid_reasons"]
    assert plugin["plugin_sha256"] == plugin["expected_sha256"] == sha_b
    assert plugin["copied_from"] == str((second / "e2e").resolve())
    assert Path(plugin["source"]) == home / "plugin" / sha_b[:16] / "e2e"
    assert all(sha == sha_b for sha, _ in applied(b["log"])) and applied(b["log"])
    assert MARKER in b["log"]  # the worker imported the second clone's changed kernel


def test_an_existing_environment_that_loads_another_e2e_is_refused_naming_it(
        default_experiment, server_python, tmp_path):
    """``python = <wrapper>``: an interpreter whose environment puts another e2e (a third
    checkout with another kernel, installed with its entry point) ahead of the PYTHONPATH
    e2e gives it."""
    other = clone(tmp_path / "other")
    change_a_kernel(other)
    monkey_home = tmp_path / "other-home"  # its own copy, like an install of that checkout
    saved = os.environ.get("E2E_HOME")
    os.environ["E2E_HOME"] = str(monkey_home)
    try:
        installed = plugin_tree(other / "e2e")
    finally:
        if saved is None:
            os.environ.pop("E2E_HOME")
        else:
            os.environ["E2E_HOME"] = saved
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={installed.folder} exec {server_python} \"$@\"\n")
    wrapper.chmod(0o755)
    experiment = small(default_experiment)
    experiment = experiment.model_copy(update={"server": experiment.server.model_copy(
        update={"build": BuildSpec(python=str(wrapper))})})
    spec = RunSpec.resolve(experiment, arm="pr", concurrency=1, dspark=False, prompts=2,
                           output_len=16, input_len=128)
    folder, record = run_unit(experiment, spec, tmp_path / "results",
                              SessionOptions(progress=False))
    assert not record.valid
    assert record.plugin.check == "failed"
    assert record.plugin.plugin_sha256 == installed.sha256 != plugin_sha256()
    assert record.plugin.expected_sha256 == plugin_sha256()
    reason = record.invalid_reasons[0]
    assert reason.startswith("arm settings not applied: the server ran e2e's plugin from "
                             f"{installed.package} (plugin_sha256 {installed.sha256[:12]}), "
                             f"not this e2e's (plugin_sha256 {plugin_sha256()[:12]}")
    assert "uninstall e2e from that environment" in reason
    assert MARKER in (folder / "server.log").read_text(errors="replace")
