"""Run records -> one pandas frame of runs -> cells, comparisons with the baseline, warnings.

``summarize`` is the whole stage: pure (no I/O), deterministic, and it returns one immutable
``Summary`` that every renderer reads (and that the nightly judges). A *cell* is all runs of
one (arm, concurrency, spec mode) made with the same workload (input and output length,
prompts, seed, warmup) and the same server settings (``e2e.config.comparable_settings``);
runs that differ in any of these are never averaged: ``summarize`` refuses them, naming the
field (``comparable`` checks; ``select`` keeps one kind). A cell's figure for a metric is the
median (range) of the *reported* runs: valid runs whose repeat number is at least
``report_from_run`` (earlier ones are warmups). Invalid runs are never used; they are counted
and warned about next to the cell they belong to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import json

import numpy as np
import pandas as pd

from e2e.analysis import _stats as stats
from e2e.analysis._components import Components, components
from e2e.config import comparable_settings
from e2e.metrics import metric_value
from e2e.results import RunRecord

__all__ = ["equivalence_of", 
    "Metric",
    "METRICS",
    "metric",
    "Cell",
    "Comparison",
    "NoiseRow",
    "ReportWarning",
    "RunCounts",
    "Summary",
    "runs_frame",
    "summarize",
    "comparable",
    "select",
    "WORKLOAD_FIELDS",
    "MIN_RUNS",
    "MAX_SPREAD",
    "MAX_ACCEPTANCE_MOVE",
    "DEFAULT_MIN_EFFECT_PCT",
    "DEFAULT_CONFIDENCE",
    "primary_metric",
    "estimate_of",
]

MIN_RUNS = 3
MAX_SPREAD = 0.05
MAX_ACCEPTANCE_MOVE = 0.10
CLIENT_SERVER_TOLERANCE = 0.05  # client vs server figure of the same runs
_CLIENT_SERVER = (("tpot_ms_mean", "server_tpot_ms_mean"), ("ttft_ms_mean", "server_ttft_ms_mean"),
                  ("e2el_ms_mean", "server_e2el_ms_mean"))
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN_EFFECT_PCT = 1.0
DEFAULT_REPORT_FROM_RUN = 2
SPEC_MODES = ("base", "dspark")


@dataclass(frozen=True)
class Metric:
    """A per-run figure from ``RunMetrics`` (``key`` is its field name there)."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    definition: str


METRICS: tuple[Metric, ...] = (
    Metric("tpot_ms_mean", "mean TPOT", "ms", False,
           "mean over a run's requests of (end-to-end latency − TTFT) / (completion tokens − 1), "
           "completion tokens from the server's usage"),
    Metric("tpot_ms_median", "median TPOT", "ms", False,
           "median over a run's requests of the same per-request TPOT"),
    Metric("server_tpot_ms_mean", "server mean TPOT", "ms", False,
           "the server's own mean per-request TPOT: Δsum / Δcount of "
           "vllm:request_time_per_output_token_seconds around the measured load (immune to "
           "how the stream's chunks reach the client)"),
    Metric("ttft_ms_mean", "mean TTFT", "ms", False,
           "mean over a run's requests of the time from sending to the first token"),
    Metric("server_ttft_ms_mean", "server mean TTFT", "ms", False,
           "the server's own mean TTFT: Δsum / Δcount of vllm:time_to_first_token_seconds "
           "around the measured load"),
    Metric("e2el_ms_mean", "mean E2E latency", "ms", False,
           "mean over a run's requests of the time from sending to the last token"),
    Metric("server_e2el_ms_mean", "server mean E2E latency", "ms", False,
           "the server's own mean end-to-end latency: Δsum / Δcount of "
           "vllm:e2e_request_latency_seconds around the measured load"),
    Metric("output_throughput_tok_s", "output throughput", "tok/s", True,
           "completion tokens of a run divided by the duration of its measured load"),
    Metric("acceptance_length", "acceptance length", "tokens/step", True,
           "1 + Δaccepted / Δdrafts of the server's spec-decode counters around the measured load"),
    Metric("ms_per_verify_step", "ms per verify step", "ms", False,
           "mean TPOT × acceptance length of the same run"),
    Metric("server_ms_per_verify_step", "ms per verify step (server TPOT)", "ms", False,
           "server mean TPOT × acceptance length of the same run (sees a per-step cost even "
           "when the client's stream arrives in bursts)"),
    Metric("goodput_req_s", "goodput", "req/s", True,
           "requests per second that met every SLO of load.slo (--slo), over the measured "
           "load's duration (vLLM's definition); only where an SLO was given"),
)
_BY_KEY = {m.key: m for m in METRICS}


