"""AIPerf's profile export -> e2e runs (``e2e import aiperf``).

    read_export(path)               -> [one document]: the records of profile_export.jsonl
                                       (and its profile_export_aiperf.json summary, if beside)
    to_run(doc, options, source=..) -> ImportedRun: pure
    READER                          -> both, for ``e2e.interop.importing.import_file``
                                       (registered in ``e2e.interop.formats``)

The format is AIPerf's (checked on aiperf 0.13.0, ``aiperf.common.models.record_models``):
``profile_export.jsonl`` holds one ``MetricRecordInfo`` per request (export level
``records``), ``{"metadata": {...
"request_start_ns", "request_end_ns", "benchmark_phase", "turn_index", ...}, "metrics":
{"time_to_first_token": {"value", "unit"}, "request_latency", "inter_chunk_latency" (a list),
"input_sequence_length", "output_sequence_length", ...}, "error": null | {"code", "type",
"message"}}``; ``profile_export_aiperf.json`` beside it has the summary and ``input_config``
(``input_config.phases``: the profiling phase's concurrency; ``run_info``: the seed and the
command line). Each request becomes a ``RequestRecord``: send = its start minus the first
start, first token = send + TTFT, chunks = the first token then each inter-chunk latency
added in turn, end = send + request latency; e2e's statistics are then computed from those
records as for its own runs. What differs from e2e's definitions is in docs/how-to/interop.md.
Only ``profiling`` records are measured (AIPerf's warmup records are left out).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from e2e.config import MAX_CONCURRENCY
from e2e.errors import ConfigError
from e2e.interop._boundary import checked_times, definition, definition_warning, read_text
from e2e.redact import copied
from e2e.interop.importing import (ImportedRun, ImportOptions, Reader, import_note,
                                   length_findings)
from e2e.metrics import summarize_run
from e2e.paths import read_bounded
from e2e.results.records import RequestRecord, RunRecord, ServerInfo

__all__ = ["FORMAT", "TOOL", "READER", "read_export", "to_run"]

FORMAT = "aiperf profile_export.jsonl"
TOOL = "AIPerf"
SUMMARY_NAME = "profile_export_aiperf.json"
_MAX_NS = 2**63
_MAX_MS = 1e10  # about 115 days
_MAX_RECORDS = 10_000_000


class _Value(BaseModel):
    model_config = ConfigDict(extra="allow")
    value: Any = None
    unit: Annotated[str, Field(max_length=64)] | None = None


class _Meta(BaseModel):
    model_config = ConfigDict(extra="allow")
    request_start_ns: Annotated[int, Field(ge=0, lt=_MAX_NS)]
    request_end_ns: Annotated[int, Field(ge=0, lt=_MAX_NS)] | None = None
    benchmark_phase: Annotated[str, Field(max_length=64)] = "profiling"
    turn_index: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    x_correlation_id: Annotated[str, Field(max_length=256)] | None = None


class _Error(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: int | None = None
    type: Annotated[str, Field(max_length=256)] | None = None
    message: Annotated[str, Field(max_length=100_000)] | None = None


class _Record(BaseModel):
    """One line of profile_export.jsonl as e2e reads it (AIPerf's MetricRecordInfo)."""

    model_config = ConfigDict(extra="allow")
    metadata: _Meta
    metrics: dict[Annotated[str, Field(max_length=128)], _Value] | None = None
    error: _Error | None = None


def _ms(record: _Record, name: str) -> float | None:
    """A metric in ms (AIPerf writes its times in ms; a unit other than ms is refused)."""
    item = (record.metrics or {}).get(name)
    if item is None or item.value is None:
        return None
    if item.unit not in (None, "ms"):
        raise ConfigError(f"metric {name} is in {item.unit!r}, e2e reads AIPerf's ms")
    value = item.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_MS:
        raise ConfigError(f"metric {name} = {value!r} is not a time in ms")
    return float(value)


def _tokens(record: _Record, name: str) -> int | None:
    item = (record.metrics or {}).get(name)
    if item is None or item.value is None:
        return None
    value = item.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e9 \
            or float(value) != int(value):
        raise ConfigError(f"metric {name} = {value!r} is not a token count")
    return int(value)


def _gaps(record: _Record) -> list[float]:
    item = (record.metrics or {}).get("inter_chunk_latency")
    if item is None or item.value is None:
        return []
    if item.unit not in (None, "ms") or not isinstance(item.value, list) or len(item.value) > 10_000_000:
        raise ConfigError("metric inter_chunk_latency is not a list of ms")
    out = []
    for gap in item.value:
        if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap <= _MAX_MS:
            raise ConfigError(f"metric inter_chunk_latency holds {gap!r}, not a time in ms")
        out.append(float(gap))
    return out


def read_export(path: Path) -> list[dict[str, Any]]:
    """``path`` (profile_export.jsonl, or the folder that holds it) as one document: its
    lines (each checked) and the summary beside it, if any. Bad input is a ConfigError."""
    path = export_file(path)
    text = read_text(path, expect="AIPerf's profile_export.jsonl",
                     not_what="not AIPerf's profile_export.jsonl")
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(records) >= _MAX_RECORDS:
            raise ConfigError(f"{path} has more than {_MAX_RECORDS:,} records")
        try:
            doc = json.loads(line)
            record = _Record.model_validate(doc)
        except (ValueError, RecursionError) as exc:
            reason = (exc.errors()[0]["msg"] + " at " + ".".join(map(str, exc.errors()[0]["loc"]))
                      if isinstance(exc, ValidationError) else "not JSON")
            raise ConfigError(f"{path} line {number}: {reason}: not an AIPerf profile record "
                              "(make it with `aiperf profile`; e2e reads profile_export.jsonl)") from None
        try:  # every number read now, so a bad one names its line
            _ms(record, "time_to_first_token"), _ms(record, "request_latency"), _gaps(record)
            _tokens(record, "input_sequence_length"), _tokens(record, "output_sequence_length")
        except ConfigError as exc:
            raise ConfigError(f"{path} line {number}: {exc}") from None
        records.append(doc)
    if not records:
        raise ConfigError(f"{path} holds no records: not AIPerf's profile_export.jsonl")
    summary = None
    beside = path.parent / SUMMARY_NAME
    if beside.is_file():
        try:
            summary = json.loads(read_bounded(beside, 64 << 20, expect=f"AIPerf's {SUMMARY_NAME}"))
        except (ValueError, RecursionError):
            raise ConfigError(f"{beside} is not JSON: not AIPerf's summary") from None
        if not isinstance(summary, dict):
            raise ConfigError(f"{beside}: expected a JSON object, AIPerf's summary")
    return [{"records": records, "summary": summary}]


def _requests(records: list[_Record]) -> tuple[RequestRecord, ...]:
    t0 = min(r.metadata.request_start_ns for r in records)
    out = []
    for i, r in enumerate(records):
        send = (r.metadata.request_start_ns - t0) / 1e9
        if r.error is not None:
            what = ": ".join(str(x) for x in (r.error.type, r.error.message) if x) or "error"
            out.append(RequestRecord(index=i, send_s=send, status=r.error.code,
                                     error=f"AIPerf recorded an error: {what}"[:2000]))
            continue
        ttft, latency = _ms(r, "time_to_first_token"), _ms(r, "request_latency")
        outputs = _tokens(r, "output_sequence_length")
        if ttft is None or latency is None or not outputs:
            out.append(RequestRecord(index=i, send_s=send,
                                     error="AIPerf recorded no TTFT, latency or output tokens"))
            continue
        first = send + ttft / 1000.0
        chunks = [first]
        for gap in _gaps(r):
            chunks.append(chunks[-1] + gap / 1000.0)
        out.append(RequestRecord(index=i, send_s=send, first_token_s=first,
                                 end_s=send + latency / 1000.0, chunk_times_s=tuple(chunks),
                                 prompt_tokens=_tokens(r, "input_sequence_length"),
                                 completion_tokens=outputs, status=200))
    return tuple(out)


def _summary_value(summary: dict | None, *keys: str) -> Any:
    node: Any = summary
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _phase(summary: dict | None, kind: str) -> dict | None:
    """The summary's phase of ``kind`` (aiperf 0.13: ``input_config.phases``, each with its
    ``type``: concurrency, poisson, gamma (``smoothness``), constant, user_centric,
    fixed_schedule; ``rate``, ``concurrency`` (a rate phase's cap), ``requests``)."""
    phases = _summary_value(summary, "input_config", "phases")
    for phase in phases if isinstance(phases, list) else ():
        if isinstance(phase, dict) and (phase.get("kind") or phase.get("name")) == kind:
            return phase
    return None


def _positive(value: Any, what: str, *, whole: bool = False) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0) or (whole and float(value) != int(value)):
        raise ConfigError(f"profile_export_aiperf.json: {what} is {str(value)[:40]!r}, not a "
                          f"positive {'whole number' if whole else 'number'}")
    return int(value) if whole else float(value)


