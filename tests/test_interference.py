"""Recorded interference in the cell model: other processes' load during a run, where it
varies within blocks, is a covariate (e2e.analysis.estimators.model.cell_model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from e2e.analysis.estimators.model import ModelRun, cell_model


def runs(rng, *, effect: float, beta: float, busy_sd: float, rounds: int = 8, noise: float = 0.01):
    out = []
    for k in range(rounds):
        level = rng.normal(0, 0.05)
        for arm, eff in (("main", 0.0), ("pr", effect)):
            busy = abs(rng.normal(0, busy_sd))
            y = math.exp(1.0 + level + eff + beta * busy + rng.normal(0, noise))
            out.append(ModelRun(arm, (k, None), None, y, busy))
    return out


def test_interference_that_varies_within_blocks_is_adjusted_for():
    rng = np.random.default_rng(4)
    data = runs(rng, effect=0.02, beta=0.3, busy_sd=0.5)
    fit = cell_model(data, "main")
    plain = cell_model([ModelRun(r.arm, r.block, r.slot, r.value) for r in data], "main")
    assert fit.covariate and not plain.covariate
    est, raw = fit.estimates["pr"], plain.estimates["pr"]
    assert abs(est.log_ratio - 0.02) < 2 * est.se
    assert est.se < raw.se  # the interference's share of the noise is explained


def test_interference_that_does_not_vary_is_left_out():
    rng = np.random.default_rng(5)
    fit = cell_model(runs(rng, effect=0.0, beta=0.3, busy_sd=0.001), "main")
    assert not fit.covariate


@pytest.mark.slow  # 400 fits
@pytest.mark.parametrize("seed", [1, 2])
def test_unrelated_interference_keeps_a_a_at_nominal(seed):
    rng = np.random.default_rng(seed)
    sims, calls = 200, 0
    for _ in range(sims):
        fit = cell_model(runs(rng, effect=0.0, beta=0.3, busy_sd=0.5, rounds=5), "main")
        e = fit.estimates["pr"]
        lo, hi = e.interval_pct(0.95)
        calls += not (lo <= 0.0 <= hi)
    assert calls / sims <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)
