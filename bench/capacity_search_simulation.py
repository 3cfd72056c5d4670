"""`e2e capacity`'s search and interval, simulated under fresh-server noise (docs/explanation/load.md).

Each unit is a fresh server whose own capacity is the arm's times exp(server part + time
part): the server part independent per server (sd ``--server-sd``), the time part an AR(1)
over consecutive units shared by the arms (sd ``--time-sd``, lag-1 ``--rho``), the units run
in e2e's order (every round, each arm's next units in turn, ``_run.interleave``, the arm that
goes first rotating). A server at offered rate r meets a request's SLO with probability
p = Phi(Phi^-1(goodput) + ln(C_server / r) / width) (``--width``: the SLO edge's width in ln
rate; small is a sharp edge; ``--shape`` logistic or plateau for other curves, ``share_p``),
and its goodput share is the share of ``--prompts`` such requests: binomial, or beta-binomial with intra-run correlation ``--overdispersion`` (the
requests of one run fail together more than independent ones would). The margin and its
censoring are e2e's (``goodput_margin``, ``censored``'s rule: a run that met every request
reports the ceiling, one that met none the floor). The search and the estimate are e2e's own
(``next_rates``, ``estimate``, ``ratio``).

**The truth** is what ``estimate`` estimates: each arm's median server's capacity (``--caps``:
the rate at which a fresh server of median capacity, at the host's mean level, is at the
goodput objective: half the servers meet it there). Printed per arm: how often the search
closes the interval, how often a closed one covers the truth (with its Monte Carlo error; the
stated level beside it), its median width, and the same for the ratio of the arms.

    python bench/capacity_search_simulation.py --sims 400 --repeats 3   # and --repeats 6
    python bench/capacity_search_simulation.py --sims 400 --width 0.03   # a sharp edge
    python bench/capacity_search_simulation.py --sims 400 --overdispersion 0.05
    python bench/capacity_search_simulation.py --sims 400 --caps main=10,close=9
    python bench/capacity_search_simulation.py --sims 400 --shape plateau   # or logistic

The estimate is the slow part (seconds a search): ``--save-runs FILE`` writes the searches
instead, and ``bench/capacity_replay.py FILE`` estimates them over many processes (the same
searches for two versions of the estimate, side by side).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
from scipy.stats import norm

from e2e.capacity import SearchSettings
from e2e.capacity.search import next_rates
from e2e.capacity.run import interleave
from e2e.results.capacity import MarginRun
from e2e.analysis.capacity.criterion import goodput_margin
from e2e.analysis.capacity.estimate import capacity_estimate, capacity_ratio


PLATEAU = (0.74, 1.35, 0.94, 0.86)
"""The plateau edge: the share falls from 0.94 at 0.74 times the server's capacity to 0.86 at
1.35 times (the goodput objective at 1 times), linear in probit and ln rate on either side of
the capacity, and at the edge's usual width beyond those rates."""


def share_p(rate: float, cap: float, goodput: float, width: float, shape: str = "probit") -> float:
    """A server of capacity ``cap``'s chance that a request meets the SLO at ``rate``: its
    probit linear in ln rate (``probit``, slope 1 / ``width``), or its logit (``logistic``, the
    same slope at the capacity), or flat near the objective (``plateau``: ``PLATEAU``)."""
    u, z0 = math.log(cap / rate), float(norm.ppf(goodput))
    if shape == "logistic":
        k = float(norm.pdf(z0)) / (goodput * (1.0 - goodput) * width)
        return 1.0 / (1.0 + math.exp(-(math.log(goodput / (1.0 - goodput)) + k * u)))
    if shape == "plateau":
        low, high, top, bottom = PLATEAU
        a, b = math.log(1.0 / low), math.log(1.0 / high)  # u where the plateau ends: > 0, < 0
        za, zb = float(norm.ppf(top)) - z0, float(norm.ppf(bottom)) - z0
        if u >= a:
            g = za + (u - a) / width
        elif u >= 0:
            g = za * u / a
        elif u >= b:
            g = zb * u / b
        else:
            g = zb + (u - b) / width
        return float(norm.cdf(z0 + g))
    return float(norm.cdf(z0 + u / width))


