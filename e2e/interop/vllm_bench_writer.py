"""e2e runs -> ``vllm bench serve --save-result`` files (the format's keys are
``e2e.interop.vllm_bench``'s, its reader's).

    to_result(record, requests)        -> one vllm bench result document: pure
    export_dir(results_dir, out)       -> one <run id>.json per run
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from e2e.errors import ConfigError, NoSuchResults, ResultsError
from e2e.interop.vllm_bench import (DATE_FORMAT, METADATA_KEYS, PER_REQUEST_KEYS, RATE_KEY,
                                    SUMMARY_KEYS)
from e2e.load import arrival_times
from e2e.metrics import per_position_rates, request_tpot_s
from e2e.names import check_name
from e2e.paths import atomic_write_json, no_links, within
from e2e.results.store import REQUESTS, read_requests, read_run
from e2e.results.records import RequestRecord, RunRecord

__all__ = ["to_result", "export_dir"]

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
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime(DATE_FORMAT)
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
