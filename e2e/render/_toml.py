"""TOML renderer: a JSON-like document -> TOML text (no I/O), for what e2e prints in its
config's own language (``e2e arms``). Python's ``tomllib`` reads TOML but does not write it;
this writes the subset a config snapshot holds: strings, numbers, booleans, lists and tables
(a table of tables as ``[a.b]`` sections, a list of tables inline). ``None`` values are left
out (TOML has no null). ``comments`` puts ``# ...`` lines above a section.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["toml_text"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    key = str(key)
    return key if _BARE.match(key) else _string(key)


def _string(value: str) -> str:
    # JSON's escapes are TOML's (\" \\ \b \f \n \r \t \uXXXX); non-ASCII stays literal, so no
    # surrogate pair (which TOML refuses) is ever written
    return json.dumps(value, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value if v is not None) + "]"
    return _string(str(value))


def toml_text(document: Mapping[str, Any], *, comments: Mapping[str, list[str]] | None = None) -> str:
    """``document`` as TOML; ``comments``: {dotted table name: lines} written as ``# line``
    above that table's header."""
    comments = comments or {}
    lines: list[str] = []

    def table(path: tuple[str, ...], body: Mapping[str, Any]) -> None:
        name = ".".join(path)
        scalars = [(k, v) for k, v in body.items()
                   if v is not None and not (isinstance(v, Mapping) and v)]
        tables = [(k, v) for k, v in body.items() if isinstance(v, Mapping) and v]
        if path:
            header = ([f"# {line}" for line in comments.get(name, [])]
                      + ([f"[{'.'.join(_key(p) for p in path)}]"] if scalars or not tables else []))
            if header and lines:
                lines.append("")
            lines.extend(header)
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
        for k, v in tables:
            table((*path, str(k)), v)

    table((), document)
    return "\n".join(lines) + "\n"
