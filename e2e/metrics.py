"""Metric math: pure functions from request records and /metrics text to a run summary.

Definitions (the README's "Definitions"):
- TTFT = first token time - send time.
- TPOT (per request) = (end-to-end latency - TTFT) / (completion_tokens - 1), with
  completion_tokens from the server's ``usage``, never from counting stream chunks.
- inter-chunk latency (ITL) = gaps between consecutive content chunks of one stream.
- acceptance length = 1 + delta(accepted tokens) / delta(drafts), from the Prometheus counters
  ``vllm:spec_decode_num_accepted_tokens_total`` and ``vllm:spec_decode_num_drafts_total``.
- acceptance rate = delta(accepted tokens) / delta(draft tokens).
- acceptance rate at draft position i = delta(accepted at position i) / delta(drafts), from
  ``vllm:spec_decode_num_accepted_tokens_per_pos`` (label ``position``): vLLM's own per-position
  rate (``vllm bench serve``'s ``spec_decode_per_position_acceptance_rates``); a draft token is
  accepted only after every one before it, so the rates fall with i and sum to
  acceptance length - 1.
- ms per verify step = mean TPOT x acceptance length.
Percentiles are numpy's linear interpolation (type 7).
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from e2e.kinds import VLLM, ServerKind
from e2e.results.records import RequestRecord, RunMetrics, SpecCounters
from e2e.slo import SLO, SLO_NAMES

__all__ = [
    "ACCEPTED", "DRAFTS", "DRAFT_TOKENS", "SERVER_TPOT",
    "parse_samples", "per_position", "spec_counters", "per_position_rates", "MAX_POSITIONS",
    "position_key", "position_of", "histogram_mean_delta",
    "request_tpot_s", "acceptance", "summarize_run", "run_duration_s", "validity_reasons",
    "ms_per_verify_step", "metric_value", "SERVER_VERIFY_STEP", "Goodput", "goodput", "meets",
    "PREFIX_CACHE_QUERIES", "PREFIX_CACHE_HITS", "prefix_cache_delta",
]

ACCEPTED = VLLM.accepted_metric
DRAFTS = VLLM.drafts_metric
DRAFT_TOKENS = VLLM.draft_tokens_metric
SERVER_TPOT = VLLM.server_tpot_metric


_MAX_SAMPLE = 1e18  # a counter or a sum beyond this is not a measurement


def _families(text: str):
    """The metric families of ``text``; a text the parser refuses is parsed a line at a time
    (with its ``# TYPE`` lines), so one bad sample drops itself, not the whole scrape."""
    try:
        return list(text_string_to_metric_families(text))
    except Exception:  # prometheus_client raises ValueError, and worse on hostile text
        pass
    families = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            families.extend(text_string_to_metric_families(line + "\n"))
        except Exception:
            continue  # not a sample: dropped
    return families


def parse_samples(text: str) -> dict[str, float]:
    """Sum every sample of a Prometheus text exposition by sample name (labels such as
    ``engine`` and ``model_name`` are summed over). What comes from the server is checked:
    a sample that does not parse, is not finite, or is beyond any real count is left out."""
    totals: dict[str, float] = {}
    if not isinstance(text, str):
        return totals
    for family in _families(text):
        for sample in family.samples:
            if sample.labels.get("le") is not None or sample.labels.get("quantile") is not None:
                continue  # histogram buckets and summary quantiles do not add up
            try:
                value = float(sample.value)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value) or abs(value) > _MAX_SAMPLE:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + value
    return totals


MAX_POSITIONS = 64
"""Draft positions read from /metrics (a speculator drafts a handful of tokens per step; a
position label beyond this is not a real one)."""


def per_position(text: str, name: str) -> list[float]:
    """The samples of counter ``name`` by their ``position`` label (0, 1, ...), summed over every
    other label (engines); [] when there is none. Checked like ``parse_samples``: a sample whose
    position is not an integer in [0, MAX_POSITIONS) or whose value is not a finite count is
    left out; a position missing between two present ones reads 0."""
    if not isinstance(text, str) or not name:
        return []
    totals: dict[int, float] = {}
    for family in _families(text):
        for sample in family.samples:
            if sample.name != name:
                continue
            raw = sample.labels.get("position")
            if raw is None or not str(raw).isdigit() or int(raw) >= MAX_POSITIONS:
                continue
            try:
                value = float(sample.value)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value) or not 0 <= value <= _MAX_SAMPLE:
                continue
            totals[int(raw)] = totals.get(int(raw), 0.0) + value
    if not totals:
        return []
    return [totals.get(i, 0.0) for i in range(max(totals) + 1)]