def metric(key: str) -> Metric:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; known: {', '.join(_BY_KEY)}") from None


@dataclass(frozen=True)
class Cell:
    """One metric of one (arm, concurrency, spec mode): its reported runs and median (range)."""

    arm: str
    concurrency: int
    spec_mode: str
    metric: str
    repeats: tuple[int, ...]
    values: tuple[float, ...]
    median: float
    low: float
    high: float
    hosts: tuple[str | None, ...] = ()
    """Each run's host (``provenance.host.hostname``), aligned with ``values``; () when unknown."""
    windows: tuple[tuple[float | None, ...], ...] = ()
    """Each run's value per load window (``[load] windows``), aligned with ``values``; a run of
    one window has (); () for the whole cell when no run had windows."""

    @property
    def n(self) -> int:
        return len(self.values)

    def blocks(self) -> list[tuple[int, str | None]]:
        """Each run's block: (round, host), aligned with ``values``."""
        hosts = self.hosts or (None,) * len(self.values)
        return list(zip(self.repeats, hosts))

    @property
    def spread(self) -> float:
        """(max − min) / median of the reported runs."""
        return stats.relative_range(self.values)


@dataclass(frozen=True)
class Comparison:
    """``arm`` against ``baseline`` for one metric of one (concurrency, spec mode).

    ``ratio`` is the geometric-mean ratio arm / baseline that ``interval`` (low %, high %, at
    ``confidence``) bounds, estimated by ``method``: "blocked" (paired per round and host) or
    "welch" (unpaired); ``pct`` = (ratio − 1) × 100; ``median_ratio`` is the ratio of the two
    cells' medians (shown for reference). ``interval`` is None with too few runs. ``verdict``
    is one of ``stats.Call``; ``mde_pct`` the minimal detectable effect at these runs (80 %
    power); ``noise_pct`` the run-to-run noise (sd of one pair's log ratio, in %), floored when
    ``noise_floored``. ``p_value`` tests no change, ``tost_p`` equivalence within
    ±``equivalence_pct`` %; ``p_holm`` is the family-wise adjusted p of the test behind the verdict
    (``stats.paired_holm`` over both hypotheses of the report's ``Summary.n_comparisons``; the
    smaller of the two when inconclusive), and ``survives`` says whether a difference or
    equivalence verdict still holds after it (None for other verdicts). ``unpaired_interval`` and
    ``unpaired_mde_pct`` are the Welch figures on the same runs, for comparison."""

    arm: str
    baseline: str
    concurrency: int
    spec_mode: str
    metric: str
    ratio: float
    pct: float
    interval: tuple[float, float] | None
    confidence: float
    verdict: stats.Call
    method: str
    n_arm: int
    n_baseline: int
    n_blocks: int = 0
    dropped: int = 0
    median_ratio: float | None = None
    mde_pct: float | None = None
    noise_pct: float | None = None
    noise_floored: bool = False
    p_value: float | None = None
    tost_p: float | None = None
    p_holm: float | None = None
    survives: bool | None = None
    equivalence_pct: float = stats.DEFAULT_EQUIVALENCE_PCT
    min_effect_pct: float = 0.0
    unpaired_interval: tuple[float, float] | None = None
    unpaired_mde_pct: float | None = None
    role: str = "secondary"
    """"primary" (the cell's headline metric, in the Holm family), "check" (an A/A arm: its
    comparisons measure the noise and are not in the family) or "secondary" (every other metric:
    unadjusted, ``p_holm`` None)."""
    df: float | None = None
    prior_df: float = 0.0
    se: float | None = None
    """Standard error of ln(ratio) (after moderation and the floor); None without an interval."""

    @property
    def method_text(self) -> str:
        return stats.METHOD_TEXT.get(self.method, self.method)