def measure(rng, p: float, a) -> tuple[float, str]:
    """One run's margin and censoring: its share of ``a.prompts`` requests, binomial or
    beta-binomial (``a.overdispersion`` the intra-run correlation)."""
    if a.overdispersion > 0:
        k = (1.0 - a.overdispersion) / a.overdispersion
        p = rng.beta(max(p * k, 1e-9), max((1.0 - p) * k, 1e-9))
    share = rng.binomial(a.prompts, p) / a.prompts
    m = goodput_margin(share, a.goodput, a.prompts)
    if m >= goodput_margin(1.0, a.goodput, a.prompts) - 1e-12:
        return m, "above"
    if m <= goodput_margin(0.0, a.goodput, a.prompts) + 1e-12:
        return m, "below"
    return m, ""


def one(caps: dict[str, float], a: argparse.Namespace, rng, estimate_them: bool = True):
    """One search of every arm (``caps``: each arm's median server's capacity): each arm's
    estimate, or with ``estimate_them`` false its (runs, lo, hi), None where it did not finish."""
    settings = SearchSettings(start=a.start, factor=a.factor, resolution=a.resolution,
                              repeats=a.repeats)
    arms = list(caps)
    observed = {arm: {} for arm in arms}
    flags = {arm: {} for arm in arms}
    made = {arm: [] for arm in arms}  # (rate, repeat) in the order the units ran
    steps = {}
    time_part = 0.0
    for round_ in range(200):
        todo = {}
        for arm in arms:
            steps[arm] = next_rates(observed[arm], settings)
            todo[arm] = [(arm, r, k) for r, k in steps[arm].runs]
        k = round_ % len(arms)
        units = interleave([todo[arm] for arm in arms[k:] + arms[:k]])
        if not units:
            break
        for arm, rate, rep in units:
            time_part = a.rho * time_part + math.sqrt(1 - a.rho ** 2) * rng.normal(0, a.time_sd)
            cap = caps[arm] * math.exp(rng.normal(0, a.server_sd) + time_part)
            m, c = measure(rng, share_p(rate, cap, a.goodput, a.width, a.shape), a)
            observed[arm].setdefault(rate, {})[rep] = m
            flags[arm][(rate, rep)] = c
            made[arm].append((rate, rep))
    searches = {}
    for arm in arms:
        s = steps[arm]
        # the runs in the order they ran, as e2e's capacity passes them (its records' order)
        searches[arm] = None if s.phase != "done" else (
            [MarginRun(r, observed[arm][r][k], flags[arm][(r, k)]) for r, k in made[arm]],
            s.lo, s.hi)
    units = sum(len(v) for o in observed.values() for v in o.values())
    if not estimate_them:
        return searches, units
    return {arm: None if x is None else capacity_estimate(x[0], lo=x[1], hi=x[2])
            for arm, x in searches.items()}, units


