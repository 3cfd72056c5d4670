"""Server kinds: how to start one, where its health check is, and which Prometheus metrics
carry what e2e measures. vLLM is the one kind today; a second (SGLang) is one more value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ServerKind", "VLLM", "KINDS"]


@dataclass(frozen=True)
class ServerKind:
    name: str
    entry: tuple[str, ...]          # argv after the interpreter
    health_path: str
    accepted_metric: str            # counter: accepted draft tokens
    drafts_metric: str              # counter: verify steps that carried drafts
    draft_tokens_metric: str        # counter: proposed draft tokens
    server_tpot_metric: str         # histogram: the server's per-request TPOT (seconds)
    accepted_per_pos_metric: str = ""  # counter with a ``position`` label: accepted per draft position
    server_ttft_metric: str = ""    # histogram: the server's TTFT (seconds)
    server_e2el_metric: str = ""    # histogram: the server's end-to-end latency (seconds)

    def speculative_args(self, profile: dict[str, Any]) -> list[str]:
        # strict JSON (the config refuses a non-finite number first): never NaN or Infinity
        return ["--speculative-config", json.dumps(profile, sort_keys=True, allow_nan=False)]


VLLM = ServerKind(
    name="vllm",
    entry=("-m", "vllm.entrypoints.openai.api_server"),
    health_path="/health",
    accepted_metric="vllm:spec_decode_num_accepted_tokens_total",
    drafts_metric="vllm:spec_decode_num_drafts_total",
    draft_tokens_metric="vllm:spec_decode_num_draft_tokens_total",
    server_tpot_metric="vllm:request_time_per_output_token_seconds",
    accepted_per_pos_metric="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    server_ttft_metric="vllm:time_to_first_token_seconds",
    server_e2el_metric="vllm:e2e_request_latency_seconds",
)

KINDS: dict[str, ServerKind] = {VLLM.name: VLLM}
