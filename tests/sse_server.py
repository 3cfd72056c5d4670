"""A scripted HTTP/1.1 server for the load generator's tests: it reads each request and hands
its JSON body to a test's ``respond(payload, writer)`` coroutine, which writes whatever bytes
the test needs (a good stream, a broken one, a hang). It runs its own event loop in a thread,
so the client under test can be this process or spawned worker processes."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import Awaitable, Callable

Respond = Callable[[dict, asyncio.StreamWriter], Awaitable[None]]

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")


def sse(*events) -> list[bytes]:
    """SSE events (dicts are JSON-encoded, bytes go as they are) as ``data:`` blocks."""
    return [b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
            for e in events]


def chunk(text="x"):
    return {"choices": [{"index": 0, "text": text, "finish_reason": None}]}


def usage(prompt, completion):
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def framed(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


async def stream(writer: asyncio.StreamWriter, blocks: list[bytes], *, gap_s: float = 0.0,
                 finish: bool = True) -> None:
    """A chunked 200 response carrying ``blocks`` (one HTTP chunk each)."""
    writer.write(HEAD)
    for block in blocks:
        if gap_s:
            await asyncio.sleep(gap_s)
        writer.write(framed(block))
        await writer.drain()
    if finish:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def good(tokens: int, prompt: int = 3) -> list[bytes]:
    return sse(*[chunk()] * tokens, usage(prompt, tokens), b"[DONE]")


class PerConnection:
    """``served = PerConnection(); n = served.count(writer)``: how many requests this
    connection has carried, counting this one. Keyed by the writer object itself, weakly,
    never by ``id(writer)``: a closed connection's writer is freed, and the next connection's
    writer may be made at the same address, so an ``id`` key let a fresh connection inherit a
    closed one's count (seen: 4 of 300 runs beside CPU load; the fresh connection was then
    treated as reused and reset, and the client rightly failed the request)."""

    def __init__(self) -> None:
        self._counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def count(self, writer) -> int:
        self._counts[writer] = self._counts.get(writer, 0) + 1
        return self._counts[writer]


class ScriptedServer:
    """``with ScriptedServer(respond) as server: ... server.base_url``; ``server.bodies``
    holds every request body received. ``process=True`` runs it in a forked process instead
    of a thread, so that it does not share the GIL with a client whose timing is tested
    (``bodies`` then stays empty)."""

    def __init__(self, respond: Respond, *, process: bool = False) -> None:
        self.respond = respond
        self.process = process
        self.bodies: list[dict] = []
        self.heads: list[bytes] = []  # each request's line and headers
        self.connections = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._tasks: set[asyncio.Task] = set()
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                payload = json.loads(await reader.readexactly(length)) if length else {}
                self.heads.append(head)
                self.bodies.append(payload)
                await self.respond(payload, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve_in_child(self, conn) -> None:
        self._thread.start()
        self._ready.wait(10)
        conn.send(self.port)
        self._thread.join()

    def __enter__(self) -> ScriptedServer:
        if self.process:
            import multiprocessing as mp

            ctx = mp.get_context("fork")
            parent, child = ctx.Pipe()
            self._child = ctx.Process(target=self._serve_in_child, args=(child,), daemon=True)
            self._child.start()
            self.port = parent.recv()
            return self
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        if self.process:
            self._child.kill()
            self._child.join()
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
