"""``vllm bench serve --save-result`` files: the format's keys, and its reader (``READER``; the
writer is ``e2e.interop.vllm_bench_writer``, both registered in ``e2e.interop.formats``).

    read_results(path)                 -> the result documents of a file (one, or one per line)
    to_run(result, options, source)    -> ImportedRun(spec, record, requests): pure

The file format is vLLM's (vllm/benchmarks/serve.py, ``main_async`` and ``benchmark``; checked
on vLLM 0.32): scalar summary keys always, the per-request arrays (``input_lens``,
``output_lens``, ``ttfts``, ``itls``, ``start_times``, ``generated_texts``, ``errors``) only
with ``--save-detailed``, and any ``--metadata KEY=VALUE`` pair as a top-level key.

What maps to what, and where vLLM's definitions differ from e2e's, is in docs/how-to/interop.md (the
table there is ``SUMMARY_KEYS`` below). In short: TTFT, TPOT (excluding the first token:
(latency - TTFT) / (output tokens - 1), output tokens from the server's usage), inter-chunk
latency and the percentile method (numpy linear) are the same in both; vLLM's latency ends at
the last content chunk, e2e's at the end of the stream; vLLM's acceptance rate is a percentage,
e2e's a fraction.

An imported run keeps every key e2e has no field for in ``provenance["imported"]["extra"]``,
so exporting it writes them back: ``to_result(import(f))`` holds the same keys and values as
``f`` (arrays rebuilt from the requests), and importing that again gives the same run.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      create_model)

from e2e.config import MAX_CONCURRENCY
from e2e.plan import RunSpec
from e2e.console import describe_validation_error
from e2e.errors import ConfigError, ResultsError
from e2e.metrics import MAX_POSITIONS
from e2e.results.records import RequestRecord, RunMetrics, RunRecord, ServerInfo
from e2e.interop._boundary import read_text
from e2e.interop.importing import (ImportedRun, ImportOptions, Reader, import_note,
                                   length_findings, whole)

__all__ = ["FORMAT", "TOOL", "DATE_FORMAT", "SUMMARY_KEYS", "PER_REQUEST_KEYS", "METADATA_KEYS",
           "READER", "check_result", "read_results", "to_run"]

FORMAT = "vllm bench serve --save-result"
TOOL = "vllm bench serve"

# e2e RunMetrics field <- vllm bench result key (values copied as they are).
SUMMARY_KEYS: tuple[tuple[str, str], ...] = (
    ("duration_s", "duration"),
    ("ok_requests", "completed"),
    ("input_tokens", "total_input_tokens"),
    ("output_tokens", "total_output_tokens"),
    ("request_throughput_req_s", "request_throughput"),
    ("output_throughput_tok_s", "output_throughput"),
    ("ttft_ms_mean", "mean_ttft_ms"), ("ttft_ms_median", "median_ttft_ms"),
    ("ttft_ms_p99", "p99_ttft_ms"),
    ("tpot_ms_mean", "mean_tpot_ms"), ("tpot_ms_median", "median_tpot_ms"),
    ("tpot_ms_p99", "p99_tpot_ms"),
    ("itl_ms_mean", "mean_itl_ms"), ("itl_ms_median", "median_itl_ms"),
    ("itl_ms_p99", "p99_itl_ms"),
    ("e2el_ms_mean", "mean_e2el_ms"), ("e2el_ms_median", "median_e2el_ms"),
    ("e2el_ms_p99", "p99_e2el_ms"),
    ("acceptance_length", "spec_decode_acceptance_length"),
)
# e2e's acceptance_rate is a fraction; vllm's spec_decode_acceptance_rate a percentage.
RATE_KEY = "spec_decode_acceptance_rate"
PER_REQUEST_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
                    "queue_times", "generated_texts", "errors")
_DETAILED = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors")
# Top-level keys e2e writes on export and reads on import (as `--metadata KEY=VALUE` would).
METADATA_KEYS = ("arm", "spec_mode", "seed", "warmup_requests", "repeat", "input_len",
                 "output_len")
# Keys the importer turns into the run's spec (so they are not kept as extras).
_SPEC_KEYS = ("num_prompts", "max_concurrency", "failed", *METADATA_KEYS)
DATE_FORMAT = "%Y%m%d-%H%M%S"  # the file's ``date``: local time, no zone


_IMPOSSIBLE = "vllm bench serve recorded impossible times"

# Bounds on what a result file may say: far above any real benchmark, finite throughout.
_MAX_S = 1e7          # seconds (about 115 days)
_MAX_COUNT = 100_000_000
_MAX_DEPTH = 32       # JSON nesting: a result document is 3 deep


def _finite_or_none(value: Any) -> Any:
    """vLLM writes NaN for a statistic of no requests (numpy's mean of nothing): read as
    absent; any other value is left for the field's own check."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


_Seconds = Annotated[float, Field(ge=0, le=_MAX_S, allow_inf_nan=False)]
_Count = Annotated[int, Field(ge=0, le=_MAX_COUNT)]
_Stat = Annotated[Optional[Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]],
                  BeforeValidator(_finite_or_none)]


