"""The prefix cache's state before a measured load.

A fresh server (e2e's default) starts with an empty prefix cache, and the warmup shares no
prefix with the measured requests (``e2e.load.draw.WARMUP_NOTE``), so the measured load
meets a cold cache for its own prompts. A reused server (``--base-url``) may hold them from an
earlier run (every arm sends the same prompts): e2e asks it to drop its prefix cache
(``POST /reset_prefix_cache``, vLLM's development endpoint, served when the server runs with
``VLLM_SERVER_DEV_MODE=1``) and records whether it did.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import orjson

__all__ = ["CacheState", "reset_prefix_cache", "FRESH"]

_LIMIT = 64 << 10   # vLLM answers {"success": true}; anything this large is not that answer
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CacheState:
    reset: bool | None   # None: a fresh server, nothing to reset
    detail: str


FRESH = CacheState(None, "a fresh server: its prefix cache was empty when the warmup began, "
                   "and the warmup shares no prefix with the measured requests")


def reset_prefix_cache(base_url: str, headers: dict[str, str]) -> CacheState:
    """``POST {base_url}/reset_prefix_cache`` on a reused server, and what came of it (never
    raises: a server that cannot reset is measured, and says so)."""
    url = base_url.rstrip("/") + "/reset_prefix_cache"
    try:
        with httpx.Client(timeout=_TIMEOUT_S) as client, \
                client.stream("POST", url, headers=headers) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _LIMIT:
                    return CacheState(False, f"not reset: {url} answered more than "
                                      f"{_LIMIT >> 10} KiB, not vLLM's answer")
            status = response.status_code
    except httpx.HTTPError as exc:
        return CacheState(False, f"not reset: {url} failed ({type(exc).__name__})")
    if status != 200:
        hint = (" (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)"
                if status in (404, 405) else "")
        return CacheState(False, f"not reset: POST /reset_prefix_cache answered HTTP "
                          f"{status}{hint}; the measured prompts may be cached from an "
                          "earlier run on this server")
    try:
        answer = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        answer = {}
    if isinstance(answer, dict) and answer.get("success") is False:
        return CacheState(False, "not reset: the server answered success=false (blocks "
                          "still held by running requests?)")
    return CacheState(True, "reset by POST /reset_prefix_cache just before the measured load")
