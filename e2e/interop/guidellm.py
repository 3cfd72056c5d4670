"""GuideLLM's benchmark report -> e2e runs (``e2e import guidellm``).

    read_report(path)               -> one document per benchmark of the report
    to_run(doc, options, source=..) -> ImportedRun: pure
    READER                          -> both, for ``e2e.interop.importing.import_file``
                                       (registered in ``e2e.interop.formats``)

The format is GuideLLM's (checked on guidellm 0.8.1: ``GenerativeBenchmarksReport``, written
by ``guidellm run`` with a ``json`` output): ``{"metadata", "config", "benchmarks": [{"config":
{"strategy": {"type_", "streams"...}}, "requests": {"successful": [...], "errored": [...],
"incomplete": [...]}, "metrics": {...}}]}``. Each request (``GenerativeRequestStats``) carries
its timings (``info.timings.request_start``, ``first_token_iteration``, ``request_end``...,
epoch seconds) and token counts; GuideLLM keeps no time per chunk, so an imported run has
TTFT, TPOT and E2E latency but no inter-chunk latency. Each benchmark of the report (one per
rate or stream count of a sweep) becomes one run; the requests the report holds are all it
measured only when it did not sample them (``metrics`` ``sample_size``: a sampled report's run
is invalid, saying so).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from e2e.config import MAX_CONCURRENCY
from e2e.errors import ConfigError
from e2e.interop._boundary import checked_times, definition, definition_warning, read_text
from e2e.redact import copied
from e2e.interop.importing import (ImportedRun, ImportOptions, Reader, import_note,
                                   length_findings)
from e2e.metrics import summarize_run
from e2e.results.records import RequestRecord, RunRecord, ServerInfo

__all__ = ["FORMAT", "TOOL", "READER", "read_report", "to_run"]

FORMAT = "guidellm benchmark report (json)"
TOOL = "GuideLLM"
_MAX_S = 1e11  # epoch seconds, far past any date


def _no_bool(value: Any) -> Any:
    """JSON's true is not 1: a length or a time of ``true`` is refused, not read as 1."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number here")
    return value


_Seconds = Annotated[float, Field(ge=0, le=_MAX_S, allow_inf_nan=False), BeforeValidator(_no_bool)]
_Tokens = Annotated[int, Field(ge=0, le=1_000_000_000, strict=True), BeforeValidator(_no_bool)]


class _Timings(BaseModel):
    model_config = ConfigDict(extra="allow")
    request_start: _Seconds | None = None
    first_token_iteration: _Seconds | None = None
    last_token_iteration: _Seconds | None = None
    request_end: _Seconds | None = None


class _Info(BaseModel):
    model_config = ConfigDict(extra="allow")
    timings: _Timings
    error: Annotated[str, Field(max_length=100_000)] | None = None


class _Request(BaseModel):
    """One ``GenerativeRequestStats`` as e2e reads it."""

    model_config = ConfigDict(extra="allow")
    info: _Info
    prompt_tokens: _Tokens | None = None
    output_tokens: _Tokens | None = None
    request_end_time: _Seconds | None = None


class _Requests(BaseModel):
    model_config = ConfigDict(extra="allow")
    successful: Annotated[list[_Request], Field(max_length=10_000_000)] = Field(default_factory=list)
    errored: Annotated[list[_Request], Field(max_length=10_000_000)] = Field(default_factory=list)
    incomplete: Annotated[list[_Request], Field(max_length=10_000_000)] = Field(default_factory=list)


class _Benchmark(BaseModel):
    model_config = ConfigDict(extra="allow")
    config: dict[str, Any] = Field(default_factory=dict)
    requests: _Requests
    metrics: dict[str, Any] = Field(default_factory=dict)


