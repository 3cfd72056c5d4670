"""`e2e capacity`'s search and interval, simulated under fresh-server noise (docs/load.md).

Each unit is a fresh server whose own capacity is the arm's times exp(server part + time
part): the server part independent per server (sd ``--server-sd``), the time part an AR(1)
over consecutive units shared by the arms (sd ``--time-sd``, lag-1 ``--rho``), the units run
in e2e's order (every round, each arm's next units, the arm that goes first rotating). A
server at offered rate r meets a request's SLO with probability
Phi(Phi^-1(goodput) + ln(C_server / r) / width), and its goodput share is the share of
``--prompts`` such requests (binomial), so its margin is capped above by ln(1 / goodput) as a
real run's is. The arm's true capacity is where the expected margin crosses 0 (found
numerically): the quantity the estimate reads. The search is e2e's own (``next_rates``,
``estimate``, ``ratio``), with the widening and, for comparison, stopped at the first
widening step (the rule before it). Printed per arm: how often the interval is closed, how
often it covers the truth, its median width; and the same for the ratio.

    python bench/capacity_search_simulation.py --sims 400
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from e2e.capacity import SearchSettings, Step, estimate, goodput_margin, next_rates, ratio
from e2e.capacity._run import interleave


def share_p(rate: float, cap: float, goodput: float, width: float) -> float:
    return float(norm.cdf(norm.ppf(goodput) + math.log(cap / rate) / width))


def margin_of(share: float, goodput: float, prompts: int, log: bool = False) -> float:
    """e2e's goodput margin (``--log-margin``: the log ratio it used before)."""
    if log:
        return math.log(max(share, 0.5 / prompts) / goodput)
    return goodput_margin(share, goodput, prompts)


def true_capacity(cap: float, a: argparse.Namespace) -> float:
    """The rate whose expected margin (over servers and the binomial) is 0."""
    z = np.random.default_rng(99).standard_normal(4000)
    caps = cap * np.exp(z * math.hypot(a.server_sd, a.time_sd))

    def expected(ln_rate: float) -> float:
        p = norm.cdf(norm.ppf(a.goodput) + np.log(caps / math.exp(ln_rate)) / a.width)
        k = np.arange(a.prompts + 1)
        # E[margin] = sum over k of P(k) * margin(k / prompts), per server, averaged
        from scipy.stats import binom
        m = np.array([margin_of(x / a.prompts, a.goodput, a.prompts, a.log_margin) for x in k])
        return float(np.mean(binom.pmf(k[None, :], a.prompts, p[:, None]) @ m))

    return math.exp(brentq(expected, math.log(cap) - 3, math.log(cap) + 3))