@dataclass(frozen=True)
class NoiseRow:
    """The run-to-run noise of one metric of one (concurrency, spec mode) and what it allows.

    ``noise_pct``: sd of the log ratio of one arm run to one baseline run of the same block, in
    % (the CV of the paired log ratio); ``source``: the A/A arm it came from, or the pooled
    blocked residuals of the cell's comparisons; ``mde_pct``: the minimal detectable effect at
    ``n_blocks`` blocks (runs per arm when the A/A comparison is unpaired; 80 % power, the report's confidence) and ``unpaired_mde_pct`` the
    unpaired method's on the same runs (None without an A/A arm); ``runs_for_target``: reported
    runs per arm whose blocked MDE is ``target_pct`` (None: more than 1000)."""

    concurrency: int
    spec_mode: str
    metric: str
    noise_pct: float
    source: str
    n_blocks: int
    mde_pct: float | None
    unpaired_mde_pct: float | None
    target_pct: float
    runs_for_target: int | None
    floored: bool
    df: float | None = None
    prior_df: float = 0.0
    arms_in_model: int = 2
    method: str = "blocked"
    slot: bool = False
    components: Components | None = None
    """Between- and within-server parts of the per-run noise (runs with load windows only)."""


@dataclass(frozen=True)
class ReportWarning:
    """A data-quality problem, attached to the numbers it affects.

    ``arm``/``concurrency``/``spec_mode`` name the cell (None: the whole report);
    ``metric`` None means every metric of that cell."""

    message: str
    arm: str | None = None
    concurrency: int | None = None
    spec_mode: str | None = None
    metric: str | None = None

    def applies_to(self, arm: str, concurrency: int, spec_mode: str, metric_key: str) -> bool:
        return (
            self.arm == arm
            and self.concurrency == concurrency
            and self.spec_mode == spec_mode
            and self.metric in (None, metric_key)
        )


@dataclass(frozen=True)
class RunCounts:
    total: int
    reported: int
    warmup: int
    invalid: int


@dataclass(frozen=True)
class Summary:
    """Everything a renderer needs; built by ``summarize``."""

    experiment: str
    baseline: str
    arms: tuple[str, ...]
    concurrencies: tuple[int, ...]
    spec_modes: tuple[str, ...]
    report_from_run: int
    counts: RunCounts
    cells: tuple[Cell, ...]
    comparisons: tuple[Comparison, ...]
    warnings: tuple[ReportWarning, ...]
    confidence: float
    min_effect_pct: float
    interval_method: str = stats.INTERVAL_METHOD
    metrics: tuple[Metric, ...] = METRICS
    equivalence_pct: float = stats.DEFAULT_EQUIVALENCE_PCT
    power: float = stats.DEFAULT_POWER
    noise: tuple[NoiseRow, ...] = ()
    aa_arms: tuple[str, ...] = ()
    n_comparisons: int = 0
    multiplicity: str = "Holm"
    pooled: tuple[str, ...] = ()
    """What the noise of the comparisons borrowed, one sentence per (metric, spec mode)."""

    def noise_row(self, concurrency: int, spec_mode: str, metric_key: str) -> NoiseRow | None:
        for r in self.noise:
            if (r.concurrency, r.spec_mode, r.metric) == (concurrency, spec_mode, metric_key):
                return r
        return None

    @property
    def compared_arms(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a != self.baseline and self.baseline in self.arms)

    def cell(self, arm: str, concurrency: int, spec_mode: str, metric_key: str) -> Cell | None:
        for c in self.cells:
            if (c.arm, c.concurrency, c.spec_mode, c.metric) == (arm, concurrency, spec_mode, metric_key):
                return c
        return None

    def comparison(
        self, arm: str, concurrency: int, spec_mode: str, metric_key: str
    ) -> Comparison | None:
        for c in self.comparisons:
            if (c.arm, c.concurrency, c.spec_mode, c.metric) == (arm, concurrency, spec_mode, metric_key):
                return c
        return None

    def warnings_for(
        self, arm: str, concurrency: int, spec_mode: str, metric_key: str
    ) -> tuple[ReportWarning, ...]:
        return tuple(w for w in self.warnings if w.applies_to(arm, concurrency, spec_mode, metric_key))

    def metrics_in(self, spec_mode: str) -> tuple[Metric, ...]:
        """Metrics with at least one cell in ``spec_mode``, in ``METRICS`` order."""
        have = {c.metric for c in self.cells if c.spec_mode == spec_mode}
        return tuple(m for m in self.metrics if m.key in have)


# What must be equal for runs to share a cell (besides arm, concurrency and spec mode).
WORKLOAD_FIELDS = ("input_len", "output_len", "prompts", "seed", "request_rate", "burstiness",
                   "max_concurrency", "windows")
