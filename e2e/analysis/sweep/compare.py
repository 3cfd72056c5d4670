"""Every arm against the baseline of its cell (``compare``): one model per cell, shared noise
where it is alike, the floor, the verdicts, the family-wise rule over the primary comparisons,
and the noise table."""

from __future__ import annotations

import math
from collections.abc import Sequence

from e2e.analysis.estimators.estimates import RESOLUTION_SD, LogRatio, log_ratio, welch_log_ratio
from e2e.analysis.estimators.median_ratio import ratio_of_medians
from e2e.analysis.estimators.model import CellFit, ModelRun, cell_model, folder_rho
from e2e.analysis.estimators.moderation import Prior, fit_prior, floor_noise, moderate
from e2e.analysis.estimators.multiplicity import paired_holm
from e2e.analysis.estimators.verdicts import call, is_difference
from e2e.analysis.sweep.headline import headline_metric
from e2e.analysis.sweep.noise import noise_rows
from e2e.analysis.sweep.summary import (
    Cell, Comparison, NoiseRow, ReportWarning, RunKey as _RunKey, label_of, metric
)

__all__ = ["compare", "estimate_of", "primary_metric"]

def _runs(cell: Cell) -> list[tuple[object, float]]:
    return list(zip(cell.blocks(), cell.values))


def _model_runs(cell: Cell, slots: dict[_RunKey, int | None],
                times: dict[_RunKey, float]) -> list[ModelRun]:
    busy = cell.interference or (None,) * len(cell.values)
    key = (cell.arm, cell.concurrency, cell.spec_mode)
    return [ModelRun(cell.arm, block, slots.get((*key, *block)), v, b,
                           time=times.get((*key, *block)) if len(block) == 2 else None)
            for block, v, b in zip(cell.blocks(), cell.values, busy)]


def estimate_of(comp: Comparison) -> LogRatio | None:
    """The comparison's estimate as a ``LogRatio`` (to read it at another confidence,
    e.g. a sequential look); None without an interval."""
    if comp.se is None or comp.df is None or comp.interval is None:
        return None
    noise = (comp.noise_pct or 0.0) / 100.0
    return LogRatio(method=comp.method if comp.method in ("model", "blocked", "welch") else "blocked",
                          log_ratio=math.log(comp.ratio), se=comp.se, df=comp.df, noise_sd=noise,
                          raw_noise_sd=noise, n_arm=comp.n_arm, n_baseline=comp.n_baseline,
                          n_blocks=comp.n_blocks, dropped=comp.dropped, floored=comp.noise_floored,
                          floor_sd=RESOLUTION_SD, prior_df=comp.prior_df)


def primary_metric(concurrency: int, spec_mode: str) -> str:
    """The cell's primary (headline) metric: mean TPOT at concurrency 1, median TPOT above it,
    ms per verify step with the speculator."""
    return headline_metric(concurrency, spec_mode)


Pair = tuple[Cell, Cell]  # (an arm's cell, the baseline's cell of the same concurrency, mode, metric)
FitKey = tuple[int, str, str]  # (concurrency, spec mode, metric)
NoiseKey = tuple[str, str, int]  # (metric, spec mode, concurrency): where noise is alike


