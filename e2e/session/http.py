"""Every whole HTTP answer e2e reads from a server (``/metrics``, ``/health``, ``/version``,
``/v1/models``, a probe request and its error body), bounded in bytes and in time.

    fetch(url, limit=..., deadline_s=...)   -> Answer(status_code, content; .text, .json())

A server is whatever answers on the port: an endless ``/metrics`` grew one e2e to 22.7 GB
before the OOM killer ended it, and a server that drips one byte a second held ``e2e run``
for minutes through per-read timeouts that each byte reset. So the body is read in chunks
and refused past ``limit`` bytes, and the whole exchange (connect, headers, body) must end
within ``deadline_s``: it runs in a worker thread the caller stops waiting for at the
deadline (the thread stops at the next chunk, and its reads stay bounded by ``timeout``).
Both failures are a ``ServerError`` (``AnswerTooLarge``, ``AnswerTooSlow``) that says what and
how much, so a run whose server does it is invalid with that reason; a network failure is
still an ``httpx.HTTPError``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from e2e.errors import ServerError

__all__ = ["Answer", "fetch", "AnswerTooLarge", "AnswerTooSlow", "METRICS_LIMIT",
           "PROBE_LIMIT", "PROBE_DEADLINE_S"]

METRICS_LIMIT = 64 << 20   # /metrics of a large multi-GPU server is a few MB
PROBE_LIMIT = 1 << 20      # /health, /version, /v1/models, a probe's answer or error body
PROBE_DEADLINE_S = 30.0    # connect + headers + body of one probe


class AnswerTooLarge(ServerError):
    pass


class AnswerTooSlow(ServerError):
    pass


@dataclass(frozen=True)
class Answer:
    """A whole, bounded answer (what e2e reads of an ``httpx.Response``)."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not; orjson bounds nesting depth)."""
        return orjson.loads(self.content)


def _read(method: str, url: str, headers: dict[str, str] | None, json: Any, timeout: float,
          limit: int, deadline: float, stop: threading.Event) -> Answer:
    with httpx.Client(timeout=timeout) as client:
        with client.stream(method, url, headers=headers, json=json) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():  # decoded: the limit is on what is kept
                size += len(chunk)
                if size > limit:
                    raise AnswerTooLarge(f"{url} answered more than {_size(limit)}: not a "
                                         "server e2e can measure (an endless or runaway body?)")
                if stop.is_set() or time.monotonic() > deadline:
                    raise AnswerTooSlow("stopped")
                chunks.append(chunk)
            content = b"".join(chunks)
            return Answer(response.status_code, content)


def fetch(url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
          json: Any = None, timeout: float = 10.0, limit: int = PROBE_LIMIT,
          deadline_s: float | None = None) -> Answer:
    """``method url``, its whole answer at most ``limit`` bytes and done within
    ``deadline_s`` (default: ``timeout``). Raises ``AnswerTooLarge``/``AnswerTooSlow`` (a
    ServerError) or ``httpx.HTTPError``."""
    budget = timeout if deadline_s is None else deadline_s
    deadline = time.monotonic() + budget
    stop = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["answer"] = _read(method, url, headers, json, min(timeout, budget), limit,
                                  deadline, stop)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="e2e-fetch", daemon=True)
    worker.start()
    worker.join(budget + 0.5)
    if worker.is_alive() or isinstance(box.get("error"), AnswerTooSlow):
        stop.set()
        raise AnswerTooSlow(f"{url} did not answer in full within {budget:g} s (a server "
                            "that sends its answer a little at a time?)")
    if "error" in box:
        raise box["error"]
    return box["answer"]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