class _BenchFields(BaseModel):
    """What e2e reads from one vllm bench serve result document, checked at the boundary:
    every number finite and within bounds, every per-request array of the right type. Keys
    e2e has no field for are allowed (kept as the run's extras)."""

    model_config = ConfigDict(extra="allow")

    completed: _Count
    failed: _Count | None = None
    num_prompts: Annotated[int, Field(ge=1, le=_MAX_COUNT)]
    duration: Annotated[float, Field(gt=0, le=_MAX_S, allow_inf_nan=False)]
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] | None = None
    total_input_tokens: _Count | None = None
    total_output_tokens: _Count | None = None
    request_throughput: _Stat = None
    output_throughput: _Stat = None
    spec_decode_acceptance_rate: _Stat = None
    spec_decode_acceptance_length: _Stat = None
    spec_decode_per_position_acceptance_rates: Annotated[
        list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]],
        Field(max_length=MAX_POSITIONS)] | None = None
    input_lens: list[_Count] | None = None
    output_lens: list[_Count | None] | None = None
    ttfts: list[_Seconds] | None = None
    itls: list[list[_Seconds]] | None = None
    latencies: list[_Seconds] | None = None
    start_times: list[Annotated[float, Field(allow_inf_nan=False, ge=-1e12, le=1e12)]] | None = None
    errors: list[str | None] | None = None


# ... and every summary statistic (``mean_ttft_ms`` ...): finite, not negative, or absent
BenchResult = create_model(
    "BenchResult", __base__=_BenchFields, __doc__=_BenchFields.__doc__,
    **{key: (_Stat, None) for _, key in SUMMARY_KEYS if key not in _BenchFields.model_fields})