def spec_counters(text: str, kind: ServerKind = VLLM) -> SpecCounters:
    samples = parse_samples(text)
    return SpecCounters(
        accepted=samples.get(kind.accepted_metric, 0.0),
        drafts=samples.get(kind.drafts_metric, 0.0),
        draft_tokens=samples.get(kind.draft_tokens_metric, 0.0),
        accepted_per_pos=per_position(text, kind.accepted_per_pos_metric),
    )


def per_position_rates(before: SpecCounters, after: SpecCounters) -> list[float] | None:
    """Acceptance rate per draft position (first = index 0): Δ accepted there / Δ drafts, as
    vLLM's ``SpecDecodingMetrics`` computes it; None without drafts or per-position counters."""
    drafts = after.drafts - before.drafts
    if drafts <= 0 or not after.accepted_per_pos:
        return None
    earlier = list(before.accepted_per_pos) + [0.0] * len(after.accepted_per_pos)
    return [max(a - b, 0.0) / drafts for a, b in zip(after.accepted_per_pos, earlier)]


_POSITION_PREFIX = "acceptance_rate_pos"


def position_key(position: int) -> str:
    """The metric key of the acceptance rate at draft position ``position`` (first = 1)."""
    return f"{_POSITION_PREFIX}{position}"


def position_of(key: str) -> int | None:
    """The draft position (first = 1) a metric key names, or None for another key."""
    tail = key[len(_POSITION_PREFIX):] if key.startswith(_POSITION_PREFIX) else ""
    return int(tail) if tail.isdigit() and int(tail) >= 1 else None


def histogram_mean_delta(before: str | dict[str, float], after: str | dict[str, float],
                         name: str) -> float | None:
    """Mean of the observations a histogram gained between two scrapes (exposition text, or
    ``parse_samples`` of it), or None if none."""
    b = parse_samples(before) if isinstance(before, str) else before
    a = parse_samples(after) if isinstance(after, str) else after
    count = a.get(name + "_count", 0.0) - b.get(name + "_count", 0.0)
    if count <= 0:
        return None
    return (a.get(name + "_sum", 0.0) - b.get(name + "_sum", 0.0)) / count


def without_holds(after: dict[str, float],
                  holds: Sequence[tuple[dict[str, float], dict[str, float]]]) -> dict[str, float]:
    """``after`` (``parse_samples``) less what each counter gained inside each hold (a pair of
    scrapes around load that is not measured: a swapping duet side's requests between its
    windows), so that deltas from the scrape before the measured load count only its requests."""
    out = dict(after)
    for start, end in holds:
        for name, value in end.items():
            out[name] = out.get(name, 0.0) - (value - start.get(name, 0.0))
    return out


def counters_without_holds(after: SpecCounters,
                           holds: Sequence[tuple[SpecCounters, SpecCounters]]) -> SpecCounters:
    """The speculative-decoding counters of ``after`` less what they gained inside each hold
    (``without_holds``), per draft position too."""
    accepted, drafts, tokens = after.accepted, after.drafts, after.draft_tokens
    per_pos = list(after.accepted_per_pos)
    for start, end in holds:
        accepted -= end.accepted - start.accepted
        drafts -= end.drafts - start.drafts
        tokens -= end.draft_tokens - start.draft_tokens
        earlier = list(start.accepted_per_pos) + [0.0] * len(end.accepted_per_pos)
        for i, value in enumerate(end.accepted_per_pos[:len(per_pos)]):
            per_pos[i] -= value - earlier[i]
    return SpecCounters(accepted=accepted, drafts=drafts, draft_tokens=tokens,
                        accepted_per_pos=per_pos)


def acceptance(before: SpecCounters, after: SpecCounters) -> tuple[float | None, float | None]:
    """(acceptance length, acceptance rate) from counter deltas; None where undefined."""
    drafts = after.drafts - before.drafts
    accepted = after.accepted - before.accepted
    draft_tokens = after.draft_tokens - before.draft_tokens
    length = 1.0 + accepted / drafts if drafts > 0 else None
    rate = accepted / draft_tokens if draft_tokens > 0 else None
    return length, rate


def request_tpot_s(record: RequestRecord) -> float | None:
    """TPOT of one request in seconds, or None when it is undefined (failed, < 2 tokens)."""
    if not record.ok or record.completion_tokens is None or record.completion_tokens < 2:
        return None
    latency = record.end_s - record.send_s  # type: ignore[operator]
    ttft = record.first_token_s - record.send_s  # type: ignore[operator]
    return (latency - ttft) / (record.completion_tokens - 1)


