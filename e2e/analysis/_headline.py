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

The figures themselves are defined once, in ``e2e.metrics`` (``ms_per_verify_step``,
``metric_value``); this module names the keys and the burst rule of the judgement.
"""

from __future__ import annotations

from e2e.metrics import SERVER_VERIFY_STEP

__all__ = ["CLIENT_VERIFY_STEP", "SERVER_VERIFY_STEP", "BURST_SHARE", "burst_affected"]

CLIENT_VERIFY_STEP = "ms_per_verify_step"
BURST_SHARE = "burst_share"


def burst_affected(burst_shares: tuple[float, ...], limit: float) -> bool:
    """True when any run's share of its stream delivered in bursts exceeds ``limit``."""
    return any(share > limit for share in burst_shares)
