"""Series of nights judged night by night through e2e's own nightly judgement and history,
as ``e2e nightly`` judges them: each night's ratio cells (tonight's build ÷ the pinned
reference, one value per duet) go through ``e2e.nightly.assess.assess_night`` (the baseline
night, ``ratio_history`` over the store's records of every earlier night, ``judge_night``,
change points) with the night's looks as the nightly runs them (``NightlyConfig.looks``: a night whose
cell is not resolved measures more duets, up to ``max_runs``, and is judged again), and each
night's rows (``night_rows``) join the records the next night reads.

The design is a nightly config's, by default the embedded one (``e2e/configs/nightly.toml``,
``--config`` for another): its judged cells (the server's mean TPOT of ``main-vs-reference``
at concurrency 1, judged with the headline's threshold), threshold, ``alpha``, looks
(``runs``/``max_runs``), ``history_nights`` and ``confidence``. ``--threshold``, ``--alpha``,
``--history``, ``--duets`` and ``--max-duets`` override it; run without them it simulates what
e2e ships.

The noise is the host's (docs/explanation/statistics.md, DESIGN.md). A duet's two servers run
at the same time, so the host's time level (AR(1) over minutes, sd 17 % for one server) is
shared by both sides and cancels in their ratio, as does the slot's speed when the sides swap
cores; what is left is each side's own part, a per-duet log-ratio sd ``--cell-sd`` per judged
cell (default 4.5 %: the nightly's own sets with four swapping windows, 4.1-5.1 %; one value
for every cell, or one a cell), plus a night part shared by the night's cells
(``--night-sd``, 1 %: what differs from night to night and more duets do not average away).

``--noise`` picks a regime beside that model (``noise``'s docstring): each side's loading on
the host's shared level differing from night to night, so what the ratio keeps of it is
correlated within a night; the same with a weekly pattern; server parts with t(3) tails; one
night in eight busy (three times every noise part), its interference recorded or not; the
step's first night busy.

Scenarios (every series its own seed, the same for every judge; all print the share of
series and nights with ± one Monte Carlo standard error over series, and the wall time):

* ``aa``: one build every night: the share of series with any night called regressed, and of
  nights called regressed (stickiness makes one false call last more nights);
* ``step``: tonight's build +``--effect`` % slower from night ``--step-night`` on, on every
  cell (default: the threshold, what the design is built to resolve): the share of nights
  after it reported regressed, of series called within 1, 2, 3 nights, and of series whose
  report lapses (regressed, then not) after its first call;
* ``drift``: +``--drift`` % a night from night ``--step-night``: the share of nights reported
  once the drift passed the threshold, and the series whose report flickers (regressed, then
  not, while the drift only grows).

Each scenario also prints the nights' exit statuses, what a release gate reads (``exits``):
each code's share of nights while the history is built and after, the first night that exits
0, the series with a blind night (4) and, after a change is first called, the series with a
green night (0).

    nice -n 10 env PYTHONPATH=$PWD python bench/nightly_series_simulation.py --series 200 \\
        --scenarios aa,step,drift --seed 1
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd

from e2e.nightly.assess import assess_night
from e2e.results._nightly_history import history_cells
from e2e.results import night_rows
from e2e.analysis.nightly.judge import Rules
from e2e.nightly.night import expected_cells, judged_key, night_of
from e2e.nightly.settings import NightlyConfig, load_nightly
from e2e.results import NightCell


def design(a) -> NightlyConfig:
    """The config to simulate: ``--config`` (default: the embedded nightly) with the flags
    that override it."""
    cfg = load_nightly(a.config)
    s, extra = cfg.settings, cfg.experiment.report_from_run - 1
    update: dict = {}
    if a.threshold is not None:
        update["thresholds"] = {m: {k: a.threshold for k in t} for m, t in s.thresholds.items()}
    if a.alpha is not None:
        update["alpha"] = a.alpha
    if a.history is not None:
        update["history_nights"] = a.history
    if a.max_duets is not None:
        update["max_runs"] = a.max_duets + extra
    runs = cfg.runs if a.duets is None else a.duets + extra
    if a.duets is not None and a.max_duets is None and s.max_runs is not None:
        update["max_runs"] = max(s.max_runs, runs)
    return dataclasses.replace(cfg, settings=s.model_copy(update=update), runs=runs)


def judged(cfg: NightlyConfig):
    """The night's expected cells and the ratio cells it judges (with their thresholds)."""
    expected = expected_cells(cfg)
    rules = Rules.from_settings(cfg.settings, cfg.looks)
    keys = [judged_key(cfg, k) for k in expected if k.kind == "load"]
    return expected, [(k, rules.threshold_or_headline(k)) for k in keys]