_OPEN = {"poisson": "poisson", "gamma": "gamma", "constant": "constant"}


def _arrival(summary: dict | None, options: ImportOptions) -> dict[str, Any]:
    """The profiling phase's load as RunSpec fields: a closed loop's concurrency, or an open
    loop's rate, burstiness (gamma's smoothness; 1 for Poisson) and cap, and ``arrival``
    ("constant" for AIPerf's even gaps). Loads e2e cannot key (a trace's fixed schedule, users
    sharing a rate, a rate series) are refused, saying so."""
    phase = _phase(summary, "profiling") or {}
    kind = phase.get("type", "concurrency") if phase else "concurrency"
    concurrency = _positive(phase.get("concurrency"), "the profiling phase's concurrency",
                            whole=True)
    if kind == "concurrency":
        return {"concurrency": options.concurrency or concurrency, "request_rate": None,
                "burstiness": 1.0, "max_concurrency": None, "arrival": None}
    if kind not in _OPEN or phase.get("rate_series") is not None:
        raise ConfigError(f"AIPerf's profiling phase is a {str(kind)[:40]!r} load"
                          + (" with a rate series" if phase.get("rate_series") is not None else "")
                          + ": e2e imports a concurrency phase or an open loop at one rate "
                          "(poisson, gamma, constant); its arrivals cannot be set beside e2e's")
    rate = _positive(phase.get("rate"), "the profiling phase's rate")
    if rate is None:
        raise ConfigError("AIPerf's profiling phase is an open loop without a rate")
    shape = _positive(phase.get("smoothness"), "the gamma phase's smoothness") \
        if kind == "gamma" else None
    return {"concurrency": options.concurrency or 1, "request_rate": rate,
            "burstiness": shape or 1.0, "max_concurrency": concurrency,
            "arrival": "constant" if kind == "constant" else None}


