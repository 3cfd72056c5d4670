"""What a config or a flag writes that e2e turns into a name, a link or a set of cores,
checked once.

    safe_name(value, what)  -> value   a name that may become a folder under results/ (an arm,
                                       an experiment, a run id, a label); ValueError otherwise
    check_name(value, what) -> value   the same for a flag or a file's field: a ConfigError
    known_name(value, names, what, among)
                                       a name the user gives that must be one of ``names``
                                       (an arm, a slot, a speculator profile, a baseline): a
                                       ConfigError listing them otherwise
    safe_link(value, what)  -> value   a link e2e may write into Markdown or HTML (the PR
                                       comment's, the nightly summary's, the dashboard's): a
                                       relative path or an http(s) URL; ValueError otherwise
    check_link(value, what) -> value   the same for a flag (``--link``, ``--link-base``)
    number_tag(value)       -> str     a number as it appears inside such a name
    parse_cpus("0-1,3")     -> frozenset({0, 1, 3})   Linux's CPU list format; ConfigError

and the other strings a config gives, as the schema (``e2e.config``) reads them, each raising
ValueError that pydantic reports key by key:

    CpuList                  a CPU set ('0', '0-3', '0,2')
    EnvTable, ArgList        what a process's environment and argv can hold
    check_wheel(value)       a path or an http(s) URL of a ``.whl``
    plugin_settings(value)   settings e2e's vLLM plugin accepts (``e2e.arm_settings``)

Names are data, never paths: every name that becomes part of a path passes ``safe_name``
first (``e2e.paths.within`` then checks where the path resolves).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator

from e2e.errors import ConfigError, E2EError
from e2e.arm_settings import PluginSettings
from e2e.redact import copied, scrub

__all__ = ["NAME_RULE", "LINK_RULE", "MAX_CPU", "safe_name", "check_name", "known_name",
           "safe_link", "check_link", "number_tag", "parse_cpus", "did_you_mean", "CpuList", "EnvTable", "ArgList", "check_wheel", "plugin_settings"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RULE = ("1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, without "
             "'..' (names are data, never paths: each names a folder under results/)")
MAX_CPU = 8192  # Linux's CONFIG_NR_CPUS maximum


def _shown(value: Any) -> str:
    """``value`` as an error message quotes it: its ``repr`` (every control character written
    as its escape), a long one cut."""
    if not isinstance(value, str) or len(value) <= 80:
        return repr(value)
    return repr(value[:60]) + f"... ({len(value)} characters)"


def safe_name(value: str, what: str = "name") -> str:
    """Return ``value`` if it can be a folder name under ``results/``, else raise ValueError.
    The one rule for every name that becomes part of a path: arm, experiment, run id, label."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {_shown(value)} must be {NAME_RULE}")
    return value


def check_name(value: str, what: str = "name") -> str:
    """``safe_name`` for a flag or a file's field: a ConfigError (exit 2) naming the rule."""
    try:
        return safe_name(value, what)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def known_name(value: str, names: Iterable[str], what: str, among: str) -> str:
    """``value`` if it is one of ``names``, else a ConfigError (exit 2) in one line: "unknown
    ``what``", the value (escaped), the closest name, and ``among``: the names that exist.
    The one check for a name the user gives that must name something: an arm, a duet slot, a
    speculator profile, a baseline."""
    names = list(names)
    if isinstance(value, str) and value in names:
        return value
    shown = ", ".join(n if isinstance(n, str) and _NAME.fullmatch(n) else _shown(n)
                      for n in names[:50]) or "none"
    more = f" and {len(names) - 50} more" if len(names) > 50 else ""
    hint = did_you_mean(value, names) if isinstance(value, str) and len(value) <= 200 else ""
    raise ConfigError(f"unknown {what} {_shown(value)}{hint}; {among}: {shown}{more}")


# A link e2e writes into Markdown or HTML. A browser drops control characters and whitespace
# before it reads a URL's scheme ("java\tscript:") and reads a backslash as "/" ("/\\evil"
# is another host); a quote or "<" ">" ends an HTML attribute or a Markdown link target.
# None of them is part of a URL as written (RFC 3986: they are percent-encoded), so a link
# holding one is refused, not repaired.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_NOT_IN_LINK = re.compile(r"[\s\x00-\x1f\x7f-\x9f\"<>\\^`{|}\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
LINK_RULE = "a relative path or an http(s) URL"


