"""Server-Sent Events framing for a streamed completion, and the checks on each event.

Method: the response body arrives in reads of any size. Each read is appended to what is left
of the previous one, split at the SSE event separator (a blank line, ``\\n\\n``; ``\\r\\n`` line
ends are normalised first), and every complete event is handled at once. All events of one read
get that read's receipt time: they arrived together, so any later time would be the client's
own queueing. Every event is parsed whole, so a content chunk, the usage block, an error event
and malformed data are told apart exactly, never by looking for substrings: the usual one, a
one-line ``data: {...}`` content chunk, by msgspec's typed JSON decoder (``_Chunk``: it reads
the choices' token ids and whether there is a usage, and skips every other field without
making Python objects of it; about 2.3x faster than orjson's ``loads`` on a vLLM chunk,
docs/measurements/outputs.md), anything else, and whatever that decoder refuses, by orjson
into Python objects, the long way.

Outputs: a request sent with ``return_token_ids`` (vLLM's completions API) gets each content
chunk's new token ids in its choice's ``token_ids``, and the whole prompt once, in the first
chunk's ``prompt_token_ids``. The decoder checks them as it parses (lists of token ids from 0
to 2**31 - 1, at C speed) and the stream extends one list per request with them; nothing is
decoded to text. ``output_ids`` checks the rest once, at the end: the prompt the server saw
must be the one sent, and the ids must be the whole completion (as many as ``usage`` counts).
A stream any of whose content chunks carried no ``token_ids`` (a server that does not send
them) or other than token ids has no recorded output, which is not an error.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, DecodeError, UnsetType
from orjson import loads as _loads
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

__all__ = ["StreamFailed", "SSEStream", "Usage", "check_usage", "output_ids"]

MAX_TOKENS = 2**31 - 1
MAX_TOKEN_ID = 2**31 - 1  # token ids are stored as int32
MAX_EVENT = 16 << 20  # one SSE event (a chunk's JSON) larger than this is not a stream
_Tokens = Annotated[StrictInt, Field(ge=0, le=MAX_TOKENS)]
_TokenId = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKEN_ID)]


class _Choice(msgspec.Struct):
    """What e2e reads of a content chunk's choice: its token ids (vLLM's return_token_ids),
    the first chunk's also the prompt; other fields are skipped unread."""

    token_ids: list[_TokenId] | None = None
    prompt_token_ids: list[int] | None = None


class _Chunk(msgspec.Struct):
    """A chunk as the fast path reads it: its choices, and whether it has a usage."""

    choices: list[_Choice] | None = None
    usage: object | UnsetType = UNSET


_decode = msgspec.json.Decoder(_Chunk).decode


class Usage(BaseModel):
    """The server's ``usage`` block as e2e reads it: whole, non-negative token counts."""

    model_config = ConfigDict(extra="allow")
    prompt_tokens: _Tokens | None = None
    completion_tokens: _Tokens | None = None


def check_usage(usage: object) -> dict:
    """``usage`` if it is a usage block of token counts, else StreamFailed naming the bad
    value (once per request, at the stream's end: nothing per chunk)."""
    try:
        Usage.model_validate(usage)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "usage"
        raise StreamFailed(f"the server's usage is not token counts: {where} = "
                           f"{str(first.get('input'))[:40]!r} ({first['msg']})") from None
    return usage  # type: ignore[return-value]


class StreamFailed(Exception):
    """The stream broke a rule (malformed data, a server error event, missing usage, ...)."""


