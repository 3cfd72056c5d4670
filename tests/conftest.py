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


def alone_nightly_raw() -> dict:
    """The embedded nightly without its reference arm: one arm, one server at a time, its
    cells judged against the baseline night and change points (the design a config without
    ``[nightly] reference`` still gets), on the matrix the embedded nightly had before it was
    a reference duet (concurrency 1 and 4, both spec modes, 6 runs, 2 % thresholds)."""
    import tomllib

    raw = tomllib.loads((ROOT / "configs" / "nightly.toml").read_text())
    raw["arms"].pop("reference")
    raw["duet"]["enabled"] = False
    raw.update(repeats=4)
    raw["server"]["cpus"] = "0"
    raw["load"].update(cpus="1", output_len=509, prompts_per_concurrency=32, concurrencies=[1, 4])
    raw["load"].pop("windows")
    night = raw["nightly"]
    for key in ("reference", "max_runs", "history_nights", "alpha"):
        night.pop(key)
    night.update(arms=["main"], concurrencies=[1, 4], spec_modes=["base", "dspark"], runs=6,
                 baseline="main", thresholds={"base": {"headline": 2.0},
                                              "dspark": {"headline": 2.0}},
                 changepoints={"enabled": True, "alpha": 0.05, "min_nights": 6})
    return raw


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
    from e2e.session import resolve_python

    return resolve_python(default_experiment.server.build)


# The fast tier, ``pytest -m "not server and not slow"``: a test that starts a Ray cluster, a
# PostgreSQL server, Chromium, a managed environment or real vLLM kernels, or that takes more
# than about 1.5 s on a 2-core host (``pytest -m "not server" --durations=0``), carries
# ``@pytest.mark.slow`` (a whole module: ``pytestmark = pytest.mark.slow``). Tests that use
# one of the slow fixtures below, or drive Chromium, are marked here; CI runs everything.
SLOW_FIXTURES = {"postgres", "hostile_site", "world", "site", "windowed", "real_python"}
SLOW_PARAMS = ("postgresql",)  # a test parametrized over stores: its PostgreSQL case


def pytest_terminal_summary(terminalreporter):
    """Which browser the dashboard's tests drove (Chromium's DevTools rules change between
    versions: a failure there reads differently with the version beside it). Printed under
    ``-q`` too, where pytest's header is not."""
    import chromium

    for binary, product in sorted(chromium.DRIVEN):
        terminalreporter.write_line(f"browser tests drove {binary} ({product})")


def _slow(item) -> bool:
    if "chromium" in item.name:
        return True
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    spec = getattr(item, "callspec", None)
    return spec is not None and any(p in str(v) for p in SLOW_PARAMS
                                    for v in (spec.id, *spec.params.values()))


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if "slow" not in item.keywords and _slow(item):
            item.add_marker(slow)
    if os.environ.get("E2E_SKIP_SERVER_TESTS"):
        skip = pytest.mark.skip(reason="E2E_SKIP_SERVER_TESTS is set")
        for item in items:
            if "server" in item.keywords:
                item.add_marker(skip)
