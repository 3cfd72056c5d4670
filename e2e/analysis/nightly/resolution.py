"""What a nightly design can see: the change a night resolves and the rounds a threshold needs
(pure functions; ``e2e nightly --dry-run`` prints them, the summary states them).

A night of a relative cell is judged against its ratio's history (``judge_night``): the
variance of tonight's mean against the history's is, with n history nights of k rounds and
tonight's K rounds (``HistoryFit.var``),

    V(K) = σ_b² + σ²/K + (σ_b² + σ²/k) / n

σ the sd of one round's (duet's) log ratio around its night's level, σ_b the night part: what
moves from night to night and more rounds do not average away. A night **resolves** a change
T when it calls T with ``power`` by its last look (``power_at``: the judge's own levels at each
look, the night's alpha over its judged cells spent over its looks) — and then an unchanged
night's interval, whose end is nearer than the call's boundary, says "no change beyond T" at
least as often. σ and σ_b come from the ratio's history (its nights' pooled within-night variance and
the spread of their means beyond it, the ANOVA estimates) or, before it has two nights, from
the host's measured noise below.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from e2e.analysis.nightly.judge import BLIND_NIGHTS, HistoryFit, night_look
from e2e.results import Looks

__all__ = ["Noise", "HOST_DUETS", "HOST_ONE_AT_A_TIME", "noise_of", "power_at",
           "resolution", "rounds_needed", "MAX_ROUNDS", "design_lines"]

MAX_ROUNDS = 96
"""The most reported rounds a night is planned with (``rounds_needed``)."""


@dataclass(frozen=True)
class Noise:
    """A ratio cell's noise on the ln scale: ``run_sd`` one round's (duet's) around its
    night's level, ``night_sd`` the night part; ``source`` says where they come from."""

    run_sd: float
    night_sd: float
    source: str


HOST_DUETS = Noise(0.045, 0.01, "a guess, not this host: duets measured on e2e's 2-core "
                   "development VM (docs/measurements/nights.md: 4.1-5.1 % a duet, a night part "
                   "of 0-2 %); the plan follows this host's own nights once the ratio's history "
                   "holds two")
"""A guess for a host with no history yet, said as one wherever it is used: tonight's build ÷
the reference in a duet on e2e's 2-core development VM (both servers at once, four swapping windows):
per-duet sd rms 4.1 % over sets 4-5 and 5.1 % over sets 7-8; the nights' means spread about
2 % beyond their duets in sets 4-5 and not at all in sets 7-8."""
HOST_ONE_AT_A_TIME = Noise(0.178, 0.01, "a guess, not this host: servers one at a time on "
                           "e2e's 2-core development VM (DESIGN.md: a fresh server's level sd "
                           "17.6 %, consecutive servers correlated 0.48, so the sd of a round's "
                           "ratio is √(2·(1 − 0.48))·17.6 %); the plan follows this host's own "
                           "nights once the ratio's history holds two")
"""A guess, as ``HOST_DUETS``: tonight's build ÷ the reference run one after the other in a round: the host's level
moves between the two servers (sd 17.6 % a server, lag-1 correlation 0.48, DESIGN.md)."""


def noise_of(nights: Sequence[Sequence[float]], source: str) -> Noise | None:
    """The noise a ratio's history nights (each its ratios) measured: σ² the pooled
    within-night variance of ln ratio, σ_b² = max(0, s²_m − σ²·h) (s²_m the variance of the
    nights' mean ln ratios, h the mean of 1/k). None without two nights and within-night
    spread."""
    logs = [np.log(np.asarray(v, dtype=float)) for v in nights if len(v)]
    spread = [x for x in logs if len(x) >= 2]
    df = sum(len(x) - 1 for x in spread)
    if len(logs) < 2 or df < 1:
        return None
    msw = float(sum(((x - x.mean()) ** 2).sum() for x in spread) / df)
    s2_m = float(np.var([x.mean() for x in logs], ddof=1))
    h = float(np.mean([1.0 / len(x) for x in logs]))
    return Noise(math.sqrt(msw), math.sqrt(max(s2_m - msw * h, 0.0)), source)


def _fit(noise: Noise, nights: int, k: int) -> HistoryFit:
    """The history a design expects: ``nights`` nights of ``k`` rounds at ``noise``."""
    s2 = noise.run_sd ** 2
    return HistoryFit(d=0.0, n=nights, s2_m=noise.night_sd ** 2 + s2 / k, msw=s2, df_w=1e9,
                      h=1.0 / k)


DRAWS = 20000
"""Simulated nights per power statement (fixed seed: the same answer every time)."""


@dataclass(frozen=True)
class _Design:
    """A design's levels and its statistic's joint law, ready to read power at any change."""

    call: np.ndarray    # the t quantile each look calls at
    show: np.ndarray    # the t quantile of each look's interval end
    e: np.ndarray       # DRAWS x looks: tonight's mean minus the history's, no change
    se: np.ndarray      # DRAWS x looks: the standard error each draw's history estimates


@functools.lru_cache(maxsize=256)
def _design(noise: Noise, looks: Looks, nights: int, alpha: float, cells: int,
            confidence: float) -> _Design:
    fit = _fit(noise, nights, looks.first)
    sched = looks.schedule()
    lv = [night_look(fit, k, looks, alpha=alpha / max(cells, 1), confidence=confidence)
          for k in sched]
    var = np.array([fit.var(k) for k in sched])
    df = fit.df(sched[0])
    rng = np.random.default_rng(20261205)
    e = np.empty((DRAWS, len(sched)))
    e[:, -1] = rng.standard_normal(DRAWS) * math.sqrt(var[-1])
    for j in range(len(sched) - 2, -1, -1):  # backwards: cov(e_i, e_j) = var of the later
        e[:, j] = e[:, j + 1] + rng.standard_normal(DRAWS) * math.sqrt(max(var[j] - var[j + 1], 0))
    scale = np.sqrt(rng.chisquare(df, DRAWS) / df)[:, None]     # s_m / σ_m, shared
    return _Design(call=np.array([student_t.isf(x.call_level, df) for x in lv]),
                   show=np.array([student_t.isf(x.show_level, df) for x in lv]),
                   e=e, se=np.sqrt(var)[None, :] * scale)


def _power(d: _Design, change_pct: float, threshold: float) -> float:
    theta = math.log1p(change_pct / 100.0)
    x = theta + d.e
    call = (x / d.se >= d.call[None, :]) & (np.expm1(x) * 100.0 >= threshold / 2.0)
    stop = call | (np.expm1(x + d.se * d.show[None, :]) * 100.0 <= threshold)
    first = np.where(stop.any(axis=1), stop.argmax(axis=1), d.e.shape[1] - 1)
    return float(call[np.arange(len(first)), first].mean())


def power_at(change_pct: float, noise: Noise, looks: Looks, *, nights: int, alpha: float,
             cells: int = 1, confidence: float = 0.95, threshold: float | None = None) -> float:
    """The chance that a night of this design calls a true change of ``change_pct`` % by its
    last look: the judge's own levels (``night_look`` at each look), its statistic's
    joint law (tonight's mean after k rounds against the history's, cov = V(later look), the
    history's s²_m shared by every look as a scaled χ² on n − 1 df), a night stopping early
    where its interval shows no change beyond ``threshold`` (default: the change). Simulated
    (``DRAWS`` nights, fixed seed)."""
    d = _design(noise, looks, nights, alpha, max(cells, 1), confidence)
    return _power(d, change_pct, change_pct if threshold is None else threshold)


def resolution(noise: Noise, looks: Looks, *, nights: int, alpha: float, cells: int = 1,
               confidence: float = 0.95, power: float = 0.8) -> float | None:
    """The change in % a night of this design calls with ``power`` by its last look
    (``looks``: rounds a night), its history ``nights`` long, the night's ``alpha`` over
    ``cells`` judged cells (``power_at``, the threshold taken as the change); None with fewer
    than 2 nights or beyond 400 %."""
    if nights < 2:
        return None
    d = _design(noise, looks, nights, alpha, max(cells, 1), confidence)
    lo, hi = 0.01, 400.0
    if _power(d, hi, hi) < power:
        return None
    while hi - lo > 0.02:  # bisection on ln(1 + change)
        mid = math.expm1((math.log1p(lo / 100) + math.log1p(hi / 100)) / 2) * 100
        lo, hi = (mid, hi) if _power(d, mid, mid) < power else (lo, mid)
    return hi


def rounds_needed(threshold: float, noise: Noise, looks: Looks, *, nights: int, alpha: float,
                  cells: int = 1, confidence: float = 0.95, power: float = 0.8) -> int | None:
    """The fewest reported rounds a night's last look needs (its first and step as
    ``looks``) to resolve ``threshold`` %; None when even ``MAX_ROUNDS`` do not (the night
    part alone is too large for this many history nights)."""
    kw = dict(nights=nights, alpha=alpha, cells=cells, confidence=confidence, power=power)
    step = max(looks.step, 1)
    top = looks.first + step * ((MAX_ROUNDS - looks.first) // step)
    best = resolution(noise, Looks(looks.first, max(top - looks.first, 1), top), **kw)  # the most
    if best is None or best > threshold:
        return None
    last = looks.first
    while last <= MAX_ROUNDS:
        got = resolution(noise, Looks(looks.first, step, last), **kw)
        if got is not None and got <= threshold:
            return last
        last += step
    return None


def design_lines(*, cell: str, threshold: float, looks: Looks, runs_of, nights_full: int,
                 nights_now: int, alpha: float, cells: int, noise: Noise,
                 confidence: float = 0.95, one_at_a_time: str | None = None) -> list[str]:
    """What a night of this design resolves, as lines for the dry run and the summary:
    ``cell`` the judged ratio cell's label, ``runs_of(k)`` the plan's runs (warmups
    included) for k reported rounds, ``nights_full`` the history's length once full
    (``history_nights``) and ``nights_now`` the nights it holds tonight, ``noise`` where the
    plan comes from; ``one_at_a_time``: why the night runs one server at a time (then what it
    costs against duets is said)."""
    kw = dict(alpha=alpha, cells=cells, confidence=confidence)
    full = resolution(noise, looks, nights=nights_full, **kw)
    now = resolution(noise, looks, nights=nights_now, **kw) if nights_now < nights_full else full
    last = looks.schedule()[-1]

    def pct(x: float | None) -> str:
        return f"{x:.1f} %" if x is not None else "nothing"

    lost = ""
    if nights_now >= nights_full and (full is None or full > threshold):
        lost = (f"its history is full ({nights_full} nights, no later night joins it) and no "
                f"longer resolves the {threshold:g} % threshold ({pct(full)} now): a change of "
                "the threshold's size can go uncalled, and a night that sees none can end "
                f"undecided (exit 3; 4 after {BLIND_NIGHTS} in a row): pin a baseline night "
                "after a quiet stretch (--baseline-night: the history restarts there), or see "
                "below. ")
    text = (f"{cell}: {lost}{'P' if lost else 'p'}lanned from {noise.source} (a round's sd "
            f"{noise.run_sd * 100:.1f} %, a night part {noise.night_sd * 100:.1f} %): with its "
            f"history full ({nights_full} nights) a night resolves {pct(full)} by {last} rounds "
            f"(called in 4 of 5 such nights at its last look; alpha {alpha:g} a night over "
            f"{cells} judged cell(s))")
    if nights_now < nights_full:
        text += (f"; with the {nights_now} night(s) it holds now, " + (
            f"{now:.1f} %" if now is not None else "nothing (it is judged from 3 nights on)"))
    need = rounds_needed(threshold, noise, looks, nights=nights_full, **kw)
    if full is not None and full <= threshold:
        text += f". The {threshold:g} % threshold is resolved."
    elif need is not None:
        text += (f". The {threshold:g} % threshold needs {need} rounds a night (max_runs = "
                 f"{runs_of(need)}), or a larger threshold.")
    else:
        floor = f": give a threshold of at least {full:.0f} %" if full is not None else ""
        text += (f". No number of rounds a night resolves the {threshold:g} % threshold (the "
                 f"night part alone is too large){floor}.")
    lines = [text]
    if one_at_a_time:
        duets = resolution(HOST_DUETS, looks, nights=nights_full, **kw)
        lines.append(f"One server at a time ({one_at_a_time}): a round's ratio then carries the "
                     "host's drift between its two servers; on e2e's 2-core development VM a night "
                     f"resolves {resolution(HOST_ONE_AT_A_TIME, looks, nights=nights_full, **kw):.0f} %"
                     f" so, against {duets:.1f} % in duets.")
    return lines