_SETTINGS = ("server_settings", "arm_settings")
_FRAME_COLUMNS = (["experiment", "run_id", "arm", "concurrency", "spec_mode", "repeat", "host", "valid",
                   "invalid_reasons", "report_from_run", "source", "burst_affected",
                   "client_saturated", "goodput_slo", "windows_metrics",
                   *WORKLOAD_FIELDS, *_SETTINGS]
                  + [m.key for m in METRICS])


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
            "valid": bool(r.valid and r.metrics is not None),
            "invalid_reasons": "; ".join(r.invalid_reasons) if r.invalid_reasons
            else ("" if r.metrics is not None else "no metrics"),
            "report_from_run": r.config.get("report_from_run") if isinstance(r.config, dict) else None,
            "burst_affected": bool(r.bursts is not None and r.bursts.affected),
            "client_saturated": bool(r.client is not None and r.client.saturated),
            "goodput_slo": r.metrics.goodput_slo if r.metrics is not None else None,
            "windows_metrics": tuple(r.windows),
            "source": ("imported" if "imported" in (r.provenance or {})
                       else r.server.kind),  # fresh (started by e2e), external, imported
            **{f: getattr(r.spec, f) for f in WORKLOAD_FIELDS},
            **_settings(r),
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
                value = "none"
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
        where = f"concurrency {conc}, {mode}"
        for field in WORKLOAD_FIELDS:
            if group[field].nunique(dropna=False) > 1:
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


def select(records: Iterable[RunRecord], only: dict[str, str]) -> list[RunRecord]:
    """The records whose spec matches every ``field=value`` of ``only`` (fields:
    ``WORKLOAD_FIELDS``, arm, concurrency, spec_mode)."""
    allowed = (*WORKLOAD_FIELDS, "arm", "concurrency", "spec_mode")
    for field in only:
        if field not in allowed:
            raise ValueError(f"--only {field}: not a field runs can be selected by "
                             f"(allowed: {', '.join(allowed)})")
    return [r for r in records
            if all(str(getattr(r.spec, f)) == str(v) for f, v in only.items())]


def _arm_order(records: Sequence[RunRecord], present: set[str], baseline: str) -> tuple[str, ...]:
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


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def _limit(x: float) -> str:
    return f"{x * 100:g} %"


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
            f"{len(invalid)} invalid run{'s' if len(invalid) != 1 else ''} excluded ({reasons})", **where))
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
                    "the other does", metric=client, **where))
    bursty = reported[reported["burst_affected"]]
    if len(bursty):
        for key in ("tpot_ms_mean", "tpot_ms_median", "ms_per_verify_step"):
            out.append(ReportWarning(
                f"client TPOT burst-affected in {len(bursty)} of {len(reported)} reported run(s) "
                "(streams whose decode time reached the client in one burst: the client's TPOT "
                "understates it; read the server's TPOT)", metric=key, **where))
    saturated = reported[reported["client_saturated"]]
    if len(saturated):
        out.append(ReportWarning(
            f"the load generator was saturated in {len(saturated)} reported run(s): its own "
            "queueing may show as latency (raise load.workers)", **where))
    foreign = reported[reported["source"] != "fresh"]
    if len(foreign):
        kinds = ", ".join(sorted(set(foreign["source"])))
        out.append(ReportWarning(
            f"{len(foreign)} reported run(s) not on a fresh server started by e2e ({kinds}): "
            "not a fresh server per run; their server settings were not checked", **where))
    warmups = group[group["valid"] & (group["repeat"] < report_from_run)]
    if len(reported) == 0:
        out.append(ReportWarning(
            f"no reported runs ({len(warmups)} warmup, {len(invalid)} invalid; reported runs are "
            f"valid runs {report_from_run} and later)", **where))
    elif len(reported) < MIN_RUNS:
        out.append(ReportWarning(
            f"only {len(reported)} reported run{'s' if len(reported) != 1 else ''} (fewer than {MIN_RUNS})",
            **where))
    dupes = reported["repeat"][reported["repeat"].duplicated()]
    if len(dupes):
        out.append(ReportWarning(
            f"repeat {', '.join(str(int(d)) for d in sorted(set(dupes)))} recorded more than once; all copies used",
            **where))
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
    correction across all comparisons (see ``_compare`` and e2e.analysis._stats). ``target_effect_pct``
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
            f"no runs of the baseline arm {baseline!r}; no comparisons (arms: {', '.join(arms)})"))
    concurrencies = tuple(sorted({int(c) for c in frame["concurrency"]}))
    spec_modes = tuple(m for m in SPEC_MODES if m in set(frame["spec_mode"]))

    reported_mask = frame["valid"] & (frame["repeat"] >= start)
    cells: list[Cell] = []
    for (arm, conc, mode), group in frame.groupby(["arm", "concurrency", "spec_mode"], sort=False):
        arm, conc, mode = str(arm), int(conc), str(mode)
        warnings.extend(_cell_warnings(arm, conc, mode, group, start))
        reported = group[reported_mask.loc[group.index]]
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
                        windows=per_window if any(per_window) else ())
            cells.append(cell)
            spread = cell.spread
            if m.key == "acceptance_length":
                if spread > MAX_ACCEPTANCE_MOVE:
                    warnings.append(ReportWarning(
                        f"acceptance length moved {_pct(spread)} between runs "
                        f"({cell.low:.2f}–{cell.high:.2f}; more than {_limit(MAX_ACCEPTANCE_MOVE)}); "
                        "raw TPOT follows it, compare ms per verify step",
                        arm, conc, mode, m.key))
            elif spread > MAX_SPREAD:
                warnings.append(ReportWarning(
                    f"spread {_pct(spread)} of the median (more than {_limit(MAX_SPREAD)})",
                    arm, conc, mode, m.key))

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
        aa_arms = _aa_arms(records, baseline, arms)
        comparisons, noise, more, pooled = _compare(
            cells, index, baseline=baseline, slots=_slots(records),
            aa_arms=aa_arms,
            confidence=confidence, min_effect_pct=min_effect_pct,
            equivalence_pct=equivalence_pct, target_effect_pct=target_effect_pct)
        warnings.extend(more)

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
    )


