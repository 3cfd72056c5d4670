"""A run's headline figures checked against its own ``requests.parquet`` when a report or a
resume reads it: a run.json edited to halve its latencies was skipped as done and reported as
"−49.8 % faster". The client figures every comparison rests on (requests that succeeded,
output tokens, mean TTFT, TPOT and end-to-end latency) are recomputed from the per-request
rows as ``e2e.metrics.summarize_run`` computes them; a run.json whose figures disagree is not
trusted (the report skips it with a warning, a sweep measures it again). Runs imported from
another tool (their own definitions) and runs without a requests.parquet are not checked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["disagreement"]

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
