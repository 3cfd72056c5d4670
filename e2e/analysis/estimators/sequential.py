"""Sequential looks of ``--until-settled``: exact group-sequential boundaries of a Lan–DeMets
spending function for the information actually reached, looks that persist (``look_at``).

Each look k after I_k reported rounds reads every comparison's statistic Z_k = estimate / se.
Under no change, Z_1, Z_2, … are jointly normal with corr(Z_i, Z_j) = √(I_i / I_j) (the score
process has independent increments), so the boundary c_k is the value for which the chance of
crossing first at look k is exactly the spending function's increment α(t_k) − α(t_{k−1}),
t = I / I_max (Lan & DeMets 1983); the chance is computed by recursive numerical integration
(Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19), not bounded by a union
(which spent 3.3–3.9 % of a 5 % plan). The t statistics of few-df tests are read at the
boundary's nominal level 2(1 − Φ(c_k)) (the "significance level approach", Jennison & Turnbull
§11.5).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize as _opt
from scipy import stats as _sp

from e2e.analysis.estimators.estimates import DEFAULT_EQUIVALENCE_PCT, LogRatio, _check_confidence

__all__ = ["Spending", "DEFAULT_SPENDING", "Decision", "Settlement", "Look", "spent_alpha",
           "spending_at", "boundaries", "look_at"]


Decision = Literal["difference", "equivalent", "open"]


@dataclass(frozen=True)
class Settlement:
    """What a look of ``--until-settled`` decided after a round: ``decisions`` per comparison (in input order),
    ``look_confidence`` the look's nominal confidence (its repeated confidence interval's), ``settled`` every comparison
    decided, ``stop`` settled or ``max_rounds`` reached."""

    rounds: int
    look_confidence: float
    decisions: tuple[Decision, ...]
    settled: bool
    stop: bool



Spending = Literal["pocock", "obrien-fleming"]
DEFAULT_SPENDING: Spending = "pocock"
GRID = 401
"""Points of the numerical integration over a look's continuation region (Simpson's rule; odd)."""


def spending_at(fraction: float, alpha: float, *, spending: Spending = DEFAULT_SPENDING,
                sides: int = 2) -> float:
    """Lan & DeMets' (1983) spending functions at information fraction t for a test of level
    ``alpha``: Pocock-type α·ln(1 + (e − 1)·t) (either side count), O'Brien–Fleming-type
    2 − 2Φ(z_{1−α/2} / √t) two-sided, 1 − Φ(z_{1−α} / √t) one-sided."""
    t = min(max(fraction, 0.0), 1.0)
    if t == 0.0 or alpha <= 0.0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "obrien-fleming":
        if sides == 2:
            return float(2.0 - 2.0 * _sp.norm.cdf(_sp.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))
        return float(1.0 - _sp.norm.cdf(_sp.norm.ppf(1.0 - alpha) / math.sqrt(t)))
    raise ValueError(f"unknown spending function {spending!r}")


def spent_alpha(fraction: float, *, confidence: float = 0.95,
                spending: Spending = DEFAULT_SPENDING) -> float:
    """Cumulative α of the whole family spent at information fraction ``fraction`` (reported
    rounds / planned maximum): ``spending_at`` two-sided at α = 1 − confidence. Pocock-type
    spends early (so a first look can settle a large effect), O'Brien–Fleming-type almost
    nothing early."""
    _check_confidence(confidence)
    return spending_at(fraction, 1.0 - confidence, spending=spending, sides=2)


def _simpson(lo: float, hi: float, n: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (hi - lo) / (3.0 * (n - 1))


def _crossing(points: np.ndarray, mass: np.ndarray, sd: float, b: float, sides: int) -> float:
    """P(S_k ≥ b, or ≤ −b when two-sided, and within the earlier looks' regions), S_k = the
    earlier sub-density (``points``, ``mass``) plus an N(0, sd²) increment."""
    up = float(np.dot(mass, _sp.norm.sf((b - points) / sd)))
    return up + (float(np.dot(mass, _sp.norm.cdf((-b - points) / sd))) if sides == 2 else 0.0)


def boundaries(information: Sequence[float], increments: Sequence[float], *, sides: int = 2,
               fixed: Sequence[float | None] = ()) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Group-sequential boundaries on the z scale: for looks at ``information`` (increasing,
    any units: reported rounds), c_k such that under no change the probability of crossing
    first at look k is ``increments[k]`` (|Z_k| ≥ c_k two-sided, Z_k ≥ c_k one-sided); an
    increment ≤ 0 gives c_k = ∞ (nothing spent). ``fixed[k]`` not None keeps a boundary already
    used (an earlier look's) instead of solving for it. Returns the boundaries and the exact
    probability of crossing first at each look. Method: the sub-density of the score
    S_k = Z_k √I_k on the continuation region, carried from look to look by convolution with
    the N(0, I_k − I_{k−1}) increment (Simpson's rule on ``GRID`` points; Armitage, McPherson &
    Rowe 1969)."""
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides}")
    fixed = tuple(fixed) + (None,) * (len(information) - len(fixed))
    return _boundaries(tuple(float(i) for i in information), tuple(float(a) for a in increments),
                       sides, fixed)