def read_report(path: Path) -> list[dict[str, Any]]:
    """The benchmarks of the report at ``path``, each checked (``_Benchmark``) and carrying the
    report's metadata. Bad input is a ConfigError (exit 2)."""
    path = Path(path)
    text = read_text(path, expect="a GuideLLM benchmark report (benchmarks.json)",
                     not_what="not a GuideLLM benchmark report")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{path} is not JSON: not a GuideLLM benchmark report (make it with "
                          "`guidellm run` and a json output)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ConfigError(f"{path} has no list of benchmarks: not a GuideLLM benchmark report")
    if not doc["benchmarks"]:
        raise ConfigError(f"{path} holds no benchmark")
    out = []
    for i, bench in enumerate(doc["benchmarks"]):
        try:
            _Benchmark.model_validate(bench)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"{path} benchmark {i + 1}: {where}: {first['msg']}: not a "
                              "GuideLLM benchmark") from None
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        backend = ((doc.get("config") or {}).get("spec") or {}).get("backend") \
            if isinstance(doc.get("config"), dict) else None
        model = backend.get("model") if isinstance(backend, dict) else None
        spec = (doc.get("config") or {}).get("spec") if isinstance(doc.get("config"), dict) else None
        seed = spec.get("seed") if isinstance(spec, dict) else None
        out.append({"benchmark": bench, "index": i, "count": len(doc["benchmarks"]),
                    "guidellm_version": str(meta.get("guidellm_version") or "")[:64],
                    "model": str(model)[:1024] if isinstance(model, str) else "",
                    "seed": seed if isinstance(seed, dict) else None})
    return out


def _record(i: int, r: _Request, t0: float, error: str | None) -> RequestRecord:
    t = r.info.timings
    send = (t.request_start - t0) if t.request_start is not None else 0.0
    end = r.request_end_time if r.request_end_time is not None else t.request_end
    if error is not None or t.first_token_iteration is None or end is None or not r.output_tokens:
        return RequestRecord(index=i, send_s=send,
                             error=error or "GuideLLM recorded no first token, end or output")
    return RequestRecord(index=i, send_s=send, first_token_s=t.first_token_iteration - t0,
                         end_s=end - t0, chunk_times_s=(t.first_token_iteration - t0,),
                         prompt_tokens=r.prompt_tokens, completion_tokens=r.output_tokens,
                         status=200)


def _requests(bench: _Benchmark) -> tuple[RequestRecord, ...]:
    groups = [(r, None) for r in bench.requests.successful]
    groups += [(r, f"GuideLLM: errored: {r.info.error or 'no error text'}"[:2000])
               for r in bench.requests.errored]
    groups += [(r, "GuideLLM: incomplete (cancelled at the benchmark's end)")
               for r in bench.requests.incomplete]
    starts = [r.info.timings.request_start for r, _ in groups
              if r.info.timings.request_start is not None]
    if not starts:
        raise ConfigError("no request of the benchmark has a start time")
    t0 = min(starts)
    groups.sort(key=lambda g: g[0].info.timings.request_start or t0)
    return tuple(_record(i, r, t0, err) for i, (r, err) in enumerate(groups))


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _load(config: dict[str, Any], options: ImportOptions, source: str) -> dict[str, Any]:
    """The benchmark's strategy as RunSpec fields: synchronous (1 stream) and concurrent
    (its streams) and throughput (all at once, its max_concurrency) are closed loops; constant
    and poisson an open loop at its rate, capped by its max_concurrency (``arrival``
    "constant" for GuideLLM's even gaps). A trace replay is refused, saying why."""
    strategy = config.get("strategy") if isinstance(config, dict) else None
    strategy = strategy if isinstance(strategy, dict) else {}
    kind = strategy.get("type_")
    cap = _whole(strategy.get("max_concurrency"))
    if kind in ("constant", "poisson"):
        rate = strategy.get("rate")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (
                math.isfinite(rate) and rate > 0):
            raise ConfigError(f"{source}: its {kind} strategy's rate is {str(rate)[:40]!r}, not "
                              "a positive number")
        return {"concurrency": options.concurrency or 1, "request_rate": float(rate),
                "burstiness": 1.0, "max_concurrency": cap,
                "arrival": "constant" if kind == "constant" else None}
    if kind == "trace":
        raise ConfigError(f"{source}: a trace-replay strategy: e2e imports synchronous, "
                          "concurrent, throughput, constant and poisson benchmarks")
    streams = {"synchronous": 1, "concurrent": _whole(strategy.get("streams")),
               "throughput": cap}.get(kind)
    concurrency = options.concurrency or streams
    if concurrency is None or not 0 < concurrency <= MAX_CONCURRENCY:
        raise ConfigError(f"{source}: its strategy ({str(kind)[:40]}) names no requests in "
                          "flight: give --concurrency, the requests it kept in flight")
    return {"concurrency": concurrency, "request_rate": None, "burstiness": 1.0,
            "max_concurrency": None, "arrival": None}


