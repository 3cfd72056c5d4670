"""The report's noise table (``noise_rows``): per (concurrency, spec mode, metric), the noise
the comparisons used, where it came from, its MDE, the runs a target effect needs and, where
the runs recorded windows, where in a run the noise lives (``components``)."""

from __future__ import annotations

from collections import Counter

from e2e.analysis.estimators.model import CellFit
from e2e.analysis.estimators.moderation import Prior
from e2e.analysis.estimators.power import runs_needed
from e2e.analysis.estimators.components import components
from e2e.analysis.sweep.summary import NoiseRow

__all__ = ["noise_rows"]


_RHO_FROM = {"calibration": "a guess: e2e's 2-core development VM's calibration, the folder too "
                            "small for its own"}
"""How the report names where the AR(1) correlation came from: the calibration's is not this
host's, and says so."""


def noise_rows(rows: list[dict], fits: dict[tuple[int, str, str], CellFit],
                aa_arms: tuple[str, ...], confidence: float, target: float,
                priors: dict[tuple[str, str, int], Prior]) -> tuple[NoiseRow, ...]:
    """Per (concurrency, spec mode, metric): the noise the comparisons used (after moderation
    and the floor; the same for every arm of a fitted cell), with the MDE and df of the A/A
    arm's comparison when there is one, else of the cell's first comparison, and the reported
    runs whose MDE in the same design (arms, slot term, prior df) is ``target``."""
    out: list[NoiseRow] = []
    keys: list[tuple[int, str, str]] = []
    for r in rows:
        k = (r["c"].concurrency, r["c"].spec_mode, r["c"].metric)
        if k not in keys:
            keys.append(k)
    for conc, mode, key in keys:
        here = [r for r in rows if (r["c"].concurrency, r["c"].spec_mode, r["c"].metric) == (conc, mode, key)
                and r["est"] is not None]
        if not here:
            continue
        aa = [r for r in here if r["c"].arm in aa_arms]
        pick = aa[0] if aa else here[0]
        e, w = pick["est"], pick["welch"]
        fit = fits.get((conc, mode, key))
        prior = priors.get((key, mode, conc), Prior(0.0, 0.0, 0))
        if e.method == "model" and fit is not None:
            source = (f"model residuals of {fit.arms} arms, {fit.runs} runs"
                      + (", slot term" if fit.slot else "")
                      + (", recorded interference as a covariate" if fit.covariate else "")
                      + (f", AR(1) over time ρ {fit.rho:.2f} ({_RHO_FROM.get(fit.rho_source, fit.rho_source)}; GLS)"
                         if fit.model == "ar1-gls" else "")
                      + (f", standard errors honest for ρ {fit.honest_for[0]:g}–"
                         f"{fit.honest_for[1]:g}" if fit.honest_for else "")
                      + (f" + {prior.df:.1f} df from the cell's {prior.units} comparisons" if e.prior_df else ""))
            arms_n = fit.arms
        else:
            source = f"{pick['c'].arm} vs its baseline ({e.method})" + (
                f" + {prior.df:.1f} df from the cell's {prior.units} comparisons" if e.prior_df else "")
            arms_n = 2
        if aa:
            source = f"A/A arm {pick['c'].arm}: " + source
        n = e.n_blocks if e.method != "welch" else min(e.n_arm, e.n_baseline)
        method = e.method if e.method in ("model", "blocked") else "welch"
        cells = {id(c): c for r in here for c in (r["c"], r["base"])}.values()
        slots = _duet_sides(cells) if method == "model" else 0
        if slots:
            source += f", in duets of {slots}"
            n = len({b[0] for c in cells for b in c.blocks()})  # rounds, not duets met in
        run_s2, run_df = ((fit.s2, fit.df) if e.method == "model" and fit is not None
                          else (e.raw_noise_sd ** 2 / 2.0, e.df))
        parts = (components([w for c in cells for w in c.windows], run_s2, run_df)
                 if any(c.windows for c in cells) else None)
        out.append(NoiseRow(
            concurrency=conc, spec_mode=mode, metric=key, noise_pct=e.noise_sd * 100.0, source=source,
            n_blocks=n, mde_pct=e.mde_pct(confidence),
            unpaired_mde_pct=None if (w is None or not aa) else w.mde_pct(confidence),
            target_pct=target,
            runs_for_target=runs_needed(e.noise_sd, target, method=method, confidence=confidence,
                                              arms=arms_n, prior_df=e.prior_df,
                                              slot=bool(fit is not None and fit.slot
                                                        and e.method == "model"),
                                              noise_df=e.df, slots=slots),
            floored=e.floored, df=e.df, prior_df=e.prior_df, arms_in_model=arms_n, method=method,
            slot=bool(fit is not None and fit.slot and e.method == "model"), components=parts,
            time_model=fit.model if fit is not None and e.method == "model" else None,
            rho=fit.rho if fit is not None and e.method == "model" else None, slots=slots,
            se=e.se))
    return tuple(out)


def _duet_sides(cells) -> int:
    """The sides of the duets the cells' runs were measured in (the most common block size;
    0 when some run was measured alone)."""
    if not cells or not all(c.in_duets for c in cells):
        return 0
    sizes = Counter(b for c in cells for b in c.blocks())
    return Counter(sizes.values()).most_common(1)[0][0] if sizes else 0
