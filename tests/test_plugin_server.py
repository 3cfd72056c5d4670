"""Real vLLM CPU servers of the ``pr`` and ``mono`` arms: e2e's plugin applies the arm's settings in the
worker process, logs it, and ``plugin_check`` accepts the log (and refuses other settings)."""

from __future__ import annotations

import re

import pytest

import e2e.session as session
from conftest import small
from e2e.plan import RunSpec
from e2e.session import plugin_check

pytestmark = pytest.mark.server


def test_pr_server_applies_settings_in_worker(default_experiment, server_python, tmp_path):
    experiment = small(default_experiment)
    spec = RunSpec.resolve(experiment, arm="pr", concurrency=1, dspark=False, prompts=2,
                           output_len=16)
    folder, record = session.run_unit(experiment, spec, tmp_path, session.SessionOptions(progress=False))
    assert record.valid, record.invalid_reasons
    log = folder / "server.log"
    text = log.read_text(errors="replace")
    settings = experiment.arm("pr").plugin
    applied = re.findall(r"e2e-plugin: applied in worker \(pid (\d+), (\w+)\): arm=pr "
                         r"mode=inject packing=inplace -> cpu-inplace", text)
    assert applied, text[-3000:]
    front = re.search(r"e2e-plugin: nothing applied in api-server \(pid (\d+)\)", text)
    assert front, "the API server process logged no line"
    assert front.group(1) not in {pid for pid, _ in applied}  # applied in another process
    assert re.search(r"e2e-plugin: first decode step in worker \(pid \d+\): 1 decode "
                     r"token\(s\), window indices packed 7 times", text)
    assert plugin_check(log, settings) is None
    reason = plugin_check(log, {"packing": "main"})
    assert reason and "not this arm's" in reason


def test_mono_server_builds_window_and_ragged_in_one_pass(default_experiment, server_python,
                                                          tmp_path):
    """The opt-in ``mono`` arm (packing = "meta") end to end: applied in the worker, checked."""
    experiment = small(default_experiment)
    spec = RunSpec.resolve(experiment, arm="mono", concurrency=1, dspark=False, prompts=2,
                           output_len=16)
    folder, record = session.run_unit(experiment, spec, tmp_path, session.SessionOptions(progress=False))
    assert record.valid, record.invalid_reasons
    log = folder / "server.log"
    text = log.read_text(errors="replace")
    assert re.search(r"e2e-plugin: applied in worker \(pid \d+, \w+\): arm=mono mode=inject "
                     r"packing=meta -> cpu-window-and-pack", text), text[-3000:]
    assert plugin_check(log, experiment.arm("mono").plugin) is None
