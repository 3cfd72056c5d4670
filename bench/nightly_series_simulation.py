"""Series of nights judged night by night through e2e's own nightly judgement and history:
each night's ratio cells (tonight's build ÷ the pinned reference, one value per duet) are
judged by ``e2e.nightly.judge.judge_night`` against ``e2e.nightly.history.ratio_history`` over
the history frame the store would hold (``night_rows`` of every earlier judgement), with the
night's looks as the nightly runs them (``NightlyConfig.looks``: a night whose cell is not
resolved measures more duets, up to ``--max-duets``, and is judged again).

The noise is the host's (docs/explanation/statistics.md, DESIGN.md). A duet's two servers run at the same
time, so the host's time level (AR(1) over minutes, sd 17 % for one server) is shared by both
sides and cancels in their ratio, as does the slot's speed when the sides swap cores; what is
left is each side's own part, a per-duet log-ratio sd ``--cell-sd`` per cell (2.7 % measured
for two servers started together; 4.1-5.1 % in the nightly's own sets with four swapping
windows), plus a night part shared by the night's cells (``--night-sd``: what differs from
night to night and more duets do not average away; about 2 % in one set of nights, none
visible in another). Cells of unequal noise are judged together under one rule (the night's
``--alpha`` split over them).

Scenarios (every series its own seed; all print the share of series and nights with ±
one Monte Carlo standard error over series):

* ``aa``: one build every night: the share of series with any night called regressed;
* ``step``: tonight's build +``--effect`` % slower from night ``--step-night`` on, on every cell
  (default: the design's stated resolution, ``e2e.nightly.plan.night_resolution``): the share of
  nights after it reported regressed, and of series called within 1, 2, 3 nights;
* ``drift``: +``--drift`` % a night from night ``--step-night``: the share of nights reported
  once the drift passed the threshold, and the series whose report flickers (regressed, then
  not, while the drift only grows).

    nice -n 10 env PYTHONPATH=$PWD python bench/nightly_series_simulation.py --series 200 \\
        --scenarios aa,step,drift --seed 1
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from e2e.results import CellKey, Looks, NightCell
from e2e.nightly.history import night_rows, ratio_history
from e2e.nightly.judge import Rules, judge_night


def _key(conc: int) -> CellKey:
    return CellKey("load", "main-vs-reference", conc, "base", "server_tpot_ms_mean")


def _date(i: int) -> str:
    return (pd.Timestamp("2026-01-01") + pd.Timedelta(days=i)).strftime("%Y-%m-%d")


def series(rng, a, sds: list[float], effect_of, rules: Rules, looks: Looks) -> list[str]:
    """One series of ``a.nights`` nights; returns each night's outcome: "regressed",
    "improved", "pass" (per the night's cells: regressed if any cell regressed)."""
    keys = [_key(c) for c in range(1, len(sds) + 1)]
    frame = None
    out = []
    top = looks.schedule()[-1]
    for i in range(a.nights):
        date = _date(i)
        night = rng.normal(0.0, a.night_sd)
        mu = math.log(1.0 + effect_of(i) / 100.0)
        values = {k: np.exp(mu + night + rng.normal(0.0, sd, top)) for k, sd in zip(keys, sds)}
        for k_t in looks.schedule():
            cells = [NightCell(k, tuple(values[k][:k_t]), tuple(range(2, 2 + k_t)))
                     for k in keys]
            hist = {} if frame is None else {
                k: ratio_history(frame, k, date=date, experiment="e", config_hash="h",
                                 limit=a.history, threshold=a.threshold) for k in keys}
            j = judge_night(date, cells, None, rules, expected=keys, histories=hist)
            if not any(v.more for v in j.verdicts):
                break
        rows = night_rows(j, experiment="e", config_hash="h", recorded_at=date, cells=cells,
                          builds={}, arm_overrides={}, e2e_git_sha=None, host="sim")
        frame = rows if frame is None else pd.concat([frame, rows], ignore_index=True)
        names = {v.verdict for v in j.verdicts}
        out.append("regressed" if "regressed" in names else
                   "improved" if "improved" in names else "pass")
    return out


def share(x) -> str:
    x = np.asarray(x, dtype=float)
    p = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
    return f"{p * 100:.1f} % ± {se * 100:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--nights", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cell-sd", default="0.027,0.045", help="per-duet sd of ln ratio per cell")
    ap.add_argument("--night-sd", type=float, default=0.01)
    ap.add_argument("--duets", type=int, default=8, help="duets a night before its first look")
    ap.add_argument("--max-duets", type=int, default=32)
    ap.add_argument("--history", type=int, default=20, help="history_nights")
    ap.add_argument("--alpha", type=float, default=0.002)
    ap.add_argument("--threshold", type=float, default=5.0)
    ap.add_argument("--effect", type=float, default=None, help="step size in %% (default: the "
                    "threshold)")
    ap.add_argument("--step-night", type=int, default=17, help="1-based night the step starts")
    ap.add_argument("--drift", type=float, default=0.5, help="%% a night")
    ap.add_argument("--scenarios", default="aa,step,drift")
    a = ap.parse_args()
    sds = [float(x) for x in a.cell_sd.split(",")]
    looks = Looks(first=a.duets, step=a.duets, last=a.max_duets)
    rules = Rules(thresholds={"base": {"server_tpot_ms_mean": a.threshold}},
                  reference="reference", alpha=a.alpha, looks=looks)
    effect = a.effect if a.effect is not None else a.threshold
    s0 = a.step_night - 1
    print(f"{a.series} series x {a.nights} nights per scenario, seed {a.seed}; cells' duet sd "
          f"{', '.join(f'{x * 100:g} %' for x in sds)}, night part {a.night_sd * 100:g} %; "
          f"{a.duets} duets a night, up to {a.max_duets} (looks {looks.schedule()}); history "
          f"{a.history} nights; alpha {a.alpha:g} a night; threshold {a.threshold:g} %")
    for scenario in a.scenarios.split(","):
        t0 = time.perf_counter()
        rng = np.random.default_rng([a.seed, hash(scenario) % 1000])
        if scenario == "aa":
            effect_of = lambda i: 0.0  # noqa: E731
        elif scenario == "step":
            effect_of = lambda i: effect if i >= s0 else 0.0  # noqa: E731
        else:
            effect_of = lambda i: a.drift * (i - s0 + 1) if i >= s0 else 0.0  # noqa: E731
        runs = [series(np.random.default_rng([a.seed, s, len(scenario)]), a, sds, effect_of,
                       rules, looks) for s in range(a.series)]
        took = time.perf_counter() - t0
        if scenario == "aa":
            anyf = [any(x == "regressed" for x in r) for r in runs]
            nightly = [np.mean([x == "regressed" for x in r]) for r in runs]
            print(f"\naa: series with a false regressed night {share(anyf)}; nights called "
                  f"regressed {share(nightly)}; improved {share([np.mean([x == 'improved' for x in r]) for r in runs])} ({took:.0f} s)")
        elif scenario == "step":
            after = [np.mean([x == "regressed" for x in r[s0:]]) for r in runs]
            first = [next((i for i, x in enumerate(r[s0:]) if x == "regressed"), 99) for r in runs]
            before = [any(x == "regressed" for x in r[:s0]) for r in runs]
            print(f"\nstep +{effect:g} % from night {a.step_night}: nights after it reported "
                  f"regressed {share(after)}; called on its first night "
                  f"{share([f == 0 for f in first])}, within 2 {share([f <= 1 for f in first])}, "
                  f"within 3 {share([f <= 2 for f in first])}; never {share([f == 99 for f in first])}; "
                  f"false regressions before it {share(before)} ({took:.0f} s)")
            by = [np.mean([r[s0 + j] == "regressed" for r in runs]) for j in range(a.nights - s0)]
            print("  per night after the step: " + " ".join(f"{x * 100:.0f}" for x in by))
        else:
            cross = s0 + math.ceil(a.threshold / a.drift) - 1  # the night the drift reaches it
            past = [np.mean([x == "regressed" for x in r[cross:]]) for r in runs]
            flick = [any(r[i] == "regressed" and r[i + 1] != "regressed"
                         for i in range(s0, a.nights - 1)) for r in runs]
            first = [next((i - cross for i in range(s0, a.nights) if r[i] == "regressed"), None)
                     for r in runs]
            got = [f for f in first if f is not None]
            print(f"\ndrift +{a.drift:g} % a night from night {a.step_night} (past the threshold "
                  f"from night {cross + 1}): nights reported from then {share(past)}; series "
                  f"that flicker (regressed, then not) {share(flick)}; first report "
                  f"{np.median(got) if got else float('nan'):+.0f} nights from the crossing "
                  f"(median; {len(got)} of {len(runs)} series) ({took:.0f} s)")
            by = [np.mean([r[i] == "regressed" for r in runs]) for i in range(s0, a.nights)]
            print("  per night from the drift's start: " + " ".join(f"{x * 100:.0f}" for x in by))


if __name__ == "__main__":
    main()
