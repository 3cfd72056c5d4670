"""Power of a design: the runs a target effect needs and the effect a design detects, in the
design the report fits (its df)."""

from __future__ import annotations

import math

from scipy import stats as _sp

from e2e.analysis.estimators.estimates import DEFAULT_POWER, Method, mde_log, median_unbiased

__all__ = ["runs_needed", "design_df", "detectable_effect", "duet_se_factor", "duet_shape",
           "PLAN_NOISE_LEVEL", "upper_noise"]

PLAN_NOISE_LEVEL = 0.7
"""``e2e plan`` plans from the upper confidence bound of the test's standard error at this
level (where the interval, not the report's minimum effect, decides), so its stated power
holds with at least this confidence there; on average over calibrations the power at the
printed effect is 83-88 % for designs of 3-12 rounds (docs/measurements/plan-power.md)."""


def _exp(x: float) -> float:
    """exp(x), inf where it overflows (a ratio of an absurd run's figures: 1e308 ms beside 10)."""
    return math.exp(x) if x < 709.0 else math.inf


def upper_noise(noise_sd: float, df: float, *, level: float = PLAN_NOISE_LEVEL) -> float:
    """One-sided upper confidence bound of σ from a sample sd on ``df`` degrees of freedom:
    s·√(df / χ²_{df, 1−level}) (df·s²/σ² is χ²_df under normal noise), so σ is at most this with
    probability ``level``. The noise itself without degrees of freedom (nothing to bound)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not df > 0 or math.isinf(df):
        return noise_sd
    return noise_sd * math.sqrt(df / float(_sp.chi2.ppf(1.0 - level, df)))


def duet_shape(method: Method, arms: int, slots: int) -> tuple[int, int, int] | None:
    """(k, b, λ) of one round of ``plan.duet_rounds`` where the comparison is the duet model
    (``method`` "model", ``slots`` ≥ 2): duets of k = min(slots, arms) sides, b = C(arms, k)
    duets (every k-subset of the arms once), each pair of arms together in λ =
    C(arms − 2, k − 2) of them. None for one server at a time."""
    if method != "model" or slots < 2 or arms < 2:
        return None
    k = min(slots, arms)
    return k, math.comb(arms, k), math.comb(arms - 2, k - 2)


def duet_se_factor(arms: int, slots: int) -> float:
    """The standard error of an arm's contrast in one round of duets, in units of the noise
    (the sd of one arm run's log ratio to one baseline run of the same block, √2 σ): the
    balanced incomplete block design's intra-block variance 2kσ²/(λ·arms) per round (Yates),
    so √(k / (λ·arms)). 1 where one duet holds every arm (the sequential round's), 1/√2 for
    4 arms in duets of 2 (each arm meets the baseline once and the other two arms, which met
    the baseline too, once each)."""
    k, _, lam = duet_shape("model", arms, max(slots, 2))
    return math.sqrt(k / (lam * arms))


def _se_factor(method: Method, arms: int, slots: int) -> float:
    return 1.0 if duet_shape(method, arms, slots) is None else duet_se_factor(arms, slots)


def runs_needed(
    noise_sd: float,
    target_effect_pct: float,
    *,
    method: Method = "blocked",
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
    max_runs: int = 1000,
    arms: int = 2,
    prior_df: float = 0.0,
    slot: bool = False,
    noise_df: float | None = None,
    slots: int = 0,
) -> int | None:
    """Fewest reported runs per arm whose MDE (``mde_log``) is at most ``target_effect_pct``.

    ``noise_sd`` is the sd of the log ratio of one arm run to one baseline run (a
    ``LogRatio.noise_sd``, e.g. from an A/A arm of a calibration); se = s/sqrt(n) in every
    design. Degrees of freedom as the test uses them: blocked (paired t) n − 1; model (``cell_model``
    over ``arms`` arms in n complete rounds) (arms − 1)(n − 1), one less with the slot term;
    Welch (equal noise on both sides) 2n − 2; plus ``prior_df`` borrowed by moderation.
    ``slots`` ≥ 2: the model's runs are in duets of that many slots (``[duet]``), n is rounds of
    ``plan.duet_rounds`` (every ``min(slots, arms)``-subset of the arms once a round), se =
    ``duet_se_factor`` · s/sqrt(n) and the df those duets leave (``design_df``). ``noise_df``:
    the df the noise was measured on; the noise is then made median-unbiased as in
    ``LogRatio.mde_pct`` (so the noise table's MDE and its runs needed agree). None when even
    ``max_runs`` is not enough."""
    if noise_sd <= 0:
        raise ValueError("noise_sd must be > 0 (floor it; see floor_noise)")
    if target_effect_pct <= 0:
        raise ValueError("target_effect_pct must be > 0")
    target = math.log(1.0 + target_effect_pct / 100.0)
    if noise_df is not None:
        noise_sd *= median_unbiased(noise_df)
    factor = _se_factor(method, arms, slots)
    for n in range(2, max_runs + 1):
        df = design_df(n, method=method, arms=arms, slot=slot, slots=slots) + prior_df
        if df <= 0:
            continue
        if mde_log(factor * noise_sd / math.sqrt(n), df, confidence=confidence,
                   power=power) <= target:
            return n
    return None


def design_df(rounds: int, *, method: Method = "blocked", arms: int = 2, slot: bool = False,
              slots: int = 0) -> float:
    """Residual degrees of freedom of a comparison at ``rounds`` complete rounds (see
    ``runs_needed``); in duets (``slots`` ≥ 2, the model) the rounds' b duets of k runs leave
    rounds·b·(k − 1) − (arms − 1), one less with the slot term."""
    shape = duet_shape(method, arms, slots)
    if shape is not None:
        k, b, _ = shape
        return float(rounds * b * (k - 1) - (arms - 1) - (1 if slot else 0))
    if method == "model":
        return float((arms - 1) * (rounds - 1) - (1 if slot else 0))
    if method == "blocked":
        return float(rounds - 1)
    return float(2 * rounds - 2)


def detectable_effect(noise_sd: float, rounds: int, *, method: Method = "blocked",
                      confidence: float = 0.95, power: float = DEFAULT_POWER, arms: int = 2,
                      prior_df: float = 0.0, slot: bool = False,
                      noise_df: float | None = None, slots: int = 0) -> float | None:
    """The effect (in %) a design detects with ``power``: the MDE at ``rounds`` complete rounds
    with the df of ``design_df`` (+ ``prior_df``); ``noise_df`` and ``slots`` as in
    ``runs_needed``. None without degrees of freedom."""
    if noise_df is not None:
        noise_sd *= median_unbiased(noise_df)
    df = design_df(rounds, method=method, arms=arms, slot=slot, slots=slots) + prior_df
    if df <= 0:
        return None
    factor = _se_factor(method, arms, slots)
    return (_exp(mde_log(factor * noise_sd / math.sqrt(rounds), df, confidence=confidence,
                             power=power)) - 1.0) * 100.0
