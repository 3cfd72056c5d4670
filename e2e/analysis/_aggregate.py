"""Run records -> cells, comparisons with the baseline, warnings: ``summarize``, the whole stage.

Pure (no I/O), deterministic, and it returns one immutable ``Summary`` that every renderer
reads (and that the nightly judges). A *cell* is all runs of one (arm, concurrency, spec mode)
made with the same workload (input and output length, prompts, seed, the workload's kind and
parameters, the arrival process, the warmup: ``_frame.WORKLOAD_FIELDS``) and the same server
settings (``e2e.plan.comparable_settings``); runs that differ in any of these are
never averaged: ``summarize`` refuses them, naming the field (``_frame.comparable`` checks;
``select`` keeps one kind). A cell's figure for a metric is the median (range) of the
*reported* runs: valid runs whose repeat number is at least ``report_from_run`` (earlier ones
are warmups). Invalid runs are never used; they are counted and warned about next to the cell
they belong to. The stage's rooms: ``_summary`` (the values), ``_frame`` (records -> runs,
which may be compared), ``_compare`` (the comparisons, noise, family), this module (cells,
their warnings, the order of it all).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import pandas as pd

from e2e.analysis import _compare
from e2e.analysis._attribution import attribute
from e2e.analysis import stats
from e2e.analysis._compare import estimate_of, primary_metric
from e2e.analysis._frame import (
    WORKLOAD_FIELDS, _arm_order, _drop_non_finite, _duets, _interference, _one_slo, _resolve_report_from_run,
    comparable, equivalence_of, runs_frame, select
)
from e2e.analysis._summary import (
    DEFAULT_CONFIDENCE, DEFAULT_MIN_EFFECT_PCT, MAX_ACCEPTANCE_MOVE, MAX_SPREAD, METRICS,
    MIN_RUNS, SPEC_MODES, Cell, Comparison, Metric, NoiseRow, ReportWarning, RunCounts,
    SegmentRow, Summary, WorkloadRow, metric, position_of
)
from e2e.arms import default_profile
from e2e.names import did_you_mean
from e2e.plan import pinned_of
from e2e.metrics import metric_value
from e2e.results import INTERFERENCE_SHARE, RunRecord

__all__ = ["equivalence_of", "Metric", "METRICS", "metric", "Cell", "Comparison", "NoiseRow",
           "ReportWarning", "RunCounts", "Summary", "runs_frame", "summarize", "comparable",
           "select", "WORKLOAD_FIELDS", "MIN_RUNS", "MAX_SPREAD", "MAX_ACCEPTANCE_MOVE",
           "DEFAULT_MIN_EFFECT_PCT", "DEFAULT_CONFIDENCE", "primary_metric", "estimate_of"]

CLIENT_SERVER_TOLERANCE = 0.05  # client vs server figure of the same runs
_CLIENT_SERVER = (("tpot_ms_mean", "server_tpot_ms_mean"), ("ttft_ms_mean", "server_ttft_ms_mean"),
                  ("e2el_ms_mean", "server_e2el_ms_mean"))


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def _limit(x: float) -> str:
    return f"{x * 100:g} %"


SPREAD_CAUSE = f"spread (max − min) more than {_limit(MAX_SPREAD)} of the median"
OTHERS_SHARE = INTERFERENCE_SHARE
"""Other processes' cores' worth during a run that the session warns about (the one level,
``e2e.results.INTERFERENCE_SHARE``)."""
OWN_SHARE = 0.5
"""A saturated client that used less than this share of its core was starved by others, not
by its own load (the session's rule, ``e2e.load._workload``)."""


def _saturation(saturated: pd.DataFrame, reported: pd.DataFrame,
                where: dict) -> list[ReportWarning]:
    """The saturated client's warnings, by the cause the runs measured: other processes took
    the client's core (it used under half of it while others used a quarter of a core or
    more), or the client's own load (too few client workers)."""
    starved = saturated[(saturated["interference"].fillna(0.0) >= OTHERS_SHARE)
                        & (saturated["client_core_share"].fillna(1.0) < OWN_SHARE)]
    own = saturated.drop(starved.index)
    out = []
    if len(starved):
        most = float(starved["interference"].max())
        out.append(ReportWarning(
            f"the load generator was saturated in {len(starved)} of {len(reported)} reported "
            f"run(s) because other processes took its core (up to {most:.2f} of a core; the "
            "client itself used under half of one): its queueing may show as latency; rerun on "
            "a quiet host, or use --require-quiet", **where,
            cause="the load generator was saturated because other processes took its core "
                  "(the client itself used under half of one): its queueing may show as "
                  "latency; rerun on a quiet host, or use --require-quiet",
            detail=f"{len(starved)} of {len(reported)} runs, others up to {most:.2f} of a core"))
    if len(own):
        out.append(ReportWarning(
            f"the load generator was saturated in {len(own)} of {len(reported)} reported run(s) "
            "by its own load: its queueing may show as latency (raise load.workers, "
            "--client-workers)", **where,
            cause="the load generator was saturated by its own load: its queueing may show as "
                  "latency (raise load.workers, --client-workers)",
            detail=f"{len(own)} of {len(reported)} runs"))
    return out


def _cell_warnings(
    arm: str, conc: int, mode: str, group: pd.DataFrame, report_from_run: int
) -> list[ReportWarning]:
    out: list[ReportWarning] = []
    where = {"arm": arm, "concurrency": conc, "spec_mode": mode}
    invalid = group[~group["valid"]]
    if len(invalid):
        reasons = "; ".join(
            f"run {int(r.repeat)}: {r.invalid_reasons or 'marked invalid'}" for r in invalid.itertuples()
        )
        out.append(ReportWarning(
            f"{len(invalid)} invalid run{'s' if len(invalid) != 1 else ''} excluded ({reasons})",
            **where, cause="invalid runs excluded", detail=reasons))
    reported = group[group["valid"] & (group["repeat"] >= report_from_run)]
    for client, server in _CLIENT_SERVER:
        if client not in reported or server not in reported:
            continue
        both = reported[reported[client].notna() & reported[server].notna() & (reported[server] > 0)]
        if len(both):
            ratio = float((both[client] / both[server]).median())
            if abs(ratio - 1.0) > CLIENT_SERVER_TOLERANCE:
                out.append(ReportWarning(
                    f"the client's {metric(client).label} is {ratio:.2f} x the server's "
                    f"({metric(server).label}, median over {len(both)} run(s); more than "
                    f"{_limit(CLIENT_SERVER_TOLERANCE)} away): one of them does not see what "
                    "the other does", metric=client, **where,
                    cause=f"the client's figure is more than {_limit(CLIENT_SERVER_TOLERANCE)} "
                          "away from the server's (median over the runs): one of them does "
                          "not see what the other does",
                    detail=f"{metric(client).label} {ratio:.2f} x"))
    bursty = reported[reported["burst_affected"]]
    if len(bursty):
        for key in ("tpot_ms_mean", "tpot_ms_median", "ms_per_verify_step"):
            out.append(ReportWarning(
                f"client TPOT burst-affected in {len(bursty)} of {len(reported)} reported run(s) "
                "(streams whose decode time reached the client in one burst: the client's TPOT "
                "understates it; read the server's TPOT)", metric=key, **where,
                cause="client TPOT burst-affected (streams whose decode time reached the client "
                      "in one burst: the client's TPOT understates it; read the server's TPOT)",
                detail=f"{len(bursty)} of {len(reported)} runs"))
    saturated = reported[reported["client_saturated"]]
    if len(saturated):
        out.extend(_saturation(saturated, reported, where))
    foreign = reported[reported["source"] != "fresh"]
    if len(foreign):
        kinds = ", ".join(sorted(set(foreign["source"])))
        out.append(ReportWarning(
            f"{len(foreign)} reported run(s) not on a fresh server started by e2e ({kinds}): "
            "not a fresh server per run; their server settings were not checked", **where,
            cause="reported runs not on a fresh server started by e2e: not a fresh server per "
                  "run; their server settings were not checked",
            detail=f"{len(foreign)}, {kinds}"))
    warmups = group[group["valid"] & (group["repeat"] < report_from_run)]
    if len(reported) == 0:
        out.append(ReportWarning(
            f"no reported runs ({len(warmups)} warmup, {len(invalid)} invalid; reported runs are "
            f"valid runs {report_from_run} and later)", **where,
            cause=f"no reported runs (reported runs are valid runs {report_from_run} and later)",
            detail=f"{len(warmups)} warmup, {len(invalid)} invalid"))
    elif len(reported) < MIN_RUNS:
        out.append(ReportWarning(
            f"only {len(reported)} reported run{'s' if len(reported) != 1 else ''} (fewer than {MIN_RUNS})",
            **where, cause=f"fewer than {MIN_RUNS} reported runs",
            detail=f"{len(reported)} run{'s' if len(reported) != 1 else ''}"))
    # a run recorded twice in its round; in a duet design an arm is in several duets of a
    # round (it meets every other arm), so copies in different duets are the design's
    seen = Counter((int(r), None if pd.isna(d) else int(d))
                   for r, d in zip(reported["repeat"], reported["duet"]))
    dupes = sorted({r for (r, _), n in seen.items() if n > 1})
    if dupes:
        which = ", ".join(str(d) for d in dupes)
        out.append(ReportWarning(
            f"repeat {which} recorded more than once; all copies used", **where,
            cause="a run recorded more than once in its round; all copies used",
            detail=f"repeat {which}"))
    return out


def _design_explained(warnings: list[ReportWarning],
                      comparisons: Sequence[Comparison]) -> list[ReportWarning]:
    """``warnings`` without the raw-spread ones of cells whose every comparison is the duet
    model's: the runs of a duet share its slow or fast moment, the model's blocks cancel it,
    and the comparison's interval and MDE already say what noise is left."""
    duet: dict[tuple, bool] = {}
    for c in comparisons:
        modelled = c.design == "duet" and c.method in ("model", "blocked")
        for arm in (c.arm, c.baseline):
            key = (arm, c.concurrency, c.spec_mode, c.metric)
            duet[key] = duet.get(key, True) and modelled
    return [w for w in warnings
            if not (w.cause == SPREAD_CAUSE
                    and duet.get((w.arm, w.concurrency, w.spec_mode, w.metric), False))]


def _median(values: list[float]) -> float | None:
    return float(pd.Series(values, dtype=float).median()) if values else None


def _workload_row(arm: str, conc: int, mode: str, reported: pd.DataFrame,
                  group: pd.DataFrame) -> WorkloadRow:
    """The workload's own figures of one cell, over its reported runs."""
    first = group.iloc[0]
    infos = [w for w in reported["workload_info"] if w is not None]
    hit = tuple(float(w.prefix_cache_hit_rate) for w in infos
                if w.prefix_cache_hit_rate is not None)
    late = tuple((float(w.schedule_lateness_ms_p50), float(w.schedule_lateness_ms_p99),
                  float(w.schedule_lateness_ms_max)) for w in infos
                 if None not in (w.schedule_lateness_ms_p50, w.schedule_lateness_ms_p99,
                                 w.schedule_lateness_ms_max))
    names = list(dict.fromkeys(s.name for w in infos for s in w.segments))
    segments = []
    for name in names:
        parts = [s for w in infos for s in w.segments if s.name == name]
        segments.append(SegmentRow(
            name, len(parts),
            _median([s.ttft_ms_mean for s in parts if s.ttft_ms_mean is not None]),
            _median([s.tpot_ms_mean for s in parts if s.tpot_ms_mean is not None])))
    warmup = first["warmup_requests"]
    return WorkloadRow(arm, conc, mode, workload=str(first["workload"]),
                       arrival=str(first["arrival"]),
                       warmup=None if pd.isna(warmup) else int(warmup), runs=len(reported),
                       hit_rate=hit, lateness_ms=late, segments=tuple(segments))


def _definition_warnings(arm: str, conc: int, mode: str, reported: pd.DataFrame,
                         metrics: Sequence[Metric]) -> list[ReportWarning]:
    """Where an imported run's tool defines a figure otherwise than e2e: one warning per
    definition, on the metric it concerns, with the tool's own figure (median over the cell's
    reported runs) where it gave one."""
    keys = {m.key for m in metrics}
    found: dict[tuple[str | None, str], list[float]] = {}
    for definitions in reported["definitions"]:
        for key, text, value in definitions:
            values = found.setdefault((key if key in keys else None, text), [])
            if value is not None:
                values.append(value)
    out = []
    for (key, text), values in found.items():
        own = ""
        if values:
            unit = f" {metric(key).unit}" if key is not None else ""
            own = (f"; the tool's own figure: {_median(values):.6g}{unit}"
                   + (f" (median of {len(values)} runs)" if len(values) > 1 else ""))
        out.append(ReportWarning(f"defined otherwise by the tool that measured it: {text}{own}",
                                 arm, conc, mode, key))
    return out


def summarize(
    records: Iterable[RunRecord],
    *,
    baseline: str = "main",
    report_from_run: int | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
    extra_warnings: Sequence[ReportWarning] = (),
    metrics: Sequence[Metric] = METRICS,
    equivalence_pct: float = stats.DEFAULT_EQUIVALENCE_PCT,
    target_effect_pct: float | None = None,
) -> Summary:
    """Aggregate run records into cells, comparisons with ``baseline`` and warnings.

    ``report_from_run`` None takes the value from the records' config snapshot (2 if absent).
    Comparisons are blocked by round and host where runs pair up, Welch otherwise, with four
    verdicts (equivalence band ±``equivalence_pct`` %), the MDE, a noise floor and Holm's
    correction across all comparisons (see ``e2e.analysis._compare``). ``target_effect_pct``
    (default: ``equivalence_pct``) is the effect the noise table's "runs needed" aims at."""
    records = list(records)
    if not records:
        raise ValueError("no run records to summarize")
    frame = runs_frame(records, metrics)
    comparable(frame)
    frame, slo_warnings = _one_slo(frame)
    start, warnings = _resolve_report_from_run(frame, report_from_run)
    warnings = list(extra_warnings) + warnings + slo_warnings + _drop_non_finite(frame, metrics)

    experiments = sorted(set(frame["experiment"]))
    if len(experiments) > 1:
        warnings.append(ReportWarning(f"runs of several experiments mixed: {', '.join(experiments)}"))
    arms = _arm_order(records, set(frame["arm"]), baseline)
    if baseline not in arms:
        warnings.append(ReportWarning(
            f"no runs of the baseline arm {baseline!r}{did_you_mean(baseline, arms)}; no "
            f"comparisons (arms: {', '.join(arms)})"))
    concurrencies = tuple(sorted({int(c) for c in frame["concurrency"]}))
    spec_modes = tuple(m for m in SPEC_MODES if m in set(frame["spec_mode"]))

    reported_mask = frame["valid"] & (frame["repeat"] >= start)
    cells: list[Cell] = []
    loads = sorted({(int(c), str(m), str(label)) for c, m, label
                    in zip(frame["concurrency"], frame["spec_mode"], frame["load"])
                    if str(label) != f"concurrency {int(c)}"})
    workloads: list[WorkloadRow] = []
    for (arm, conc, mode), group in frame.groupby(["arm", "concurrency", "spec_mode"], sort=False):
        arm, conc, mode = str(arm), int(conc), str(mode)
        warnings.extend(_cell_warnings(arm, conc, mode, group, start))
        reported = group[reported_mask.loc[group.index]]
        warnings.extend(_definition_warnings(arm, conc, mode, reported, metrics))
        workloads.append(_workload_row(arm, conc, mode, reported, group))
        for m in metrics:
            rows = reported[reported[m.key].notna()]
            if rows.empty:
                continue
            values = tuple(float(v) for v in rows[m.key])
            mr = stats.median_range(values)
            per_window = tuple(tuple(metric_value(w, m.key) for w in ws)
                               for ws in rows["windows_metrics"])
            cell = Cell(arm, conc, mode, m.key, tuple(int(r) for r in rows["repeat"]), values,
                        mr.median, mr.low, mr.high,
                        hosts=tuple(None if pd.isna(h) else str(h) for h in rows["host"]),
                        windows=per_window if any(per_window) else (),
                        duets=_duets(rows["duet"]),
                        interference=_interference(rows["interference"]))
            cells.append(cell)
            spread = cell.spread
            if m.key == "acceptance_length":
                if spread > MAX_ACCEPTANCE_MOVE:
                    warnings.append(ReportWarning(
                        f"acceptance length moved {_pct(spread)} between runs "
                        f"({cell.low:.2f}–{cell.high:.2f}; more than {_limit(MAX_ACCEPTANCE_MOVE)}); "
                        "raw TPOT follows it, compare ms per verify step",
                        arm, conc, mode, m.key,
                        cause=f"acceptance length moved more than {_limit(MAX_ACCEPTANCE_MOVE)} "
                              "between runs; raw TPOT follows it, compare ms per verify step",
                        detail=f"{cell.low:.2f}–{cell.high:.2f}, {_pct(spread)}"))
            elif position_of(m.key) is not None:
                if spread > MAX_ACCEPTANCE_MOVE:
                    warnings.append(ReportWarning(
                        f"{m.label} moved {_pct(spread)} between runs "
                        f"({cell.low:.3f}–{cell.high:.3f}; more than {_limit(MAX_ACCEPTANCE_MOVE)})",
                        arm, conc, mode, m.key,
                        cause=f"acceptance rate per draft position moved more than "
                              f"{_limit(MAX_ACCEPTANCE_MOVE)} between runs",
                        detail=f"position {position_of(m.key)} {_pct(spread)}"))
            elif spread > MAX_SPREAD:
                warnings.append(ReportWarning(
                    f"spread {_pct(spread)} of the median (more than {_limit(MAX_SPREAD)})",
                    arm, conc, mode, m.key,
                    cause=SPREAD_CAUSE,
                    detail=f"{m.label} {_pct(spread)}"))

    arm_rank = {a: i for i, a in enumerate(arms)}
    metric_rank = {m.key: i for i, m in enumerate(metrics)}
    mode_rank = {m: i for i, m in enumerate(SPEC_MODES)}

    def cell_key(c: Cell) -> tuple[int, int, int, int]:
        return (mode_rank[c.spec_mode], c.concurrency, metric_rank[c.metric], arm_rank[c.arm])

    cells.sort(key=cell_key)
    index = {(c.arm, c.concurrency, c.spec_mode, c.metric): c for c in cells}

    comparisons: list[Comparison] = []
    noise: tuple[NoiseRow, ...] = ()
    aa_arms: tuple[str, ...] = ()
    pooled: list[str] = []
    if baseline in arms:
        aa_arms = _compare.aa_arms(records, baseline, arms)
        comparisons, noise, more, pooled = _compare.compare(
            cells, index, baseline=baseline, slots=_compare.slots(records), times=_compare.run_times(records),
            aa_arms=aa_arms,
            confidence=confidence, min_effect_pct=min_effect_pct,
            equivalence_pct=equivalence_pct, target_effect_pct=target_effect_pct)
        warnings.extend(more)
        warnings = _design_explained(warnings, comparisons)

    def warning_key(w: ReportWarning) -> tuple:
        if w.arm is None:
            return (0, 0, 0, 0, 0)
        return (1, mode_rank.get(w.spec_mode or "", 9), w.concurrency or 0,
                arm_rank.get(w.arm, 99), -1 if w.metric is None else metric_rank[w.metric])

    warnings.sort(key=warning_key)
    invalid = int((~frame["valid"]).sum())
    return Summary(
        experiment=experiments[0] if len(experiments) == 1 else "+".join(experiments),
        baseline=baseline,
        arms=arms,
        concurrencies=concurrencies,
        spec_modes=spec_modes,
        report_from_run=start,
        counts=RunCounts(
            total=len(frame),
            reported=int(reported_mask.sum()),
            warmup=int((frame["valid"] & (frame["repeat"] < start)).sum()),
            invalid=invalid,
        ),
        cells=tuple(cells),
        comparisons=tuple(comparisons),
        warnings=tuple(warnings),
        confidence=confidence,
        min_effect_pct=min_effect_pct,
        metrics=tuple(metrics),
        equivalence_pct=equivalence_pct,
        noise=noise,
        aa_arms=aa_arms,
        n_comparisons=sum(1 for c in comparisons if c.p_holm is not None),
        pooled=tuple(pooled),
        attributions=attribute(comparisons),
        speculators=tuple(sorted({name for r in records if r.spec.dspark
                                  for name in [default_profile((r.config or {}).get("speculators") or {})
                                               if isinstance(r.config, dict) else None]
                                  if name is not None})),
        pinned=tuple(sorted({p for r in records if r.spec.dspark
                             for p in [pinned_of(r.config)] if p is not None})),
        loads=tuple(loads),
        workloads=tuple(sorted(workloads, key=lambda w: (
            mode_rank[w.spec_mode], w.concurrency, arm_rank.get(w.arm, 99)))),
    )