def _share(x: list[bool]) -> str:
    if not x:
        return "—"
    p = float(np.mean(x))
    return f"{p * 100:.1f} % ± {math.sqrt(p * (1 - p) / len(x)) * 100:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--caps", default="main=10,delay=0.35", help="arm=capacity of the median server")
    p.add_argument("--server-sd", type=float, default=0.15)
    p.add_argument("--time-sd", type=float, default=0.10)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--width", type=float, default=0.15, help="the SLO edge's width in ln rate")
    p.add_argument("--shape", choices=("probit", "logistic", "plateau"), default="probit",
                   help="the goodput curve: probit-linear in ln rate, logistic, or a plateau "
                        "near the objective (0.94 to 0.86 from 0.74 to 1.35 times the capacity)")
    p.add_argument("--overdispersion", type=float, default=0.0,
                   help="intra-run correlation of the requests' outcomes (beta-binomial)")
    p.add_argument("--goodput", type=float, default=0.9)
    p.add_argument("--prompts", type=int, default=120)
    p.add_argument("--start", type=float, default=16.0)
    p.add_argument("--factor", type=float, default=1.5)
    p.add_argument("--resolution", type=float, default=0.2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-runs", metavar="FILE",
                   help="write every search's runs (JSON lines) instead of estimating them: "
                        "bench/capacity_replay.py estimates them, in parallel")
    a = p.parse_args()
    caps = {k: float(v) for k, v in (x.split("=") for x in a.caps.split(","))}
    base = next(iter(caps))
    print(f"{a.sims} searches; servers sd {a.server_sd}, time AR(1) sd {a.time_sd} rho {a.rho}, "
          f"edge {a.shape} width {a.width}, over-dispersion {a.overdispersion:g}, {a.prompts} prompts, "
          f"goodput {a.goodput:g}, start {a.start:g} factor {a.factor:g} resolution "
          f"{a.resolution:g} repeats {a.repeats}; truth: each arm's median server's capacity "
          + ", ".join(f"{k} {v:g}" for k, v in caps.items()))
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    rows = {k: [] for k in caps}
    rat, units = [], []
    if a.save_runs:
        with open(a.save_runs, "w") as f:
            for i in range(a.sims):
                searches, n = one(caps, a, rng, estimate_them=False)
                units.append(n)
                f.write(json.dumps({"search": i, "truth": caps, "arms": {
                    k: None if x is None else {
                        "lo": x[1], "hi": x[2],
                        "runs": [[r.rate, r.margin, r.censored] for r in x[0]]}
                    for k, x in searches.items()}}) + "\n")
        print(f"{np.mean(units):.1f} units per search (all arms); {time.perf_counter() - t0:.0f} s; "
              f"runs in {a.save_runs}")
        return
    for _ in range(a.sims):
        ests, n = one(caps, a, rng)
        units.append(n)
        for k, e in ests.items():
            rows[k].append(e)
        for k, e in ests.items():
            if k != base and e is not None and ests[base] is not None:
                rat.append((e, ests[base], caps[k] / caps[base]))
    print(f"{np.mean(units):.1f} units per search (all arms); {time.perf_counter() - t0:.0f} s")
    for k, es in rows.items():
        got = [e for e in es if e is not None]
        closed = [e for e in got if e.closed]
        cover = [e.low <= caps[k] <= e.high for e in closed]
        allc = [e.low <= caps[k] <= e.high for e in got]
        level = got[0].confidence if got else float("nan")
        width = np.median([e.high / e.low for e in closed]) if closed else float("nan")
        bias = np.median([math.log(e.rate / caps[k]) for e in closed]) if closed else float("nan")
        print(f"  {k}: estimate in {len(got)}/{len(es)}; interval closed {_share([e.closed for e in got])}; "
              f"closed ones cover the truth {_share(cover)} (stated {level * 100:g} %), all "
              f"{_share(allc)}; median high/low {width:.2f}, median ln(estimate / truth) "
              f"{bias:+.3f}")
    if rat:
        rs = [(capacity_ratio(e, b), t, e.closed and b.closed) for e, b, t in rat]
        both = [(r, t) for r, t, c in rs if c]
        print(f"  ratio: {len(rs)} with both; covers the truth {_share([lo <= t <= hi for (_, lo, hi), t, _c in rs])}, "
              f"where both arms closed {_share([lo <= t <= hi for (_, lo, hi), t in both])}; "
              f"its interval closed {_share([lo > 0 and math.isfinite(hi) for (_, lo, hi), _t, _c in rs])}, "
              f"separates from 1 {_share([hi < 1 or lo > 1 for (_, lo, hi), _t, _c in rs])}")


if __name__ == "__main__":
    main()
