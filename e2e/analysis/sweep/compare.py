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
    # each cell's runs as the model reads them, and as the fallbacks' (block, value) pairs
    model_runs = {id(c): _model_runs(c, slots, times or {}) for c in cells}
    blocked = {id(c): _runs(c) for c in cells}
    warnings: list[ReportWarning] = []
    pairs: list[tuple[Cell, Cell]] = []
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
    metrics = {c.metric: metric(c.metric) for c, _ in pairs}

    # 1. one model per (concurrency, spec mode, metric), else the fallbacks
    groups: dict[tuple[int, str, str], list[tuple[Cell, Cell]]] = {}
    for c, base in pairs:
        groups.setdefault((c.concurrency, c.spec_mode, c.metric), []).append((c, base))
    est: dict[int, LogRatio | None] = {}
    own_s2: dict[int, float] = {}
    fits: dict[tuple[int, str, str], CellFit] = {}
    units: dict[tuple[str, str, int], list[tuple[float, float]]] = {}  # (metric, mode, conc)
    group_runs: dict[tuple[int, str, str], list[ModelRun]] = {}
    for key, members in groups.items():
        runs = list(model_runs[id(members[0][1])])
        for c, _ in members:
            runs += model_runs[id(c)]
        group_runs[key] = runs
        if len(runs) > 2 and (fit := cell_model(runs, baseline)) is not None:
            fits[key] = fit
    # the host's level over time: one AR(1) correlation for the folder, from its headline cells
    rho, rho_source, plausible = folder_rho([f for (conc, mode, m), f in fits.items()
                                                   if m == headline_metric(conc, mode)])
    for key, members in groups.items():
        fit = fits.pop(key, None)
        if fit is not None and fit.design is not None and plausible:
            fit = cell_model(group_runs[key], baseline, rho=rho, rho_source=rho_source,
                                   plausible=plausible)
        if fit is not None:
            fits[key] = fit
            units.setdefault((key[2], key[1], key[0]), []).append((fit.s2, fit.df))
        for c, base in members:
            e = fit.estimates.get(c.arm) if fit is not None else None
            if e is not None:
                own_s2[id(c)] = fit.s2
            else:
                e = log_ratio(blocked[id(c)], blocked[id(base)])
                if e is not None and e.method == "blocked":
                    own_s2[id(c)] = e.raw_noise_sd ** 2 / 2.0
                    units.setdefault((key[2], key[1], key[0]), []).append((own_s2[id(c)], e.df))
            est[id(c)] = e

    # 2. moderation, only among variances whose noise is alike: the same metric, spec mode and
    # concurrency (noise grows with concurrency and differs with the speculator, and borrowing
    # a quiet cell's noise made a noisy cell's A/A false calls 7.7-10.1 %, issue 33); a fitted
    # cell is one variance already pooled over its arms, so this borrows only among the paired
    # fallbacks of one cell. 3. the floor: the measurement's resolution, nothing borrowed.
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

    alpha = 1.0 - confidence
    rows: list[dict] = []
    for c, base in pairs:
        e = est[id(c)]
        welch = welch_log_ratio(c.values, base.values)
        if welch is not None:
            welch = floor_noise(welch, RESOLUTION_SD)
        m = metrics[c.metric]
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
        rows.append({
            "c": c, "base": base, "est": e, "welch": welch, "verdict": verdict, "role": role,
            "fit": fit if e is not None and e.method == "model" else None,
            "p": None if e is None else e.p_value(),
            "tost": None if e is None else e.tost_p_value(equivalence_pct),
        })

    family = [r for r in rows if r["role"] == "primary" and r["p"] is not None]
    adj_diff, adj_equiv = paired_holm([r["p"] for r in family], [r["tost"] for r in family])
    for r, a_diff, a_equiv in zip(family, adj_diff, adj_equiv):
        if is_difference(r["verdict"]):
            r["p_holm"], r["survives"] = a_diff, a_diff < alpha
        elif r["verdict"] == "equivalent":
            r["p_holm"], r["survives"] = a_equiv, a_equiv < alpha
        else:
            r["p_holm"] = min(a_diff, a_equiv)

    comparisons: list[Comparison] = []
    for r in rows:
        c, base, e, welch = r["c"], r["base"], r["est"], r["welch"]
        interval = None if e is None else e.interval_pct(confidence)
        comparisons.append(Comparison(
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
        ))
    target = equivalence_pct if target_effect_pct is None else target_effect_pct
    return (comparisons, noise_rows(rows, fits, aa_arms, confidence, target, priors), warnings,
            pooled_text)
