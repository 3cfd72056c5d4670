"""Burst detection: which streams reached the client in lumps instead of token by token, and
which of them had their decode time hidden in TTFT.

On a busy host the API server (or the load generator) can be scheduled late; the chunks it
could not deliver pile up and arrive together, microseconds apart. Such a stream's
inter-chunk gaps no longer show the decode steps (its inter-chunk latency is meaningless),
and when the *first* chunk was held back too, its decode time hides inside TTFT and the
client's TPOT understates it (seen here: TTFT 0.39 s, then 128 chunks within 1.5 ms).
Measured here, the two differ: at concurrency 4 many streams came in lumps while the run's
client mean TPOT stayed within 3.2 % of the server's; at concurrency 1 the held-back ones
pulled it down to 0.13-0.59 x the server's (docs/measurements/bursts.md).

    stream_spread(record, reference_s=...)  -> float | None   lumps: the gap statistic
    decode_share(record, reference_s=...)   -> float | None   held back: the TPOT statistic
    decode_reference_s(record, server_tpot_s) -> float | None the time both are compared with
    burst_summary(records, server_tpot_s=...) -> BurstSummary per run, with its warnings

The rules (chosen from measured streams; docs/measurements/bursts.md has the distributions):

    reference = the server's mean TPOT x (completion_tokens - 1) when the run has it
                (vllm:request_time_per_output_token_seconds), else the request's E2E latency
    spread    = (sum of the smallest 90 % of the stream's inter-chunk gaps) / reference
    decode share = (last chunk - first chunk) / reference

A stream is **burst-delivered** when ``spread < SPREAD_THRESHOLD`` (0.1): 90 % of its gaps
carry less than a tenth of its decode time, wherever the lumps fall. Of 352 real streams
measured here, 120 were below 0.005, 8 between 0.005 and 0.1, the rest above (a scripted
paced stream: 0.94). "The last 90 % of tokens within 10 % of the decode time" and "TTFT >=
0.9 x E2E" both miss a stream whose first chunks came on time and the rest in one lump.
A burst-delivered stream is **TPOT-affected** when its decode share is below ``HELD_SHARE``
(0.5) against the server's TPOT: half its decode time or more went into TTFT (of the 128
burst-delivered streams, 74 were below 0.02, none in [0.02, 0.05), 11 in [0.05, 0.5), 43
above). Against E2E latency (no server figure) the limit is ``HELD_SHARE_E2E`` (0.1), which is
"TTFT >= 0.9 x E2E", so that a long prefill is not mistaken for a held-back stream. A run
whose TPOT-affected share exceeds ``WARN_SHARE`` (5 %) gets "client TPOT burst-affected"
(each such request understates its TPOT by half or more, so above 5 % the run's mean can move
by more than the 5 % the client may differ from the server); one whose burst-delivered share
exceeds it gets "inter-chunk latency burst-affected". Failed requests and those with fewer
than 3 content chunks are not judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
import numpy as np
from e2e.results.records import WARN_SHARE, BurstSummary, RequestRecord


__all__ = ["GAP_SHARE", "SPREAD_THRESHOLD", "HELD_SHARE", "HELD_SHARE_E2E",
           "stream_spread", "decode_share", "decode_reference_s",
           "burst_summary"]

GAP_SHARE = 0.9
SPREAD_THRESHOLD = 0.1
HELD_SHARE = 0.5
HELD_SHARE_E2E = 0.1


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


def decode_share(record: RequestRecord, *, reference_s: float | None = None) -> float | None:
    """(last content chunk - first content chunk) / ``reference_s`` (default: the request's
    E2E latency): the part of the decode time the client saw after TTFT. None for a failed
    request or a reference that is not positive."""
    if not record.ok or not record.chunk_times_s:
        return None
    reference = reference_s if reference_s is not None else decode_reference_s(record, None)
    if not reference or reference <= 0:
        return None
    return (record.chunk_times_s[-1] - record.chunk_times_s[0]) / reference


def burst_summary(records: Sequence[RequestRecord], *, server_tpot_s: float | None = None,
                  threshold: float = SPREAD_THRESHOLD,
                  warn_share: float = WARN_SHARE) -> BurstSummary:
    """Flag burst-delivered requests (``stream_spread < threshold``) and, among them, the
    TPOT-affected ones (``decode_share`` below ``HELD_SHARE`` against the server's TPOT, or
    ``HELD_SHARE_E2E`` against E2E latency when ``server_tpot_s`` is None); a run is
    affected when a flagged share exceeds ``warn_share`` (see the module docstring)."""
    reference = "server TPOT" if server_tpot_s else "E2E latency"
    held_limit = HELD_SHARE if server_tpot_s else HELD_SHARE_E2E
    spreads: list[tuple[int, float]] = []
    held: list[int] = []
    for record in records:
        ref = decode_reference_s(record, server_tpot_s)
        value = stream_spread(record, reference_s=ref)
        if value is None:
            continue
        spreads.append((record.index, value))
        seen = decode_share(record, reference_s=ref)
        if value < threshold and seen is not None and seen < held_limit:
            held.append(record.index)
    flagged = sorted(index for index, value in spreads if value < threshold)
    judged = len(spreads)
    share = len(flagged) / judged if judged else None
    held_share = len(held) / judged if judged else None
    affected = held_share is not None and held_share > warn_share
    itl_affected = share is not None and share > warn_share
    values = [value for _, value in spreads]
    rule = (f"burst-delivered when the smallest {GAP_SHARE:.0%} of a stream's inter-chunk gaps "
            f"add up to less than {threshold:.0%} of its decode time ({reference}); "
            f"TPOT-affected when also less than {held_limit:.0%} of it came after the first chunk")
    warnings = []
    if affected:
        warnings.append(
            f"client TPOT burst-affected: {len(held)} of {judged} requests ({held_share:.0%}) "
            f"arrived in one late burst, their decode time hidden in TTFT; the client's mean "
            "TPOT understates decoding, the server's TPOT does not")
    if itl_affected:
        warnings.append(
            f"inter-chunk latency burst-affected: {len(flagged)} of {judged} requests "
            f"({share:.0%}) arrived in lumps, not token by token")
    return BurstSummary(rule=rule, reference=reference, threshold=threshold,
                        warn_share=warn_share, held_limit=held_limit, judged=judged,
                        flagged=len(flagged), share=share, flagged_indices=flagged,
                        tpot_affected=len(held), tpot_affected_share=held_share,
                        tpot_affected_indices=sorted(held),
                        spread_median=float(np.median(values)) if values else None,
                        spread_min=min(values) if values else None, affected=affected,
                        itl_affected=itl_affected, warnings=warnings)