def _seed(doc: dict[str, Any], config: dict[str, Any]) -> int | None:
    """The report's seed (``config.spec.seed``, a static one), else a Poisson strategy's."""
    seed = doc.get("seed") or {}
    value = seed.get("value") if seed.get("kind", "static") == "static" else None
    if _whole(value) is not None or value == 0 and not isinstance(value, bool):
        return int(value)
    strategy = config.get("strategy") if isinstance(config, dict) else None
    value = strategy.get("random_seed") if isinstance(strategy, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _warmup(config: dict[str, Any]) -> tuple[int | None, str | None]:
    """(warmup requests, note): 0 when the benchmark had no warmup; unknown (None) with a note
    when it had one, which GuideLLM sets as a share or a duration, not a request count."""
    warmup = config.get("warmup") if isinstance(config, dict) else None
    if not isinstance(warmup, dict) or (warmup.get("percent") in (None, 0)
                                        and warmup.get("value") in (None, 0)):
        return 0, None
    what = ", ".join(f"{k} {str(warmup.get(k))[:40]}" for k in ("percent", "value", "mode")
                     if warmup.get(k) is not None)
    return None, (f"GuideLLM's warmup ({what}) is a share or a duration of the benchmark, not a "
                  "request count: recorded as unknown")


def to_run(doc: dict[str, Any], options: ImportOptions, *, source: str,
           repeat: int | None = None, provenance: dict[str, Any] | None = None) -> ImportedRun:
    """One benchmark of a GuideLLM report as an e2e run (pure). The arm is ``--arm``; the
    concurrency ``--concurrency``, else a concurrent (or synchronous) strategy's streams; the
    lengths the flags', else the most common among the successful requests."""
    from e2e.plan import RunSpec
    from e2e.console import describe_validation_error

    bench = _Benchmark.model_validate(doc["benchmark"])
    if doc.get("count", 1) > 1:
        source = f"{source} (benchmark {doc['index'] + 1})"
    requests, impossible = checked_times(_requests(bench), "GuideLLM")
    ok = [r for r in requests if r.ok]
    if not options.arm:
        raise ConfigError("GuideLLM records no arm: give --arm")
    load = _load(bench.config, options, source)
    concurrency, arrival = load.pop("concurrency"), load.pop("arrival")
    seed = options.seed if options.seed is not None else _seed(doc, bench.config)
    warmups, warmup_note = ((options.warmup_requests, None)
                            if options.warmup_requests is not None else _warmup(bench.config))
    defaulted = [name for name, value in (("seed", seed), ("warmup_requests", warmups))
                 if value is None]

    def mode(values):
        return Counter(values).most_common(1)[0][0] if values else None

    input_len = options.input_len or mode([r.prompt_tokens for r in ok if r.prompt_tokens])
    output_len = options.output_len or mode([r.completion_tokens for r in ok
                                             if r.completion_tokens])
    if input_len is None or output_len is None:
        raise ConfigError(f"{source}: no successful request to take the lengths from: give "
                          "--input-len and --output-len")
    try:
        spec = RunSpec(arm=options.arm, concurrency=concurrency, dspark=bool(options.dspark),
                       prompts=len(requests), input_len=input_len, output_len=output_len,
                       seed=seed or 0, warmup_requests=warmups or 0,
                       repeat=repeat or options.repeat or 2, **load)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "the report and the flags",
                                                    RunSpec)) from None
    reasons = list(impossible)
    notes = [import_note(source, TOOL),
             "GuideLLM keeps no time per chunk: no inter-chunk latency"]
    if "seed" in defaulted:
        notes.append("GuideLLM's report records no seed; set to 0 (give --seed)")
    if warmup_note:
        notes.append(warmup_note)
    failed = [r for r in requests if not r.ok and "impossible times" not in (r.error or "")]
    if failed:
        reasons.append(f"{len(failed)} request(s) failed; first: request {failed[0].index}: "
                       f"{failed[0].error}")
    sampled = bench.config.get("sample_size") if isinstance(bench.config, dict) else None
    if isinstance(sampled, int) and not isinstance(sampled, bool) and sampled < len(requests):
        reasons.append(f"the report holds a sample of {sampled} requests, not every one")
    found, said = length_findings(ok, input_len, output_len, strict=options.strict_lengths,
                                  why="GuideLLM's synthetic prompts are text its tokenizer sized")
    reasons += found
    notes += said
    figures = _figures(bench.metrics)
    definitions = _definitions(figures)
    notes += [definition_warning(d) for d in definitions]
    record = RunRecord(
        experiment=options.experiment, run_id=spec.run_id, spec=spec, arm_settings={},
        config={},
        server=ServerInfo(argv=[], env={}, base_url="",
                          model=copied(str(doc.get("model") or ""), string=1024)),
        provenance={"imported": copied({
            "format": FORMAT, "source": source, **(provenance or {}), "per_request": True,
            "benchmark": doc.get("index", 0), "strategy": bench.config.get("strategy"),
            "guidellm_version": doc.get("guidellm_version"), "arrival": arrival,
            "defaulted": defaulted, "guidellm": figures, "definitions": definitions})},
        started_at="", finished_at="", metrics=summarize_run(requests), valid=not reasons,
        invalid_reasons=reasons, warnings=notes)
    return ImportedRun(record=record, requests=requests)


