"""A frame of checked runs -> the report's cells (``cells_of``): each (arm, concurrency, spec
mode, metric)'s reported runs and their median (range), the cell's warnings (invalid runs,
warmups only, too few runs, client against server, bursts, a saturated client, a server e2e
did not start, a run recorded twice, a spread or an acceptance that moved) and the workload's
own figures. Reported runs are valid runs whose repeat is at least ``report_from_run``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from e2e.analysis.estimators.estimates import median_range
from e2e.analysis.sweep.frame import _duets, _interference
from e2e.analysis.sweep.summary import (
    MAX_ACCEPTANCE_MOVE, MAX_SPREAD, MIN_RUNS, Cell, Metric, ReportWarning, SegmentRow,
    WorkloadRow, metric
)
from e2e.results.records import INTERFERENCE_SHARE
from e2e.metrics import position_of

__all__ = ["cells_of", "SPREAD_CAUSE", "CLIENT_SERVER_TOLERANCE"]

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
``e2e.results.records.INTERFERENCE_SHARE``)."""
OWN_SHARE = 0.5
"""A saturated client that used less than this share of its core was starved by others, not
by its own load (the session's rule, ``e2e.load.workload``)."""


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



def _spread_warning(cell: Cell, m: Metric) -> ReportWarning | None:
    """The warning of a cell whose runs moved more than their limit, by what moved."""
    spread = cell.spread
    where = (cell.arm, cell.concurrency, cell.spec_mode, m.key)
    if m.key == "acceptance_length":
        if spread <= MAX_ACCEPTANCE_MOVE:
            return None
        return ReportWarning(
            f"acceptance length moved {_pct(spread)} between runs "
            f"({cell.low:.2f}–{cell.high:.2f}; more than {_limit(MAX_ACCEPTANCE_MOVE)}); "
            "raw TPOT follows it, compare ms per verify step",
            *where,
            cause=f"acceptance length moved more than {_limit(MAX_ACCEPTANCE_MOVE)} "
                  "between runs; raw TPOT follows it, compare ms per verify step",
            detail=f"{cell.low:.2f}–{cell.high:.2f}, {_pct(spread)}")
    if position_of(m.key) is not None:
        if spread <= MAX_ACCEPTANCE_MOVE:
            return None
        return ReportWarning(
            f"{m.label} moved {_pct(spread)} between runs "
            f"({cell.low:.3f}–{cell.high:.3f}; more than {_limit(MAX_ACCEPTANCE_MOVE)})",
            *where,
            cause=f"acceptance rate per draft position moved more than "
                  f"{_limit(MAX_ACCEPTANCE_MOVE)} between runs",
            detail=f"position {position_of(m.key)} {_pct(spread)}")
    if spread > MAX_SPREAD:
        return ReportWarning(
            f"spread {_pct(spread)} of the median (more than {_limit(MAX_SPREAD)})",
            *where, cause=SPREAD_CAUSE, detail=f"{m.label} {_pct(spread)}")
    return None


def cells_of(frame: pd.DataFrame, start: int, metrics: Sequence[Metric]
             ) -> tuple[list[Cell], list[WorkloadRow], list[ReportWarning]]:
    """Every (arm, concurrency, spec mode) group of ``frame`` (``frame.checked_runs``) with
    reported runs from repeat ``start`` on: its cells (one per metric with a value), its
    workload row and its warnings, in the frame's order."""
    reported_mask = frame["valid"] & (frame["repeat"] >= start)
    cells: list[Cell] = []
    workloads: list[WorkloadRow] = []
    warnings: list[ReportWarning] = []
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
            mr = median_range(values)
            per_window = tuple(ws[m.key] for ws in rows["window_values"])
            cell = Cell(arm, conc, mode, m.key, tuple(int(r) for r in rows["repeat"]), values,
                        mr.median, mr.low, mr.high,
                        hosts=tuple(None if pd.isna(h) else str(h) for h in rows["host"]),
                        windows=per_window if any(per_window) else (),
                        duets=_duets(rows["duet"]),
                        interference=_interference(rows["interference"]))
            cells.append(cell)
            spread = _spread_warning(cell, m)
            if spread is not None:
                warnings.append(spread)
    return cells, workloads, warnings
