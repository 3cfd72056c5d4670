"""One model per cell: ln y = block + slot + arm over every arm, the residual variance pooled
(``cell_model``); where the runs' times allow it, the residuals AR(1) over time (feasible GLS,
``AR1_GRID``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from e2e.analysis.estimators.estimates import RESOLUTION_SD, Block, LogRatio, _logs

__all__ = ["ModelRun", "CellFit", "MIN_MODEL_DF", "MIN_AR1_DF", "MIN_FOLDER_AR1_DF",
           "CALIBRATED_AR1_RHO", "AR1_GRID", "cell_model", "folder_rho"]


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
    time: float | None = None
    """When the run started on its host's timeline, in runs (``run_times``: seconds since
    the host's first run over the host's typical spacing of runs); None when unknown or when
    the run shared its time with others (a duet)."""


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
    rho: float = 0.0
    """The lag-1 (one run apart) correlation of the residuals over time that the fit used
    (REML, ``ar1_rho``); 0: ordinary least squares."""
    model: str = "ols"
    """"ols", or "ar1-gls" (feasible GLS with AR(1) residuals over the runs' times, ``rho``)."""
    rho_source: str | None = None
    """Where ``rho`` came from: "folder" (REML over the folder's cells, ``folder_rho``) or
    "calibration" (``CALIBRATED_AR1_RHO``); None for OLS."""
    honest_for: tuple[float, float] | None = None
    """The range of true AR(1) correlations the standard errors are honest for (the largest
    variance over them, ``_robust_c``); None when time is not in the model."""
    design: tuple | None = field(default=None, repr=False, compare=False)
    """(y, X, the runs' chain in time (``_chain``), their lags (``_lags``)) of the design where an AR(1) term is possible (every run
    has a time, ``MIN_AR1_DF`` residual df), else None."""


MIN_INTERFERENCE_SPREAD = 0.1
"""Recorded interference enters the model only when it varies within blocks by at least this
many cores' worth (less is the measurement's own jitter)."""


MIN_MODEL_DF = 2
"""The slot term is kept only when the model still has this many residual degrees of freedom."""

MIN_AR1_DF = 4
"""A cell's model takes the AR(1) term only when it has this many residual df (its
correlation is the folder's or the calibration's, not the cell's own). At 3 df (the default
config's 3 arms in two interleaved cells) the term's approximations (Satterthwaite df, the
worst case over ρ) cost coverage, 93.6 % against OLS's 95.0 % at ρ 0, and gained nothing
(``bench/stats_design_simulation.py --only ar1 --designs default``, docs/explanation/statistics.md)."""

MIN_FOLDER_AR1_DF = 40
"""The AR(1) correlation is estimated from the folder (REML summed over its headline cells)
only when those cells have this many residual df together; with fewer the likelihood is too
flat to say (a 5-arm, 3-round cell alone, 7 df, gave ρ̂ anywhere in 0–0.9 whatever the truth:
false calls up to 8 % at ρ = 0, ``bench/stats_design_simulation.py --only ar1``), and the
calibration's correlation (``CALIBRATED_AR1_RHO``) is used instead."""

CALIBRATED_AR1_RHO = 0.48
"""The lag-1 correlation of consecutive servers' levels measured on this host's calibration
(rank autocorrelation 0.48, p = 0.036, 19 pairs: docs/explanation/statistics.md, "Real CPU calibration"):
the AR(1) term's correlation where the folder has too few residual df to estimate its own."""

AR1_GRID = tuple(round(0.05 * i, 2) for i in range(19))
"""The correlations (0 to 0.9) over which the REML likelihood is maximised: capped at 0.9, so
the correlation matrix stays well conditioned (a host's level at 0.9 per run is nearly a
constant within a round, which the block already takes out)."""


def _chain(times: np.ndarray, hosts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each run's predecessor on its host's timeline (−1 for a host's first run) and the time
    since it, in runs, for the Prais–Winsten transform; None when two runs of a host share a
    start (an AR(1) in time cannot tell them apart)."""
    names = [repr(h) for h in hosts]
    order = sorted(range(len(times)), key=lambda i: (names[i], times[i]))
    prev = np.full(len(times), -1)
    gap = np.zeros(len(times))
    for a, b in zip(order, order[1:]):
        if names[a] == names[b]:
            if times[b] <= times[a]:
                return None
            prev[b], gap[b] = a, times[b] - times[a]
    return np.asarray(order), prev, gap


def _whiten(chain, rho: float, *arrays: np.ndarray):
    """The Prais–Winsten transform of an AR(1) sampled at the runs' times (corr ρ^|Δt|, the
    process Markov in time): a host's first run as it is, each later one
    (z_i − φ z_prev) / √(1 − φ²) with φ = ρ^Δt. Returns the whitened arrays and log|Σ|."""
    _, prev, gap = chain
    phi = np.where(prev >= 0, rho ** gap, 0.0)
    scale = np.sqrt(1.0 - phi ** 2)
    out = []
    for z in arrays:
        before = np.where((prev >= 0)[:, None] if z.ndim == 2 else prev >= 0,
                          z[np.maximum(prev, 0)], 0.0)
        k = phi[:, None] if z.ndim == 2 else phi
        out.append((z - k * before) / (scale[:, None] if z.ndim == 2 else scale))
    return out, float(np.sum(np.log(scale ** 2)))


def _reml(y: np.ndarray, x: np.ndarray, chain, rho: float) -> float:
    """The restricted log-likelihood of y = x b + e, e ~ N(0, s² Σ(ρ)), s² profiled out."""
    (yw, xw), logdet_sigma = _whiten(chain, rho, y, x)
    beta, *_ = np.linalg.lstsq(xw, yw, rcond=None)
    n, p = x.shape
    rss = float(np.sum((yw - xw @ beta) ** 2))
    sign, logdet = np.linalg.slogdet(xw.T @ xw)
    if rss <= 0 or sign <= 0:
        return -math.inf
    return -0.5 * ((n - p) * math.log(rss / (n - p)) + logdet_sigma + logdet)


LR_95 = 3.841458820694124
"""χ²₁'s 95 % quantile: the correlations within it of the folder's REML maximum (twice the
log-likelihood drop) are the plausible ones (a profile-likelihood confidence set)."""


def folder_rho(fits: Sequence[CellFit]) -> tuple[float, str | None, tuple[float, ...]]:
    """The AR(1) correlation for a folder's cell models, where it came from, and the
    correlations the intervals must stay honest for. REML summed over ``fits`` (the folder's
    headline cells, fitted without it; ``AR1_GRID``) when those with a possible AR(1) term have
    ``MIN_FOLDER_AR1_DF`` residual df together ("folder"; plausible: the grid points within
    ``LR_95`` of the maximum), else ``CALIBRATED_AR1_RHO`` ("calibration"; plausible: the whole
    grid, 0–0.9, since nothing in the folder says which); (0, None, ()) when none can have the
    term."""
    designs = [f.design for f in fits if f.design is not None]
    if not designs:
        return 0.0, None, ()
    if sum(d[1].shape[0] - d[1].shape[1] for d in designs) < MIN_FOLDER_AR1_DF:
        return CALIBRATED_AR1_RHO, "calibration", AR1_GRID
    profile = {rho: sum(_reml(y, x, chain, rho) for y, x, chain, _ in designs)
               for rho in AR1_GRID}
    best_rho = max(AR1_GRID, key=lambda r: (profile[r], -r))
    plausible = tuple(r for r in AR1_GRID if 2.0 * (profile[best_rho] - profile[r]) <= LR_95)
    return best_rho, "folder", plausible


def _lags(times: np.ndarray, hosts: list) -> np.ndarray:
    """|t_i − t_j| in runs between runs of one host; inf across hosts (no correlation)."""
    names = np.asarray([repr(h) for h in hosts])
    lag = np.abs(times[:, None] - times[None, :])
    return np.where(names[:, None] == names[None, :], lag, np.inf)


def _robust_c(x: np.ndarray, chain, lags: np.ndarray, rho: float,
              plausible: Sequence[float]) -> tuple[np.ndarray, float]:
    """Per coefficient, c with se² = c · s² (s² the fit's residual variance per run), and the
    df, honest whichever correlation in ``plausible`` is the true one: for each such ρ_t, the
    variance of the estimator fitted with ``rho`` (whitening W) under Σ(ρ_t), with s² read as
    an estimate of σ² under Σ(ρ_t) too (E[rss] = σ² tr(R B), R = I − H, B = W Σ(ρ_t) W'), and
    the Satterthwaite df of that s² (tr(R B)² / tr((R B)²): correlated residuals carry fewer
    df than n − p); the largest c and the smallest df over ρ_t, never beyond the fit's own."""
    n, p = x.shape
    eye = np.eye(n)
    (w,), _ = _whiten(chain, rho, eye) if rho > 0 else ((eye,), 0.0)
    xw = w @ x
    g = np.linalg.pinv(xw.T @ xw)
    resid = eye - xw @ g @ xw.T
    c, df = np.diag(g).copy(), float(n - p)
    for rho_t in plausible:
        if rho_t == rho:
            continue
        b = w @ (rho_t ** lags if rho_t > 0 else eye) @ w.T
        v = g @ xw.T @ b @ xw @ g
        rb = resid @ b
        trace = float(np.trace(rb))
        c = np.maximum(c, np.diag(v) * (n - p) / trace)
        df = min(df, trace ** 2 / float(np.sum(rb * rb.T)))
    return c, df


def cell_model(runs: Sequence[ModelRun], baseline: str, *,
               floor_sd: float = RESOLUTION_SD, rho: float = 0.0,
               rho_source: str | None = None,
               plausible: Sequence[float] = ()) -> CellFit | None:
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
    then falls back to the paired t or Welch (``log_ratio``).

    **Time**: a host's level wanders (lag-1 correlation 0.48 measured here), so runs close in
    time are alike beyond their block; with a fixed order the same arm then sits far from the
    baseline every sweep. Where every run has a ``time`` (sequential runs with start times; not
    duets, whose sides share their time and whose block takes the shared level out) and the
    model keeps ``MIN_AR1_DF`` residual df, the fit records its design (``CellFit.design``) and,
    given ``rho`` > 0 (the folder's, ``folder_rho``: REML over its cells, or the calibration's),
    the residuals are taken as AR(1) over the runs' times, corr = ρ^|Δt|, and the same design
    is fitted by GLS (feasible GLS: statsmodels ``OLS`` on the rows whitened by the Prais–Winsten
    transform for an AR(1) sampled at the runs' times, ``_whiten``, the same as ``GLS`` with
    that Σ and without its n × n algebra); its df are n − p, one less when ρ was
    estimated from the folder. ``CellFit.model``, ``rho`` and ``rho_source`` say which was
    used."""
    runs = [r for r in runs if r.block is not None]
    arms = sorted({r.arm for r in runs}, key=lambda a: (a != baseline, a))
    if len(arms) < 2 or arms[0] != baseline:
        return None
    y = _logs([r.value for r in runs], "cell_model")
    fitted = _ols(runs, arms, y)
    if fitted is None:
        return None
    res, cols, used_slot, used_busy = fitted
    res, model, design, robust, honest = _time_model(runs, y, res, rho=rho, plausible=plausible)
    if model == "ols":
        rho = 0.0
        rho_source = rho_source if robust is not None else None
    df = float(res.df_resid) - (1.0 if rho_source == "folder" else 0.0)
    if robust is not None:
        df = min(df, robust[1])
    raw_s2 = float(res.ssr) / float(res.df_resid)
    out = _contrasts(runs, arms, res, cols, None if robust is None else robust[0],
                     raw_s2=raw_s2, df=df, floor_sd=floor_sd)
    return CellFit(estimates=out, s2=raw_s2, df=df, slot=bool(used_slot), arms=len(arms),
                   runs=len(runs), covariate=used_busy, rho=rho, model=model,
                   rho_source=rho_source, design=design, honest_for=honest)


def _ols(runs: Sequence[ModelRun], arms: list[str], y: np.ndarray):
    """The OLS fit of ln y on block + arm (the baseline ``arms[0]`` as reference), with the
    slot as a linear term where every run has one, it varies within blocks and the model keeps
    ``MIN_MODEL_DF`` residual df, and the recorded interference as a covariate where it varies
    within blocks by ``MIN_INTERFERENCE_SPREAD`` and the df stay; (result, columns, slot used,
    interference used), None when not even block + arm can be fitted."""
    import pandas as pd
    import statsmodels.api as sm

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
    return res, cols, used_slot, used_busy


def _time_model(runs: Sequence[ModelRun], y: np.ndarray, res, *, rho: float,
                plausible: Sequence[float]):
    """Time, where every run has a ``time`` and the fit keeps ``MIN_AR1_DF`` residual df: the
    design the folder's REML reads, the GLS refit at ``rho`` > 0 (OLS on the Prais–Winsten-
    whitened rows) and, given ``plausible``, the errors honest for each of them
    (``_robust_c``). (result, "ols" or "ar1-gls", design, (c, df) or None, honest range)."""
    import statsmodels.api as sm

    model, design, robust, honest = "ols", None, None, None
    if all(r.time is not None for r in runs) and res.df_resid >= MIN_AR1_DF:
        times = np.asarray([float(r.time) for r in runs])
        hosts = [r.block[1] if isinstance(r.block, tuple) and len(r.block) > 1 else None
                 for r in runs]
        chain = _chain(times, hosts)
        design = None if chain is None else (y, res.model.exog, chain, _lags(times, hosts))
        if design is not None and rho > 0:  # GLS: OLS on the Prais–Winsten-whitened rows
            (yw, xw), _ = _whiten(chain, rho, y, design[1])
            res = sm.OLS(yw, xw).fit()
            model = "ar1-gls"
        if design is not None and plausible:
            robust = _robust_c(design[1], chain, design[3],
                               rho if model != "ols" else 0.0, plausible)
            honest = (min(plausible), max(plausible))
    return res, model, design, robust, honest


def _contrasts(runs: Sequence[ModelRun], arms: list[str], res, cols: list[str],
               robust: np.ndarray | None, *, raw_s2: float, df: float,
               floor_sd: float) -> dict[str, LogRatio]:
    """Each arm's coefficient as its ``LogRatio`` against the baseline ``arms[0]``: se² = c·s²
    (c the model's, or the honest one), s the residual sd floored at ``floor_sd``."""
    baseline = arms[0]
    raw = math.sqrt(max(raw_s2, 0.0))
    s = max(raw, floor_sd)
    counts = {a: sum(1 for r in runs if r.arm == a) for a in arms}
    block_sets = {a: {r.block for r in runs if r.arm == a} for a in arms}
    out: dict[str, LogRatio] = {}
    for a in arms[1:]:
        j = cols.index(f"a:{a}")
        c = float(res.normalized_cov_params[j, j] if robust is None else robust[j])  # se² = c·s²
        shared = block_sets[a] & block_sets[baseline]
        common = len(shared)
        # with two arms a run in a block without the other arm only fixes its own block effect
        lone = 0 if len(arms) > 2 else sum(1 for r in runs if r.block not in shared)
        out[a] = LogRatio(method="model", log_ratio=float(res.params[j]), se=math.sqrt(c) * s,
                          df=df, noise_sd=math.sqrt(2.0) * s, raw_noise_sd=math.sqrt(2.0) * raw,
                          n_arm=counts[a], n_baseline=counts[baseline], n_blocks=common,
                          dropped=lone, floored=raw < floor_sd, floor_sd=floor_sd,
                          residual_df=df)
    return out