def _depth(obj: Any, limit: int = _MAX_DEPTH) -> int:
    """How deeply ``obj`` nests (iteratively: a hostile file cannot exhaust the stack)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def check_result(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` checked as a vllm bench result (``BenchResult``); a ConfigError naming the key
    and the value otherwise. Returns the document as read (NaN statistics as None)."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a JSON object per result, as vllm bench serve "
                          "--save-result writes")
    missing = [k for k in ("completed", "duration", "num_prompts") if k not in doc]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}: not a vllm bench serve "
                          "result (make it with `vllm bench serve --save-result`)")
    if _depth(doc) > _MAX_DEPTH:
        raise ConfigError(f"{where}: nested more than {_MAX_DEPTH} deep; not a vllm bench "
                          "serve result")
    try:
        checked = BenchResult.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, where, BenchResult)) from None
    out = dict(doc)
    for key in BenchResult.model_fields:
        if key in doc:
            out[key] = getattr(checked, key)
    return out


def read_results(path: Path) -> list[dict[str, Any]]:
    """The result documents in ``path``: one JSON object (``--save-result``) or one per line
    (``--append-result``), each checked (``check_result``). Bad input is a ConfigError."""
    path = Path(path)
    text = read_text(path, expect="the JSON file that vllm bench serve --save-result wrote",
                     not_what="not a vllm bench serve --save-result file")
    try:
        try:
            docs = [json.loads(text)]
        except ValueError:
            try:
                docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            except ValueError as exc:
                raise ConfigError(f"{path} is not JSON (a vllm bench serve --save-result "
                                  f"file?): {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deep to be a vllm bench serve result") from None
    if not docs:
        raise ConfigError(f"{path}: expected a JSON object per result, as vllm bench serve "
                          "--save-result writes")
    return [check_result(doc, f"{path}" if len(docs) == 1 else f"{path} (result {i + 1})")
            for i, doc in enumerate(docs)]


# ---------------------------------------------------------------- import (pure) ----


def _bool(value: Any, key: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "dspark"):
        return True
    if text in ("0", "false", "no", "off", "base"):
        return False
    raise ConfigError(f"the file's {key} is {value!r}: give true/false (or spec_mode base/dspark)")


def _mode(values: Sequence[int]) -> int | None:
    """The most common value (ties: the smallest); None for an empty sequence."""
    if not values:
        return None
    counts = Counter(values)
    top = max(counts.values())
    return min(v for v, c in counts.items() if c == top)


def _per_token(total: Any, completed: Any) -> int | None:
    if not completed or total is None:
        return None
    share = float(total) / float(completed)
    return int(share) if share.is_integer() else None


def _arrival(result: dict[str, Any]) -> tuple[float | None, float]:
    """(request rate, burstiness) of the file's load: (None, 1.0) for ``request_rate`` inf
    (every request at once: a closed loop of ``max_concurrency``), else vLLM's open loop
    (gamma gaps of shape ``burstiness``; 1: Poisson)."""
    rate = result.get("request_rate")
    if rate is None or (isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity")):
        return None, 1.0
    burst = result.get("burstiness", 1.0)
    try:
        value, shape = float(rate), float(1.0 if burst is None else burst)
    except (TypeError, ValueError):
        raise ConfigError(f"the file's request_rate {str(rate)[:40]!r} / burstiness "
                          f"{str(burst)[:40]!r} is not a number") from None
    if isinstance(rate, bool) or isinstance(burst, bool) or not (
            math.isfinite(value) or value == math.inf) or not 0 < value or \
            not (math.isfinite(shape) and shape > 0):
        raise ConfigError(f"the file's request_rate {rate!r} / burstiness {burst!r}: give a "
                          "positive rate (or inf) and a positive burstiness")
    return (None, 1.0) if value == math.inf else (value, shape)


def _resolve_spec(result: dict[str, Any], options: ImportOptions, repeat: int,
                  ok_inputs: Sequence[int], ok_outputs: Sequence[int]
                  ) -> tuple[RunSpec, list[str]]:
    """The run's spec: a flag, else the file's field, else (for lengths) what the requests
    had. Returns the spec and the fields that were neither (given a default)."""
    arm = options.arm or result.get("arm") or result.get("label")
    if not arm:
        raise ConfigError("the file names no arm (no `arm` metadata, no label): give --arm")
    rate, burstiness = _arrival(result)
    cap = whole(result.get("max_concurrency"), "max_concurrency")
    if rate is not None:  # an open loop: its rate, burstiness and in-flight cap; the
        concurrency = options.concurrency or 1  # concurrency only numbers its cell
    else:
        concurrency = options.concurrency or cap
    if concurrency is None:
        raise ConfigError(
            "the file has no max_concurrency (vllm bench serve ran without "
            "--max-concurrency): give --concurrency, the requests it kept in flight")
    dspark = options.dspark
    if dspark is None:
        dspark = _bool(result.get("spec_mode"), "spec_mode")
    if dspark is None:
        dspark = RATE_KEY in result  # vLLM writes spec-decode figures only when drafts were made
    prompts = options.prompts or whole(result.get("num_prompts"), "num_prompts")
    input_len = (options.input_len or whole(result.get("input_len"), "input_len")
                 or _mode(ok_inputs)
                 or _per_token(result.get("total_input_tokens"), result.get("completed")))
    output_len = (options.output_len or whole(result.get("output_len"), "output_len")
                  or _mode(ok_outputs)
                  or _per_token(result.get("total_output_tokens"), result.get("completed")))
    if input_len is None or output_len is None:
        which = " and ".join(n for n, v in (("--input-len", input_len),
                                            ("--output-len", output_len)) if v is None)
        raise ConfigError(f"cannot tell the run's lengths from the file (no per-request arrays, "
                          f"and the totals are not a whole number per request): give {which}")
    seed = options.seed if options.seed is not None else whole(result.get("seed"), "seed")
    warmups = (options.warmup_requests if options.warmup_requests is not None
               else whole(result.get("warmup_requests"), "warmup_requests"))
    # vllm bench serve records neither its --seed nor its --num-warmups
    defaulted = [name for name, value in (("seed", seed), ("warmup_requests", warmups))
                 if value is None]
    try:
        spec = RunSpec(arm=str(arm), concurrency=concurrency, dspark=dspark, prompts=prompts,
                       input_len=input_len, output_len=output_len, seed=seed or 0,
                       warmup_requests=warmups or 0, repeat=repeat, request_rate=rate,
                       burstiness=burstiness, max_concurrency=cap if rate is not None else None)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "the file's fields and the flags",
                                                    RunSpec)) from None
    return spec, defaulted


def _requests(result: dict[str, Any]) -> tuple[RequestRecord, ...] | None:
    """Request records from the per-request arrays (--save-detailed), or None without them.

    send = start_time - the earliest start_time; first token = send + ttft; chunk times =
    first token, then each inter-token latency added in turn; end = send + latency. A request
    vLLM counted as failed (no output tokens, or an error) has no token times."""
    if not all(isinstance(result.get(k), list) for k in _DETAILED):
        return None
    n = len(result["start_times"])
    if any(len(result[k]) != n for k in _DETAILED):
        lengths = ", ".join(f"{k} {len(result[k])}" for k in _DETAILED)
        raise ConfigError(f"the file's per-request arrays differ in length ({lengths}): not a "
                          "whole vllm bench serve --save-detailed result (truncated or edited?)")
    t0 = min(result["start_times"], default=0.0)
    out = []
    for i in range(n):
        send = float(result["start_times"][i]) - t0
        error = result["errors"][i] or None
        output = int(result["output_lens"][i] or 0)
        if error is not None or output == 0:
            out.append(RequestRecord(
                index=i, send_s=send,
                error=error or "vllm bench serve recorded no output for this request"))
            continue
        first = send + float(result["ttfts"][i])
        chunks = [first]
        for gap in result["itls"][i]:
            chunks.append(chunks[-1] + float(gap))
        out.append(RequestRecord(
            index=i, send_s=send, first_token_s=first, end_s=send + float(result["latencies"][i]),
            chunk_times_s=tuple(chunks), prompt_tokens=int(result["input_lens"][i]),
            completion_tokens=output))
    return tuple(out)


def _float(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _metrics(result: dict[str, Any]) -> RunMetrics:
    values: dict[str, Any] = {field: _float(result.get(key)) for field, key in SUMMARY_KEYS}
    for field in ("ok_requests", "input_tokens", "output_tokens"):
        values[field] = int(values[field] or 0)
    values["requests"] = values["ok_requests"] + int(result.get("failed") or 0)
    rate = _float(result.get(RATE_KEY))
    values["acceptance_rate"] = rate / 100.0 if rate is not None else None
    values["acceptance_rates_per_pos"] = (
        list(result["spec_decode_per_position_acceptance_rates"])
        if result.get("spec_decode_per_position_acceptance_rates") else None)
    tpot, length = values["tpot_ms_mean"], values["acceptance_length"]
    values["ms_per_verify_step"] = tpot * length if tpot is not None and length else None
    return RunMetrics(**values)


def _times(result: dict[str, Any]) -> tuple[str, str]:
    """(started_at, finished_at): vLLM's ``date`` (local time when it wrote the file, after
    the load) and that minus ``duration``; the file carries no time zone."""
    try:
        end = datetime.strptime(str(result.get("date")), DATE_FORMAT)
    except ValueError:
        return "", ""
    start = end - timedelta(seconds=float(result.get("duration") or 0.0))
    return start.isoformat(timespec="seconds"), end.isoformat(timespec="seconds")


def _checks(result: dict[str, Any], spec: RunSpec, requests: Sequence[RequestRecord] | None,
            strict: bool) -> tuple[list[str], list[str]]:
    """(invalid reasons, warnings) by e2e's rules: every request measured and successful;
    lengths as asked (a warning unless ``strict``: see ImportOptions)."""
    reasons: list[str] = []
    notes: list[str] = []
    completed, failed = int(result.get("completed") or 0), int(result.get("failed") or 0)
    if completed + failed != spec.prompts:
        reasons.append(f"{completed + failed} of {spec.prompts} requests were measured")
    if requests is not None:
        bad = [r for r in requests if not r.ok and not (r.error or "").startswith(_IMPOSSIBLE)]
        if bad:
            reasons.append(f"{len(bad)} request(s) failed; first: request {bad[0].index}: "
                           f"{bad[0].error}")
        found, said = length_findings(
            [r for r in requests if r.ok], spec.input_len, spec.output_len, strict=strict,
            why="vllm bench serve's random dataset decodes random token ids to text and the "
                "server re-tokenizes it, so a length can be a token off")
        reasons += found
        notes += said
    elif failed:
        reasons.append(f"{failed} request(s) failed")
    if spec.dspark and RATE_KEY not in result:
        reasons.append("spec mode dspark but the file has no spec-decode figures (vllm bench "
                       "serve writes them only when the server's counters showed drafts)")
    return reasons, notes


def to_run(result: dict[str, Any], options: ImportOptions, *, source: str,
           repeat: int | None = None, provenance: dict[str, Any] | None = None) -> ImportedRun:
    """One vllm bench result document as an e2e run (pure; ``source`` names the file).

    The repeat number is ``repeat``, else ``options.repeat``, else the file's ``repeat`` (an
    e2e export), else 2 (``import_file`` picks a free one)."""
    from e2e.interop._boundary import checked_times, definition, definition_warning
    from e2e.redact import copied

    repeat = repeat or options.repeat or whole(result.get("repeat"), "repeat") or 2
    requests = _requests(result)
    impossible: list[str] = []
    if requests is not None:
        requests, impossible = checked_times(requests, "vllm bench serve")
    ok = [r for r in requests or () if r.ok]
    spec, defaulted = _resolve_spec(
        result, options, repeat,
        [r.prompt_tokens for r in ok if r.prompt_tokens is not None],
        [r.completion_tokens for r in ok if r.completion_tokens is not None])
    reasons, notes = _checks(result, spec, requests, options.strict_lengths)
    reasons = impossible + reasons
    consumed = {k for _, k in SUMMARY_KEYS} | {RATE_KEY} | set(_SPEC_KEYS)
    if requests is not None:  # else keep what arrays there are (latencies, queue_times)
        consumed |= set(PER_REQUEST_KEYS)
    # through the one redactor (an error string's api_key=…, a --metadata token), strings
    # bounded; arrays whole (the export writes them back)
    extra = copied({k: v for k, v in result.items() if k not in consumed},
                   depth=_MAX_DEPTH + 1, string=100_000, items=_MAX_COUNT)
    definitions = [
        definition("output_throughput_tok_s",
                   "vllm bench serve's throughputs (copied as they are) divide by its own "
                   f"duration ({float(result['duration']):.6g} s: from just before it schedules "
                   "the first request to after the last returns), e2e's by its first send to "
                   "its last end", _float(result.get("output_throughput"))),
        definition("e2el_ms_mean",
                   "vllm bench serve's latency ends at the last content chunk, e2e's at the end "
                   "of the stream (after the usage chunk and [DONE]), sub-millisecond later",
                   _float(result.get("mean_e2el_ms")))]
    if defaulted:
        notes.append(f"the file does not record {' or '.join(defaulted)}; set to 0 (give "
                     + " / ".join(f"--{d.replace('_', '-')}" for d in defaulted) + ")")
    try:
        metrics = _metrics(result)
    except (TypeError, ValueError, ValidationError) as exc:
        raise ResultsError(f"{source}: a summary value is not a number: {exc}") from None
    started, finished = _times(result)
    record = RunRecord(
        experiment=options.experiment,
        run_id=spec.run_id,
        spec=spec,
        arm_settings={},
        config={},
        server=ServerInfo(argv=[], env={}, base_url="",
                          model=str(result.get("model_id") or "")),
        provenance={"imported": {
            "format": FORMAT, "source": source, **(provenance or {}),
            "per_request": requests is not None, "defaulted": defaulted, "extra": extra,
            "definitions": definitions}},
        started_at=started,
        finished_at=finished,
        metrics=metrics,
        valid=not reasons,
        invalid_reasons=reasons,
        warnings=[import_note(source, TOOL), *notes, *map(definition_warning, definitions)],
    )
    return ImportedRun(record=record, requests=requests)


READER = Reader(tool=TOOL, read=read_results, convert=to_run)
