"""The load generator's HTTP/1.1: keep-alive connections that hand each read of a streamed
response body to an ``SSEStream`` the moment the event loop delivers it.

Why not an HTTP client library here: on this path the client does nothing but read one long
chunked response per request, and every microsecond per read is a microsecond of queueing
that lands in the measured ITL and TPOT. aiohttp (what this path used before, and what
`vllm bench serve` uses) wakes a task through a future on every read, re-arms a read timer on
every read and builds a request object per request: ~7 µs of CPU per one-chunk read and
~130 µs per request on one core, against ~5 µs and ~31 µs here, measured side by side with
bench/load_ceiling.py (docs/explanation/load.md). Here a read is one
protocol callback: ``data_received`` takes the time, llhttp (``httptools``, the C parser
uvicorn uses) removes the chunked framing, and the stream splits and parses the SSE events,
with no task switch before the timestamp; the request is one pre-built write. TLS (https)
goes through asyncio's own. Everything else in e2e uses httpx.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_mod
import time
from urllib.parse import urlsplit

import httptools

from e2e.load.sse import SSEStream, StreamFailed

__all__ = ["Endpoint", "Connection", "Pool", "IdleClosed"]

ERROR_BODY_KEPT = 64 << 10  # of a response that is not a 200: the start is kept, never all


class IdleClosed(StreamFailed):
    """A reused keep-alive connection closed before any byte of the response: the server
    closed it as idle while the request went out (HTTP/1.1 allows that at any time, RFC 9112
    9.6), so the server never saw the request and it may be sent again on a fresh one."""


class Endpoint:
    """Where the requests go and the fixed part of every request's head."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl_mod.create_default_context() if parts.scheme == "https" else None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
                 "Accept: text/event-stream", "Connection: keep-alive"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")

    def request(self, body: bytes) -> bytes:
        return self._head + b"%d\r\n\r\n" % len(body) + body


class Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time. ``send`` starts a request whose body
    goes into ``stream``; ``wait`` returns the HTTP status when the response is complete, or
    raises ``StreamFailed`` (the stream broke a rule, the connection broke)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.stream: SSEStream | None = None
        self.done: asyncio.Future | None = None
        self.status: int | None = None
        self.reusable = False
        self.reused = False  # the pool handed it out again after a response
        self._began = False  # a byte of this request's response arrived
        self._complete = False
        self._framed = False  # the response says where its body ends (a length or chunks)
        self._pieces: list[bytes] = []
        self._other: list[bytes] = []  # the body of a response that is not a 200
        self._kept = 0  # bytes of it kept (at most ERROR_BODY_KEPT: the rest is dropped)

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter() - self.t0
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._finish(StreamFailed("the server answered with a protocol upgrade"))
            return
        except httptools.HttpParserError as exc:
            self._finish(StreamFailed(f"malformed HTTP response: {exc}"))
            return
        if self._pieces and self.stream is not None:
            body = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
            self._pieces.clear()
            try:
                self.stream.feed(body, now)
            except StreamFailed as exc:
                self._finish(exc)
                return
        if self.status is not None and self._complete:
            self._finish(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self.done is None or self.done.done():
            return
        if exc is None and self.status is not None and not self._framed:
            self._complete = True  # a body without a length or chunks ends when the server closes
            self._finish(None)
            return
        why = f": {exc}" if exc else ""
        failed = IdleClosed if self.reused and not self._began else StreamFailed
        self._finish(failed(f"the server closed the connection mid-response{why}"))

    # -- httptools callbacks
    def on_message_begin(self) -> None:  # once per response, at its first byte
        self._began = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.reusable = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.status == 200:
            self._pieces.append(body)
        elif self._kept < ERROR_BODY_KEPT:  # an error body: its start is what is reported
            self._other.append(body[:ERROR_BODY_KEPT - self._kept])
            self._kept += len(self._other[-1])

    def on_message_complete(self) -> None:
        self._complete = True

    # -- requests
    def send(self, request: bytes, stream: SSEStream) -> None:
        self.stream, self.status, self._complete, self._framed = stream, None, False, False
        self._began = False
        self._other.clear()
        self._kept = 0
        self.done = asyncio.get_running_loop().create_future()
        self.reusable = False
        self.transport.write(request)

    async def wait(self) -> int:
        await self.done
        return self.status

    def other_body(self) -> str:
        return b"".join(self._other).decode(errors="replace")

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def _finish(self, error: StreamFailed | None) -> None:
        done = self.done
        if error is not None:
            self.close()
        if done is not None and not done.done():
            done.set_exception(error) if error is not None else done.set_result(None)


class Pool:
    """Idle keep-alive connections to one endpoint; a request takes one (or opens one) and
    gives it back when its response ended cleanly."""

    def __init__(self, endpoint: Endpoint, t0: float, connect_timeout_s: float = 30.0) -> None:
        self.endpoint, self.t0, self.connect_timeout_s = endpoint, t0, connect_timeout_s
        self.idle: list[Connection] = []
        self.open: set[Connection] = set()

    async def take(self) -> Connection:
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable and not conn.transport.is_closing():
                conn.reused = True
                return conn
            self.open.discard(conn)
        return await self.connect()

    async def connect(self) -> Connection:
        """A fresh connection, never an idle one."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: Connection(self.t0), self.endpoint.host, self.endpoint.port,
                    ssl=self.endpoint.ssl)
        except TimeoutError:
            raise ConnectionError(f"no connection within {self.connect_timeout_s:g} s") from None
        self.open.add(conn)
        return conn

    def give_back(self, conn: Connection) -> None:
        if conn.reusable and not conn.transport.is_closing():
            self.idle.append(conn)
        else:
            conn.close()
            self.open.discard(conn)

    def close(self) -> None:
        for conn in self.open:
            conn.close()
        self.open.clear()
        self.idle.clear()
