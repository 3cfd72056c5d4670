"""What every import checks and says at the boundary, whichever tool wrote the file.

    checked_times(requests)    each request's times finite, not negative, send <= first token
                               <= every chunk <= end; an impossible request is failed (its
                               error says why, so it enters no figure) and the run's reason
                               names how many and the first
    definition(metric, text, tool_value)
                               a figure the tool defines otherwise than e2e: kept in
                               ``provenance.imported.definitions`` (the report puts it beside
                               the metric, with the tool's own value) and in the run's warnings
    lengths_why(off, want, rounding_why)
                               why a tool's prompts or completions were not the asked length
    read_text(path, expect=, not_what=)
                               a file the user gave, as text: bounded (``read_bounded``) and
                               UTF-8, else a ConfigError saying what it should be
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from e2e.results.records import RequestRecord
from pathlib import Path
from e2e.errors import ConfigError
from e2e.paths import read_bounded

__all__ = ["checked_times", "definition", "definition_warning", "lengths_why", "read_text"]

_SLACK_S = 1e-6  # chunk times rebuilt by adding a tool's gaps may pass its end by rounding


def _impossible(r: RequestRecord) -> str | None:
    times = [("send", r.send_s), ("first token", r.first_token_s), ("end", r.end_s)]
    for name, t in times:
        if t is not None and not math.isfinite(t):
            return f"its {name} time is {t}"
        if t is not None and t < 0:
            return f"its {name} time is {t:.6g} s, before the load's start"
    if r.first_token_s is not None and r.first_token_s < r.send_s:
        return (f"its first token came {(r.send_s - r.first_token_s) * 1000:.3f} ms before "
                "it was sent (TTFT < 0)")
    if r.end_s is not None and r.first_token_s is not None and r.end_s < r.first_token_s:
        return (f"it ended {(r.first_token_s - r.end_s) * 1000:.3f} ms before its first token "
                "(latency < TTFT)")
    if r.end_s is not None and r.end_s < r.send_s:
        return f"it ended {(r.send_s - r.end_s) * 1000:.3f} ms before it was sent"
    for t in r.chunk_times_s:
        if not math.isfinite(t) or (r.first_token_s is not None and t < r.first_token_s - _SLACK_S) \
                or (r.end_s is not None and t > r.end_s + _SLACK_S):
            return (f"a chunk's time {t:.6g} s lies outside its first token "
                    f"({r.first_token_s}) and its end ({r.end_s})")
    return None


def checked_times(requests: Sequence[RequestRecord], tool: str
                  ) -> tuple[tuple[RequestRecord, ...], list[str]]:
    """(requests, reasons): each request whose times are impossible (not finite, negative,
    first token before the send, end before the first token, a chunk outside them) is made a
    failed request whose error says why, so no figure of the run holds it; ``reasons`` (the
    run's invalid reasons) says how many and the first."""
    out, bad = [], []
    for r in requests:
        why = _impossible(r)
        if why is None:
            out.append(r)
            continue
        bad.append((r.index, why))
        out.append(RequestRecord(index=r.index, send_s=r.send_s if math.isfinite(r.send_s) and
                                 r.send_s >= 0 else 0.0, status=r.status,
                                 error=f"{tool} recorded impossible times: {why}"))
    reasons = []
    if bad:
        index, why = bad[0]
        reasons.append(f"{len(bad)} request(s) with impossible times, left out of every figure; "
                       f"first: request {index}: {why}")
    return tuple(out), reasons


def definition(metric: str | None, text: str, tool_value: float | None = None) -> dict[str, Any]:
    """A figure ``metric`` (a RunMetrics key; None: the run as a whole) that the tool defines
    otherwise than e2e, said in ``text``, with the tool's own value where it has one."""
    value = tool_value if isinstance(tool_value, (int, float)) and not isinstance(
        tool_value, bool) and math.isfinite(tool_value) else None
    return {"metric": metric, "definition": text, "tool_value": value}


def definition_warning(item: dict[str, Any]) -> str:
    """The run's warning for a definition (``definition``)."""
    return f"defined otherwise: {item['definition']}"


def lengths_why(off: Sequence[int], want: int, rounding_why: str) -> str:
    """Why lengths ``off`` differ from ``want``: a token either way is ``rounding_why`` (the
    tool's text re-tokenized); a wider spread is a length drawn from a range around the asked
    one (vllm bench serve's ``--random-range-ratio``, AIPerf's and GuideLLM's stddev), which
    ``e2e`` never does: every request it sends has the asked length."""
    spread = max((abs(x - want) for x in off), default=0)
    if spread <= 1:
        return rounding_why
    return (f"lengths spread from {min(off)} to {max(off)} around {want} (up to {spread} "
            f"tokens, {spread / want:.0%}): the tool drew each request's length from a range "
            "(vllm bench serve's --random-range-ratio, a tool's length stddev), where e2e sends "
            "every request exactly the asked length; set beside an e2e run, the two measured "
            "different requests")


def read_text(path: Path, *, expect: str, not_what: str) -> str:
    """The text of ``path``, a file the user gave to import: at most ``read_bounded``'s limit
    (``expect``: what to give instead of a larger one), decoded as UTF-8; any other bytes are
    a ConfigError (exit 2) ending in ``not_what`` (what the file is not, then)."""
    data = read_bounded(path, expect=expect)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}): {not_what}") from None