# --- comparisons: blocks, A/A arms, noise floor, verdicts, MDE, multiplicity -------------------

_RunKey = tuple[str, int, str, int, "str | None"]  # arm, concurrency, spec mode, repeat, host


def _aa_arms(records: Sequence[RunRecord], baseline: str, arms: Sequence[str]) -> tuple[str, ...]:
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


def _slots(records: Sequence[RunRecord]) -> dict[_RunKey, int | None]:
    """Each run's position in its block (0 = first): the rank of its start time among the
    runs of the same round, host, concurrency and spec mode (the runs a host made back to back).
    None for every run of a block whose start times are missing, unparsable or tied (then the
    model has no slot term). A block is (round, host): the sweep runs round k of every arm of a
    cell back to back, on one host."""
    from datetime import datetime, timezone

    groups: dict[tuple, list[tuple[_RunKey, object]]] = {}
    for r in records:
        name = _host(r)
        key = (r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode, int(r.spec.repeat), name)
        try:
            when = datetime.fromisoformat(str(r.started_at))
        except ValueError:
            when = None
        if when is not None and when.tzinfo is None:  # e.g. an imported vllm-bench file's date
            when = when.replace(tzinfo=timezone.utc)
        groups.setdefault((key[3], name, key[1], key[2]), []).append((key, when))
    out: dict[_RunKey, int | None] = {}
    for runs in groups.values():
        times = [w for _, w in runs]
        if any(w is None for w in times) or len(set(times)) < len(times):
            out.update({k: None for k, _ in runs})
            continue
        for rank, (k, _) in enumerate(sorted(runs, key=lambda kw: kw[1])):
            out[k] = rank
    return out


def _runs(cell: Cell) -> list[tuple[object, float]]:
    return list(zip(cell.blocks(), cell.values))


def _model_runs(cell: Cell, slots: dict[_RunKey, int | None]) -> list[stats.ModelRun]:
    return [stats.ModelRun(cell.arm, block, slots.get((cell.arm, cell.concurrency, cell.spec_mode,
                                                       *block)), v)
            for block, v in zip(cell.blocks(), cell.values)]


def estimate_of(comp: Comparison) -> stats.LogRatio | None:
    """The comparison's estimate as a ``stats.LogRatio`` (to read it at another confidence,
    e.g. a sequential look); None without an interval."""
    if comp.se is None or comp.df is None or comp.interval is None:
        return None
    noise = (comp.noise_pct or 0.0) / 100.0
    return stats.LogRatio(method=comp.method if comp.method in ("model", "blocked", "welch") else "blocked",
                          log_ratio=math.log(comp.ratio), se=comp.se, df=comp.df, noise_sd=noise,
                          raw_noise_sd=noise, n_arm=comp.n_arm, n_baseline=comp.n_baseline,
                          n_blocks=comp.n_blocks, dropped=comp.dropped, floored=comp.noise_floored,
                          floor_sd=stats.RESOLUTION_SD, prior_df=comp.prior_df)


