r"""Text of unknown origin inside Markdown: one line, shown as text, never as markup; and
inside a CSV file: never a spreadsheet formula.

    md_text(text)   ``text`` for a Markdown line (report.md, the PR comment, the nightly
                    summary; index.html is rendered from the same Markdown)
    md_link(text, url)  ``[text](url)``, or None where ``url`` is not a link e2e writes
                    (``e2e.names.safe_link``: relative or http(s)), its target escaped
    csv_safe(frame) a table for a CSV file (``e2e history --format csv``)

A message e2e did not write itself (a server's error body in an invalid run's reason, a
reason read back from a run.json or a store) reaches Markdown that GitHub and markdown-it
render. A newline in it could start a forged table row ("🟢 −50 % faster") or heading, an
``<!--`` hide the rest of a comment, an ``![](https://…)`` make a page load a remote image,
an ``@name`` notify someone. So: every run of whitespace (line and paragraph separators and
other control characters included) becomes one space, bidirectional controls are dropped,
the text is cut to ``limit`` characters, and every character Markdown or HTML gives a
meaning inside a line (``\ ` * [ ] < > | ! ~ & @``) is backslash-escaped (CommonMark: a backslash before ASCII
punctuation makes it literal; GitHub's renderer follows it).

A link's target (a ``--link`` or ``--link-base`` flag, checked there) is written only when
``e2e.names.safe_link`` holds, and then escaped for a Markdown link target: every character
outside a URL's plain ones percent-encoded (``(`` ``)`` ``[`` ``]`` and quotes among them, so
no target can end early and start an image), and ``&`` backslash-escaped (no entity).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

__all__ = ["md_text", "md_link", "csv_safe"]

_SPACE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_BIDI = re.compile(r"[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# inline meaning only: the line never starts with the text (a caller's "- " or "| " comes
# first), so "#", "-", "+", "=" and digits-and-dot are plain; "_" inside a word is plain too
_SPECIAL = re.compile(r"([\\`*\[\]<>|!~&@])")
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # one that could open or close emphasis


def md_text(text: Any, limit: int = 2000) -> str:
    """``text`` (any value; None is "") as one line of literal Markdown text."""
    if text is None:
        return ""
    line = _BIDI.sub("", _SPACE.sub(" ", str(text))).strip()
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    line = _SPECIAL.sub(r"\\\1", line)
    return _UNDERSCORE.sub(r"\\_", line)


def md_link(text: Any, url: str | None) -> str | None:
    """``[text](url)`` with ``text`` as ``md_text`` and ``url`` escaped for a Markdown link
    target; None when there is no ``url`` or it is not a link e2e writes (``safe_link``)."""
    from e2e.names import safe_link  # here: this module loads with the standard library alone

    try:
        safe_link(url)
    except ValueError:
        return None
    target = quote(url, safe="/:?#@!$&+,;=%*~").replace("&", "\\&")
    return f"[{md_text(text)}]({target})"


def csv_safe(frame):
    """Text cells that a spreadsheet would run as a formula (starting with =, +, -, @, a tab
    or a carriage return; a store's text is anyone's) prefixed with a ', as OWASP advises.
    Numbers stay numbers. ``frame``: a pandas DataFrame (a copy is returned)."""
    def safe(value):
        if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
            return "'" + value
        return value

    import pandas as pd

    frame = frame.copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = pd.Series([safe(v) for v in frame[column]], index=frame.index,
                                      dtype=object)
    return frame
