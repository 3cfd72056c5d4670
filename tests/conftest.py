"""Shared fixtures. Tests marked ``server`` start real vLLM CPU servers from the embedded
default's managed environment (built once per machine under $E2E_HOME, ~2 min)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e.config import Experiment, load_experiment

ROOT = Path(__file__).resolve().parent.parent
GSM8K_DATA = (ROOT.parent / "shared" / "data" / "gsm8k").resolve()


def small(experiment: Experiment, **load) -> Experiment:
    """The experiment with a lighter load and tighter timeouts, for tests."""
    defaults = dict(request_timeout_s=120.0, stall_timeout_s=30.0, warmup_requests=1)
    return experiment.model_copy(update={
        "load": experiment.load.model_copy(update={**defaults, **load}),
        # other e2e processes (a developer's run) may hold the server lock: wait for them
        "server": experiment.server.model_copy(update={"lock_wait_s": 900.0})})


@pytest.fixture(scope="session", autouse=True)
def _ctrl_c_works():
    """Tests send themselves SIGINT (a Ctrl-C on a driver); a shell that ran the suite as a
    background job hands it down ignored, so put Python's own handler back."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def default_experiment() -> Experiment:
    return load_experiment()


@pytest.fixture(scope="session")
def server_python(default_experiment) -> Path:
    """The managed server environment (created on first use)."""
    from e2e.session._builds import resolve_python

    return resolve_python(default_experiment.server.build)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("E2E_SKIP_SERVER_TESTS"):
        skip = pytest.mark.skip(reason="E2E_SKIP_SERVER_TESTS is set")
        for item in items:
            if "server" in item.keywords:
                item.add_marker(skip)
