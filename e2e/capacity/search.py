"""The search for one arm's capacity, as a pure function of what is measured so far.

``next_rates(observed, settings)`` looks at the first repeat of every rate measured
(``observed``: rate -> {repeat: margin}) and says which (rate, repeat) units to run next:

1. **bracket**: from ``start`` multiply by ``factor`` while the rate meets the objective, or
   divide while it does not, until one rate that meets it (``lo``) sits below one that does
   not (``hi``);
2. **bisect**: the geometric mean of ``lo`` and ``hi`` until ``hi / lo <= 1 + resolution``;
3. **repeats at the boundary**: ``repeats`` runs in all of ``lo`` and ``hi`` (each a fresh
   server), the runs the estimate uses;
4. **widen** while their means do not bracket the edge: when the mean margin at ``lo`` misses
   the objective, the boundary moves one ``factor`` down (``hi`` becomes ``lo``, the new ``lo``
   gets ``repeats`` runs); when the mean at ``hi`` meets it, one ``factor`` up. Fresh servers
   on a shared host differ most at the SLO's edge, so the first repeats' bracket is often too
   narrow for the means to fall across it; without this step the estimate's interval stays
   open there (measured in docs/explanation/load.md).

Until the widening, only the first repeat of each rate steers (its outcome decides the next
rate); the widening steps on the means of the repeats. The path is a function of the records
and ``repeats``: a rerun over a folder replays the same steps from the records already there
and runs only what is missing (that is the resume). Rates are rounded
to 3 significant digits (a rate is a folder name: ``<arm>-c1-rate<r>-<mode>-r<k>``).
``lo`` is the highest rate that met the objective below the lowest that did not, so a noisy
first repeat above the boundary cannot move the bracket up past a failure.
"""

from __future__ import annotations

import math

from pydantic import Field

from e2e.config import MAX_RATE, Table
from e2e.results.capacity import Step

__all__ = ["SearchSettings", "next_rates", "round_rate", "boundary"]


class SearchSettings(Table):
    """How the search moves (the bounds in requests/s)."""

    start: float = Field(gt=0, le=MAX_RATE)
    factor: float = Field(2.0, gt=1, le=16)
    resolution: float = Field(0.15, gt=0, le=1)
    repeats: int = Field(3, ge=2, le=50)
    min_rate: float = Field(0.05, gt=0, le=MAX_RATE)
    max_rate: float = Field(1000.0, gt=0, le=MAX_RATE)


def round_rate(rate: float) -> float:
    """3 significant digits: the rate as a folder names it."""
    return float(f"{rate:.3g}")


def boundary(observed: dict[float, dict[int, float]]) -> tuple[float | None, float | None]:
    """(lo, hi) from the first repeats: hi the lowest rate that missed, lo the highest rate
    below it that met the objective (None where there is none yet)."""
    first = {r: reps[1] for r, reps in observed.items() if 1 in reps}
    fails = [r for r, m in first.items() if m < 0]
    hi = min(fails) if fails else None
    passes = [r for r, m in first.items() if m >= 0 and (hi is None or r < hi)]
    return (max(passes) if passes else None), hi


def next_rates(observed: dict[float, dict[int, float]], settings: SearchSettings) -> Step:
    """The next step of one arm's search (see the module's docstring)."""
    s = settings
    start = round_rate(min(max(s.start, s.min_rate), s.max_rate))
    if not any(1 in reps for reps in observed.values()):
        return Step("bracket", ((start, 1),))
    lo, hi = boundary(observed)
    if hi is None:  # every rate met it: go up
        nxt = round_rate(lo * s.factor)
        if lo >= s.max_rate or nxt > s.max_rate:
            nxt = round_rate(s.max_rate)
            if nxt <= lo:
                return Step("above", lo=lo, why=f"meets the objective at the highest rate "
                            f"searched, {lo:g} req/s (raise --max-rate)")
        return Step("bracket", ((nxt, 1),), lo=lo)
    if lo is None:  # every rate missed it: go down
        nxt = round_rate(hi / s.factor)
        if nxt < s.min_rate:
            nxt = round_rate(s.min_rate)
            if nxt >= hi:
                return Step("below", hi=hi, why=f"misses the objective at the lowest rate "
                            f"searched, {hi:g} req/s (lower --min-rate, or loosen the SLO)")
        return Step("bracket", ((nxt, 1),), hi=hi)
    mid = round_rate(math.sqrt(lo * hi))
    if hi / lo > 1 + s.resolution and lo < mid < hi:
        return Step("bisect", ((mid, 1),), lo=lo, hi=hi)
    phase = "repeats"
    while True:  # ends: every pass moves one way (a new lo's mean met, a new hi's missed)
        missing = tuple((r, k) for k in range(1, s.repeats + 1) for r in (lo, hi)
                        if k not in observed.get(r, {}))  # lo and hi in turn: see _run
        if missing:
            return Step(phase, missing, lo=lo, hi=hi)
        phase = "widen"
        if _mean(observed[lo]) < 0:  # the means' edge lies below lo
            nxt = round_rate(lo / s.factor)
            if nxt < s.min_rate or nxt >= lo:
                return Step("below", hi=lo, why=f"the mean of its runs misses the "
                            f"objective at the lowest rate searched, {lo:g} req/s (lower "
                            "--min-rate, or loosen the SLO)")
            lo, hi = nxt, lo
        elif _mean(observed[hi]) >= 0:  # ... above hi
            nxt = round_rate(hi * s.factor)
            if nxt > s.max_rate or nxt <= hi:
                return Step("above", lo=hi, why=f"the mean of its runs meets the "
                            f"objective at the highest rate searched, {hi:g} req/s (raise "
                            "--max-rate)")
            lo, hi = hi, nxt
        else:
            return Step("done", lo=lo, hi=hi)


def _mean(reps: dict[int, float]) -> float:
    """The mean margin of a rate's runs (all of them: the ones the estimate reads)."""
    return sum(reps.values()) / len(reps)
