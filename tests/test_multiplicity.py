"""The report's family-wise rule (e2e.analysis.estimators.multiplicity.paired_holm): both hypotheses of
every primary comparison, Holm's step-down with Shaffer's restriction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from e2e.analysis.estimators.estimates import LogRatio
from e2e.analysis.estimators.multiplicity import holm, paired_holm


def test_it_is_holm_over_2m_with_at_most_m_true():
    p_diff, p_equiv = [0.001, 0.04, 0.5], [0.3, 0.002, 0.01]
    a_diff, a_equiv = paired_holm(p_diff, p_equiv)
    # sorted: 0.001 (x3), 0.002 (x3), 0.01 (x3), 0.04 (x3), 0.3 (x2), 0.5 (x1)
    assert a_diff == pytest.approx([0.003, 0.12, 0.6])
    assert a_equiv == pytest.approx([0.6, 0.006, 0.03])
    # never less strict than Holm over the m comparisons' own p alone at the first step,
    # never stricter than plain Holm over all 2m
    plain = holm(p_diff + p_equiv)
    assert all(a <= b + 1e-12 for a, b in zip(a_diff + a_equiv, plain))
    assert paired_holm([], []) == ([], [])


def _at(theta: float, se: float, df: float = 8.0) -> LogRatio:
    return LogRatio(method="model", log_ratio=theta, se=se, df=df, noise_sd=se, raw_noise_sd=se,
                    n_arm=3, n_baseline=3, n_blocks=3, dropped=0, floored=False, floor_sd=0.001)


def test_a_false_equivalence_at_the_band_edge_is_held_to_alpha():
    """12 comparisons whose true change sits at the band's edge (+1 %), the noise small: a true
    "beyond the band" null for every one, a false "no change" for every one. The rule before
    (each comparison entering with its own verdict's p) let the rows called "slower" step Holm
    down for the rest and kept a false "equivalent" in about a third of the sweeps."""
    rng = np.random.default_rng(3)
    edge, se, df, m, sims = math.log(1.01), 0.002 / math.sqrt(3), 8.0, 12, 2000
    false_eq = 0
    for _ in range(sims):
        est = [_at(edge + se * rng.standard_t(df), se, df) for _ in range(m)]
        _, a_equiv = paired_holm([e.p_value() for e in est], [e.tost_p_value(1.0) for e in est])
        false_eq += any(a < 0.05 for a in a_equiv)
    rate = false_eq / sims
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)
