"""What "meets the SLO" means for one measured run, and by how much.

A run meets the objective when at least ``goodput_pct`` % of its measured requests met every
per-request objective of ``slo`` (its goodput share, ``e2e.metrics.goodput``) and, where
``p99`` names figures (TTFT, TPOT, E2E), the 99th percentile over its requests of each
(``RunMetrics.*_p99``) is at most its objective there: "p99 TPOT <= 20 ms, p99 TTFT <= 500 ms,
goodput >= 90 %" is ``p99=tpot=20ms,ttft=500ms``, ``slo`` the same, ``goodput_pct=90``. Its
*margin* is the smallest of its terms: each p99's log ratio ``ln(objective / p99)``, and the
goodput share's probit distance ``Phi^-1(share) - Phi^-1(goodput)`` (the share kept half a
request inside 0 and 1): positive when it meets the objective with room, 0 at the edge,
negative when it misses. The margin is what the capacity estimate reads (``estimate``); a
pass is margin >= 0. The objective is ``e2e.results.capacity.Objective`` (``objective_of``
parses it).

Why the probit for the share: a request meets a per-request objective when its figure (say
its TPOT, spread about a level that the server and the rate set) is under the objective, so
the share is Phi((ln objective - level) / spread) and its probit moves in step with the
level, the same amount either side of the edge. ``ln(share / goodput)`` cannot rise above
``ln(1 / goodput)`` (0.105 at 90 %) and falls to -5 for a server that met nothing: measured
on fresh servers the runs that met sat at that ceiling while the ones that missed spread over
several units, so a mean that met was always within noise of 0 and the estimate's interval
stayed open (bench/capacity_search_simulation.py, docs/explanation/load.md).
"""

from __future__ import annotations

import math

from e2e.results.capacity import P99_FIELDS, Objective
from e2e.results.records import RunMetrics

__all__ = ["capacity_margin_terms", "capacity_margin", "goodput_margin", "capacity_censored"]

MISSING = -10.0  # the margin of a figure a run could not measure (no successful request)


def capacity_margin_terms(metrics: RunMetrics, objective: Objective) -> dict[str, float]:
    """Each term's log ratio (positive: within the objective). The goodput share is floored
    at half a request so that a run meeting nothing has a finite margin."""
    terms: dict[str, float] = {}
    for name, target in objective.targets().items():
        p99 = getattr(metrics, P99_FIELDS[name])
        terms[name] = MISSING if p99 is None or p99 <= 0 else math.log(target / p99)
    share = metrics.goodput_share
    terms["goodput"] = MISSING if share is None else \
        goodput_margin(share, objective.goodput_pct / 100.0, metrics.requests)
    return terms


def goodput_margin(share: float, goodput: float, requests: int) -> float:
    """``Phi^-1(share) - Phi^-1(goodput)``, the share kept half a request inside 0 and 1 (so a
    run that met every request, or none, has a finite margin); a goodput objective of 100 %
    is met only by a run that met every request (margin 0), missed by any other."""
    from scipy.stats import norm

    half = 0.5 / max(requests, 1)
    if goodput >= 1.0:
        return 0.0 if share >= 1.0 else min(float(norm.ppf(min(max(share, half), 1 - half))
                                                   - norm.ppf(1 - half)), -1e-9)
    target = float(norm.ppf(goodput))
    if share >= goodput:  # meets: never below 0 (the half-request cap may sit under the target)
        return max(float(norm.ppf(min(share, 1 - half))) - target, 0.0)
    return min(float(norm.ppf(max(share, half))) - target, -1e-9)


def capacity_margin(metrics: RunMetrics, objective: Objective) -> float:
    """The run's margin: its smallest term (>= 0: the run meets the objective)."""
    return min(capacity_margin_terms(metrics, objective).values())


def capacity_censored(metrics: RunMetrics, objective: Objective) -> str:
    """How a run's margin bounds the line it is read by (``capacity_estimate``): "above" when it is
    the goodput term at its ceiling (every request met: the margin could be no higher, the
    run's own level may be), "below" at its floor (none met) or where nothing was measured,
    else "" (the margin as measured)."""
    terms = capacity_margin_terms(metrics, objective)
    m = min(terms.values())
    if m <= MISSING:
        return "below"
    if terms["goodput"] != m:
        return ""
    goal, n = objective.goodput_pct / 100.0, metrics.requests
    if m >= goodput_margin(1.0, goal, n) - 1e-12:
        return "above"
    if m <= goodput_margin(0.0, goal, n) + 1e-12:
        return "below"
    return ""
