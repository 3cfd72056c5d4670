"""Mooncake-format request traces, read and checked at the boundary.

A trace is JSONL, one request per line, as Mooncake's published traces and ``vllm bench
serve``'s and AIPerf's Mooncake loaders read them::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

``timestamp`` is the arrival in milliseconds (any origin; lines may come in any order and are
sorted by it), ``input_length``/``output_length`` are tokens, and each of ``hash_ids`` names one
block of ``block_size`` prompt tokens (512 in Mooncake's traces): two requests whose hash ids
start alike share that many blocks of prompt. Unknown keys are allowed and ignored. A file that
is too large, not UTF-8, not JSON per line, or whose numbers are out of range is a ConfigError
(exit 2) naming the line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from e2e.errors import ConfigError
from e2e.paths import read_bounded

__all__ = ["TraceRequest", "Trace", "read_trace", "MAX_TRACE_BYTES", "MAX_TRACE_REQUESTS"]

MAX_TRACE_BYTES = 256 << 20      # Mooncake's largest public trace is ~6 MB
MAX_TRACE_REQUESTS = 1_000_000
_MAX_TOKENS = 10_000_000         # per request, prompt or completion
_MAX_MS = 1e11                   # about three years


def _no_bool(value: Any) -> Any:
    """JSON's true is not 1: a length, a time or a hash id of ``true`` is refused."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number here")
    return value


_NotBool = BeforeValidator(_no_bool)


class TraceRequest(BaseModel):
    """One line of a trace, as e2e reads it (other keys are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    timestamp: Annotated[float, Field(ge=0, le=_MAX_MS, allow_inf_nan=False), _NotBool]
    input_length: Annotated[int, Field(gt=0, le=_MAX_TOKENS), _NotBool]
    output_length: Annotated[int, Field(gt=0, le=_MAX_TOKENS), _NotBool]
    hash_ids: Annotated[list[Annotated[int, Field(ge=0, lt=2**63), _NotBool]],
                        Field(max_length=_MAX_TOKENS)] = Field(default_factory=list)


@dataclass(frozen=True)
class Trace:
    """A trace's requests in arrival order and the SHA-256 of the file's bytes."""

    path: str
    requests: tuple[TraceRequest, ...]
    sha256: str


def read_trace(path: str | Path, *, block_size: int, max_requests: int | None = None) -> Trace:
    """The trace at ``path`` (its first ``max_requests`` arrivals), checked: every line a
    request, each prompt within its hash ids' blocks (``input_length <= len(hash_ids) x
    block_size``, as Mooncake's traces are; a trace without hash ids shares no prefix)."""
    path = Path(path)
    data = read_bounded(path, MAX_TRACE_BYTES, expect="a Mooncake-format JSONL trace",
                        regular=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}): not a JSONL "
                          "trace") from None
    requests: list[TraceRequest] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(requests) >= MAX_TRACE_REQUESTS:
            raise ConfigError(f"{path} has more than {MAX_TRACE_REQUESTS:,} requests: give a "
                              "shorter trace (or cut it)")
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path} line {number} is not JSON ({exc}): a trace is one JSON "
                              "object per line") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path} line {number}: expected a JSON object with timestamp, "
                              "input_length, output_length and hash_ids")
        try:
            request = TraceRequest.model_validate(doc)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise ConfigError(f"{path} line {number}: {key}: {first['msg']}: not a "
                              "Mooncake-format request (timestamp ms, input_length, "
                              "output_length, hash_ids)") from None
        if request.hash_ids and request.input_length > len(request.hash_ids) * block_size:
            raise ConfigError(
                f"{path} line {number}: input_length {request.input_length} is more than its "
                f"{len(request.hash_ids)} hash ids x {block_size} tokens: is block_size "
                f"right? (Mooncake's traces use 512)")
        requests.append(request)
    if not requests:
        raise ConfigError(f"{path} holds no requests: a trace is one JSON object per line")
    ordered = sorted(requests, key=lambda r: r.timestamp)  # stable: ties keep file order
    if max_requests is not None:
        ordered = ordered[:max_requests]
    return Trace(path=str(path), requests=tuple(ordered),
                 sha256=hashlib.sha256(data).hexdigest())