def compare(
    cells: Sequence[Cell],
    index: dict[tuple[str, int, str, str], Cell],
    *,
    baseline: str,
    slots: dict[_RunKey, int | None],
    aa_arms: tuple[str, ...],
    confidence: float,
    min_effect_pct: float,
    equivalence_pct: float,
    target_effect_pct: float | None,
    times: dict[_RunKey, float] | None = None,
) -> tuple[list[Comparison], tuple[NoiseRow, ...], list[ReportWarning], list[str]]:
    """Every arm against the baseline of its cell:

    1. **one model per cell and metric** (``cell_model``: ln y = round × host + slot + arm
       over every arm, the residual variance pooled across them); where it cannot be fitted,
       the paired t per arm (``log_ratio``: blocked where 2 blocks pair up) or Welch;
       with the runs' ``times``, the model's residuals AR(1) over time where estimable
       (feasible GLS, ``cell_model``);
    2. **shared noise** only where noise is alike: a fallback comparison's per-run variance is
       moderated toward the other comparisons of the same cell (metric, spec mode and
       concurrency; ``fit_prior``, ``moderate``: limma's moderated t; no prior with fewer than 3
       of them); a fitted cell already pools its arms and borrows nothing from other cells;
    3. a **monotone floor** at the measurement's resolution, 0.1 % per run
       (``floor_noise``);
    4. verdicts (``call``) and the MDE with the df the test uses; the **family**: both
       null hypotheses (no change; a change beyond the band) of every primary comparison (the
       headline metric of every cell, every arm except the A/A ones), 2m in all, by Holm's
       step-down with Shaffer's restriction (``paired_holm``), so a false "faster",
       "slower" or "equivalent" anywhere in the family has probability at most α. A/A arms are
       "check"s, other metrics "secondary" (unadjusted)."""
    pairs, warnings = _pairs(cells, index, baseline)
    metrics = {c.metric: metric(c.metric) for c, _ in pairs}
    est, own_s2, fits, units = _estimates(pairs, cells, baseline, slots, times or {})
    priors, pooled_text = _moderated(pairs, est, own_s2, units, metrics)
    rows = [_row(c, base, est[id(c)], metrics[c.metric], fits, warnings, baseline=baseline,
                 aa_arms=aa_arms, confidence=confidence, min_effect_pct=min_effect_pct,
                 equivalence_pct=equivalence_pct)
            for c, base in pairs]
    _holm_family(rows, alpha=1.0 - confidence)
    comparisons = [_comparison(r, baseline, confidence=confidence, min_effect_pct=min_effect_pct,
                               equivalence_pct=equivalence_pct) for r in rows]
    target = equivalence_pct if target_effect_pct is None else target_effect_pct
    return (comparisons, noise_rows(rows, fits, aa_arms, confidence, target, priors), warnings,
            pooled_text)


def _pairs(cells: Sequence[Cell], index: dict[tuple[str, int, str, str], Cell],
           baseline: str) -> tuple[list[Pair], list[ReportWarning]]:
    """Each arm's cell with the baseline's of the same concurrency, mode and metric; a cell
    with a value at or below zero has no ratio (a warning)."""
    warnings: list[ReportWarning] = []
    pairs: list[Pair] = []
    for c in cells:
        if c.arm == baseline:
            continue
        base = index.get((baseline, c.concurrency, c.spec_mode, c.metric))
        if base is None:
            continue
        if min(c.values + base.values) <= 0:
            warnings.append(ReportWarning(
                "a value is zero or negative; no ratio", c.arm, c.concurrency, c.spec_mode, c.metric,
                detail=label_of(c.metric)))
            continue
        pairs.append((c, base))
    return pairs, warnings


def _fits(groups: dict[FitKey, list[Pair]], model_runs: dict[int, list[ModelRun]],
          baseline: str) -> dict[FitKey, CellFit]:
    """One model per (concurrency, spec mode, metric) over every arm's runs, refitted with the
    folder's AR(1) correlation (one for the folder, from its headline cells: the host's level
    over time) where the model has a time term and the correlation is plausible."""
    fits: dict[FitKey, CellFit] = {}
    group_runs: dict[FitKey, list[ModelRun]] = {}
    for key, members in groups.items():
        runs = list(model_runs[id(members[0][1])])
        for c, _ in members:
            runs += model_runs[id(c)]
        group_runs[key] = runs
        if len(runs) > 2 and (fit := cell_model(runs, baseline)) is not None:
            fits[key] = fit
    rho, rho_source, plausible = folder_rho([f for (conc, mode, m), f in fits.items()
                                                   if m == headline_metric(conc, mode)])
    refitted: dict[FitKey, CellFit] = {}
    for key in groups:
        fit = fits.pop(key, None)
        if fit is not None and fit.design is not None and plausible:
            fit = cell_model(group_runs[key], baseline, rho=rho, rho_source=rho_source,
                                   plausible=plausible)
        if fit is not None:
            refitted[key] = fit
    return refitted