def primary_metric(concurrency: int, spec_mode: str) -> str:
    """The cell's primary (headline) metric: mean TPOT at concurrency 1, median TPOT above it,
    ms per verify step with the speculator."""
    from e2e.analysis._headline import headline_metric

    return headline_metric(concurrency, spec_mode)


def _compare(
    cells: Sequence[Cell],
    index: dict[tuple[str, int, str, str], Cell],
    *,
    baseline: str,
    slots: dict[_RunKey, int | None],
    aa_arms: tuple[str, ...],
    confidence: float,
    min_effect_pct: float,
    equivalence_pct: float,
    target_effect_pct: float | None,
) -> tuple[list[Comparison], tuple[NoiseRow, ...], list[ReportWarning], list[str]]:
    """Every arm against the baseline of its cell:

    1. **one model per cell and metric** (``stats.cell_model``: ln y = round × host + slot + arm
       over every arm, the residual variance pooled across them); where it cannot be fitted,
       the paired t per arm (``stats.log_ratio``: blocked where 2 blocks pair up) or Welch;
    2. **shared noise** only where noise is alike: a fallback comparison's per-run variance is
       moderated toward the other comparisons of the same cell (metric, spec mode and
       concurrency; ``fit_prior``, ``moderate``: limma's moderated t; no prior with fewer than 3
       of them); a fitted cell already pools its arms and borrows nothing from other cells;
    3. a **monotone floor** at the measurement's resolution, 0.1 % per run
       (``stats.floor_noise``);
    4. verdicts (``stats.call``) and the MDE with the df the test uses; the **family**: both
       null hypotheses (no change; a change beyond the band) of every primary comparison (the
       headline metric of every cell, every arm except the A/A ones), 2m in all, by Holm's
       step-down with Shaffer's restriction (``stats.paired_holm``), so a false "faster",
       "slower" or "equivalent" anywhere in the family has probability at most α. A/A arms are
       "check"s, other metrics "secondary" (unadjusted)."""
    warnings: list[ReportWarning] = []
    pairs: list[tuple[Cell, Cell]] = []
    for c in cells:
        if c.arm == baseline:
            continue
        base = index.get((baseline, c.concurrency, c.spec_mode, c.metric))
        if base is None:
            continue
        if min(c.values + base.values) <= 0:
            warnings.append(ReportWarning(
                "a value is zero or negative; no ratio", c.arm, c.concurrency, c.spec_mode, c.metric))
            continue
        pairs.append((c, base))

    # 1. one model per (concurrency, spec mode, metric), else the fallbacks
    groups: dict[tuple[int, str, str], list[tuple[Cell, Cell]]] = {}
    for c, base in pairs:
        groups.setdefault((c.concurrency, c.spec_mode, c.metric), []).append((c, base))
    est: dict[int, stats.LogRatio | None] = {}
    own_s2: dict[int, float] = {}
    fits: dict[tuple[int, str, str], stats.CellFit] = {}
    units: dict[tuple[str, str, int], list[tuple[float, float]]] = {}  # (metric, mode, conc)
    for key, members in groups.items():
        runs = _model_runs(members[0][1], slots)
        for c, _ in members:
            runs += _model_runs(c, slots)
        fit = stats.cell_model(runs, baseline) if len(runs) > 2 else None
        if fit is not None:
            fits[key] = fit
            units.setdefault((key[2], key[1], key[0]), []).append((fit.s2, fit.df))
        for c, base in members:
            e = fit.estimates.get(c.arm) if fit is not None else None
            if e is not None:
                own_s2[id(c)] = fit.s2
            else:
                e = stats.log_ratio(_runs(c), _runs(base))
                if e is not None and e.method == "blocked":
                    own_s2[id(c)] = e.raw_noise_sd ** 2 / 2.0
                    units.setdefault((key[2], key[1], key[0]), []).append((own_s2[id(c)], e.df))
            est[id(c)] = e

    # 2. moderation, only among variances whose noise is alike: the same metric, spec mode and
    # concurrency (noise grows with concurrency and differs with the speculator, and borrowing
    # a quiet cell's noise made a noisy cell's A/A false calls 7.7-10.1 %, issue 33); a fitted
    # cell is one variance already pooled over its arms, so this borrows only among the paired
    # fallbacks of one cell. 3. the floor: the measurement's resolution, nothing borrowed.
    priors = {k: stats.fit_prior(v) for k, v in units.items()}
    pooled_text: list[str] = []
    for (key, mode, conc), v in sorted(units.items()):
        prior = priors[(key, mode, conc)]
        if prior.df > 0:
            pooled_text.append(
                f"{metric(key).label} (concurrency {conc}, {mode}): each comparison's noise is "
                f"moderated toward the cell's {prior.units} comparisons' (prior "
                f"{math.sqrt(prior.s2) * 100:.2g} % per run on {prior.df:.1f} df)")
    for c, base in pairs:
        e = est[id(c)]
        if e is None:
            continue
        k = (c.metric, c.spec_mode, c.concurrency)
        if id(c) in own_s2:
            e = stats.moderate(e, own_s2[id(c)], priors.get(k, stats.Prior(0.0, 0.0, 0)))
        est[id(c)] = stats.floor_noise(e, stats.RESOLUTION_SD)

    alpha = 1.0 - confidence
    rows: list[dict] = []
    for c, base in pairs:
        e = est[id(c)]
        welch = stats.welch_log_ratio(c.values, base.values)
        if welch is not None:
            welch = stats.floor_noise(welch, stats.RESOLUTION_SD)
        m = metric(c.metric)
        verdict = stats.call(e, time_metric=m.unit == "ms", confidence=confidence,
                             min_effect_pct=min_effect_pct, equivalence_pct=equivalence_pct)
        where = (c.arm, c.concurrency, c.spec_mode, c.metric)
        if e is not None and e.floored:
            spread = ("no spread between the runs" if e.raw_noise_sd < 1e-9 else
                      f"run-to-run noise {e.raw_noise_sd / math.sqrt(2) * 100:.2g} % per run")
            warnings.append(ReportWarning(
                f"{spread}: noise floored at {e.floor_sd * 100:.2g} % per run (the measurement's "
                "resolution), so the interval is not narrower than that", *where))
        if e is not None and e.method in ("model", "blocked") and e.dropped:
            warnings.append(ReportWarning(
                f"{e.dropped} run{'s' if e.dropped != 1 else ''} without a partner in "
                f"{'its' if e.dropped == 1 else 'their'} round left out of the blocked comparison "
                f"with {baseline}", *where))
        role = ("check" if c.arm in aa_arms else
                "primary" if c.metric == primary_metric(c.concurrency, c.spec_mode) else "secondary")
        rows.append({
            "c": c, "base": base, "est": e, "welch": welch, "verdict": verdict, "role": role,
            "p": None if e is None else e.p_value(),
            "tost": None if e is None else e.tost_p_value(equivalence_pct),
        })

    family = [r for r in rows if r["role"] == "primary" and r["p"] is not None]
    adj_diff, adj_equiv = stats.paired_holm([r["p"] for r in family], [r["tost"] for r in family])
    for r, a_diff, a_equiv in zip(family, adj_diff, adj_equiv):
        if stats.is_difference(r["verdict"]):
            r["p_holm"], r["survives"] = a_diff, a_diff < alpha
        elif r["verdict"] == "equivalent":
            r["p_holm"], r["survives"] = a_equiv, a_equiv < alpha
        else:
            r["p_holm"] = min(a_diff, a_equiv)

    comparisons: list[Comparison] = []
    for r in rows:
        c, base, e, welch = r["c"], r["base"], r["est"], r["welch"]
        interval = None if e is None else e.interval_pct(confidence)
        comparisons.append(Comparison(
            arm=c.arm, baseline=baseline, concurrency=c.concurrency, spec_mode=c.spec_mode,
            metric=c.metric,
            ratio=e.ratio if e is not None else stats.ratio_of_medians(c.values, base.values),
            pct=e.pct if e is not None else stats.ratio_of_medians(c.values, base.values) * 100 - 100,
            interval=interval, confidence=confidence, verdict=r["verdict"],
            method=e.method if e is not None else "none", n_arm=c.n, n_baseline=base.n,
            n_blocks=0 if e is None else e.n_blocks, dropped=0 if e is None else e.dropped,
            median_ratio=stats.ratio_of_medians(c.values, base.values),
            mde_pct=None if e is None else e.mde_pct(confidence),
            noise_pct=None if e is None else e.noise_sd * 100.0,
            noise_floored=bool(e is not None and e.floored),
            p_value=r["p"], tost_p=r["tost"], p_holm=r.get("p_holm"), survives=r.get("survives"),
            equivalence_pct=equivalence_pct, min_effect_pct=min_effect_pct,
            unpaired_interval=None if welch is None else welch.interval_pct(confidence),
            unpaired_mde_pct=None if welch is None else welch.mde_pct(confidence),
            role=r["role"], df=None if e is None else e.df, se=None if e is None else e.se,
            prior_df=0.0 if e is None else e.prior_df,
        ))
    target = equivalence_pct if target_effect_pct is None else target_effect_pct
    return (comparisons, _noise_rows(rows, fits, aa_arms, confidence, target, priors), warnings,
            pooled_text)


