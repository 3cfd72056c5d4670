"""Run records -> one pandas frame of runs, checked (``checked_runs``): which runs may share a
cell (``comparable``), which are kept (``select``), the arms' order and which are A/A repeats
of the baseline (``aa_arms``), the warmups (``report_from_run``), each run's slot in its block
(``slots``) and place on its host's timeline (``run_times``), and the equivalence band of the
records' config.

What a run's load was is read once here (``field_of``), for e2e's runs and imported ones
alike, and for records written before a field existed: the workload (``workload_key``: its
kind and every parameter that shapes the requests, a trace by its file's hash), the arrival
process (``arrival_of``: a closed loop, or an open loop's distribution, rate and cap) and the
warmup (None where the tool did not record it: unknown, never refused)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from e2e.analysis.sweep.summary import DEFAULT_REPORT_FROM_RUN, METRICS, Metric, ReportWarning, RunKey
from e2e.config import TraceReplay
from e2e.names import did_you_mean
from e2e.plan import comparable_settings
from e2e.metrics import metric_value
from e2e.results.records import RunRecord

__all__ = ["WORKLOAD_FIELDS", "CheckedRuns", "checked_runs", "runs_frame", "comparable",
           "select", "equivalence_of", "workload_key", "arrival_of", "field_of", "load_label",
           "aa_arms", "arm_order", "slots", "run_times"]

# What must be equal for runs to share a cell (besides arm, concurrency and spec mode).
WORKLOAD_FIELDS = ("input_len", "output_len", "prompts", "seed", "request_rate", "burstiness",
                   "max_concurrency", "windows", "workload", "arrival", "warmup_requests")
_UNKNOWN_ALLOWED = ("warmup_requests",)  # None there: the tool did not record it, not refused
_SETTINGS = ("server_settings", "arm_settings")
_FRAME_COLUMNS = (["experiment", "run_id", "arm", "concurrency", "spec_mode", "repeat", "host", "duet", "interference", "valid",
                   "invalid_reasons", "report_from_run", "source", "burst_affected",
                   "client_core_share",
                   "client_saturated", "goodput_slo", "window_values", "load", "workload_info",
                   "definitions", *WORKLOAD_FIELDS, *_SETTINGS]
                  + [m.key for m in METRICS])


def _imported(record: RunRecord) -> dict:
    provenance = record.provenance if isinstance(record.provenance, dict) else {}
    imported = provenance.get("imported")
    return imported if isinstance(imported, dict) else {}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if np.isfinite(value) and value > 0 else None


def _legacy_rate(record: RunRecord) -> tuple[float | None, float | None]:
    """An import written before imports kept the arrival process: a vllm bench file's open
    loop (its ``request_rate``, ``burstiness`` kept among the extras); (None, None) else."""
    if record.spec.request_rate is not None:
        return None, None
    extra = _imported(record).get("extra")
    if not isinstance(extra, dict):
        return None, None
    return _number(extra.get("request_rate")), _number(extra.get("burstiness"))


def workload_key(record: RunRecord) -> str:
    """The run's workload as one value: ``reference``, or the workload's tag (every parameter
    that shapes its requests: ``sp4x8p896``, ``mt8x4u64t0.5``), for a trace its tag, block
    size, request cap and the first 12 hex digits of the file's SHA-256 (the same file under
    another path is the same workload; another file of the same name is not)."""
    shape = record.spec.workload
    if shape is None:
        return "reference"
    if not isinstance(shape, TraceReplay):
        return shape.tag
    digest = record.workload.source_sha256 if record.workload is not None else None
    parts = [shape.tag, f"b{shape.block_size}"]
    if shape.max_requests is not None:
        parts.append(f"n{shape.max_requests}")
    parts.append(digest[:12] if digest else "unhashed")
    return "-".join(parts)


def field_of(record: RunRecord, field: str) -> object:
    """A workload field of ``record`` as the cell key uses it (``WORKLOAD_FIELDS``)."""
    spec = record.spec
    if field == "workload":
        return workload_key(record)
    if field == "arrival":
        return arrival_of(record)
    if field == "warmup_requests":
        imported = _imported(record)
        if "warmup_requests" in (imported.get("defaulted") or ()):
            return None  # the tool did not record it (vllm bench's --num-warmups)
        if imported and spec.warmup_requests == 0 and isinstance(imported.get("warmup_records"), int):
            return int(imported["warmup_records"])  # an AIPerf import made before it kept them
        return spec.warmup_requests
    if field in ("request_rate", "burstiness", "max_concurrency"):
        rate, burst = _legacy_rate(record)
        if rate is not None:
            return {"request_rate": rate, "burstiness": burst or 1.0,
                    "max_concurrency": spec.max_concurrency or spec.concurrency}[field]
    return getattr(spec, field)


def arrival_of(record: RunRecord) -> str:
    """How the run's requests arrived: ``closed loop``; ``trace 2× (…)`` (a trace's own
    times, sped up); or an open loop: ``poisson 3 req/s``, ``gamma 0.5 3 req/s`` (gamma gaps
    of that shape), ``constant 3 req/s`` (an imported tool's even gaps), each with ``, at most
    N in flight`` where capped."""
    cap = field_of(record, "max_concurrency")
    capped = f", at most {cap} in flight" if cap else ""
    shape = record.spec.workload
    if isinstance(shape, TraceReplay):
        return f"trace {shape.speedup:g}×{capped}"
    rate = field_of(record, "request_rate")
    if rate is None:
        return "closed loop"
    kind = _imported(record).get("arrival")
    if kind != "constant":
        burst = float(field_of(record, "burstiness") or 1.0)
        kind = "poisson" if burst == 1.0 else f"gamma {burst:g}"
    return f"{kind} {float(rate):g} req/s{capped}"


def load_label(record: RunRecord) -> str:
    """What the report's load column says of a run: ``concurrency N`` for a closed loop, else
    its arrival process (an open loop's concurrency is no load of its own)."""
    arrival = arrival_of(record)
    return f"concurrency {record.spec.concurrency}" if arrival == "closed loop" else arrival


def _definitions(record: RunRecord) -> tuple:
    """An imported run's figures whose definition differs from e2e's: ((metric or None,
    definition, the tool's own value or None), ...)."""
    out = []
    for item in _imported(record).get("definitions") or ():
        if isinstance(item, dict) and isinstance(item.get("definition"), str):
            value = item.get("tool_value")
            out.append((item.get("metric") if isinstance(item.get("metric"), str) else None,
                        item["definition"],
                        float(value) if _number(value) is not None else None))
    return tuple(out)


def _duets(column) -> tuple[int | None, ...]:
    """A cell's runs' duets (its ``duet`` column), or () when none was in a duet."""
    duets = tuple(None if pd.isna(d) else int(d) for d in column)
    return duets if any(d is not None for d in duets) else ()


def _interference(column) -> tuple[float | None, ...]:
    """A cell's runs' recorded interference, or () when a run did not record it."""
    busy = tuple(None if pd.isna(b) else float(b) for b in column)
    return busy if all(b is not None for b in busy) else ()


def _host(record: RunRecord) -> str | None:
    host = record.provenance.get("host") if isinstance(record.provenance, dict) else None
    name = host.get("hostname") if isinstance(host, dict) else None
    return str(name) if name is not None else None


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _settings(record: RunRecord) -> dict[str, str | None]:
    """The record's comparable server and arm settings as canonical JSON; None (unknown, not
    checked) for a record without a config snapshot, e.g. one imported from vllm bench."""
    config = record.config if isinstance(record.config, dict) else {}
    if not config.get("server"):
        return {"server_settings": None, "arm_settings": None}
    settings = comparable_settings(config, record.spec.arm)
    arm = settings.pop("arm")
    if not record.spec.dspark:  # the speculator profile does not touch a run without it
        settings.pop("speculators", None)
    return {"server_settings": _canonical(settings), "arm_settings": _canonical(arm)}


def runs_frame(records: Iterable[RunRecord], metrics: Sequence[Metric] = METRICS) -> pd.DataFrame:
    """One row per run: identity, workload, settings, validity and every metric in
    ``metrics`` (NaN if absent)."""
    rows = []
    for r in records:
        rows.append({
            "experiment": r.experiment,
            "run_id": r.run_id,
            "arm": r.spec.arm,
            "concurrency": int(r.spec.concurrency),
            "spec_mode": r.spec.spec_mode,
            "repeat": int(r.spec.repeat),
            "host": _host(r),
            "duet": r.spec.duet,
            "interference": (r.host_noise.other_cpu_share if r.host_noise is not None
                             else None),
            "valid": bool(r.valid and r.metrics is not None),
            "invalid_reasons": "; ".join(r.invalid_reasons) if r.invalid_reasons
            else ("" if r.metrics is not None else "no metrics"),
            "report_from_run": r.config.get("report_from_run") if isinstance(r.config, dict) else None,
            "burst_affected": bool(r.bursts is not None and r.bursts.affected),
            "client_saturated": bool(r.client is not None and r.client.saturated),
            "client_core_share": r.client.core_share if r.client is not None else None,
            "goodput_slo": r.metrics.goodput_slo if r.metrics is not None else None,
            "load": load_label(r),
            "workload_info": r.workload,
            "definitions": _definitions(r),
            "source": ("imported" if "imported" in (r.provenance or {})
                       else r.server.kind),  # fresh (started by e2e), external, imported
            **{f: field_of(r, f) for f in WORKLOAD_FIELDS},
            **_settings(r),
            "window_values": {m.key: tuple(metric_value(w, m.key) for w in r.windows)
                              for m in metrics},
            **{m.key: metric_value(r.metrics, m.key) for m in metrics},
        })
    columns = _FRAME_COLUMNS[:-len(METRICS)] + [m.key for m in metrics]
    frame = pd.DataFrame(rows, columns=columns)
    for m in metrics:
        frame[m.key] = pd.to_numeric(frame[m.key], errors="coerce").astype(float)
    return frame.sort_values(["arm", "spec_mode", "concurrency", "repeat", "run_id"],
                             kind="stable").reset_index(drop=True)


def _drop_non_finite(frame: pd.DataFrame, metrics: Sequence[Metric]) -> list[ReportWarning]:
    """A run's metric that is infinite (a record made by hand or by another tool) is left out
    of its cell, in place, with a warning naming the run: it cannot be averaged, and the other
    metrics of the run still count."""
    out = []
    for m in metrics:
        bad = ~np.isfinite(frame[m.key]) & frame[m.key].notna()
        for run_id in frame.loc[bad, "run_id"]:
            out.append(ReportWarning(f"{run_id}: {m.label} is not a finite number; left out",
                                     metric=m.key))
        frame.loc[bad, m.key] = np.nan
    return out


def _diff_keys(a: object, b: object, prefix: str = "") -> list[str]:
    """Dotted keys where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            out += _diff_keys(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".") or "(value)"]


def _pick(value: object, key: str) -> object:
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def comparable(frame: pd.DataFrame) -> None:
    """Raise ValueError, naming the field and its values, when runs that would share a
    comparison differ in their workload (per concurrency and spec mode, across arms) or in
    their server settings; or when runs of one arm differ in that arm's settings."""
    def refuse(field: str, column: str, group: pd.DataFrame, where: str,
               keys: list[str] | None = None) -> None:
        parts = []
        for value, rows in group.groupby(column, sort=True, dropna=False):
            ids = ", ".join(list(rows["run_id"])[:3]) + (", ..." if len(rows) > 3 else "")
            if keys is None and pd.isna(value):
                value = "unknown" if field in _UNKNOWN_ALLOWED else "none"
            elif isinstance(value, float) and value.is_integer() and field in _UNKNOWN_ALLOWED:
                value = int(value)
            if keys is not None:  # settings: show only the keys that differ
                data = json.loads(value)
                value = ", ".join(f"{k}={json.dumps(_pick(data, k))}" for k in keys)
            parts.append(f"{value} in {len(rows)} run(s) ({ids})")
        hint = (f"report one of them: e2e report DIR --only {field}=VALUE"
                if field in WORKLOAD_FIELDS
                else "put the runs of each setting in their own --results folder")
        raise ValueError(f"runs that would be compared differ in {field} ({where}): "
                         f"{'; '.join(parts)}; they are not averaged together; {hint}")

    def differing(values: list[str]) -> list[str]:  # (unknown settings are never refused)
        data = [json.loads(v) for v in values]
        return sorted({k for d in data[1:] for k in _diff_keys(data[0], d)})

    for (conc, mode), group in frame.groupby(["concurrency", "spec_mode"], sort=True):
        loads = group["load"].unique()
        where = f"{loads[0] if len(loads) == 1 else f'concurrency {conc}'}, {mode}"
        for field in WORKLOAD_FIELDS:
            if group[field].nunique(dropna=field in _UNKNOWN_ALLOWED) > 1:
                refuse(field, field, group, where)
        if group["server_settings"].nunique() > 1:
            keys = differing(list(group["server_settings"].unique()))
            refuse(f"server settings ({', '.join(keys)})", "server_settings", group, where, keys)
    for arm, group in frame.groupby("arm", sort=True):
        if group["arm_settings"].nunique() > 1:
            keys = differing(list(group["arm_settings"].unique()))
            refuse(f"arms.{arm} settings ({', '.join(keys)})", "arm_settings", group,
                   f"arm {arm}", keys)


def _one_slo(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[ReportWarning]]:
    """Goodput is a figure of its SLO: where runs that would be compared were measured against
    different SLOs, their goodput is not used (the other metrics are) and a warning says so."""
    if "goodput_req_s" not in frame:
        return frame, []
    frame = frame.copy()
    warnings = []
    for (conc, mode), group in frame.groupby(["concurrency", "spec_mode"], sort=True):
        slos = sorted(set(group["goodput_slo"].dropna()))
        if len(slos) > 1:
            frame.loc[group.index, "goodput_req_s"] = float("nan")
            warnings.append(ReportWarning(
                f"goodput not compared at concurrency {conc}, {mode}: its runs were measured "
                f"against different SLOs ({'; '.join(slos)}); measure every arm with one --slo"))
    return frame, warnings


def _matches(record: RunRecord, field: str, value: str) -> bool:
    if field in ("arm", "concurrency", "spec_mode"):
        return str(getattr(record.spec, field)) == value
    have = field_of(record, field)
    if field == "workload":  # the whole key, or the tag a config's cell names carry
        shape = record.spec.workload
        return value in (have, shape.tag if shape is not None else "reference")
    if field in ("request_rate", "burstiness") and have is not None:
        try:
            return float(have) == float(value)
        except ValueError:
            return False
    return str(have) == value


def select(records: Iterable[RunRecord], only: dict[str, str]) -> list[RunRecord]:
    """The records whose spec matches every ``field=value`` of ``only`` (fields:
    ``WORKLOAD_FIELDS``, arm, concurrency, spec_mode; ``workload`` by its whole key or its
    tag, ``arrival`` as the report's refusal names it)."""
    allowed = (*WORKLOAD_FIELDS, "arm", "concurrency", "spec_mode")
    for field in only:
        if field not in allowed:
            raise ValueError(f"--only {field}: not a field runs can be selected by"
                             f"{did_you_mean(field, allowed)} (allowed: {', '.join(allowed)})")
    return [r for r in records if all(_matches(r, f, str(v)) for f, v in only.items())]


def arm_order(records: Sequence[RunRecord], present: set[str], baseline: str) -> tuple[str, ...]:
    """Baseline first, then the arms in the config snapshot's order, then any others sorted."""
    order: list[str] = []
    for r in records:
        arms = r.config.get("arms") if isinstance(r.config, dict) else None
        if isinstance(arms, dict):
            order.extend(a for a in arms if a not in order)
    ordered = [a for a in order if a in present]
    ordered += sorted(present - set(ordered))
    if baseline in ordered:
        ordered.remove(baseline)
        ordered.insert(0, baseline)
    return tuple(ordered)


def _resolve_report_from_run(
    frame: pd.DataFrame, override: int | None
) -> tuple[int, list[ReportWarning]]:
    if override is not None:
        if override < 1:
            raise ValueError(f"report_from_run must be >= 1, got {override}")
        return override, []
    seen = sorted({int(v) for v in frame["report_from_run"].dropna()})
    if not seen:
        return DEFAULT_REPORT_FROM_RUN, []
    if len(seen) == 1:
        return seen[0], []
    chosen = max(seen)
    return chosen, [ReportWarning(
        f"runs were recorded with different report_from_run settings ({', '.join(map(str, seen))}); "
        f"using {chosen}"
    )]




def equivalence_of(records) -> float:
    """The equivalence band (±%) of the records' config snapshot (the largest if they
    differ; 1 % when none says)."""
    bands = [r.config.get("equivalence_pct") for r in records if isinstance(r.config, dict)]
    bands = [float(b) for b in bands if b is not None]
    return max(bands) if bands else 1.0


def aa_arms(records: Sequence[RunRecord], baseline: str, arms: Sequence[str]) -> tuple[str, ...]:
    """Arms whose comparable settings (``config.comparable_settings``: description aside)
    equal the baseline's: repeats of the baseline, whose comparison measures the noise (A/A)."""
    config: dict = {}
    for r in records:
        if isinstance(r.config, dict) and isinstance(r.config.get("arms"), dict):
            config = {**r.config, "arms": {**config.get("arms", {}), **r.config["arms"]}}
    known = config.get("arms", {})
    if baseline not in known:
        return ()
    base = comparable_settings(config, baseline)["arm"]
    return tuple(a for a in arms if a != baseline and a in known
                 and comparable_settings(config, a)["arm"] == base)


def slots(records: Sequence[RunRecord]) -> dict[RunKey, int | None]:
    """Each run's position in its block (0 = first): the rank of its start time among the
    runs of the same round, host, concurrency and spec mode (the runs a host made back to back).
    None for every run of a block whose start times are missing, unparsable or tied (then the
    model has no slot term). A block is (round, host): the sweep runs round k of every arm of a
    cell back to back, on one host."""
    groups: dict[tuple, list[tuple[RunKey, object]]] = {}
    out: dict[RunKey, int | None] = {}
    for r in records:
        name = _host(r)
        if r.spec.duet is not None:  # measured together: its slot is its place in the block
            out[(r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode, int(r.spec.repeat), name,
                 int(r.spec.duet))] = r.spec.slot
            continue
        key = (r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode, int(r.spec.repeat), name)
        when = _started(r)  # None where unparsable; a naive time (an imported file's) as UTC
        groups.setdefault((key[3], name, key[1], key[2]), []).append((key, when))
    for runs in groups.values():
        times = [w for _, w in runs]
        if any(w is None for w in times) or len(set(times)) < len(times):
            out.update({k: None for k, _ in runs})
            continue
        for rank, (k, _) in enumerate(sorted(runs, key=lambda kw: kw[1])):
            out[k] = rank
    return out


def _started(r: RunRecord):
    from datetime import datetime, timezone

    try:
        when = datetime.fromisoformat(str(r.started_at))
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


def run_times(records: Sequence[RunRecord]) -> dict[RunKey, float]:
    """Each sequential run's start on its host's timeline, in runs: seconds since the host's
    first run over the median spacing of the host's consecutive starts (so one run apart is
    about 1, a round of other cells in between more, a resume the next day very far). Runs
    measured in duets, or on a host with fewer than 3 parsable, distinct start times, have none
    (then the cell model has no time term: ``cell_model``)."""
    hosts: dict[str | None, list[tuple[RunKey, object]]] = {}
    for r in records:
        when = _started(r)
        if r.spec.duet is not None or when is None:
            continue
        key = (r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode, int(r.spec.repeat), _host(r))
        hosts.setdefault(key[4], []).append((key, when))
    out: dict[RunKey, float] = {}
    for runs in hosts.values():
        starts = sorted(w.timestamp() for _, w in runs)
        gaps = [b - a for a, b in zip(starts, starts[1:]) if b > a]
        if len(set(starts)) < 3 or not gaps:
            continue
        unit = sorted(gaps)[len(gaps) // 2]
        out.update({k: (w.timestamp() - starts[0]) / unit for k, w in runs})
    return out


@dataclass(frozen=True)
class CheckedRuns:
    """Run records as the report reads them (``checked_runs``): one frame row a run, runs that
    may share a cell (``comparable`` refused the others), and what the cells and comparisons
    need of the records besides."""

    frame: pd.DataFrame
    start: int
    """The first reported repeat (``report_from_run``); earlier valid runs are warmups."""
    arms: tuple[str, ...]
    """The baseline first, then the config snapshot's order (``arm_order``)."""
    aa_arms: tuple[str, ...]
    slots: dict[RunKey, int | None]
    times: dict[RunKey, float]
    warnings: tuple[ReportWarning, ...]


def checked_runs(records: Sequence[RunRecord], metrics: Sequence[Metric], *, baseline: str,
                 report_from_run: int | None) -> CheckedRuns:
    """``records`` as one checked frame: raises ValueError where runs that would be compared
    differ (``comparable``); warns where goodput's SLOs differ, where warmup settings differ,
    where a metric is not finite, where experiments mix and where the baseline has no runs."""
    frame = runs_frame(records, metrics)
    comparable(frame)
    frame, slo_warnings = _one_slo(frame)
    start, warnings = _resolve_report_from_run(frame, report_from_run)
    warnings = warnings + slo_warnings + _drop_non_finite(frame, metrics)
    experiments = sorted(set(frame["experiment"]))
    if len(experiments) > 1:
        warnings.append(ReportWarning(f"runs of several experiments mixed: {', '.join(experiments)}"))
    arms = arm_order(records, set(frame["arm"]), baseline)
    if baseline not in arms:
        warnings.append(ReportWarning(
            f"no runs of the baseline arm {baseline!r}{did_you_mean(baseline, arms)}; no "
            f"comparisons (arms: {', '.join(arms)})"))
    return CheckedRuns(frame, start, arms,
                       aa_arms(records, baseline, arms) if baseline in arms else (),
                       slots(records), run_times(records), tuple(warnings))