@functools.lru_cache(maxsize=4096)
def _boundaries(information: tuple[float, ...], increments: tuple[float, ...], sides: int,
                fixed: tuple[float | None, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    points, mass = np.zeros(1), np.ones(1)
    before = 0.0
    out: list[float] = []
    spent: list[float] = []
    for k, (info, inc) in enumerate(zip(information, increments)):
        if info <= before:
            raise ValueError(f"information must increase, got {list(information)!r}")
        sd, root = math.sqrt(info - before), math.sqrt(info)
        given = fixed[k]
        if given is not None:
            c = given
        elif inc <= 0.0:
            c = math.inf
        else:
            left = float(mass.sum())
            if inc >= left:
                c = 0.0
            else:
                c = _opt.brentq(lambda z: _crossing(points, mass, sd, z * root, sides) - inc,
                                0.0, 40.0, xtol=1e-10)
        b = c * root
        spent.append(0.0 if math.isinf(c) else _crossing(points, mass, sd, b, sides))
        out.append(c)
        far = 12.0 * root
        x, w = _simpson(-min(b, far) if sides == 2 else -far, min(b, far))
        dens = (_sp.norm.pdf((x[:, None] - points[None, :]) / sd) / sd) @ mass
        points, mass = x, w * dens
        before = info
    return tuple(out), tuple(spent)


@dataclass(frozen=True)
class Look:
    """One look of ``--until-settled``: after ``rounds`` reported rounds of at most
    ``max_rounds``, ``alpha`` of the family was spent (``cumulative`` in all so far) over
    ``comparisons`` comparisons, each tested at its own level α/m: a difference when
    |Z| ≥ ``boundary``, equivalent when both one-sided TOST statistics are ≥
    ``equivalence_boundary`` (z scale; None: nothing spent at this look, or a look recorded
    before boundaries were kept). ``confidence`` = 1 − 2(1 − Φ(boundary)): the nominal level of
    the look's repeated confidence interval."""

    rounds: int
    max_rounds: int
    alpha: float
    cumulative: float
    confidence: float
    decisions: tuple[Decision, ...]
    stop: bool
    boundary: float | None = None
    equivalence_boundary: float | None = None
    comparisons: int | None = None


def _earlier_boundary(look: Look, sides: int) -> float:
    """The z boundary an earlier look used (older looks.json: from its confidence)."""
    kept = look.boundary if sides == 2 else look.equivalence_boundary
    if kept is not None:
        return kept
    if look.alpha <= 0.0:
        return math.inf
    per = 1.0 - look.confidence  # the old rule: each comparison at α_k / m, TOST one-sided at it
    return float(_sp.norm.isf(per / 2.0 if sides == 2 else per))


def look_at(estimates: Sequence[LogRatio | None], *, rounds: int, max_rounds: int,
            earlier: Sequence[Look] = (), spent_before: float | None = None, min_rounds: int = 3,
            confidence: float = 0.95, min_effect_pct: float = 1.0,
            equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT,
            spending: Spending = DEFAULT_SPENDING) -> Look:
    """One look at the primary, non-A/A comparisons (the stopping set; m of them). Each
    comparison is a group-sequential test at level α/m (α = 1 − confidence; Bonferroni over
    the comparisons, at most one of a comparison's two null hypotheses — no change, a change
    beyond the band — being true): the difference test two-sided, each one-sided test of TOST
    one-sided, with the exact boundaries (``boundaries``) of the spending function at level
    α/m for the information reached, t = rounds / max_rounds, given the ``earlier`` looks
    (from ``looks.json``; their boundaries are kept as they were used). This look spends the
    function's value beyond what the earlier looks spent (nothing when a larger --max-runs
    lowered it below that). A comparison is a "difference" when its p-value of no change is
    below the nominal level 2(1 − Φ(c_k)) and the change is at least the minimum effect,
    "equivalent" when both TOST p-values are below 1 − Φ(e_k), else "open". Stop when all are
    decided or ``max_rounds`` is reached. Before ``min_rounds`` nothing is spent.

    ``spent_before`` without ``earlier`` (a caller that kept no looks): the earlier looks'
    boundaries are unknown, so this look's increment is used as its own nominal level (the
    union bound: valid, conservative)."""
    if not 2 <= min_rounds <= max_rounds:
        raise ValueError(f"need 2 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}")
    _check_confidence(confidence)
    m = max(len(estimates), 1)
    alpha = 1.0 - confidence
    earlier = [k for k in earlier if k.rounds < rounds]
    recorded = earlier[-1].cumulative if earlier else (spent_before or 0.0)
    alpha_k = 0.0
    if rounds >= min_rounds:
        alpha_k = max(0.0, spent_alpha(rounds / max_rounds, confidence=confidence,
                                       spending=spending) - recorded)
    c = e = math.inf
    if alpha_k > 0.0 and (earlier or not spent_before):
        info = [float(k.rounds) for k in earlier] + [float(rounds)]
        per_two = alpha_k / m
        two, _ = boundaries(info, [0.0] * len(earlier) + [per_two], sides=2,
                            fixed=[_earlier_boundary(k, 2) for k in earlier])
        c = two[-1]
        one_target = spending_at(rounds / max_rounds, alpha / m, spending=spending, sides=1)
        fixed1 = [_earlier_boundary(k, 1) for k in earlier]
        _, spent1 = boundaries(info[:-1], [0.0] * len(earlier), sides=1, fixed=fixed1) if earlier \
            else ((), ())
        inc1 = one_target - sum(spent1)
        one, _ = boundaries(info, [0.0] * len(earlier) + [inc1], sides=1, fixed=fixed1)
        e = one[-1]
    elif alpha_k > 0.0:  # no earlier boundaries known: the look's increment as its level
        c = float(_sp.norm.isf(alpha_k / m / 2.0))
        e = float(_sp.norm.isf(alpha_k / m))
    p_diff = 2.0 * float(_sp.norm.sf(c)) if math.isfinite(c) else 0.0
    p_equiv = float(_sp.norm.sf(e)) if math.isfinite(e) else 0.0
    decisions: list[Decision] = []
    for est in estimates:
        if est is None or p_diff <= 0.0:
            decisions.append("open")
        elif est.p_value() < p_diff and abs(est.pct) >= min_effect_pct:
            decisions.append("difference")
        elif est.tost_p_value(equivalence_pct) < p_equiv:
            decisions.append("equivalent")
        else:
            decisions.append("open")
    done = bool(decisions) and all(d != "open" for d in decisions)
    return Look(rounds=rounds, max_rounds=max_rounds, alpha=alpha_k,
                cumulative=recorded + alpha_k,
                confidence=1.0 - p_diff if p_diff > 0 else confidence,
                decisions=tuple(decisions), stop=done or rounds >= max_rounds,
                boundary=c if math.isfinite(c) else None,
                equivalence_boundary=e if math.isfinite(e) else None, comparisons=m)
