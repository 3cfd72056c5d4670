"""Per-run figures a nightly derives, and which one is the headline with the speculator.

**ms per verify step** = TPOT × acceptance length (the time of one target-model verify step,
steady while acceptance moves from run to run). It can be built from two TPOTs:

* the client's mean TPOT (``ms_per_verify_step``, as ``e2e run`` prints it), or
* the server's own mean TPOT, ``RunMetrics.server_tpot_ms_mean`` from
  ``vllm:request_time_per_output_token_seconds`` (``server_ms_per_verify_step``).

On a small busy host the API server can deliver a whole stream in one burst; the client's TPOT
then understates decode time and cannot see a per-step delay (docs/plugin.md), while the
server's can. A nightly judges the server-built figure where the config says so
(``verify_step_from = "server"``) or where a run's client stream is flagged as burst-affected
(``RunMetrics.burst_share`` above ``burst_share_max``, when runs carry that field).

Pure functions; ``ms_per_verify_step`` is the one definition of the derived metric (it belongs
in ``e2e.metrics`` once the pipeline moves there).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLIENT_VERIFY_STEP", "SERVER_VERIFY_STEP", "BURST_SHARE", "ms_per_verify_step",
           "run_value", "burst_affected"]

CLIENT_VERIFY_STEP = "ms_per_verify_step"
SERVER_VERIFY_STEP = "server_ms_per_verify_step"
BURST_SHARE = "burst_share"


def ms_per_verify_step(tpot_ms: float | None, acceptance_length: float | None) -> float | None:
    """ms per verify step = mean TPOT (ms) × mean acceptance length (tokens per verify step);
    None when either is missing."""
    if tpot_ms is None or acceptance_length is None:
        return None
    return float(tpot_ms) * float(acceptance_length)


def run_value(metrics: Any, key: str) -> float | None:
    """A run's value of a nightly metric: a ``RunMetrics`` field of that name, or one of the
    derived ones (``ms_per_verify_step`` from the client's mean TPOT when the record lacks it,
    ``server_ms_per_verify_step`` from the server's mean TPOT). None if absent."""
    if metrics is None:
        return None
    if key == SERVER_VERIFY_STEP:
        return ms_per_verify_step(getattr(metrics, "server_tpot_ms_mean", None),
                                  getattr(metrics, "acceptance_length", None))
    value = getattr(metrics, key, None)
    if key == CLIENT_VERIFY_STEP and value is None:
        value = ms_per_verify_step(getattr(metrics, "tpot_ms_mean", None),
                                   getattr(metrics, "acceptance_length", None))
    return None if value is None else float(value)


def burst_affected(burst_shares: tuple[float, ...], limit: float) -> bool:
    """True when any run's share of its stream delivered in bursts exceeds ``limit``."""
    return any(share > limit for share in burst_shares)
