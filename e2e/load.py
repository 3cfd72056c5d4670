"""The load generator: seeded random token-id prompts, streamed ``/v1/completions`` requests
over async httpx, at most ``concurrency`` in flight, one ``RequestRecord`` per request.

The per-chunk loop does as little as it can: read a line, take a timestamp, and parse JSON only
to tell a content chunk from the usage chunk or an error.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from e2e.errors import ConfigError
from e2e.records import RequestRecord

__all__ = ["LoadSpec", "make_prompts", "vocabulary", "run_load", "drive"]

from orjson import loads as _loads  # several times faster than json on the chunk loop


@dataclass(frozen=True)
class LoadSpec:
    base_url: str
    model: str
    prompts: Sequence[Sequence[int]]
    output_len: int
    concurrency: int
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 60.0
    headers: dict[str, str] = field(default_factory=dict)
    path: str = "/v1/completions"


def _tokenizer_file(model: str) -> Path | None:
    """tokenizer.json of a local model folder, or of a hub model in the Hugging Face cache."""
    local = Path(model).expanduser() / "tokenizer.json"
    if local.exists():
        return local
    if "/" not in model or Path(model).expanduser().exists():
        return None
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    snapshots = hub / ("models--" + model.replace("/", "--")) / "snapshots"
    found = sorted(snapshots.glob("*/tokenizer.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def vocabulary(model: str) -> tuple[int, list[int]]:
    """(vocabulary size, special token ids) from the model's tokenizer.json (a local folder,
    or the Hugging Face cache for a hub name)."""
    tokenizer = _tokenizer_file(model)
    if tokenizer is None:
        raise ConfigError(
            f"cannot find tokenizer.json for model {model!r}: e2e draws prompt token ids from "
            "the model's tokenizer; point server.model at a local model folder, or download "
            "the model into the Hugging Face cache first"
        )
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    specials = sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)
    return tok.get_vocab_size(with_added_tokens=True), specials


def make_prompts(n: int, length: int, *, vocab_size: int, exclude: Sequence[int] = (),
                 seed: int = 0, stream: int = 0) -> list[list[int]]:
    """``n`` prompts of exactly ``length`` token ids, uniform over the vocabulary without the
    special tokens; the same for every arm at the same seed. ``stream`` separates warmup
    prompts from measured ones (so warmups never warm the prefix cache for them)."""
    allowed = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.asarray(exclude, dtype=np.int64))
    if allowed.size == 0:
        raise ConfigError("the model's vocabulary has no non-special tokens to draw from")
    rng = np.random.Generator(np.random.PCG64([seed, stream]))
    return rng.choice(allowed, size=(n, length), replace=True).tolist()


async def _one(client: httpx.AsyncClient, spec: LoadSpec, index: int, prompt: Sequence[int],
               t0: float, gate: asyncio.Semaphore) -> RequestRecord:
    body = {
        "model": spec.model,
        "prompt": list(prompt),
        "max_tokens": spec.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    clock = time.perf_counter
    async with gate:
        send = clock() - t0
        first: float | None = None
        chunks: list[float] = []
        usage: dict | None = None
        status: int | None = None
        done = False
        error: str | None = None
        try:
            async with asyncio.timeout(spec.request_timeout_s):
                async with client.stream("POST", spec.path, json=body) as response:
                    status = response.status_code
                    if status != 200:
                        text = (await response.aread()).decode(errors="replace")[:300]
                        raise _RequestFailed(f"HTTP {status}: {text}")
                    async for line in response.aiter_lines():
                        now = clock() - t0
                        if not line.startswith("data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            done = True
                            break
                        try:
                            event = _loads(payload)
                        except ValueError:
                            raise _RequestFailed(f"malformed SSE data: {payload[:80]!r}") from None
                        if not isinstance(event, dict):
                            raise _RequestFailed(f"malformed SSE event: {payload[:80]!r}")
                        if event.get("choices"):
                            if first is None:
                                first = now
                            chunks.append(now)
                        if event.get("usage"):
                            usage = event["usage"]
                        if "error" in event and not event.get("choices"):
                            raise _RequestFailed(f"server error: {str(event['error'])[:200]}")
            if not done:
                raise _RequestFailed("the stream ended before [DONE]")
            if usage is None:
                raise _RequestFailed("the stream carried no usage (stream_options.include_usage)")
            if first is None:
                raise _RequestFailed("the stream carried no tokens")
            if len(chunks) > int(usage.get("completion_tokens") or 0):
                raise _RequestFailed(
                    f"usage says {usage.get('completion_tokens')} completion tokens but "
                    f"{len(chunks)} content chunks arrived"
                )
        except _RequestFailed as exc:
            error = str(exc)
        except TimeoutError:
            error = f"timed out after {spec.request_timeout_s:.0f} s (load.request_timeout_s)"
        except httpx.ReadTimeout:
            error = f"no data for {spec.stall_timeout_s:.0f} s (load.stall_timeout_s)"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        end = clock() - t0
        return RequestRecord(
            index=index,
            send_s=send,
            first_token_s=first,
            end_s=end if error is None else None,
            chunk_times_s=tuple(chunks),
            prompt_tokens=(usage or {}).get("prompt_tokens"),
            completion_tokens=(usage or {}).get("completion_tokens"),
            status=status,
            error=error,
        )


class _RequestFailed(Exception):
    pass


async def drive(spec: LoadSpec, on_done: Callable[[RequestRecord], None] | None = None,
                transport: httpx.AsyncBaseTransport | None = None) -> list[RequestRecord]:
    """Send every prompt, at most ``spec.concurrency`` in flight; records in prompt order.
    Records finished before an interruption are passed to ``on_done`` as they finish."""
    limits = httpx.Limits(max_connections=spec.concurrency,
                          max_keepalive_connections=spec.concurrency)
    timeout = httpx.Timeout(connect=30.0, read=spec.stall_timeout_s, write=30.0, pool=None)
    gate = asyncio.Semaphore(spec.concurrency)
    async with httpx.AsyncClient(base_url=spec.base_url, limits=limits, timeout=timeout,
                                 headers=spec.headers, transport=transport) as client:
        t0 = time.perf_counter()

        async def task(i: int, prompt: Sequence[int]) -> RequestRecord:
            record = await _one(client, spec, i, prompt, t0, gate)
            if on_done is not None:
                on_done(record)
            return record

        return list(await asyncio.gather(*(task(i, p) for i, p in enumerate(spec.prompts))))


def run_load(spec: LoadSpec, *, progress: bool = True, label: str = "requests",
             on_done: Callable[[RequestRecord], None] | None = None) -> list[RequestRecord]:
    """Run ``drive`` with a progress bar (rich) on stderr."""
    if not progress:
        return asyncio.run(drive(spec, on_done))
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task(label, total=len(spec.prompts))

        def done(record: RequestRecord) -> None:
            bar.advance(task)
            if on_done is not None:
                on_done(record)

        return asyncio.run(drive(spec, done))
