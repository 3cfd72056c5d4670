"""One model per cell: ln y = block + slot + arm over every arm, the residual variance pooled
(``cell_model``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from e2e.analysis._estimates import RESOLUTION_SD, Block, LogRatio, _logs

__all__ = ["ModelRun", "CellFit", "MIN_MODEL_DF", "cell_model"]


@dataclass(frozen=True)
class ModelRun:
    """One reported run of a cell for ``cell_model``: its arm, block (round, host), position
    in its block (``slot``, 0 = first; None when unknown) and value (> 0)."""

    arm: str
    block: Block
    slot: float | None
    value: float
    interference: float | None = None
    """Cores' worth of other processes during the run (``host_noise.other_cpu_share``)."""


@dataclass(frozen=True)
class CellFit:
    """``cell_model``'s result: per arm (not the baseline) its contrast with the baseline,
    the residual variance per run (``s2``, log units) on ``df`` degrees of freedom and whether
    the slot term was in the model, and whether the recorded interference was (``covariate``)."""

    estimates: dict[str, LogRatio]
    s2: float
    df: float
    slot: bool
    arms: int
    runs: int
    covariate: bool = False


MIN_INTERFERENCE_SPREAD = 0.1
"""Recorded interference enters the model only when it varies within blocks by at least this
many cores' worth (less is the measurement's own jitter)."""


MIN_MODEL_DF = 2
"""The slot term is kept only when the model still has this many residual degrees of freedom."""


def cell_model(runs: Sequence[ModelRun], baseline: str, *,
               floor_sd: float = RESOLUTION_SD) -> CellFit | None:
    """Fit ln y = block + slot + arm by ordinary least squares (statsmodels ``OLS``) over
    every reported run of every arm of one cell (Jones & Kenward's model of a crossover with
    fixed period effects): block = round (× host) as a factor, slot = the run's position in its
    block as a linear term (a linear drift *within* a round; kept only when every run has a slot,
    it varies within blocks, and the model keeps ``MIN_MODEL_DF`` residual df), arm as a factor
    with the baseline as reference. Each arm's coefficient is its contrast ln(arm / baseline);
    its standard error uses the residual variance pooled over all arms and blocks (df = n − p).

    The per-run noise is floored at ``floor_sd`` (the residual sd, so identical values never give
    a zero-width interval). None when the model cannot be fitted: fewer than 2 arms, a
    rank-deficient design (an arm not estimable), or no residual degrees of freedom; the caller
    then falls back to the paired t or Welch (``log_ratio``)."""
    import pandas as pd
    import statsmodels.api as sm

    runs = [r for r in runs if r.block is not None]
    arms = sorted({r.arm for r in runs}, key=lambda a: (a != baseline, a))
    if len(arms) < 2 or arms[0] != baseline:
        return None
    y = _logs([r.value for r in runs], "cell_model")
    blocks = pd.Categorical([repr(r.block) for r in runs])
    arm_cat = pd.Categorical([r.arm for r in runs], categories=arms)
    base = pd.concat([pd.get_dummies(blocks, drop_first=False, dtype=float),
                      pd.get_dummies(arm_cat, dtype=float).iloc[:, 1:]], axis=1)
    base.columns = [f"b{i}" for i in range(len(blocks.categories))] + [f"a:{a}" for a in arms[1:]]
    slot_ok = all(r.slot is not None for r in runs)
    if slot_ok:
        slots = np.asarray([float(r.slot) for r in runs])
        within = pd.Series(slots).groupby(np.asarray(blocks.codes)).transform(lambda s: s - s.mean())
        slot_ok = bool(np.any(np.abs(within.to_numpy()) > 0))

    busy = None
    if all(r.interference is not None for r in runs):
        busy = np.asarray([float(r.interference) for r in runs])
        spread = pd.Series(busy).groupby(np.asarray(blocks.codes)).transform(lambda s: s - s.mean())
        if np.ptp(spread.to_numpy()) < MIN_INTERFERENCE_SPREAD:
            busy = None

    def fit(with_slot: bool, with_busy: bool = False):
        x = base.copy()
        if with_slot:
            x["slot"] = slots
        if with_busy:
            x["interference"] = busy
        mat = x.to_numpy()
        if np.linalg.matrix_rank(mat) < mat.shape[1] or mat.shape[0] - mat.shape[1] < 1:
            return None, None
        return sm.OLS(y, mat).fit(), list(x.columns)

    res = cols = None
    used_slot = False
    if slot_ok:
        res, cols = fit(True)
        used_slot = res is not None and res.df_resid >= MIN_MODEL_DF
        if not used_slot:
            res = None
    if res is None:
        res, cols = fit(False)
    if res is None:
        return None
    used_busy = False
    if busy is not None:  # other processes' load, where it varied within blocks
        with_busy, busy_cols = fit(used_slot, True)
        if with_busy is not None and with_busy.df_resid >= MIN_MODEL_DF:
            res, cols, used_busy = with_busy, busy_cols, True
    df = float(res.df_resid)
    raw_s2 = float(res.ssr) / df
    raw = math.sqrt(max(raw_s2, 0.0))
    s = max(raw, floor_sd)
    counts = {a: sum(1 for r in runs if r.arm == a) for a in arms}
    block_sets = {a: {r.block for r in runs if r.arm == a} for a in arms}
    out: dict[str, LogRatio] = {}
    for a in arms[1:]:
        j = cols.index(f"a:{a}")
        c = float(res.normalized_cov_params[j, j])  # se² = c · s²
        shared = block_sets[a] & block_sets[baseline]
        common = len(shared)
        # with two arms a run in a block without the other arm only fixes its own block effect
        lone = 0 if len(arms) > 2 else sum(1 for r in runs if r.block not in shared)
        out[a] = LogRatio(method="model", log_ratio=float(res.params[j]), se=math.sqrt(c) * s,
                          df=df, noise_sd=math.sqrt(2.0) * s, raw_noise_sd=math.sqrt(2.0) * raw,
                          n_arm=counts[a], n_baseline=counts[baseline], n_blocks=common,
                          dropped=lone, floored=raw < floor_sd, floor_sd=floor_sd,
                          residual_df=df)
    return CellFit(estimates=out, s2=raw_s2, df=df, slot=bool(used_slot), arms=len(arms),
                   runs=len(runs), covariate=used_busy)
