"""What a nightly design resolves (e2e.analysis.nightly.resolution.resolution, design_lines): the power statement
against the judge's own calls on simulated nights, the rounds a threshold needs, the noise a
history measured, and what the dry run and the summary say. Pure: no server."""

from __future__ import annotations

import math

import numpy as np
import pytest

from e2e.analysis.nightly.judge import Rules, judge_night
from e2e.analysis.nightly.resolution import (
    HOST_DUETS, Noise, design_lines, noise_of, power_at, resolution, rounds_needed
)
from e2e.results import CellKey, Looks, NightCell, RatioHistory

REL = CellKey("load", "main-vs-reference", 1, "base", "server_tpot_ms_mean")
LOOKS = Looks(first=8, step=8, last=24)


def test_more_history_nights_and_rounds_resolve_less_and_the_night_part_sets_a_floor():
    quiet = Noise(0.045, 0.0, "x")
    assert resolution(quiet, LOOKS, nights=20, alpha=0.002) < resolution(
        quiet, LOOKS, nights=5, alpha=0.002)
    assert resolution(quiet, Looks(8, 8, 32), nights=20, alpha=0.002) < resolution(
        quiet, Looks(8, 8, 8), nights=20, alpha=0.002)
    assert resolution(quiet, LOOKS, nights=1, alpha=0.002) is None
    # two judged cells share the night's level: each resolves less
    assert resolution(quiet, LOOKS, nights=20, alpha=0.002, cells=2) > resolution(
        quiet, LOOKS, nights=20, alpha=0.002)
    need = rounds_needed(4.0, quiet, LOOKS, nights=20, alpha=0.002)
    assert need is not None and need % 8 == 0 and need > LOOKS.last
    assert resolution(quiet, Looks(8, 8, need), nights=20, alpha=0.002) <= 4.0
    assert resolution(quiet, Looks(8, 8, need - 8), nights=20, alpha=0.002) > 4.0
    # a night part no number of rounds averages away
    assert rounds_needed(3.0, Noise(0.045, 0.02, "x"), LOOKS, nights=20, alpha=0.002) is None


@pytest.mark.slow  # 300 simulated nights through the judge's looks, ~10 s
def test_the_power_statement_is_the_judges_own_call_rate():
    noise = Noise(0.045, 0.01, "x")
    change = 8.0
    promised = power_at(change, noise, LOOKS, nights=10, alpha=0.002, threshold=7.0)
    rules = Rules(thresholds={"base": {REL.metric: 7.0}}, reference="reference", alpha=0.002,
                  looks=LOOKS)
    rng = np.random.default_rng(5)
    sims, called = 300, 0
    for _ in range(sims):
        history = tuple((f"2026-01-{d:02d}", NightCell(REL, tuple(np.exp(
            rng.normal(0, noise.night_sd) + rng.normal(0, noise.run_sd, 8)))))
            for d in range(1, 11))
        level = math.log1p(change / 100) + rng.normal(0, noise.night_sd)
        values = np.exp(level + rng.normal(0, noise.run_sd, LOOKS.last))
        for k in LOOKS.schedule():
            (v,) = judge_night("2026-02-01", [NightCell(REL, tuple(values[:k]))], None, rules,
                               histories={REL: RatioHistory(history)}).verdicts
            if not v.more:
                break
        called += v.verdict == "regressed"
    share = called / sims
    assert abs(share - promised) <= 3 * math.sqrt(promised * (1 - promised) / sims) + 0.02


def test_a_historys_noise_is_its_nights_anova():
    rng = np.random.default_rng(2)
    nights = [np.exp(rng.normal(0, 0.02) + rng.normal(0, 0.05, 16)) for _ in range(60)]
    got = noise_of(nights, "h")
    assert got.run_sd == pytest.approx(0.05, rel=0.1)
    assert got.night_sd == pytest.approx(0.02, abs=0.008)
    assert noise_of(nights[:1], "h") is None


def test_the_lines_say_whether_the_threshold_is_resolved_and_what_one_server_at_a_time_costs():
    kw = dict(cell="main-vs-reference c1 base m", looks=LOOKS, runs_of=lambda k: k + 1,
              nights_full=20, nights_now=4, alpha=0.002, cells=1, noise=HOST_DUETS)
    (line,) = design_lines(threshold=9.0, **kw)
    assert "The 9 % threshold is resolved." in line and "with the 4 night(s) it holds now" in line
    (line,) = design_lines(threshold=3.0, **kw)
    assert "No number of rounds a night resolves the 3 % threshold" in line
    quiet = dict(kw, noise=Noise(0.045, 0.0, "x"))
    (line,) = design_lines(threshold=4.0, **quiet)
    assert "The 4 % threshold needs" in line and "max_runs =" in line
    lines = design_lines(threshold=9.0, **dict(kw, one_at_a_time="no second slot"))
    assert len(lines) == 2 and lines[1].startswith("One server at a time (no second slot)")
    # a full history says first whether it still resolves the threshold, and what it does now
    full = dict(kw, nights_now=20)
    (line,) = design_lines(threshold=9.0, **full)
    assert "no longer resolves" not in line and "The 9 % threshold is resolved." in line
    (line,) = design_lines(threshold=5.0, **full)
    now = resolution(HOST_DUETS, LOOKS, nights=20, alpha=0.002)
    assert now > 5.0 and line.startswith(
        f"main-vs-reference c1 base m: its history is full (20 nights, no later night joins it) "
        f"and no longer resolves the 5 % threshold ({now:.1f} % now)")
    assert "undecided (exit 3; 4 after 3 in a row)" in line
