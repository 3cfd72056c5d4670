"""A run's headline figures checked against its own ``requests.parquet`` when a report or a
resume reads it: a run.json edited to halve its latencies was skipped as done and reported as
"−49.8 % faster". The client figures every comparison rests on (requests that succeeded,
output tokens, mean TTFT, TPOT and end-to-end latency) are recomputed from the per-request
rows as ``e2e.metrics.summarize_run`` computes them; a run.json whose figures disagree is not
trusted (the report skips it with a warning, a sweep measures it again). Runs imported from
another tool (their own definitions) and runs without a requests.parquet are not checked.

The recorded outputs are guarded the same way: run.json keeps the SHA-256 of requests.parquet's
``output_token_ids`` as written (``outputs_sha256``); replacing one arm's outputs by another's
turned "diverges more than A/A" into "identical". A run.json whose digest is not its file's
(or, from schema 7 on, that has none) is not trusted either. Run records of schema 1-6 carry
no digest: their outputs read unchecked, as before."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["disagreement", "outputs_sha256", "outputs_disagreement"]

_REL = 1e-9  # float64 survives parquet exactly; a few ulps for the summation order


def _mean_ms(values: list[float]) -> float | None:
    return float(np.asarray(values, dtype=float).mean() * 1000.0) if values else None


def disagreement(metrics: Any, rows: Sequence[Any]) -> str | None:
    """Why a run's ``metrics`` (RunMetrics) are not what its request ``rows`` give, or None."""
    ok = [r for r in rows if r.ok]
    tpot = [((r.end_s - r.send_s) - (r.first_token_s - r.send_s)) / (r.completion_tokens - 1)
            for r in ok
            if r.completion_tokens is not None and r.completion_tokens >= 2]
    found = {
        "ok_requests": len(ok),
        "output_tokens": sum(r.completion_tokens or 0 for r in ok),
        "ttft_ms_mean": _mean_ms([r.first_token_s - r.send_s for r in ok]),
        "tpot_ms_mean": _mean_ms(tpot),
        "e2el_ms_mean": _mean_ms([r.end_s - r.send_s for r in ok]),
    }
    for key, value in found.items():
        stated = getattr(metrics, key, None)
        if stated is None and value is None:
            continue
        if stated is None or value is None or not math.isclose(float(stated), float(value),
                                                                rel_tol=_REL, abs_tol=1e-9):
            return (f"its {key} ({stated}) is not what its requests.parquet gives ({value}): "
                    "run.json was changed after the run")
    return None


_OUTPUTS_DIGEST = b"e2e outputs sha256 v1\0"  # what the digest is of: index, lengths, token ids


def outputs_sha256(index: Any, outputs: Any | None) -> str:
    """SHA-256 of a requests.parquet's recorded outputs: its ``index`` column and its
    ``output_token_ids`` column (pyarrow arrays; None: a file without the column, every output
    not recorded), row by row as stored: each row's index, its number of token ids (-1 for
    not recorded) and every token id, each a little-endian int64."""
    import hashlib

    import pyarrow.compute as pc

    rows = np.asarray(index.to_numpy() if hasattr(index, "to_numpy") else index, dtype="<i8")
    if outputs is None:
        lengths, ids = np.full(len(rows), -1, dtype="<i8"), np.empty(0, dtype="<i8")
    else:
        lengths = np.asarray(pc.fill_null(pc.list_value_length(outputs), -1).to_numpy(),
                             dtype="<i8")
        ids = np.asarray(pc.list_flatten(outputs).to_numpy(), dtype="<i8")
    digest = hashlib.sha256(_OUTPUTS_DIGEST)
    for part in (rows, lengths, ids):
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


def outputs_disagreement(stated: str | None, found: str) -> str | None:
    """Why a run.json's ``outputs_sha256`` (``stated``; None: it has none, though its schema
    records one) is not its requests.parquet's (``found``), or None."""
    if stated is None:
        return ("it records no outputs_sha256 for its requests.parquet's outputs (every run "
                "e2e writes has one): run.json was changed after the run")
    if stated != found:
        return (f"its requests.parquet's output_token_ids (sha256 {found[:12]}) are not the "
                f"outputs run.json recorded (sha256 {stated[:12]}): requests.parquet or "
                "run.json was changed after the run")
    return None