def _window_s(summary: dict | None) -> float | None:
    """The profiling phase's window, ``start_time`` to ``end_time`` (what AIPerf divides its
    throughputs by), in seconds; None when the summary does not say."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(_summary_value(summary, "start_time")))
        end = datetime.fromisoformat(str(_summary_value(summary, "end_time")))
    except ValueError:
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def _definitions(summary: dict | None, duration_s: float) -> list[dict[str, Any]]:
    """AIPerf's figures whose definition or name differs from e2e's, with AIPerf's values."""
    def avg(name: str) -> float | None:
        value = _summary_value(summary, name, "avg")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else None

    out = []
    window = _window_s(summary)
    tokens, rate = avg("output_token_throughput"), avg("request_throughput")
    if tokens is not None or rate is not None:
        span = (f"its profiling phase's window ({window:.6g} s, start_time to end_time)"
                if window is not None else "its profiling phase's window")
        out.append(definition(
            "output_throughput_tok_s",
            f"AIPerf's throughputs (output_token_throughput {tokens:.6g} tok/s, "
            f"request_throughput {rate:.6g} req/s) divide by {span}; e2e's by its first send to "
            f"its last end ({duration_s:.6g} s, AIPerf's benchmark_duration); both are kept",
            tokens) if tokens is not None and rate is not None else definition(
            "output_throughput_tok_s", f"AIPerf's throughputs divide by {span}; e2e's by its "
            f"first send to its last end ({duration_s:.6g} s)", tokens))
    itl = avg("inter_token_latency")
    out.append(definition(
        "tpot_ms_mean",
        "AIPerf's \"inter token latency\" is e2e's TPOT ((latency − TTFT) / (output tokens − 1)), "
        "its \"inter chunk latency\" e2e's inter-chunk latency; AIPerf's percentiles are "
        "numpy's, as e2e's", itl))
    return out


def _mode(values: list[int]) -> int | None:
    from collections import Counter

    return Counter(values).most_common(1)[0][0] if values else None