def _noise_rows(rows: list[dict], fits: dict[tuple[int, str, str], stats.CellFit],
                aa_arms: tuple[str, ...], confidence: float, target: float,
                priors: dict[tuple[str, str, int], stats.Prior]) -> tuple[NoiseRow, ...]:
    """Per (concurrency, spec mode, metric): the noise the comparisons used (after moderation
    and the floor; the same for every arm of a fitted cell), with the MDE and df of the A/A
    arm's comparison when there is one, else of the cell's first comparison, and the reported
    runs whose MDE in the same design (arms, slot term, prior df) is ``target``."""
    out: list[NoiseRow] = []
    keys: list[tuple[int, str, str]] = []
    for r in rows:
        k = (r["c"].concurrency, r["c"].spec_mode, r["c"].metric)
        if k not in keys:
            keys.append(k)
    for conc, mode, key in keys:
        here = [r for r in rows if (r["c"].concurrency, r["c"].spec_mode, r["c"].metric) == (conc, mode, key)
                and r["est"] is not None]
        if not here:
            continue
        aa = [r for r in here if r["c"].arm in aa_arms]
        pick = aa[0] if aa else here[0]
        e, w = pick["est"], pick["welch"]
        fit = fits.get((conc, mode, key))
        prior = priors.get((key, mode, conc), stats.Prior(0.0, 0.0, 0))
        if e.method == "model" and fit is not None:
            source = (f"model residuals of {fit.arms} arms, {fit.runs} runs"
                      + (", slot term" if fit.slot else "")
                      + (f" + {prior.df:.1f} df from the cell's {prior.units} comparisons" if e.prior_df else ""))
            arms_n = fit.arms
        else:
            source = f"{pick['c'].arm} vs its baseline ({e.method})" + (
                f" + {prior.df:.1f} df from the cell's {prior.units} comparisons" if e.prior_df else "")
            arms_n = 2
        if aa:
            source = f"A/A arm {pick['c'].arm}: " + source
        n = e.n_blocks if e.method != "welch" else min(e.n_arm, e.n_baseline)
        method = e.method if e.method in ("model", "blocked") else "welch"
        cells = {id(c): c for r in here for c in (r["c"], r["base"])}.values()
        run_s2, run_df = ((fit.s2, fit.df) if e.method == "model" and fit is not None
                          else (e.raw_noise_sd ** 2 / 2.0, e.df))
        parts = (components([w for c in cells for w in c.windows], run_s2, run_df)
                 if any(c.windows for c in cells) else None)
        out.append(NoiseRow(
            concurrency=conc, spec_mode=mode, metric=key, noise_pct=e.noise_sd * 100.0, source=source,
            n_blocks=n, mde_pct=e.mde_pct(confidence),
            unpaired_mde_pct=None if (w is None or not aa) else w.mde_pct(confidence),
            target_pct=target,
            runs_for_target=stats.runs_needed(e.noise_sd, target, method=method, confidence=confidence,
                                              arms=arms_n, prior_df=e.prior_df,
                                              slot=bool(fit is not None and fit.slot
                                                        and e.method == "model"),
                                              noise_df=e.df),
            floored=e.floored, df=e.df, prior_df=e.prior_df, arms_in_model=arms_n, method=method,
            slot=bool(fit is not None and fit.slot and e.method == "model"), components=parts))
    return tuple(out)


def equivalence_of(records) -> float:
    """The equivalence band (±%) of the records' config snapshot (the largest if they
    differ; 1 % when none says)."""
    bands = [r.config.get("equivalence_pct") for r in records if isinstance(r.config, dict)]
    bands = [float(b) for b in bands if b is not None]
    return max(bands) if bands else 1.0
