"""``vllm bench serve --save-result`` files <-> e2e runs.

    read_results(path)                 -> the result documents of a file (one, or one per line)
    to_run(result, options, source)    -> ImportedRun(spec, record, requests): pure
    import_file(path, options, results)-> runs written into results/<experiment>/<run id>/
    to_result(record, requests)        -> one vllm bench result document: pure
    export_dir(results_dir, out)       -> one <run id>.json per run

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
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      create_model)

from e2e.config import MAX_CONCURRENCY
from e2e.plan import RunSpec
from e2e.console import describe_validation_error
from e2e.names import check_name
from e2e.errors import ConfigError, NoSuchResults, ResultsError
from e2e.load import arrival_times
from e2e.metrics import MAX_POSITIONS, per_position_rates, request_tpot_s
from e2e.paths import atomic_write_json, no_links, read_bounded, sha256_file, within
from e2e.results.records import RequestRecord, RunMetrics, RunRecord, ServerInfo
from e2e.results.store import (REQUESTS, finalize, new_partial_dir, next_attempt_dir, read_requests,
                               read_run, write_requests, write_run, writing)

__all__ = [
    "FORMAT", "SUMMARY_KEYS", "PER_REQUEST_KEYS", "METADATA_KEYS", "ImportOptions",
    "ImportedRun", "read_results", "to_run", "import_file", "to_result", "export_dir",
    "import_note",
]

FORMAT = "vllm bench serve --save-result"

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
# The order vLLM writes its keys in (main_async, then benchmark's result, then the stats).
_ORDER = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
          "num_prompts", *METADATA_KEYS, "request_rate", "burstiness", "max_concurrency",
          "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
          "request_throughput", "request_goodput", "output_throughput",
          "total_token_throughput", *PER_REQUEST_KEYS, "max_output_tokens_per_s",
          "max_concurrent_requests", "rtfx", "spec_decode_acceptance_rate",
          "spec_decode_acceptance_length", "spec_decode_num_drafts", "spec_decode_draft_tokens",
          "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates",
          *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
            for stat in ("mean", "median", "std", "p99")))
_DATE = "%Y%m%d-%H%M%S"


@dataclass(frozen=True)
class ImportOptions:
    """What the command line says about imported runs; None: read it from the file.

    ``experiment`` names the results folder the runs join. ``strict_lengths`` makes a prompt
    or completion of other than the spec's length invalidate the run (as in an e2e run)
    instead of warning: vLLM's random dataset re-tokenizes text prompts, so a prompt may be a
    token longer or shorter than asked for."""

    experiment: str
    arm: str | None = None
    concurrency: int | None = None
    dspark: bool | None = None
    prompts: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    seed: int | None = None
    warmup_requests: int | None = None
    repeat: int | None = None
    strict_lengths: bool = False
    force: bool = False  # import a result again that the folder already holds (replacing it)
    lock_wait_s: float = 0.0  # how long to wait for another e2e writing into the folder

    def __post_init__(self) -> None:
        check_name(self.experiment, "--experiment")
        if self.arm is not None:
            check_name(self.arm, "--arm")


@dataclass(frozen=True)
class ImportedRun:
    record: RunRecord
    requests: tuple[RequestRecord, ...] | None  # None: the file has no per-request arrays


def import_note(source: str) -> str:
    """The warning every imported run carries (until records get a source marker)."""
    return f"imported from vllm bench serve: {source}"


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
    data = read_bounded(path, expect="the JSON file that vllm bench serve --save-result wrote")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}): not a vllm bench serve "
                          "--save-result file") from None
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


def _int(value: Any, key: str) -> int | None:
    """An integer from a JSON number or a --metadata string; None if absent."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"the file's {key} is {value!r}, not a number") from None
    if not number.is_integer():
        raise ConfigError(f"the file's {key} is {value!r}, not a whole number")
    return int(number)


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
    cap = _int(result.get("max_concurrency"), "max_concurrency")
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
    prompts = options.prompts or _int(result.get("num_prompts"), "num_prompts")
    input_len = (options.input_len or _int(result.get("input_len"), "input_len")
                 or _mode(ok_inputs)
                 or _per_token(result.get("total_input_tokens"), result.get("completed")))
    output_len = (options.output_len or _int(result.get("output_len"), "output_len")
                  or _mode(ok_outputs)
                  or _per_token(result.get("total_output_tokens"), result.get("completed")))
    if input_len is None or output_len is None:
        which = " and ".join(n for n, v in (("--input-len", input_len),
                                            ("--output-len", output_len)) if v is None)
        raise ConfigError(f"cannot tell the run's lengths from the file (no per-request arrays, "
                          f"and the totals are not a whole number per request): give {which}")
    seed = options.seed if options.seed is not None else _int(result.get("seed"), "seed")
    warmups = (options.warmup_requests if options.warmup_requests is not None
               else _int(result.get("warmup_requests"), "warmup_requests"))
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
        end = datetime.strptime(str(result.get("date")), _DATE)
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

    repeat = repeat or options.repeat or _int(result.get("repeat"), "repeat") or 2
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
        warnings=[import_note(source), *notes, *map(definition_warning, definitions)],
    )
    return ImportedRun(record=record, requests=requests)