def to_run(doc: dict[str, Any], options: ImportOptions, *, source: str,
           repeat: int | None = None, provenance: dict[str, Any] | None = None) -> ImportedRun:
    """AIPerf's export as one e2e run (pure). The arm is ``--arm`` (AIPerf records none);
    the concurrency ``--concurrency``, else the summary's profiling phase's;
    the lengths the flags', else the most common among the requests."""
    from e2e.plan import RunSpec
    from e2e.console import describe_validation_error

    all_records = [_Record.model_validate(r) for r in doc["records"]]
    measured = [r for r in all_records if r.metadata.benchmark_phase == "profiling"]
    if not measured:
        raise ConfigError(f"{source}: no record of the profiling phase (only warmup?)")
    requests, impossible = checked_times(_requests(measured), "AIPerf")
    ok = [r for r in requests if r.ok]
    summary = doc.get("summary")
    if not options.arm:
        raise ConfigError("AIPerf records no arm: give --arm")
    load = _arrival(summary, options)
    concurrency = load.pop("concurrency")
    arrival = load.pop("arrival")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or \
            not 0 < concurrency <= MAX_CONCURRENCY:
        raise ConfigError("cannot tell the concurrency (no profile_export_aiperf.json beside "
                          "the records, or it names none): give --concurrency")
    input_len = options.input_len or _mode([r.prompt_tokens for r in ok if r.prompt_tokens])
    output_len = options.output_len or _mode([r.completion_tokens for r in ok
                                              if r.completion_tokens])
    if input_len is None or output_len is None:
        raise ConfigError("no successful request to take the lengths from: give "
                          "--input-len and --output-len")
    seed = options.seed
    if seed is None:
        seed = _summary_value(summary, "run_info", "random_seed")
    defaulted = [] if isinstance(seed, int) and not isinstance(seed, bool) else ["seed"]
    seed = 0 if defaulted else seed
    warmups = options.warmup_requests
    if warmups is None:  # the warmup phase's requests, else the warmup records it kept
        warmups = _positive(_summary_value(_phase(summary, "warmup"), "requests"),
                            "the warmup phase's requests", whole=True)
        warmups = warmups if warmups is not None else len(all_records) - len(measured)
    try:
        spec = RunSpec(arm=options.arm, concurrency=concurrency, dspark=bool(options.dspark),
                       prompts=len(measured), input_len=input_len, output_len=output_len,
                       seed=seed, warmup_requests=warmups,
                       repeat=repeat or options.repeat or 2, **load)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "the export and the flags",
                                                    RunSpec)) from None
    reasons, notes = list(impossible), [import_note(source, TOOL)]
    if defaulted:
        notes.append("AIPerf's summary records no seed; set to 0 (give --seed)")
    failed = [r for r in requests if not r.ok and "impossible times" not in (r.error or "")]
    if failed:
        reasons.append(f"{len(failed)} request(s) failed; first: request {failed[0].index}: "
                       f"{failed[0].error}")
    found, said = length_findings(ok, input_len, output_len, strict=options.strict_lengths,
                                  why='AIPerf counts tokens with its own tokenizer')
    reasons += found
    notes += said
    items = _summary_value(summary, "input_config", "models", "items")
    model = [m.get("name") for m in items if isinstance(m, dict)] if isinstance(items, list) else None
    metrics = summarize_run(requests)
    definitions = _definitions(summary, metrics.duration_s)
    notes += [definition_warning(d) for d in definitions]
    record = RunRecord(
        experiment=options.experiment, run_id=spec.run_id, spec=spec, arm_settings={},
        config={},
        server=ServerInfo(argv=[], env={}, base_url="",
                          model=copied(str(model[0]), string=1024)
                          if isinstance(model, list) and model else ""),
        provenance={"imported": copied({
            "format": FORMAT, "source": source, **(provenance or {}), "per_request": True,
            "records": len(all_records), "warmup_records": len(all_records) - len(measured),
            "cli_command": _summary_value(summary, "run_info", "cli_command"),
            "aiperf_version": _summary_value(summary, "aiperf_version"),
            "phase": _phase(summary, "profiling"), "arrival": arrival, "defaulted": defaulted,
            "summary": _figures(summary), "definitions": definitions})},
        started_at=copied(str(_summary_value(summary, "start_time") or ""), string=64),
        finished_at=copied(str(_summary_value(summary, "end_time") or ""), string=64),
        metrics=metrics, valid=not reasons, invalid_reasons=reasons,
        warnings=notes)
    return ImportedRun(record=record, requests=requests)


_FIGURES = ("time_to_first_token", "request_latency", "inter_token_latency",
            "inter_chunk_latency", "output_token_throughput", "request_throughput",
            "benchmark_duration", "request_count")


def _figures(summary: dict | None) -> dict[str, Any]:
    """AIPerf's own summary figures (avg, p50, p99 and unit), kept beside e2e's."""
    out = {}
    for name in _FIGURES:
        item = _summary_value(summary, name)
        if isinstance(item, dict):
            out[name] = {k: item[k] for k in ("unit", "avg", "p50", "p99")
                         if k in item and isinstance(item[k], (int, float, str))}
    return out


def export_file(path: Path) -> Path:
    """The profile_export.jsonl a path names: the file, or the artifact folder holding it."""
    path = Path(path)
    return path / "profile_export.jsonl" if path.is_dir() else path


READER = Reader(tool=TOOL, read=read_export, convert=to_run, locate=export_file)