def _estimates(pairs: list[Pair], cells: Sequence[Cell], baseline: str,
               slots: dict[_RunKey, int | None], times: dict[_RunKey, float]):
    """Step 1: each pair's estimate, from its cell's model, else the paired t (blocked) or
    Welch; with each estimate's own per-run variance (where moderation may use it) and the
    variances of each cell where noise is alike (``NoiseKey``: model fits and blocked
    fallbacks, with their df)."""
    model_runs = {id(c): _model_runs(c, slots, times) for c in cells}
    groups: dict[FitKey, list[Pair]] = {}
    for c, base in pairs:
        groups.setdefault((c.concurrency, c.spec_mode, c.metric), []).append((c, base))
    fits = _fits(groups, model_runs, baseline)
    est: dict[int, LogRatio | None] = {}
    own_s2: dict[int, float] = {}
    units: dict[NoiseKey, list[tuple[float, float]]] = {}
    for key, members in groups.items():
        fit = fits.get(key)
        if fit is not None:
            units.setdefault((key[2], key[1], key[0]), []).append((fit.s2, fit.df))
        for c, base in members:
            e = fit.estimates.get(c.arm) if fit is not None else None
            if e is not None:
                own_s2[id(c)] = fit.s2
            else:
                e = log_ratio(_runs(c), _runs(base))
                if e is not None and e.method == "blocked":
                    own_s2[id(c)] = e.raw_noise_sd ** 2 / 2.0
                    units.setdefault((key[2], key[1], key[0]), []).append((own_s2[id(c)], e.df))
            est[id(c)] = e
    return est, own_s2, fits, units


def _moderated(pairs: list[Pair], est: dict[int, LogRatio | None], own_s2: dict[int, float],
               units: dict[NoiseKey, list[tuple[float, float]]],
               metrics: dict) -> tuple[dict[NoiseKey, Prior], list[str]]:
    """Steps 2 and 3, in place on ``est``: moderation, only among variances whose noise is
    alike: the same metric, spec mode and concurrency (noise grows with concurrency and differs
    with the speculator, and borrowing a quiet cell's noise made a noisy cell's A/A false calls
    7.7-10.1 %, issue 33); a fitted cell is one variance already pooled over its arms, so this
    borrows only among the paired fallbacks of one cell. Then the floor: the measurement's
    resolution, nothing borrowed. Returns the priors and a sentence per moderated cell."""
    priors = {k: fit_prior(v) for k, v in units.items()}
    pooled_text: list[str] = []
    for (key, mode, conc), v in sorted(units.items()):
        prior = priors[(key, mode, conc)]
        if prior.df > 0:
            pooled_text.append(
                f"{metrics[key].label} (concurrency {conc}, {mode}): each comparison's noise is "
                f"moderated toward the cell's {prior.units} comparisons' (prior "
                f"{math.sqrt(prior.s2) * 100:.2g} % per run on {prior.df:.1f} df)")
    for c, base in pairs:
        e = est[id(c)]
        if e is None:
            continue
        k = (c.metric, c.spec_mode, c.concurrency)
        if id(c) in own_s2:
            e = moderate(e, own_s2[id(c)], priors.get(k, Prior(0.0, 0.0, 0)))
        est[id(c)] = floor_noise(e, RESOLUTION_SD)
    return priors, pooled_text