# ---------------------------------------------------------------- import (files) ----


def _first_repeat(results: Path, experiment: str) -> int:
    """Imported runs are numbered from the folder's report_from_run (2 when it has none), so
    the report counts them: the file's own warmups (--num-warmups) are already behind them."""
    seen = []
    for path in (Path(results) / experiment).glob("*/run.json"):
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("config", {}).get(
                "report_from_run")
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable run is the report's to warn about, not the import's
        if isinstance(value, int) and not isinstance(value, bool):
            seen.append(value)
    return max(seen) if seen else 2


def _native_runs(results: Path, experiment: str, cell: str) -> list[str]:
    """Run folders of ``cell`` that e2e made itself (not imported)."""
    native = []
    for path in sorted((results / experiment).glob(f"{cell}-r*/run.json")):
        try:
            provenance = json.loads(path.read_text(encoding="utf-8")).get("provenance") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(provenance, dict) and "imported" not in provenance:
            native.append(path.parent.name)
    return native


def _tool_of(record: RunRecord) -> str:
    """The tool an imported record's file came from, by its format."""
    fmt = str((record.provenance.get("imported") or {}).get("format", FORMAT))
    return ("AIPerf" if fmt.startswith("aiperf") else "GuideLLM" if fmt.startswith("guidellm")
            else "vllm bench serve")


def content_sha256(doc: Any) -> str:
    """The hash of a result's content, not its bytes: the same result pretty-printed, with
    its keys in another order, or twice in one file, is the same result."""
    import hashlib

    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8")).hexdigest()


def _imported_before(results: Path, experiment: str) -> dict[Any, str]:
    """The key of every result this experiment's folder already holds an import of -> the
    run id that holds it: its content hash, and (imports made before content hashes) the
    file's sha256 with the result's index."""
    seen: dict[Any, str] = {}
    for path in sorted((Path(results) / experiment).glob("*/run.json")):
        try:
            doc = json.loads(read_bounded(path, 64 << 20))
            imported = (doc.get("provenance") or {}).get("imported") or {}
            if imported.get("content_sha256"):
                seen.setdefault(str(imported["content_sha256"]), path.parent.name)
            key = (str(imported["sha256"]), int(imported.get("index") or 0))
        except (OSError, ValueError, AttributeError, KeyError, TypeError, ConfigError):
            continue  # not an import, or unreadable: the report warns about the latter
        seen.setdefault(key, path.parent.name)
    return seen


def import_file(path: Path, options: ImportOptions, results: Path, *,
                on_skip: Callable[[str], None] | None = None,
                read: Callable[[Path], list[dict[str, Any]]] | None = None,
                convert: Callable[..., ImportedRun] | None = None
                ) -> list[tuple[Path, RunRecord]]:
    """Import every result in ``path`` into ``results/<experiment>/``; one run folder each
    (run.json, and requests.parquet when the file has per-request arrays).

    Idempotent: a result (the file's sha256 and its index in the file) the folder already
    holds is skipped, ``on_skip`` told why, so importing a file twice cannot count its runs
    twice; ``options.force`` replaces the earlier import in place (its run id kept). The
    experiment's folder is held meanwhile, as a sweep holds it: another e2e writing there makes
    the import wait ``options.lock_wait_s``, then refuse (ResultsBusyError) with nothing written.
    ``read`` and ``convert`` import another tool's files the same way (``e2e.interop.aiperf``,
    ``e2e.interop.guidellm``): its documents, and one document -> ``ImportedRun`` as
    ``to_run``."""
    path, results = Path(path), Path(results)
    convert = convert or to_run
    docs = (read or read_results)(path)
    if options.repeat is not None and len(docs) > 1:
        raise ConfigError(f"{path} holds {len(docs)} results and --repeat numbers one run; "
                          "leave it out (each takes the next free repeat)")
    digest = sha256_file(path)
    # the folder held as a sweep holds it (e2e.results.store.writing): the repeat numbers this
    # import takes and the runs it writes are its alone
    with writing(results, options.experiment, wait_s=options.lock_wait_s):
        return _import_docs(docs, path, digest, options, results, on_skip=on_skip,
                            convert=convert)