def one(caps: dict[str, float], a: argparse.Namespace, rng, widen: bool):
    """One search of every arm (``caps``: each arm's median server's capacity)."""
    settings = SearchSettings(start=a.start, factor=a.factor, resolution=a.resolution,
                              repeats=a.repeats)
    arms = list(caps)
    observed = {arm: {} for arm in arms}
    steps, last = {}, {}
    time_part = 0.0
    for round_ in range(200):
        todo = {}
        for arm in arms:
            step = next_rates(observed[arm], settings)
            if step.phase == "repeats":
                last[arm] = step
            elif step.phase == "widen" and not widen:  # the rule before: stop at the repeats
                step = Step("done", lo=last[arm].lo, hi=last[arm].hi)
            steps[arm] = step
            todo[arm] = [(arm, r, k) for r, k in step.runs]
        k = round_ % len(arms)
        if a.blocked:  # the order before: each arm's units together, a rate's repeats in a row
            units = [u for arm in arms[k:] + arms[:k] for u in sorted(todo[arm], key=lambda u: u[1])]
        else:
            units = interleave([todo[arm] for arm in arms[k:] + arms[:k]])
        if not units:
            break
        for arm, rate, rep in units:
            time_part = a.rho * time_part + math.sqrt(1 - a.rho ** 2) * rng.normal(0, a.time_sd)
            cap = caps[arm] * math.exp(rng.normal(0, a.server_sd) + time_part)
            p = share_p(rate, cap, a.goodput, a.width)
            share = rng.binomial(a.prompts, p) / a.prompts
            observed[arm].setdefault(rate, {})[rep] = margin_of(share, a.goodput, a.prompts,
                                                                a.log_margin)
    ests = {}
    for arm in arms:
        s = steps[arm]
        if s.phase != "done":
            ests[arm] = None
            continue
        by_rate = {r: list(v.values()) for r, v in observed[arm].items()}
        ests[arm] = estimate(s.lo, s.hi, by_rate[s.lo], by_rate[s.hi],
                             others=by_rate if a.others else None,
                             seed=int(rng.integers(1 << 30)))
    units = sum(len(v) for o in observed.values() for v in o.values())
    return ests, units


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--caps", default="main=10,delay=0.35", help="arm=capacity of the median server")
    p.add_argument("--server-sd", type=float, default=0.15)
    p.add_argument("--time-sd", type=float, default=0.10)
    p.add_argument("--rho", type=float, default=0.48)
    p.add_argument("--width", type=float, default=0.15, help="the SLO edge's width in ln rate")
    p.add_argument("--goodput", type=float, default=0.9)
    p.add_argument("--prompts", type=int, default=120)
    p.add_argument("--start", type=float, default=16.0)
    p.add_argument("--factor", type=float, default=1.5)
    p.add_argument("--resolution", type=float, default=0.2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-others", dest="others", action="store_false",
                   help="the estimate from the two boundary rates alone (before the walk)")
    p.add_argument("--blocked", action="store_true",
                   help="run each arm's units together and a rate's repeats in a row (the "
                   "order before the interleaving)")
    p.add_argument("--log-margin", action="store_true",
                   help="the goodput term as ln(share / goodput), e2e's before the probit")
    a = p.parse_args()
    caps = {k: float(v) for k, v in (x.split("=") for x in a.caps.split(","))}
    truths = {k: true_capacity(v, a) for k, v in caps.items()}
    base = next(iter(caps))
    print(f"{a.sims} searches per rule; goodput margin {'log' if a.log_margin else 'probit'}, "
          f"{'all rates' if a.others else 'boundary rates only'}, "
          f"{'blocked' if a.blocked else 'interleaved'} order; servers sd {a.server_sd}, time AR(1) sd {a.time_sd} "
          f"rho {a.rho}, edge width {a.width}, {a.prompts} prompts, goodput {a.goodput:g}, "
          f"start {a.start:g} factor {a.factor:g} resolution {a.resolution:g} repeats {a.repeats}")
    print("true capacity (expected margin 0): " + ", ".join(f"{k} {v:.3g}" for k, v in truths.items()))
    for widen in (False, True):
        rng = np.random.default_rng([a.seed, widen])
        rows = {k: [] for k in truths}
        rat = []
        units = []
        for _ in range(a.sims):
            ests, n = one(caps, a, rng, widen)
            units.append(n)
            for k, e in ests.items():
                rows[k].append(e)
            for k, e in ests.items():
                if k != base and e is not None and ests[base] is not None:
                    rat.append((ratio(e, ests[base]), truths[k] / truths[base]))
        label = "with widening" if widen else "stopped at the first widening (before)"
        print(f"\n{label}: {np.mean(units):.1f} units per search (both arms)")
        for k, es in rows.items():
            got = [e for e in es if e is not None]
            closed = [e for e in got if 0 < e.low and math.isfinite(e.high)]
            cover = [e.low <= truths[k] <= e.high for e in got]
            mc = lambda x: math.sqrt(x * (1 - x) / max(len(got), 1))  # noqa: E731
            cl = len(closed) / max(len(got), 1)
            cv = float(np.mean(cover)) if cover else float("nan")
            width = np.median([e.high / e.low for e in closed]) if closed else float("nan")
            print(f"  {k}: estimate in {len(got)}/{len(es)}; interval closed {cl:.1%} "
                  f"(+-{mc(cl):.1%}), covers the truth {cv:.1%} (+-{mc(cv):.1%}), median "
                  f"high/low of closed ones {width:.2f}")
        if rat:
            cover = np.mean([lo <= t <= hi for (r, lo, hi), t in rat])
            closed = np.mean([lo > 0 and math.isfinite(hi) for (r, lo, hi), t in rat])
            sep = np.mean([hi < 1 for (r, lo, hi), t in rat])
            print(f"  ratio: {len(rat)} with both; covers the truth {cover:.1%}, closed "
                  f"{closed:.1%}, separates from 1 (high < 1) {sep:.1%}")


if __name__ == "__main__":
    main()