def _row(c: Cell, base: Cell, e: LogRatio | None, m, fits: dict[FitKey, CellFit],
         warnings: list[ReportWarning], *, baseline: str, aa_arms: tuple[str, ...],
         confidence: float, min_effect_pct: float, equivalence_pct: float) -> dict:
    """Step 4 for one pair: its verdict, role, p-values and Welch's unpaired reading; the
    floor's and the unpartnered runs' warnings appended to ``warnings``."""
    welch = welch_log_ratio(c.values, base.values)
    if welch is not None:
        welch = floor_noise(welch, RESOLUTION_SD)
    verdict = call(e, time_metric=m.unit == "ms", confidence=confidence,
                         min_effect_pct=min_effect_pct, equivalence_pct=equivalence_pct)
    where = (c.arm, c.concurrency, c.spec_mode, c.metric)
    if e is not None and e.floored:
        spread = ("no spread between the runs" if e.raw_noise_sd < 1e-9 else
                  f"run-to-run noise {e.raw_noise_sd / math.sqrt(2) * 100:.2g} % per run")
        warnings.append(ReportWarning(
            f"{spread}: noise floored at {e.floor_sd * 100:.2g} % per run (the measurement's "
            "resolution), so the interval is not narrower than that", *where,
            cause=f"run-to-run noise below the measurement's resolution: floored at "
                  f"{e.floor_sd * 100:.2g} % per run, so the interval is not narrower than "
                  "that", detail=m.label))
    if e is not None and e.method in ("model", "blocked") and e.dropped:
        warnings.append(ReportWarning(
            f"{e.dropped} run{'s' if e.dropped != 1 else ''} without a partner in "
            f"{'its' if e.dropped == 1 else 'their'} round left out of the blocked comparison "
            f"with {baseline}", *where,
            cause=f"runs without a partner in their round left out of the blocked "
                  f"comparison with {baseline}", detail=f"{m.label} {e.dropped}"))
    role = ("check" if c.arm in aa_arms else
            "primary" if c.metric == headline_metric(c.concurrency, c.spec_mode) else "secondary")
    fit = fits.get((c.concurrency, c.spec_mode, c.metric))
    return {
        "c": c, "base": base, "est": e, "welch": welch, "verdict": verdict, "role": role,
        "fit": fit if e is not None and e.method == "model" else None,
        "p": None if e is None else e.p_value(),
        "tost": None if e is None else e.tost_p_value(equivalence_pct),
    }


def _holm_family(rows: list[dict], *, alpha: float) -> None:
    """The family-wise rule over the primary comparisons, in place: each row's Holm-adjusted p
    of the test behind its verdict, and whether it survives at ``alpha``."""
    family = [r for r in rows if r["role"] == "primary" and r["p"] is not None]
    adj_diff, adj_equiv = paired_holm([r["p"] for r in family], [r["tost"] for r in family])
    for r, a_diff, a_equiv in zip(family, adj_diff, adj_equiv):
        if is_difference(r["verdict"]):
            r["p_holm"], r["survives"] = a_diff, a_diff < alpha
        elif r["verdict"] == "equivalent":
            r["p_holm"], r["survives"] = a_equiv, a_equiv < alpha
        else:
            r["p_holm"] = min(a_diff, a_equiv)


def _comparison(r: dict, baseline: str, *, confidence: float, min_effect_pct: float,
                equivalence_pct: float) -> Comparison:
    c, base, e, welch = r["c"], r["base"], r["est"], r["welch"]
    interval = None if e is None else e.interval_pct(confidence)
    return Comparison(
        arm=c.arm, baseline=baseline, concurrency=c.concurrency, spec_mode=c.spec_mode,
        metric=c.metric,
        ratio=e.ratio if e is not None else ratio_of_medians(c.values, base.values),
        pct=e.pct if e is not None else ratio_of_medians(c.values, base.values) * 100 - 100,
        interval=interval, confidence=confidence, verdict=r["verdict"],
        method=e.method if e is not None else "none", n_arm=c.n, n_baseline=base.n,
        n_blocks=0 if e is None else e.n_blocks, dropped=0 if e is None else e.dropped,
        median_ratio=ratio_of_medians(c.values, base.values),
        mde_pct=None if e is None else e.mde_pct(confidence),
        noise_pct=None if e is None else e.noise_sd * 100.0,
        noise_floored=bool(e is not None and e.floored),
        p_value=r["p"], tost_p=r["tost"], p_holm=r.get("p_holm"), survives=r.get("survives"),
        equivalence_pct=equivalence_pct, min_effect_pct=min_effect_pct,
        unpaired_interval=None if welch is None else welch.interval_pct(confidence),
        unpaired_mde_pct=None if welch is None else welch.mde_pct(confidence),
        role=r["role"], df=None if e is None else e.df, se=None if e is None else e.se,
        design="duet" if c.in_duets and base.in_duets else "sequential",
        prior_df=0.0 if e is None else e.prior_df,
        time_model=fit.model if (fit := r["fit"]) is not None else None,
        rho=fit.rho if fit is not None else None,
    )