def _import_docs(docs: list[dict[str, Any]], path: Path, digest: str, options: ImportOptions,
                 results: Path, *, on_skip: Callable[[str], None] | None,
                 convert: Callable[..., ImportedRun]) -> list[tuple[Path, RunRecord]]:
    """``import_file``'s writes, the folder held."""
    before = _imported_before(results, options.experiment)
    written = []
    # what the folder held before: imported runs change neither (no config, not e2e's own)
    first = None
    native_by_cell: dict[str, list[str]] = {}
    for i, doc in enumerate(docs):
        source = str(path) if len(docs) == 1 else f"{path} (result {i + 1})"
        cell = convert(doc, options, source=source).record.spec.cell
        repeat = options.repeat  # asked for: an existing run of that number moves to .attempts
        content = content_sha256(doc)
        earlier = before.get(content) or before.get((digest, i))
        if earlier is not None and not options.force:
            if on_skip is not None:
                on_skip(f"{source}: already imported as {earlier} (the same result, content "
                        f"sha256 {content[:12]}); skipped (--force imports it again, "
                        "replacing it)")
            continue
        if earlier is not None and earlier.startswith(f"{cell}-r"):
            tail = earlier[len(cell) + 2:]
            repeat = int(tail) if tail.isdigit() else repeat  # --force: replace it in place
        if repeat is None:
            wanted = _int(doc.get("repeat"), "repeat")  # an e2e export's; kept when free
            taken = wanted is None or (results / options.experiment / f"{cell}-r{wanted}").exists()
            if taken and first is None:
                first = _first_repeat(results, options.experiment)
            repeat = wanted if not taken else first
            while taken and (results / options.experiment / f"{cell}-r{repeat}").exists():
                repeat += 1
        run = convert(doc, options, source=source, repeat=repeat,
                     provenance={"path": str(path.resolve()), "sha256": digest, "index": i,
                                 "content_sha256": content})
        if cell not in native_by_cell:
            native_by_cell[cell] = _native_runs(results, options.experiment, cell)
        native = native_by_cell[cell]
        if native:
            record = run.record.model_copy(update={"warnings": [*run.record.warnings, (
                f"joins cell {cell} with e2e's own runs ({', '.join(native)}): its figures are "
                f"{_tool_of(run.record)}'s (docs/how-to/interop.md says where they differ); give --arm "
                "to keep it apart")]})
            run = ImportedRun(record=record, requests=run.requests)
        partial = new_partial_dir(results, options.experiment, run.record.run_id)
        if run.requests is not None:
            write_requests(partial / REQUESTS, run.requests)
        write_run(partial, run.record)
        folder = finalize(partial, results, options.experiment, run.record.run_id)
        if earlier is not None and earlier != run.record.run_id:  # --force under another cell
            old = results / options.experiment / earlier
            aside = next_attempt_dir(old)
            aside.parent.mkdir(parents=True, exist_ok=True)
            os.rename(old, aside)  # the earlier import, kept beside like any replaced run
        before[content] = run.record.run_id  # the same result again in this file: skipped
        written.append((folder, run.record))
    return written


# ---------------------------------------------------------------- export (pure) ----


def _std_ms(values: Sequence[float]) -> float | None:
    return float(np.std(values) * 1000.0) if len(values) else None


