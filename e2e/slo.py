"""Service-level objectives: ``parse_slo("ttft=200ms,tpot=50ms,e2e=2s") -> SLO``. Goodput
over a run's requests (which requests met every SLO, and how many per second) is metric
math: ``e2e.metrics.goodput(records, slo) -> Goodput(share, req_s, met, requests, missed)``.

Per-request figures are e2e's own (``e2e.metrics``; the README's "Definitions"):
- TTFT = first token time - send time;
- TPOT = (end-to-end latency - TTFT) / (completion_tokens - 1), completion_tokens from the
  server's usage (``e2e.metrics.request_tpot_s``);
- E2E = end time - send time.

A request *meets* the SLO when it succeeded and each figure the SLO names is at most its
objective (equality meets it). ``share`` = met / all measured requests (a failed request
meets nothing); ``req_s`` = met / the run's duration (first send to last end, the duration of
``e2e.metrics.summarize_run``).

Against ``vllm bench serve --goodput ttft:200 tpot:50 e2el:2000`` (vllm/benchmarks/serve.py,
``calculate_metrics``; checked on vLLM 0.32): the same three figures, the same per-request TPOT
formula, the same "at most" test, and a request with fewer than 2 output tokens meets any TPOT
objective there too (vLLM counts its TPOT as 0). Differences: vLLM reports only the rate
(``request_goodput``), divides by its own benchmark duration (from just before the first
request is scheduled to after the last one returns), ends a request's latency at its last
content chunk (e2e at the end of the stream, after the usage chunk: sub-millisecond later),
and writes objectives as bare milliseconds (``ttft:200``), where e2e asks for a unit.
"""

from __future__ import annotations

import math
import re
from pydantic import BaseModel, ConfigDict, Field

from e2e.errors import ConfigError

__all__ = ["SLO", "parse_slo", "SLO_NAMES"]

SLO_NAMES = ("ttft", "tpot", "e2e")
_ALIASES = {"ttft": "ttft", "tpot": "tpot", "e2e": "e2e", "e2el": "e2e"}
_UNITS_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
_ITEM = re.compile(r"^\s*([A-Za-z0-9_]+)\s*[=:]\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")
_EXAMPLE = "e.g. --slo ttft=200ms,tpot=50ms,e2e=2s"


class SLO(BaseModel):
    """Objectives in milliseconds; None where the SLO does not name that figure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token, at most.")
    tpot_ms: float | None = Field(None, gt=0, description="Per-request TPOT, at most.")
    e2e_ms: float | None = Field(None, gt=0, description="End-to-end latency, at most.")

    def __str__(self) -> str:
        parts = [f"{name}={value:g}ms" for name, value in
                 (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2e", self.e2e_ms))
                 if value is not None]
        return ",".join(parts)


def parse_slo(text: str) -> SLO:
    """Parse ``name=value+unit`` items separated by commas: names ttft, tpot, e2e (or vLLM's
    e2el), units us, ms or s. Raises ``ConfigError`` naming the bad item and what to write."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"an empty SLO: name at least one objective ({_EXAMPLE})")
    values: dict[str, float] = {}
    for raw in text.split(","):
        if not raw.strip():
            raise ConfigError(f"SLO {text!r} has an empty item (a doubled or trailing comma); "
                              f"{_EXAMPLE}")
        match = _ITEM.match(raw)
        if match is None:
            raise ConfigError(f"cannot read SLO item {raw.strip()!r}: write name=value with a "
                              f"unit ({_EXAMPLE})")
        name, number, unit = match.group(1).lower(), float(match.group(2)), match.group(3)
        key = _ALIASES.get(name)
        if key is None:
            raise ConfigError(f"unknown SLO {name!r} in {raw.strip()!r}: the objectives are "
                              f"{', '.join(SLO_NAMES)} ({_EXAMPLE})")
        if not unit:
            raise ConfigError(f"SLO item {raw.strip()!r} has no unit: write {name}={number:g}ms "
                              f"or {name}={number / 1000:g}s")
        if unit not in _UNITS_MS:
            raise ConfigError(f"unknown unit {unit!r} in SLO item {raw.strip()!r}: use us, ms "
                              "or s")
        if key in values:
            raise ConfigError(f"SLO {text!r} names {key} twice; give each objective once")
        ms = number * _UNITS_MS[unit]
        if not math.isfinite(ms) or ms <= 0:
            raise ConfigError(f"SLO item {raw.strip()!r}: an objective must be a positive time")
        values[key] = ms
    return SLO(**{f"{k}_ms": v for k, v in values.items()})