def _date(i: int) -> str:
    return (pd.Timestamp("2026-01-01") + pd.Timedelta(days=i)).strftime("%Y-%m-%d")


def series(args) -> tuple[list[str], list[int], list[int]]:
    """One series of ``a.nights`` nights; returns each night's outcome ("regressed",
    "improved", "pass": regressed if any judged cell regressed), its duets and its exit
    status (``Judgement.exit_code``)."""
    a, cfg, sds, scenario, s = args
    a = argparse.Namespace(**{**vars(a), "scenario": scenario})
    rng = np.random.default_rng([a.seed, s, len(scenario)])
    effect_of = effects(a, scenario)
    expected, keys = judged(cfg)
    measured = {judged_key(cfg, k): k for k in expected if k.kind == "load"}
    schedule = cfg.looks.schedule()
    history = []  # the store's records of the nights so far (Store.cells)
    phase = rng.uniform(0.0, 2.0 * math.pi)  # the weekly pattern's
    out, duets, codes = [], [], []
    with tempfile.TemporaryDirectory() as results:
        for i in range(a.nights):
            date = _date(i)
            mu = math.log(1.0 + effect_of(i) / 100.0)
            logs, busy = noise(rng, a, i, schedule[-1], sds, phase)
            values = {k: np.exp(mu + x) for (k, _), x in zip(keys, logs)}
            seen = (1.0 if busy else 0.0) if a.noise == "busy-recorded" else None
            for k_t in schedule:
                # every measured cell, as load_cells gives them: a judged server twin beside
                # the client's headline cell it replaces (recorded, not judged)
                cells = [NightCell(c, tuple(values[k][:k_t]), tuple(range(2, 2 + k_t)),
                                   interference=() if seen is None else (seen,) * k_t)
                         for k, _ in keys for c in dict.fromkeys((measured[k], k))]
                j = assess_night(night_of(cfg, date=date, results=Path(results)), cells,
                                 expected=expected, history=history)
                if not any(v.more for v in j.verdicts):
                    break
            rows = night_rows(j, experiment=cfg.experiment.name, config_hash=cfg.config_hash,
                              recorded_at=date, cells=cells, builds={}, arm_overrides={},
                              e2e_git_sha=None, host="sim")
            history += history_cells(rows)
            names = {v.verdict for v in j.verdicts}
            out.append("regressed" if "regressed" in names else
                       "improved" if "improved" in names else "pass")
            duets.append(k_t)
            codes.append(j.exit_code)
    return out, duets, codes


NOISES = ("iid", "loading", "weekly", "t3", "busy-recorded", "busy-unrecorded", "step-busy",
          "bank")


def noise(rng, a, i: int, k: int, sds, phase: float) -> tuple[list[np.ndarray], bool]:
    """Night ``i``'s ln ratios (before the effect) for k duets of each judged cell, and
    whether the night is busy; every draw is made whatever the regime uses, so a seed's
    series differ between regimes only where the regime differs.

    * ``iid``: a server part N(0, sd) a duet and a night part N(0, ``--night-sd``);
    * ``loading``: plus each side's loading on the host's shared level drawn per night as
      1 ± ``--loading-sd`` (normal), the level AR(1) over the night's duets (sd
      ``--host-sd``, ρ ``--host-rho``): the ratio keeps (l1 − l2) × level, correlated
      within a night;
    * ``weekly``: ``loading`` plus ± ``--weekly`` % (a sine over 7 nights);
    * ``t3``: ``loading`` with server parts of Student's t on 3 df (the same sd);
    * ``busy-recorded`` / ``busy-unrecorded``: ``loading`` with 1 night in ``--busy-every``
      (at random) at ``--busy-factor`` times every noise part, its runs' interference
      recorded above the rule's max (1 core) or not (0);
    * ``step-busy``: ``loading`` with the step's first night (``--step-night``) busy, not
      recorded;
    * ``bank``: real noise: the night's duets are a recorded A/A night's reported duets
      (``--bank``, ``bench/noise_bank.py``; ``--bank-condition`` keeps one condition), in
      their time order, the next recorded night's following where the night needs more; the
      same values for every judged cell. The night part is what the recorded nights' means
      differ by; nothing is recorded as interference."""
    night = rng.normal(0.0, a.night_sd)
    server = [rng.normal(0.0, sd, k) for sd in sds]
    heavy = [sd * rng.standard_t(3, k) / math.sqrt(3.0) for sd in sds]
    l1, l2 = 1.0 + rng.normal(0.0, a.loading_sd, 2)
    level = np.empty(k)
    level[0] = rng.normal(0.0, a.host_sd)
    shocks = rng.normal(0.0, a.host_sd * math.sqrt(1.0 - a.host_rho ** 2), k)
    for j in range(1, k):
        level[j] = a.host_rho * level[j - 1] + shocks[j]
    busy_draw = rng.uniform() < 1.0 / a.busy_every
    regime = a.noise
    if regime == "bank":
        nights = bank_nights(a.bank, a.bank_condition)
        xs: list[float] = []
        while len(xs) < k:
            xs += nights[int(rng.integers(len(nights)))]
        return [np.asarray(xs[:k]) for _ in sds], False
    if regime == "iid":
        return [night + x for x in server], False
    busy = (busy_draw if regime.startswith("busy-") else
            i == a.step_night - 1 and a.scenario == "step" if regime == "step-busy" else False)
    f = a.busy_factor if busy else 1.0
    parts = heavy if regime == "t3" else server
    week = (math.log(1.0 + a.weekly / 100.0 * math.sin(2.0 * math.pi * i / 7.0 + phase))
            if regime == "weekly" else 0.0)
    return [week + f * (night + x + (l1 - l2) * level) for x in parts], busy