def _peaks(requests: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's max_output_tokens_per_s and max_concurrent_requests (calculate_metrics): content
    chunks and in-flight requests counted in 1-second buckets from the first send."""
    ok = [r for r in requests if r.ok]
    if not ok:
        return 0.0, 0
    start = min(r.send_s for r in ok)
    end = max(r.end_s for r in ok)  # type: ignore[type-var]
    n = int(math.ceil(end - start)) + 1
    tokens = np.zeros(n)
    active = np.zeros(n)
    for r in ok:
        for t in r.chunk_times_s:
            bucket = int(t - start)
            if 0 <= bucket < n:
                tokens[bucket] += 1
        for second in range(int(r.send_s - start), int(r.end_s - start) + 1):  # type: ignore[operator]
            active[second] += 1
    return float(tokens.max()), int(active.max())


def _arrays(record: RunRecord, requests: Sequence[RequestRecord]) -> dict[str, Any]:
    spec = record.spec
    return {
        "input_lens": [r.prompt_tokens if r.prompt_tokens is not None else spec.input_len
                       for r in requests],
        "output_lens": [(r.completion_tokens or 0) if r.ok else 0 for r in requests],
        "ttfts": [r.first_token_s - r.send_s if r.ok else 0.0 for r in requests],  # type: ignore[operator]
        "itls": [[b - a for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:])] if r.ok else []
                 for r in requests],
        "latencies": [r.end_s - r.send_s if r.ok else 0.0 for r in requests],  # type: ignore[operator]
        "start_times": [r.send_s for r in requests],
        "queue_times": _queue_times(spec, requests),
        "generated_texts": ["" for _ in requests],  # e2e keeps no text
        "errors": [r.error or "" for r in requests],
    }


def _queue_times(spec, requests: Sequence[RequestRecord]) -> list[float]:
    """How long each request waited to be sent. Closed loop: from the load's start (every
    request is ready then and waits for a free stream). Open loop: from its arrival in the
    seeded schedule (recomputed, as the load made it) to its send, which a max_concurrency cap
    delays."""
    if spec.request_rate is None:
        return [r.send_s for r in requests]
    at = arrival_times(spec.prompts, spec.request_rate, burstiness=spec.burstiness,
                       seed=spec.seed)
    return [max(r.send_s - float(at[r.index]), 0.0) for r in requests]


def _computed(record: RunRecord, requests: Sequence[RequestRecord] | None) -> dict[str, Any]:
    """Keys e2e has no field for, computed for an e2e run by vLLM's formulas."""
    mx = record.metrics
    assert mx is not None
    out: dict[str, Any] = {
        "date": _date(record.finished_at),
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": record.spec.arm,
        "model_id": record.server.model,
        "tokenizer_id": record.server.model,
        "request_rate": record.spec.request_rate or "inf",
        "burstiness": record.spec.burstiness,
        "request_goodput": mx.goodput_req_s,
        "total_token_throughput": ((mx.input_tokens + mx.output_tokens) / mx.duration_s
                                   if mx.duration_s > 0 else None),
        "rtfx": 0.0,
    }
    if requests is not None:
        ok = [r for r in requests if r.ok]
        out["max_output_tokens_per_s"], out["max_concurrent_requests"] = _peaks(requests)
        out["std_ttft_ms"] = _std_ms([r.first_token_s - r.send_s for r in ok])  # type: ignore[operator]
        out["std_tpot_ms"] = _std_ms([t for t in map(request_tpot_s, ok) if t is not None])
        out["std_itl_ms"] = _std_ms([b - a for r in ok
                                     for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:])])
        out["std_e2el_ms"] = _std_ms([r.end_s - r.send_s for r in ok])  # type: ignore[operator]
    before, after = record.counters_before, record.counters_after
    if before is not None and after is not None and after.draft_tokens > before.draft_tokens:
        drafts = after.drafts - before.drafts
        out["spec_decode_num_drafts"] = int(drafts)
        out["spec_decode_draft_tokens"] = int(after.draft_tokens - before.draft_tokens)
        out["spec_decode_accepted_tokens"] = int(after.accepted - before.accepted)
        out["spec_decode_per_position_acceptance_rates"] = (
            per_position_rates(before, after) or [])
    return out


