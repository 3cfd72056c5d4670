"""The headline: the one figure a cell is judged by, defined here once for the report, the
nightly, ``e2e bisect`` and ``--until-settled``.

    headline_metric(concurrency, spec_mode)        the reference's rule
        with the speculator   ms per verify step (mean TPOT x acceptance length: raw TPOT
                              follows acceptance, which moves from run to run)
        concurrency 1         mean TPOT
        above                 median TPOT
    server_twin(metric)       the same figure built from the server's own TPOT
    headline_for(c, mode, tpot_from="server")  the headline, from the server's TPOT

**ms per verify step** = TPOT x acceptance length (the time of one target-model verify step,
steady while acceptance moves from run to run). It can be built from two TPOTs: the client's
mean TPOT (``ms_per_verify_step``, as ``e2e run`` prints it), or the server's own mean TPOT,
``RunMetrics.server_tpot_ms_mean`` from ``vllm:request_time_per_output_token_seconds``
(``server_ms_per_verify_step``). On a small busy host the API server can deliver a whole
stream in one burst; the client's TPOT then understates decode time and cannot see a
per-step delay (docs/explanation/plugin.md), while the server's can. The server-built twin is an explicit
choice on top of the rule (the nightly's ``verify_step_from = "server"``, recorded with its
verdict) or the burst rule's (a run's ``burst_share`` above the limit: ``burst_affected``).
The server's histogram gives its mean only, so the twin of either TPOT is its mean.

The figures themselves are defined once, in ``e2e.metrics``; this module names them.
"""

from __future__ import annotations

from e2e.metrics import SERVER_VERIFY_STEP

__all__ = ["CLIENT_VERIFY_STEP", "BURST_SHARE", "HEADLINE",
           "headline_metric", "headline_for", "server_twin", "burst_affected"]

CLIENT_VERIFY_STEP = "ms_per_verify_step"
BURST_SHARE = "burst_share"
HEADLINE = "headline"  # the nightly thresholds' name for "this cell's headline metric"

_SERVER_TWIN = {CLIENT_VERIFY_STEP: SERVER_VERIFY_STEP, "tpot_ms_mean": "server_tpot_ms_mean",
                "tpot_ms_median": "server_tpot_ms_mean"}


def headline_metric(concurrency: int, spec_mode: str) -> str:
    """The headline metric of a cell: ms per verify step with the speculator, mean TPOT at
    concurrency 1, median TPOT above it."""
    if spec_mode == "dspark":
        return CLIENT_VERIFY_STEP
    return "tpot_ms_mean" if concurrency == 1 else "tpot_ms_median"


def server_twin(metric: str) -> str | None:
    """The figure ``metric`` names, built from the server's own TPOT (None: it has none)."""
    return _SERVER_TWIN.get(metric)


def headline_for(concurrency: int, spec_mode: str, *, tpot_from: str = "client") -> str:
    """The headline metric with its TPOT from the client (the rule) or the server."""
    key = headline_metric(concurrency, spec_mode)
    return server_twin(key) or key if tpot_from == "server" else key


def burst_affected(burst_shares: tuple[float, ...], limit: float) -> bool:
    """True when any run's share of its stream delivered in bursts exceeds ``limit``."""
    return any(share > limit for share in burst_shares)