def safe_link(value: str, what: str = "link", *, relative: bool = False) -> str:
    """Return ``value`` if e2e may write it as a link into Markdown or HTML, else raise
    ValueError: a relative path or an http(s) URL (never ``javascript:``, ``data:`` or another
    scheme), holding none of the characters a URL never holds as written. ``relative``: a
    path relative to a folder only (no scheme, no leading '/'), as a store's report path.
    The one rule for every link: the PR comment's ``--link``, the nightly's and the
    dashboard's ``--link-base``, the dashboard's links to reports. Where it is written, it is
    escaped for its context besides (``e2e.render.markup.md_text``'s module: a Markdown link target;
    the dashboard's templates: an HTML attribute)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} {_shown(value)}: give {LINK_RULE}")
    if _NOT_IN_LINK.search(value):
        raise ValueError(f"{what} {_shown(value)} holds a character no URL holds as written "
                         "(a space, a quote, '<', '>', '\\', '`', '{', '|', '}', '^' or a "
                         f"control character): percent-encode it; give {LINK_RULE}")
    scheme = _SCHEME.match(value)
    if relative and (scheme or value.startswith("/")):
        raise ValueError(f"{what} {_shown(value)}: give a path relative to the results folder")
    if scheme and scheme.group(1).lower() not in ("http", "https"):
        raise ValueError(f"{what} {_shown(value)} is a {scheme.group(1)[:20]}: URL; give "
                         f"{LINK_RULE}")
    return value


def check_link(value: str | None, what: str) -> str | None:
    """``safe_link`` for a flag: a ConfigError (exit 2) naming the rule; None or "" (a CI
    variable that is not set) is no link."""
    if value is None or value == "":
        return None
    try:
        return safe_link(value, what)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def number_tag(value: float) -> str:
    """A number as it appears in a run id or a cell name: ``:g`` (6 significant digits),
    but never in exponent notation, whose ``+`` no name may hold (``3.68e+06`` is
    ``3680000``, ``1e-06`` is ``0.000001``)."""
    text = f"{value:g}"
    if "e" not in text:
        return text
    from decimal import Decimal

    return format(Decimal(text), "f")


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_cpus(text: str) -> frozenset[int]:
    """A CPU list as Linux writes it (``cpuset(7)`` "list format"): ``"0"``, ``"0-1"``,
    ``"0,2"``, ``"0-3,6"``. Raises ConfigError for anything else (empty, negative, reversed
    ranges, stray characters)."""
    cores: set[int] = set()
    parts = [p.strip() for p in str(text).split(",")]
    if not text or not str(text).strip() or any(not p for p in parts):
        raise ConfigError(f"CPU set {text!r} is empty or has an empty item; write cores like "
                          "'0', '0-1' or '0,2'")
    for part in parts:
        match = _RANGE.match(part)
        if not match:
            raise ConfigError(f"CPU set {text!r}: {part!r} is not a core number or a range "
                              "'a-b'; write cores like '0', '0-1' or '0,2'")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ConfigError(f"CPU set {text!r}: range {part!r} runs backwards; write '{high}-{low}'")
        if high >= MAX_CPU:
            raise ConfigError(f"CPU set {text!r}: core {high} is beyond any host (cores are "
                              f"numbered below {MAX_CPU}); write cores like '0', '0-1' or '0,2'")
        cores.update(range(low, high + 1))
    return frozenset(cores)


def did_you_mean(word: str, known) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to a misspelt ``word`` (difflib),
    else ''."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _cpus(value: str) -> str:
    try:
        parse_cpus(value)
    except E2EError as exc:
        raise ValueError(str(exc)) from None
    return value


CpuList = Annotated[str, AfterValidator(_cpus)]
"""A CPU set as the config gives it ('0', '0-3', '0,2'), checked (None where allowed: unpinned)."""


def _env_name(name: str) -> str:
    if not name or "=" in name or "\x00" in name:
        raise ValueError(f"{name!r} is not an environment variable name (empty, or holds '=' "
                         "or a NUL byte)")
    return name


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL byte, which no command line or environment can carry")
    return value


# what a process's environment and argv can hold (os.execve refuses the rest at launch)
EnvTable = dict[Annotated[str, AfterValidator(_env_name)], Annotated[str, AfterValidator(_no_nul)]]
ArgList = list[Annotated[str, AfterValidator(_no_nul)]]


def check_wheel(value: str | None) -> str | None:
    """A wheel as the config gives it: a local path or an http(s) URL of a ``.whl`` file."""
    if value is None:
        return None
    if "\x00" in value or not value.strip():
        raise ValueError("give a path or an http(s) URL of a .whl file")
    name = value.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    if not name.endswith(".whl"):
        raise ValueError(f"{value!r} is not a wheel: give a path or an http(s) URL of a "
                         ".whl file (pip install <it> is what e2e runs)")
    scheme = value.split("://", 1)[0].lower() if "://" in value else None
    if scheme is not None and scheme not in ("http", "https", "file"):
        raise ValueError(f"{value!r}: a wheel URL is http(s):// or file://")
    return value


# Here, not in e2e.arm_settings: the plugin's files are part of the measurement (hashed, and
# loaded in every server), and they import the standard library alone (not pydantic, redact).
def plugin_settings(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` if e2e's vLLM plugin would accept it as an arm's settings, else ValueError
    saying why: checked here, not first by a server that starts only to refuse them."""
    try:
        PluginSettings.parse(json.dumps(value))
    except (TypeError, ValueError, RecursionError) as exc:  # SettingsError: a ValueError
        # shown through ``copied``: a secret-named key's value never echoed (``api_key=…``
        # refused on a command line must not print the key), nesting and size bounded
        raise ValueError(f"plugin settings {copied(value, depth=4, string=200)!r}: "
                         f"{scrub(str(exc))[:500]}") from None
    return value