_BANKS: dict = {}


def bank_nights(path: str, condition: str | None) -> list[list[float]]:
    """The bank's recorded nights (``bench/noise_bank.py``): each night's reported duets'
    log ratios (rounds from the embedded nightly's ``report_from_run``, 2), in time order."""
    key = (path, condition)
    if key not in _BANKS:
        import csv

        nights: dict = {}
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if int(r["round"]) >= 2 and condition in (None, r["condition"]):
                    nights.setdefault((r["condition"], r["night"]), []).append(
                        (r["started_at"], float(r["log_ratio"])))
        if not nights:
            raise SystemExit(f"{path}: no recorded night" + (f" of {condition!r}" if condition else ""))
        _BANKS[key] = [[x for _, x in sorted(v)] for v in nights.values()]
    return _BANKS[key]


def effects(a, scenario: str):
    s0 = a.step_night - 1
    if scenario == "aa":
        return lambda i: 0.0
    if scenario == "step":
        return lambda i: a.effect if i >= s0 else 0.0
    if scenario == "drift":
        return lambda i: a.drift * (i - s0 + 1) if i >= s0 else 0.0
    raise SystemExit(f"unknown scenario {scenario!r}: aa, step or drift")


def share(x) -> str:
    x = np.asarray(x, dtype=float)
    p = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
    return f"{p * 100:.1f} % ± {se * 100:.1f}"


def lapses(r: list[str], start: int) -> bool:
    """Whether the report is let go after a call: a night regressed, a later one not."""
    first = next((i for i in range(start, len(r)) if r[i] == "regressed"), None)
    return first is not None and any(x != "regressed" for x in r[first + 1:])


def red_stretches(runs: list[list[str]], full: int) -> str:
    """False red stretches (maximal runs of nights called regressed) in unchanged series,
    counted over the nights judged against a full history (nights ``full + 1`` on), per year
    of such nights (365), with a stretch's mean length: what a nightly left on shows a team."""
    lengths: list[int] = []
    nights = 0
    for r in runs:
        tail = r[full:]
        nights += len(tail)
        k = 0
        for x in [*tail, "pass"]:
            if x == "regressed":
                k += 1
            elif k:
                lengths.append(k)
                k = 0
    if not nights:
        return "false red stretches: no night after the history is full"
    per_year = len(lengths) / nights * 365.0
    se = math.sqrt(len(lengths)) / nights * 365.0   # Poisson
    return (f"false red stretches after the history is full: {len(lengths)} in {nights} nights, "
            f"{per_year:.2f} ± {se:.2f} a year (365 nights), "
            f"{np.mean(lengths) if lengths else 0:.1f} nights each on average")


def nights_to_call(first: list[int], span: int) -> str:
    """The nights from a change to its first call (1: called on its first night): median,
    90th and 95th percentile over series, a series never called counted as never (the
    percentile then reads "never")."""
    got = sorted(f + 1 if f != 99 else math.inf for f in first)

    def pct(q: float) -> str:
        x = got[min(len(got) - 1, math.ceil(q * len(got)) - 1)]
        return "never" if math.isinf(x) else f"{x:.0f}"
    return (f"nights to the first call (1 = its first night; {len(got)} series, never called "
            f"counted as never in {span}): median {pct(0.5)}, 90th percentile {pct(0.9)}, "
            f"95th {pct(0.95)}")