def _date(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime(_DATE)
    except ValueError:
        return iso


def to_result(record: RunRecord, requests: Sequence[RequestRecord] | None) -> dict[str, Any]:
    """One run as a vllm bench serve result document (pure).

    Summary keys come from the run's metrics (``SUMMARY_KEYS``), the spec goes into the
    metadata keys (``METADATA_KEYS``) plus ``num_prompts`` and ``max_concurrency``, and the
    per-request arrays from ``requests``. Keys e2e has no field for: an imported run's own
    (kept at import), else computed from the requests as vLLM computes them."""
    mx = record.metrics
    if mx is None:
        raise ResultsError(f"{record.run_id} has no metrics (no request finished): nothing to "
                           "export")
    imported = record.provenance.get("imported") if isinstance(record.provenance, dict) else None
    doc: dict[str, Any] = (dict(imported.get("extra") or {}) if isinstance(imported, dict)
                           else _computed(record, requests))
    spec = record.spec
    doc.update({
        "num_prompts": spec.prompts, "arm": spec.arm, "spec_mode": spec.spec_mode,
        "seed": spec.seed, "warmup_requests": spec.warmup_requests, "repeat": spec.repeat,
        "input_len": spec.input_len, "output_len": spec.output_len,
        # vLLM's in-flight cap: the streams of a closed loop, the open loop's cap (None: none)
        "max_concurrency": spec.concurrency if spec.request_rate is None else spec.max_concurrency,
        "failed": mx.requests - mx.ok_requests,
    })
    for name in (imported or {}).get("defaulted") or ():
        doc.pop(name, None)  # not known at import: leave it unknown
    for field, key in SUMMARY_KEYS:
        value = getattr(mx, field)
        if key.startswith("spec_decode_") and value is None:
            continue  # vLLM writes spec-decode keys only when drafts were made
        doc[key] = value
    if mx.acceptance_rate is not None:
        doc[RATE_KEY] = mx.acceptance_rate * 100.0
    if mx.acceptance_rates_per_pos:
        doc["spec_decode_per_position_acceptance_rates"] = list(mx.acceptance_rates_per_pos)
    if requests is not None:
        doc.update(_arrays(record, requests))
    ordered = {k: doc[k] for k in _ORDER if k in doc}
    ordered.update({k: v for k, v in doc.items() if k not in ordered})
    return ordered


def export_dir(results_dir: Path, out: Path, *, include_invalid: bool = False,
               force: bool = False) -> tuple[list[Path], list[str]]:
    """Write ``out/<run id>.json`` for every run in ``results_dir`` (an experiment's folder).
    Returns (files written, runs skipped with the reason)."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise NoSuchResults(f"{results_dir}: no such results folder (give results/<experiment>)")
    written: list[Path] = []
    skipped: list[str] = []
    if Path(out).is_relative_to(results_dir):  # export/<format>/ inside a results folder
        no_links(results_dir, Path(out), "an exported file")
    folders = sorted(p.parent for p in results_dir.glob("*/run.json"))
    if not folders:
        raise NoSuchResults(f"{results_dir}: no run.json in its run folders; point at "
                            "results/<experiment>")
    for folder in folders:
        try:
            record = read_run(folder)
        except ResultsError as exc:  # as the report does: the others still export
            skipped.append(str(exc))
            continue
        if not record.valid and not include_invalid:
            skipped.append(f"{record.run_id}: invalid ({'; '.join(record.invalid_reasons)}); "
                           "--include-invalid exports it too")
            continue
        if record.metrics is None:
            skipped.append(f"{record.run_id}: no metrics")
            continue
        requests_path = folder / REQUESTS
        requests = read_requests(requests_path) if requests_path.is_file() else None
        try:
            check_name(record.run_id, "run id")
        except ConfigError as exc:
            skipped.append(f"{folder.name}: {exc}")
            continue
        target = within(out, Path(out) / f"{record.run_id}.json", "an exported file")
        if target.exists() and not force:
            raise ConfigError(f"{target} exists; give --force to overwrite it (or another --out)")
        atomic_write_json(target, to_result(record, requests))
        written.append(target)
    return written, skipped


def length_findings(ok, input_len: int, output_len: int, *, strict: bool,
                    why: str) -> tuple[list[str], list[str]]:
    """(reasons, notes) about an imported run's requests whose prompt or completion was not
    the spec's length: reasons (the run is invalid) with ``strict``, else notes ending in
    ``why`` (how the other tool counts tokens) and how to make them reasons."""
    from e2e.interop._boundary import lengths_why

    reasons: list[str] = []
    notes: list[str] = []
    for what, attr, want in (("prompt", "prompt_tokens", input_len),
                             ("completion", "completion_tokens", output_len)):
        off = sorted({getattr(r, attr) for r in ok if getattr(r, attr) != want})
        if off:
            text = (f"{sum(getattr(r, attr) != want for r in ok)} of {len(ok)} {what}s had "
                    f"other than {want} tokens ({', '.join(map(str, off[:5]))})")
            if strict:
                reasons.append(text)
            else:
                notes.append(f"{text}; {lengths_why(off, want, why)} (--strict-lengths makes "
                             "this invalid)")
    return reasons, notes
