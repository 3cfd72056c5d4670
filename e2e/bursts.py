"""Burst detection: which streams reached the client in lumps instead of token by token.

On a busy host the API server (or the load generator) can be scheduled late; the chunks it
could not deliver pile up and arrive together, microseconds apart. Such a stream's
inter-chunk gaps no longer show the decode steps, and when the first chunk was held back too
its decode time hides inside TTFT and the client's TPOT understates it (seen here: TTFT
0.39 s, then 128 chunks within 1.5 ms).

    stream_spread(record, reference_s=...)  -> float | None   the statistic, per request
    decode_reference_s(record, server_tpot_s) -> float | None the time it is compared with
    burst_summary(records, server_tpot_s=...) -> BurstSummary per run, with a warning

The rule (chosen from measured streams; docs/measurement.md has the distributions):

    spread = (sum of the smallest 90 % of the stream's inter-chunk gaps) / reference

where reference is the time decoding the stream should have taken: the server's own mean
TPOT x (completion_tokens - 1) when the run has it (``vllm:request_time_per_output_token_
seconds``), else the request's end-to-end latency. A paced stream spreads its gaps over its
decode time (spread near 1 against the server's TPOT); a burst-delivered one packs 90 % of
its gaps into almost nothing (spread 0.002-0.01 measured), wherever in the stream the lumps
fall -- unlike "the last 90 % of tokens" or "TTFT >= 0.9 x E2E", which miss a stream whose
first chunks came on time and the rest in one lump. A stream is **flagged** when
``spread < SPREAD_THRESHOLD``. A run whose flagged share exceeds ``WARN_SHARE`` gets the
warning that its client TPOT and inter-chunk latency are burst-affected: each flagged
request can understate its own TPOT by up to all of it, so a share above 5 % can move the
run's mean TPOT by more than the 5 % the client is allowed to differ from the server.
Requests that failed or have fewer than 3 content chunks are not judged (fewer than 2 gaps
carry no pacing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from e2e.records import RequestRecord

__all__ = ["GAP_SHARE", "SPREAD_THRESHOLD", "WARN_SHARE", "BurstSummary", "stream_spread",
           "decode_reference_s", "burst_summary"]

GAP_SHARE = 0.9
SPREAD_THRESHOLD = 0.25
WARN_SHARE = 0.05


class BurstSummary(BaseModel):
    """A run's burst-delivered requests, for run.json and the run summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = Field(description="The rule, in words.")
    reference: str = Field(description="'server TPOT' or 'E2E latency': what spread is "
                                       "measured against.")
    threshold: float
    warn_share: float
    judged: int = Field(description="Requests judged (ok, at least 3 content chunks).")
    flagged: int
    share: float | None = Field(None, description="flagged / judged; None when none judged.")
    flagged_indices: list[int] = Field(default_factory=list)
    spread_median: float | None = None
    spread_min: float | None = None
    affected: bool = Field(False, description="share > warn_share: client TPOT and "
                                              "inter-chunk latency are burst-affected.")
    warning: str | None = None


def decode_reference_s(record: RequestRecord, server_tpot_s: float | None) -> float | None:
    """The time decoding ``record`` should have taken: server mean TPOT x (completion_tokens
    - 1) when given and the token count is known, else the request's end-to-end latency;
    None for a failed request."""
    if not record.ok:
        return None
    if server_tpot_s and record.completion_tokens and record.completion_tokens > 1:
        return server_tpot_s * (record.completion_tokens - 1)
    return record.end_s - record.send_s  # type: ignore[operator]


def stream_spread(record: RequestRecord, *, reference_s: float | None = None) -> float | None:
    """Sum of the smallest ``GAP_SHARE`` (90 %, rounded up) of the request's inter-chunk gaps
    divided by ``reference_s`` (default: its end-to-end latency). None for a failed request,
    fewer than 3 content chunks, or a reference that is not positive."""
    if not record.ok or len(record.chunk_times_s) < 3:
        return None
    reference = reference_s if reference_s is not None else decode_reference_s(record, None)
    if not reference or reference <= 0:
        return None
    gaps = np.sort(np.diff(np.asarray(record.chunk_times_s, dtype=float)))
    keep = math.ceil(GAP_SHARE * gaps.size)
    return float(gaps[:keep].sum() / reference)


def burst_summary(records: Sequence[RequestRecord], *, server_tpot_s: float | None = None,
                  threshold: float = SPREAD_THRESHOLD,
                  warn_share: float = WARN_SHARE) -> BurstSummary:
    """Flag every request with ``stream_spread < threshold`` (reference: the server's TPOT
    when ``server_tpot_s`` is given, else each request's E2E latency); the run is
    burst-affected when the flagged share of judged requests exceeds ``warn_share``."""
    reference = "server TPOT" if server_tpot_s else "E2E latency"
    spreads: list[tuple[int, float]] = []
    for record in records:
        value = stream_spread(record, reference_s=decode_reference_s(record, server_tpot_s))
        if value is not None:
            spreads.append((record.index, value))
    flagged = sorted(index for index, value in spreads if value < threshold)
    share = len(flagged) / len(spreads) if spreads else None
    affected = share is not None and share > warn_share
    values = [value for _, value in spreads]
    rule = (f"flagged when the smallest {GAP_SHARE:.0%} of a stream's inter-chunk gaps add "
            f"up to less than {threshold:.0%} of its decode time ({reference})")
    warning = None
    if affected:
        warning = (f"client TPOT burst-affected: {len(flagged)} of {len(spreads)} requests "
                   f"({share:.0%}) arrived in bursts ({rule}); the client's TPOT and "
                   "inter-chunk latency understate decoding there, the server's TPOT does not")
    return BurstSummary(rule=rule, reference=reference, threshold=threshold,
                        warn_share=warn_share, judged=len(spreads), flagged=len(flagged),
                        share=share, flagged_indices=flagged,
                        spread_median=float(np.median(values)) if values else None,
                        spread_min=min(values) if values else None, affected=affected,
                        warning=warning)
