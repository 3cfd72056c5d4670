"""Load windows (``[load] windows = k``) and where the noise lives (issue 23, item 8).

The estimator is checked against simulated servers whose between- and within-server parts are
known; the windows themselves run end to end through e2e's real session against the scripted
vLLM (tests/fakevllm.py), and ``e2e plan`` weighs servers against windows from that folder."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import fakevllm
from e2e.analysis.estimators.components import components, run_costs
from e2e.analysis.sweep.aggregate import summarize
from e2e.pipeline import sweep
from e2e.render import build_report
from e2e.results.store import load_records

pytestmark = pytest.mark.slow  # the whole module is the slow tier


def simulate(rng, servers: int, windows: int, between: float, within: float, first: float = 0.0):
    level = rng.normal(0.0, between, servers)
    y = level[:, None] + rng.normal(0.0, within, (servers, windows))
    y[:, 0] += first
    values = np.exp(y + math.log(3.0))
    run_means = np.log(values.mean(axis=1))
    return values.tolist(), float(np.var(run_means, ddof=1)), servers - 1


def test_the_two_parts_are_recovered_from_simulated_servers():
    rng = np.random.default_rng(1)
    between, within, got = [], [], []
    for _ in range(200):
        values, s2, df = simulate(rng, servers=12, windows=4, between=0.02, within=0.03)
        c = components(values, s2, df)
        got.append(c)
        between.append(c.between_sd)
        within.append(c.within_sd)
    # within: 33 df per experiment, so its median is within a few % of the truth
    assert np.median(within) == pytest.approx(0.03, rel=0.05)
    # between: the ANOVA estimator on 11 df is noisy but centred (median within 15 %)
    assert np.median(between) == pytest.approx(0.02, rel=0.15)
    assert all(c.windows == 4 and c.runs == 12 and c.within_df == 33 for c in got)


def test_a_slower_first_window_is_its_own_effect_not_within_noise():
    rng = np.random.default_rng(2)
    values, s2, df = simulate(rng, servers=10, windows=3, between=0.01, within=0.01, first=0.05)
    c = components(values, s2, df)
    assert c.first_window == pytest.approx(0.05, abs=0.01)
    assert c.first_window / c.first_window_se > 5
    assert c.within_sd == pytest.approx(0.01, rel=0.35)  # not inflated by the 5 % first window


def test_no_server_noise_beyond_the_windows_reads_zero_between():
    rng = np.random.default_rng(3)
    values, s2, df = simulate(rng, servers=8, windows=4, between=0.0, within=0.02)
    c = components(values, 0.0, df)  # a per-run variance smaller than within²/k
    assert c.between_sd == 0.0 and c.between_share == 0.0
    assert c.run_sd_with(4) == pytest.approx(c.within_sd / 2)


@pytest.mark.parametrize("values", [[[3.0, 3.1]], [[3.0], [3.1]], [[3.0, None], [3.1, 3.2]]])
def test_too_few_windows_give_no_components(values):
    assert components(values, 1e-4, 3) is None


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    from e2e.session.tinymodel import build_tiny_llama

    root = tmp_path_factory.mktemp("windows")
    saved = os.environ.get("E2E_HOME")
    os.environ["E2E_HOME"] = str(root / "home")
    exp = fakevllm.experiment(fakevllm.install(root / "fake"), str(build_tiny_llama(root / "model")),
                              name="win")
    exp = exp.model_copy(update={"repeats": 3, "report_from_run": 1,
                                 "load": exp.load.model_copy(update={"windows": 3})})
    results = root / "results"
    try:
        sweep(exp, results, arms=["main", "pr"], concurrencies=[1], spec_modes=[False])
    finally:
        if saved is None:
            os.environ.pop("E2E_HOME", None)
        else:
            os.environ["E2E_HOME"] = saved
    return results / "win"


def test_a_windowed_run_measures_its_load_k_times_in_one_server(windowed):
    records, problems = load_records(windowed)
    assert not problems and len(records) == 6
    for r in records:
        assert r.valid, r.invalid_reasons
        assert r.outputs_sha256 is not None  # as written; load_records checked it against the file
        assert r.spec.windows == 3 and len(r.windows) == 3
        assert [w.requests for w in r.windows] == [r.spec.prompts] * 3
        assert r.metrics.requests == 3 * r.spec.prompts
        memory = r.placement.server_memory  # read after the load, from the server's group
        assert memory.rss_mib > 0 and sum(memory.numa_mib.values()) > 0
        requests = pd.read_parquet(windowed / r.run_id / "requests.parquet")
        assert list(requests["index"]) == list(range(3 * r.spec.prompts))
        # one clock for the run: each window starts after the one before it ended
        sends = requests["send_s"].to_numpy()
        ends = requests["end_s"].to_numpy()
        n = r.spec.prompts
        for w in (1, 2):
            assert sends[w * n:(w + 1) * n].min() >= ends[(w - 1) * n:w * n].max() - 1e-6
        assert r.metrics.duration_s >= sum(w.duration_s for w in r.windows) - 1e-6


def test_the_report_and_plan_split_the_noise_between_and_within_servers(windowed):
    records, _ = load_records(windowed)
    summary = summarize(records)
    row = summary.noise_row(1, "base", "tpot_ms_mean")
    assert row is not None and row.components is not None
    assert row.components.windows == 3 and row.components.runs == 6
    report = build_report(windowed)
    text = (windowed / "report" / "report.md").read_text()
    assert "Where the noise lives" in text and "3 × 6 runs" in text
    costs = run_costs(records)
    assert costs[(1, "base")].fixed_s > 0 and costs[(1, "base")].window_s > 0

    from e2e.cli import app

    out = CliRunner().invoke(app, ["plan", "--target-effect", "5%", str(windowed)])
    assert out.exit_code == 0, out.output
    assert "servers × windows" in out.output and "fastest" in out.output
    assert report is not None


def test_a_folder_of_runs_without_windows_reads_as_before(tmp_path, windowed):
    """A run.json written before windows existed has neither field: it reads with one window."""
    records, _ = load_records(windowed)
    raw = json.loads((windowed / records[0].run_id / "run.json").read_text())
    raw.pop("windows")
    raw["spec"].pop("windows")
    from e2e.results.records import RunRecord

    old = RunRecord.model_validate(raw)
    assert old.spec.windows == 1 and old.windows == []


def test_windows_whose_requests_all_failed_combine_to_rate_zero_not_an_error():
    from e2e.load.generator import LoadOutcome
    from e2e.load.workload import combine_windows
    from e2e.results.records import ClientStats

    client = ClientStats(workers=1, wall_s=1.0, cpu_s=0.1, chunks=0, cpu_us_per_chunk=None,
                         core_share=0.1, loop_lag_ms_max=0.0, loop_lag_ms_p99=0.0,
                         saturated=False)
    failed = LoadOutcome(records=[], client=client, offered_rate=None, achieved_rate=0.0)
    assert combine_windows([failed, failed]).achieved_rate == 0.0
    ok = LoadOutcome(records=[object()] * 4, client=client, offered_rate=None, achieved_rate=2.0)
    assert combine_windows([ok, failed, ok]).achieved_rate == pytest.approx(2.0)