class SSEStream:
    """The state of one stream: content chunk times, usage, whether ``[DONE]`` came."""

    __slots__ = ("chunk_times", "usage", "done", "done_at", "last", "stalled", "_rest",
                 "token_ids", "prompt_ids")

    def __init__(self, now: float = 0.0) -> None:
        self.chunk_times: list[float] = []
        # the completion's token ids as they came; None once a content chunk carried none
        self.token_ids: list[int] | None = []
        self.prompt_ids: list | None = None  # the first chunk's prompt_token_ids
        self.usage: dict | None = None
        self.done = False
        self.done_at: float | None = None  # receipt time of the read that carried [DONE]
        self.last = now  # when the request was sent, then the receipt time of the last read
        self.stalled = False  # set by whoever gave up waiting for the next read
        self._rest = b""

    def feed(self, data: bytes, now: float) -> None:
        """Handle one read of the body received at time ``now``; raises ``StreamFailed``."""
        self.last = now
        if self.done:
            return
        buffer = self._rest + data if self._rest else data
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        events = buffer.split(b"\n\n")
        self._rest = events.pop()
        if len(self._rest) > MAX_EVENT:  # an event that never ends would fill the memory
            raise StreamFailed(f"an SSE event grew past {MAX_EVENT >> 20} MiB without ending")
        times, ids = self.chunk_times, self.token_ids
        for event in events:
            # the usual event, one "data: {...}" content chunk, inline; anything else the
            # long way (including whatever the typed decoder refuses)
            if event.startswith(b"data: {") and b"\n" not in event:
                try:
                    chunk = _decode(event[6:])
                except DecodeError:
                    chunk = None
                if chunk is not None and chunk.usage is UNSET and chunk.choices:
                    if not times:  # the first: it carries the prompt, checked at the end
                        self._first(chunk.choices[0])
                        ids = self.token_ids
                    elif ids is not None:
                        new = chunk.choices[0].token_ids
                        if new is None:
                            self.token_ids = ids = None
                        else:
                            ids += new
                    times.append(now)
                    continue
            self._event(event, now)
            ids = self.token_ids
            if self.done:
                return

    def close(self, now: float) -> None:
        """The body ended: an unterminated last event still counts (as vllm bench's reader
        does), then the stream must have ended with ``[DONE]`` and carried a usage that does
        not disagree with the chunks."""
        rest, self._rest = self._rest.strip(), b""
        if rest and not self.done:
            self._event(rest, now)
        if not self.done:
            raise StreamFailed("the stream ended before [DONE]")
        if self.usage is None:
            raise StreamFailed("the stream carried no usage (stream_options.include_usage)")
        check_usage(self.usage)
        if not self.chunk_times:
            raise StreamFailed("the stream carried no tokens")
        if len(self.chunk_times) > int(self.usage.get("completion_tokens") or 0):
            raise StreamFailed(
                f"usage says {self.usage.get('completion_tokens')} completion tokens but "
                f"{len(self.chunk_times)} content chunks arrived"
            )

    def _first(self, choice: _Choice) -> None:
        if choice.token_ids is None or self.token_ids is None:
            self.token_ids = None
        else:
            self.token_ids += choice.token_ids
            self.prompt_ids = choice.prompt_token_ids

    def _content(self, choices, now: float) -> None:
        """A content chunk the typed decoder did not take: its receipt time, and its token
        ids where they are what the decoder would have taken."""
        try:
            choice = msgspec.convert(choices, list[_Choice])[0]
        except (msgspec.ValidationError, IndexError):
            self.token_ids = None
        else:
            if not self.chunk_times:
                self._first(choice)
            elif choice.token_ids is None or self.token_ids is None:
                self.token_ids = None
            else:
                self.token_ids += choice.token_ids
        self.chunk_times.append(now)

    def _event(self, event: bytes, now: float) -> None:
        if event.startswith(b"data:") and b"\n" not in event:
            payload = event[5:].strip()  # the usual one-line event
        else:  # comments (":ping"), "event:"/"id:" fields, multi-line data
            lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if not lines:
                return
            payload = b"\n".join(lines)
        if payload == b"[DONE]":
            self.done, self.done_at = True, now
            return
        try:
            parsed = _loads(payload)
        except ValueError:
            raise StreamFailed(f"malformed SSE data: {payload[:80]!r}") from None
        if not isinstance(parsed, dict):
            raise StreamFailed(f"malformed SSE event: {payload[:80]!r}")
        choices = parsed.get("choices")
        if choices:
            self._content(choices, now)
        elif "error" in parsed or parsed.get("object") == "error":
            detail = parsed.get("error") or parsed.get("message") or parsed
            raise StreamFailed(f"server error: {str(detail)[:200]}")
        usage = parsed.get("usage")
        if usage:
            self.usage = usage


def output_ids(stream: SSEStream, prompt, completion_tokens: int | None) -> tuple[int, ...] | None:
    """The completion's token ids of a stream that ended cleanly, or None where they were not
    recorded (a chunk without ``token_ids``, ids that are not token ids, or fewer or more of
    them than ``completion_tokens``: then they are not the whole output). Raises StreamFailed
    when the server echoed a prompt other than the one sent (``prompt``): it answered
    another question than the one asked. Checked here, once per request, at C speed (an
    ``array('i')`` refuses what is not a 32-bit integer), not per chunk."""
    ids = stream.token_ids
    echoed = stream.prompt_ids
    if echoed is not None and echoed != (prompt if type(prompt) is list else list(prompt)):
        at = next((k for k, (a, b) in enumerate(zip(echoed, prompt)) if a != b),
                  min(len(echoed), len(prompt)))
        raise StreamFailed(f"the server answered another prompt than the one sent "
                           f"(prompt_token_ids: {len(echoed)} tokens, sent {len(prompt)}; they "
                           f"differ from position {at})")
    if not ids or completion_tokens is None or len(ids) != completion_tokens:
        return None
    return tuple(ids)  # int32 token ids already: the decoder took nothing else