_FIGURES = ("time_to_first_token_ms", "time_per_output_token_ms", "request_latency",
            "requests_per_second", "output_tokens_per_second", "inter_token_latency_ms")


def _figures(metrics: dict[str, Any]) -> dict[str, Any]:
    """GuideLLM's own summary of successful requests (mean, median, p99), kept beside e2e's."""
    out = {}
    for name in _FIGURES:
        item = metrics.get(name) if isinstance(metrics, dict) else None
        good = item.get("successful") if isinstance(item, dict) else None
        if isinstance(good, dict):
            pct = good.get("percentiles") if isinstance(good.get("percentiles"), dict) else {}
            out[name] = {k: v for k, v in (("mean", good.get("mean")),
                                           ("median", good.get("median")),
                                           ("p99", pct.get("p99")))
                         if isinstance(v, (int, float))}
    return out


def _definitions(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """GuideLLM's figures whose definitions differ from e2e's, with GuideLLM's own values."""
    def stat(name: str, key: str) -> float | None:
        value = (figures.get(name) or {}).get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else None

    ttft = stat("time_to_first_token_ms", "median")
    return [
        definition("tpot_ms_mean",
                   "GuideLLM's inter-token latency ends at the last token ((last token − first "
                   "token) / (output tokens − 1)), e2e's TPOT at the end of the stream; its time "
                   "per output token is latency / output tokens, TTFT included",
                   stat("inter_token_latency_ms", "mean")),
        definition("tpot_ms_median",
                   "GuideLLM's percentiles (median, p99, …) are one sample of its requests, the "
                   "value at that rank, where e2e's interpolate (numpy's linear) over the same "
                   "requests" + (f" (GuideLLM's median TTFT {ttft:.6g} ms)" if ttft else ""),
                   stat("inter_token_latency_ms", "median"))]


READER = Reader(tool=TOOL, read=read_report, convert=to_run)