def exits(a, codes: list[list[int]], s0: int | None) -> None:
    """The nights' exit statuses (what a release gate reads): the share of nights with each
    code while the history is built (its first ``history_nights``) and after, the first night
    that exits 0, the series with a blind night (4); with a change from night ``s0 + 1``, the
    codes of the nights from it on and the series with a green night (0) after it, before and
    after its first call."""
    full = a.history_nights
    spans = [("nights 1-3", 0, 3), (f"nights 4-{full}", 3, full),
             (f"nights {full + 1}-{a.nights}", full, a.nights)]
    if s0 is not None:
        spans.append((f"nights {s0 + 1}-{a.nights} (the change on)", s0, a.nights))
    for name, lo, hi in spans:
        if hi > lo:
            print(f"  exit status, {name}: " + "; ".join(
                f"{code} {share([np.mean([c == code for c in r[lo:hi]]) for r in codes])}"
                for code in (0, 1, 2, 3, 4) if any(code in r[lo:hi] for r in codes)))
    green = [r.index(0) + 1 for r in codes if 0 in r]
    first = (f"median {np.median(green):.0f}, 90th percentile {np.percentile(green, 90):.0f}, "
             f"last {max(green)} ({len(green)} of {len(codes)} series)" if green else "none")
    print(f"  first night that exits 0: {first}; series with a blind night (4) "
          f"{share([4 in r for r in codes])}")
    if s0 is not None:
        called = [r[s0:].index(1) if 1 in r[s0:] else None for r in codes]
        waits = [r[s0:s0 + (c if c is not None else len(r))] for r, c in zip(codes, called)]
        after = [0 in r[s0 + c:] for r, c in zip(codes, called) if c is not None]
        print(f"  series with a night that exits 0 after the change: before its first call "
              f"{share([0 in w for w in waits])} (one that exits 3 or 4 "
              f"{share([3 in w or 4 in w for w in waits])}); after it {share(after)} "
              f"({len(after)} series called)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=None, help="a nightly config (default: the embedded one)")
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--nights", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cell-sd", default="0.045", help="per-duet sd of ln ratio: one for "
                    "every judged cell, or one a cell (comma-separated)")
    ap.add_argument("--night-sd", type=float, default=0.01)
    ap.add_argument("--duets", type=int, default=None, help="duets before a night's first look "
                    "(default: the config's runs less its warmup)")
    ap.add_argument("--max-duets", type=int, default=None, help="default: the config's max_runs")
    ap.add_argument("--history", type=int, default=None, help="default: history_nights")
    ap.add_argument("--alpha", type=float, default=None, help="default: the config's alpha")
    ap.add_argument("--threshold", type=float, default=None, help="%% (default: the config's)")
    ap.add_argument("--effect", type=float, default=None, help="step size in %% (default: the "
                    "threshold)")
    ap.add_argument("--step-night", type=int, default=17, help="1-based night the step starts")
    ap.add_argument("--drift", type=float, default=0.5, help="%% a night")
    ap.add_argument("--noise", default="iid", choices=NOISES, help="the noise's regime "
                    "(``noise``'s docstring)")
    ap.add_argument("--bank", default=str(Path(__file__).resolve().parents[1] / "tests" / "data"
                                          / "noise_bank" / "duets.csv"),
                    help="--noise bank: the recorded duets (bench/noise_bank.py)")
    ap.add_argument("--bank-condition", default=None, help="--noise bank: one condition only")
    ap.add_argument("--loading-sd", type=float, default=0.07)
    ap.add_argument("--host-sd", type=float, default=0.17)
    ap.add_argument("--host-rho", type=float, default=0.5)
    ap.add_argument("--weekly", type=float, default=1.5, help="%%")
    ap.add_argument("--busy-every", type=float, default=8.0)
    ap.add_argument("--busy-factor", type=float, default=3.0)
    ap.add_argument("--scenarios", default="aa,step,drift")
    ap.add_argument("--jobs", type=int, default=1, help="processes (the series are the same)")
    a = ap.parse_args()
    cfg = design(a)
    _, keys = judged(cfg)
    thresholds = {t for _, t in keys}
    if len(thresholds) != 1:
        raise SystemExit(f"the judged cells have thresholds {sorted(thresholds)}: one needed")
    threshold = thresholds.pop()
    sds = [float(x) for x in a.cell_sd.split(",")]
    sds = sds * len(keys) if len(sds) == 1 else sds
    if len(sds) != len(keys):
        raise SystemExit(f"--cell-sd gives {len(sds)} sds for {len(keys)} judged cells")
    a.effect = a.effect if a.effect is not None else threshold
    a.history_nights = cfg.settings.history_nights
    s0 = a.step_night - 1
    st = cfg.settings
    print(f"{a.series} series x {a.nights} nights per scenario, seed {a.seed}; config "
          f"{cfg.source}: {len(keys)} judged cell(s) ({', '.join(k.label() + ' ' + k.metric for k, _ in keys)}), "
          f"duet sd {', '.join(f'{x * 100:g} %' for x in sds)}, night part {a.night_sd * 100:g} %, noise {a.noise}; "
          f"looks at {cfg.looks.schedule()} duets; history {st.history_nights} nights; alpha "
          f"{st.alpha:g} a night; threshold {threshold:g} %; confidence {st.confidence:g}")
    for scenario in a.scenarios.split(","):
        t0 = time.perf_counter()
        jobs = [(a, cfg, sds, scenario, s) for s in range(a.series)]
        if a.jobs > 1:
            with Pool(a.jobs) as pool:
                got = pool.map(series, jobs, chunksize=1)
        else:
            got = [series(j) for j in jobs]
        runs = [r for r, _, _ in got]
        mean_duets = np.mean([np.mean(d) for _, d, _ in got])
        took = time.perf_counter() - t0
        tail = f"mean duets a night {mean_duets:.1f}; {took:.0f} s"
        if scenario == "aa":
            anyf = [any(x == "regressed" for x in r) for r in runs]
            nightly = [np.mean([x == "regressed" for x in r]) for r in runs]
            called = [sum(x == "regressed" for x in r) for r in runs if "regressed" in r]
            print(f"\naa: series with a false regressed night {share(anyf)}; nights called "
                  f"regressed {share(nightly)} (in a series with a call: {np.mean(called) if called else 0:.1f} "
                  f"nights on average); improved "
                  f"{share([np.mean([x == 'improved' for x in r]) for r in runs])} ({tail})")
            print("  " + red_stretches(runs, a.history_nights))
        elif scenario == "step":
            after = [np.mean([x == "regressed" for x in r[s0:]]) for r in runs]
            first = [next((i for i, x in enumerate(r[s0:]) if x == "regressed"), 99) for r in runs]
            before = [any(x == "regressed" for x in r[:s0]) for r in runs]
            print(f"\nstep +{a.effect:g} % from night {a.step_night}: nights after it reported "
                  f"regressed {share(after)}; called on its first night "
                  f"{share([f == 0 for f in first])}, within 2 {share([f <= 1 for f in first])}, "
                  f"within 3 {share([f <= 2 for f in first])}; never {share([f == 99 for f in first])}; "
                  f"series whose report lapses after its first call {share([lapses(r, s0) for r in runs])}; "
                  f"false regressions before it {share(before)} ({tail})")
            print("  " + nights_to_call(first, a.nights - s0))
            by = [np.mean([r[s0 + j] == "regressed" for r in runs]) for j in range(a.nights - s0)]
            print("  per night after the step: " + " ".join(f"{x * 100:.0f}" for x in by))
        else:
            cross = s0 + math.ceil(threshold / a.drift) - 1  # the night the drift reaches it
            past = [np.mean([x == "regressed" for x in r[cross:]]) for r in runs]
            flick = [any(r[i] == "regressed" and r[i + 1] != "regressed"
                         for i in range(s0, a.nights - 1)) for r in runs]
            first = [next((i - cross for i in range(s0, a.nights) if r[i] == "regressed"), None)
                     for r in runs]
            got_ = [f for f in first if f is not None]
            print(f"\ndrift +{a.drift:g} % a night from night {a.step_night} (past the threshold "
                  f"from night {cross + 1}): nights reported from then {share(past)}; series "
                  f"that flicker (regressed, then not) {share(flick)}; first report "
                  f"{np.median(got_) if got_ else float('nan'):+.0f} nights from the crossing "
                  f"(median; {len(got_)} of {len(runs)} series) ({tail})")
            by = [np.mean([r[i] == "regressed" for r in runs]) for i in range(s0, a.nights)]
            print("  per night from the drift's start: " + " ".join(f"{x * 100:.0f}" for x in by))
        exits(a, [c for _, _, c in got], s0 if scenario != "aa" else None)


if __name__ == "__main__":
    main()