def ms_per_verify_step(tpot_ms_mean: float | None, acceptance_length: float | None) -> float | None:
    """ms per verify step = mean TPOT (ms) x acceptance length; None when either is missing.
    The one definition: run summaries, the report and the nightly all call this."""
    if tpot_ms_mean is None or not acceptance_length:
        return None
    return tpot_ms_mean * acceptance_length


SERVER_VERIFY_STEP = "server_ms_per_verify_step"


def metric_value(metrics: RunMetrics | None, key: str) -> float | None:
    """A run's figure for a metric key: a ``RunMetrics`` field, or a derived figure, each
    defined once here: ``ms_per_verify_step`` (client mean TPOT x acceptance length,
    recomputed when a record predates it) and ``server_ms_per_verify_step`` (the server's mean
    TPOT x acceptance length: the headline where the client's TPOT cannot see the effect,
    e.g. a stream delivered in bursts), and ``acceptance_rate_pos<i>`` (the acceptance rate at
    draft position i, first = 1). None where absent."""
    if metrics is None:
        return None
    position = position_of(key)
    if position is not None:
        rates = metrics.acceptance_rates_per_pos or []
        return float(rates[position - 1]) if position <= len(rates) else None
    if key == SERVER_VERIFY_STEP:
        return ms_per_verify_step(metrics.server_tpot_ms_mean, metrics.acceptance_length)
    value = getattr(metrics, key, None)
    if value is None and key == "ms_per_verify_step":
        value = ms_per_verify_step(metrics.tpot_ms_mean, metrics.acceptance_length)
    return None if value is None else float(value)


def _stats_ms(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if len(values) == 0:
        return None, None, None
    arr = np.asarray(values, dtype=float) * 1000.0
    return float(arr.mean()), float(np.median(arr)), float(np.percentile(arr, 99))


def summarize_run(
    records: Sequence[RequestRecord],
    *,
    counters_before: SpecCounters | None = None,
    counters_after: SpecCounters | None = None,
    server_tpot_s: float | None = None,
    per_window: int | None = None,
) -> RunMetrics:
    """The per-run summary of the measured requests (warmups excluded by the caller);
    ``per_window``: the requests of each load window (``run_duration_s``)."""
    ok = [r for r in records if r.ok]
    ttft = [r.first_token_s - r.send_s for r in ok]  # type: ignore[operator]
    e2el = [r.end_s - r.send_s for r in ok]  # type: ignore[operator]
    tpot = [t for t in (request_tpot_s(r) for r in ok) if t is not None]
    itl = [b - a for r in ok for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:])]
    duration = run_duration_s(records, per_window)
    output_tokens = sum(r.completion_tokens or 0 for r in ok)
    length = rate = positions = None
    if counters_before is not None and counters_after is not None:
        length, rate = acceptance(counters_before, counters_after)
        positions = per_position_rates(counters_before, counters_after)
    ttft_s, tpot_s, itl_s, e2el_s = (_stats_ms(v) for v in (ttft, tpot, itl, e2el))
    return RunMetrics(
        requests=len(records),
        ok_requests=len(ok),
        duration_s=duration,
        input_tokens=sum(r.prompt_tokens or 0 for r in ok),
        output_tokens=output_tokens,
        ttft_ms_mean=ttft_s[0], ttft_ms_median=ttft_s[1], ttft_ms_p99=ttft_s[2],
        tpot_ms_mean=tpot_s[0], tpot_ms_median=tpot_s[1], tpot_ms_p99=tpot_s[2],
        itl_ms_mean=itl_s[0], itl_ms_median=itl_s[1], itl_ms_p99=itl_s[2],
        e2el_ms_mean=e2el_s[0], e2el_ms_median=e2el_s[1], e2el_ms_p99=e2el_s[2],
        output_throughput_tok_s=output_tokens / duration if duration > 0 else None,
        request_throughput_req_s=len(ok) / duration if duration > 0 else None,
        server_tpot_ms_mean=server_tpot_s * 1000.0 if server_tpot_s is not None else None,
        acceptance_length=length,
        acceptance_rate=rate,
        acceptance_rates_per_pos=positions,
        ms_per_verify_step=ms_per_verify_step(tpot_s[0], length),
    )


def validity_reasons(
    records: Sequence[RequestRecord], *, input_len: int, output_len: int, expected: int
) -> list[str]:
    """Why a run must not be averaged in: failed requests, wrong token counts, missing ones."""
    reasons: list[str] = []
    if len(records) != expected:
        reasons.append(f"{len(records)} of {expected} requests were measured")
    failed = [r for r in records if not r.ok]
    if failed:
        first = failed[0]
        reasons.append(
            f"{len(failed)} request(s) failed; first: request {first.index}: {first.error}"
        )
    bad_prompt = [r for r in records if r.ok and r.prompt_tokens != input_len]
    if bad_prompt:
        reasons.append(
            f"{len(bad_prompt)} request(s) had a prompt of other than {input_len} tokens "
            f"(e.g. {bad_prompt[0].prompt_tokens})"
        )
    bad_out = [r for r in records if r.ok and r.completion_tokens != output_len]
    if bad_out:
        reasons.append(
            f"{len(bad_out)} request(s) completed other than {output_len} tokens "
            f"(e.g. {bad_out[0].completion_tokens})"
        )
    return reasons


def _misses(record: RequestRecord, slo: SLO) -> tuple[str, ...]:
    """The objectives ``record`` misses ("failed" if it did not succeed)."""
    if not record.ok:
        return ("failed",)
    out = []
    if slo.ttft_ms is not None and not (slo.ttft_ms / 1000.0 >= record.first_token_s - record.send_s):  # type: ignore[operator]
        out.append("ttft")
    if slo.tpot_ms is not None:
        tpot = request_tpot_s(record)
        # fewer than 2 tokens: no TPOT; vLLM counts it as 0 and so meets the objective
        if tpot is not None and not (slo.tpot_ms / 1000.0 >= tpot):
            out.append("tpot")
    if slo.e2e_ms is not None and not (slo.e2e_ms / 1000.0 >= record.end_s - record.send_s):  # type: ignore[operator]
        out.append("e2e")
    return tuple(out)


def meets(record: RequestRecord, slo: SLO) -> bool:
    """Whether one request succeeded and met every objective ``slo`` names."""
    return not _misses(record, slo)


@dataclass(frozen=True)
class Goodput:
    """Goodput of one run's measured requests against one SLO.

    ``share`` = met / requests (None without requests); ``req_s`` = met / duration_s (None
    when the duration is 0); ``missed`` counts, per objective and "failed", the requests that
    missed it (a request can miss several)."""

    slo: SLO
    requests: int
    met: int
    duration_s: float
    share: float | None
    req_s: float | None
    missed: dict[str, int] = field(default_factory=dict)


def run_duration_s(records: Sequence[RequestRecord], per_window: int | None = None) -> float:
    """A run's duration: its first send to its last end (what summarize_run reports). A run
    measured in load windows of ``per_window`` requests each (request ``i`` in window ``i //
    per_window``) lasts the sum of its windows' spans: between two windows a duet's side waits
    for its partner, and that wait is not time its load ran (counted, a side's throughput
    would be its slower partner's)."""
    if not records:
        return 0.0
    if per_window:
        windows: dict[int, list[RequestRecord]] = {}
        for r in records:
            windows.setdefault(r.index // per_window, []).append(r)
        if len(windows) > 1:
            return sum(run_duration_s(part) for part in windows.values())
    start = min(r.send_s for r in records)
    end = max((r.end_s for r in records if r.end_s is not None), default=start)
    return max(end - start, 0.0)


def goodput(records: Sequence[RequestRecord], slo: SLO, *,
            duration_s: float | None = None) -> Goodput:
    """Count the requests meeting every objective of ``slo``; share of all and rate per second.

    ``duration_s`` None uses the run's duration as ``summarize_run`` measures it
    (an imported ``vllm bench serve`` run passes its own ``duration`` to reproduce its
    ``request_goodput``)."""
    missed = {name: 0 for name in (*SLO_NAMES, "failed")}
    met = 0
    for record in records:
        misses = _misses(record, slo)
        met += not misses
        for name in misses:
            missed[name] += 1
    duration = run_duration_s(records) if duration_s is None else float(duration_s)
    return Goodput(
        slo=slo,
        requests=len(records),
        met=met,
        duration_s=duration,
        share=met / len(records) if records else None,
        req_s=met / duration if duration > 0 else None,
        missed={k: v for k, v in missed.items() if v},
    )


# vLLM's prefix-cache counters (tokens; vLLM 0.32 v1/metrics/loggers.py), as exposed: a
# prometheus counter's sample carries the ``_total`` suffix.
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"


def prefix_cache_delta(before: dict[str, float],
                       after: dict[str, float]) -> tuple[float, float, float | None] | None:
    """(queried tokens, hit tokens, hits / queries) the prefix cache gained between two
    scrapes (``parse_samples``); None when the server exports no such counters. The rate is
    None when nothing was queried."""
    if PREFIX_CACHE_QUERIES not in after or PREFIX_CACHE_HITS not in after:
        return None
    queries = after[PREFIX_CACHE_QUERIES] - before.get(PREFIX_CACHE_QUERIES, 0.0)
    hits = after[PREFIX_CACHE_HITS] - before.get(PREFIX_CACHE_HITS, 0.0)
    return queries, hits, (hits / queries if queries > 0 else None)
