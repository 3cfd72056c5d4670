"""One redaction for everything e2e records or prints: no secret reaches a file or a terminal.

    Redactor(pattern, secrets)    the rule: names that match ``pattern`` hide their values,
                                  and every literal secret is scrubbed from any text
      .env(env) / .argv(argv)     an environment / a command line with secrets hidden
      .url(url)                   a URL with its credentials masked (user:pw@ -> ***@)
      .text(text)                 any text (an error body, a reason) scrubbed
      .config(data)               a config snapshot: env tables, args lists and any key
                                  that matches, recursively
    remember(*secrets)            secrets this process has seen (the API key, the values of
                                  secret variables and flags, URL passwords): ``scrub`` and
                                  every record's reasons, warnings and request errors drop them
    scrub(text)                   ``text`` with every remembered secret, any URL credential,
                                  any ``Bearer`` token and the value of every secret-named
                                  pair (``password=``, ``api_key=``, ``--api-key X``,
                                  ``"token": "…"``) masked
    copied(data)                  JSON-like data from another tool's file, as it may enter a
                                  record: secret-named keys' values hidden, every string
                                  scrubbed and cut, nesting and item counts bounded

The default pattern (``DEFAULT_SECRET_PATTERN``) matches ``*_TOKEN``, ``*_KEY``, ``*SECRET*``,
``*PASS*`` (``DB_PASS``, ``GPG_PASSPHRASE``, ``*PASSWORD*``), ``*PWD*`` (``MYSQL_PWD``),
``*JWT*`` (``CI_JOB_JWT``), ``*COOKIE*``, ``*SESSION*``, ``*AUTH*``, ``*CREDENTIAL*``,
``*PRIVATE*`` and ``*DSN*`` names, case-insensitively. The config's ``server.secret_pattern``
adds to it, never replaces it (a team's pattern for its own names must not unmask the
common ones). Whatever its name, a value holding a URL with credentials
(``DATABASE_URL=postgres://u:pw@db``) or a ``password=`` pair (a connection string,
``host=db password=pw``) has them masked.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "DEFAULT_SECRET_PATTERN", "Redactor", "remember", "scrub", "known",
           "mask_url", "mask_pairs", "url_credentials", "copied"]

REDACTED = "***"
DEFAULT_SECRET_PATTERN = (r"(?i)(token|key|secret|pass|pwd|jwt|auth|credential|cookie|session"
                          r"|private|dsn)")

# scheme://user:password@host or scheme://token@host: the userinfo part of any URL in a text
_URL_CREDS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@'\"]+)@")
# Authorization schemes: "Bearer X", "Basic X", and GitHub's "token X" where X looks like a
# credential (8+ characters with a digit: "token latency" is prose)
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{4,}"
                     r"|\b(token)(\s+)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}")
# password=... inside a connection string or a query: libpq's keywords, ODBC's and JDBC's
_PAIR = re.compile(r"(?i)(?<![a-z])(password|passwd|passphrase|sslpassword|pwd|pass)"
                   r"(\s*=\s*|(?<=d)\s*:\s*|(?<=e)\s*:\s*)"
                   r"('[^']*'|\"[^\"]*\"|[^\s;&,'\"]+)")
# api_key=..., "token": "...", Authorization: ..., x-api-key: ... (a key's name, an optional
# closing quote, = or :, the value); the name must stand alone ("max_tokens=16" is no token)
_KEY_PAIR = re.compile(
    r"(?i)(?<![\w-])((?:x-)?(?:[a-z0-9]+[_-])*(?:api[_-]?key|apikey|token|secret|private[_-]?key)"
    r"|authorization)"
    # = always; : after a quoted key ("token": ...) or a compound name (api_key:, hf_token:),
    # not after a bare word in prose ("first token: 12 ms")
    r"([\"']\s*[=:]\s*|\s*=\s*|(?<!\btoken)(?<!\bsecret)\s*:\s*)"
    r"('[^']*'|\"[^\"]*\"|[^\s;&,'\"]+)")
# a command line in a text: --api-key VALUE, --hf-token 'VALUE', -token=VALUE
_FLAG = re.compile(r"(?i)(--?[\w-]*?(?:api[_-]?key|token|secret|password|passwd))"
                   r"(\s+|=)('[^']*'|\"[^\"]*\"|[^\s'\"]+)")
_MIN_SECRET = 4  # shorter values would scrub ordinary text ("1", "on")

_lock = threading.Lock()
_known: set[str] = set()


def remember(*secrets: str | None) -> None:
    """Add secrets this process must never write or print (empty and very short ones are
    ignored: they would mask ordinary text)."""
    with _lock:
        _known.update(s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET)


def known() -> frozenset[str]:
    with _lock:
        return frozenset(_known)


def _mask_userinfo(match: re.Match[str]) -> str:
    return f"{match.group('scheme')}{REDACTED}@"


def scrub(text: Any, extra: Iterable[str] = ()) -> Any:
    """``text`` with every remembered secret (and ``extra``), URL credentials and bearer
    tokens masked. Not a string: returned as it is."""
    if not isinstance(text, str) or not text:
        return text
    secrets = sorted({*known(), *(s for s in extra if s and len(s) >= _MIN_SECRET)},
                     key=len, reverse=True)  # a secret inside another: the longer first
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "@" in text:
        text = _URL_CREDS.sub(_mask_userinfo, text)
    text = _BEARER.sub(lambda m: f"{m.group(1) or m.group(3)}{m.group(2) or m.group(4)}"
                       f"{REDACTED}", text)
    return mask_pairs(text)


def _masked(m: re.Match[str]) -> str:
    value = m.group(3)
    if value.strip("'\"") == REDACTED or value.lower() in ("bearer", "basic", "digest", "token"):
        return m.group(0)  # masked already, or a scheme whose credential _BEARER masked
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
    return f"{m.group(1)}{m.group(2)}{quote}{REDACTED}{quote}"


def mask_pairs(text: str) -> str:
    """``text`` with the value of every secret-named pair masked: ``password=`` (``pwd=``,
    ``passphrase:``, ...) in a connection string or a URL query, ``api_key=``, ``token:``,
    ``"api_key": "…"``, ``Authorization: …``, and a command line's ``--api-key VALUE``."""
    if "=" not in text and ":" not in text and "-" not in text:
        return text
    text = _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _KEY_PAIR.sub(_masked, text)
    return _FLAG.sub(_masked, text) if "-" in text else text


# keys whose value another tool's file may hold a secret in (as JSON keys, not env names:
# ``max_tokens`` and ``tokenizer`` are settings)
_SECRET_KEY = re.compile(r"(?i)^(x[_-])?(api[_-]?key|apikey|token|access[_-]?token|auth[_-]?token"
                         r"|refresh[_-]?token|bearer[_-]?token|id[_-]?token|secret|client[_-]?secret"
                         r"|secret[_-]?key|private[_-]?key|password|passwd|passphrase|pwd"
                         r"|authorization|cookie|credentials?|headers?[_-]?auth)$")
MAX_COPIED_DEPTH = 16
MAX_COPIED_STRING = 4096
MAX_COPIED_ITEMS = 1000


def copied(data: Any, *, depth: int = MAX_COPIED_DEPTH, string: int = MAX_COPIED_STRING,
           items: int = MAX_COPIED_ITEMS) -> Any:
    """JSON-like ``data`` read from another tool's file, fit to enter a record: the value of
    every secret-named key hidden, every string scrubbed (``scrub``) and cut to ``string``
    characters (saying how long it was), at most ``items`` entries per list or object and
    ``depth`` levels (deeper is replaced by a note). A 900-deep field or a 50 MB string from a
    hostile file is neither copied whole nor able to exhaust the stack."""
    def text(value: str) -> str:
        if len(value) > string:
            return scrub(value[:string]) + f"… ({len(value):,} characters, cut)"
        return scrub(value)

    def walk(value: Any, level: int) -> Any:
        if isinstance(value, str):
            return text(value)
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if level >= depth:
            return f"… (nested deeper than {depth} levels, not copied)"
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for i, (key, inner) in enumerate(value.items()):
                if i >= items:
                    out["…"] = f"{len(value) - items:,} more keys not copied"
                    break
                name = text(str(key))
                out[name] = (REDACTED if inner not in (None, "", [], {}) and
                             _SECRET_KEY.match(str(key)) else walk(inner, level + 1))
            return out
        if isinstance(value, (list, tuple)):
            shown = [walk(inner, level + 1) for inner in list(value[:items])]
            if len(value) > items:
                shown.append(f"… {len(value) - items:,} more items not copied")
            return shown
        return text(repr(value))

    return walk(data, 0)


def url_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without its userinfo, user, password); user/password None when absent."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return (urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
            parts.username, parts.password)


def mask_url(url: str) -> str:
    """``url`` with any credentials shown as ``***@``."""
    return _URL_CREDS.sub(_mask_userinfo, url) if isinstance(url, str) and "@" in url else url


class Redactor:
    """The redaction rule of one experiment: ``pattern`` (names whose values are hidden) and
    literal ``secrets`` (an API key) scrubbed from any text."""

    def __init__(self, pattern: str = DEFAULT_SECRET_PATTERN, secrets: Iterable[str | None] = ()):
        # a pattern of one's own adds to the default: each is compiled alone (flags such as
        # (?i) must open a pattern), and a name matching either is hidden
        self.regexes = tuple(re.compile(p) for p in dict.fromkeys(
            [DEFAULT_SECRET_PATTERN, pattern]) if p)
        self.secrets = tuple(s for s in secrets if s)

    def _hidden(self, name: str) -> bool:
        return any(regex.search(name) for regex in self.regexes)

    def text(self, text: Any) -> Any:
        return scrub(text, self.secrets)

    def url(self, url: str) -> str:
        return mask_url(url)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Values of matching names hidden, every other value scrubbed (a URL's password)."""
        return {k: (REDACTED if self._hidden(k) else self.text(v)) for k, v in env.items()}

    def argv(self, argv: Iterable[str]) -> list[str]:
        """The value after any ``--flag`` whose name matches (``--flag=value`` too) hidden,
        and every other item scrubbed."""
        out: list[str] = []
        hide_next = False
        for item in argv:
            item = str(item)
            if hide_next:
                out.append(REDACTED)
                hide_next = False
                continue
            if item.startswith("-") and self._hidden(item.split("=", 1)[0]):
                if "=" in item:
                    out.append(item.split("=", 1)[0] + "=" + REDACTED)
                else:
                    out.append(item)
                    hide_next = True
                continue
            out.append(self.text(item))
        return out

    def secrets_in(self, env: Mapping[str, str] = {}, argv: Iterable[str] = ()) -> list[str]:
        """The literal secret values an environment and a command line hold (to remember)."""
        found = [v for k, v in env.items() if self._hidden(k)]
        items = list(argv)
        for i, item in enumerate(items):
            name, eq, value = str(item).partition("=")
            if str(item).startswith("-") and self._hidden(name):
                if eq:
                    found.append(value)
                elif i + 1 < len(items):
                    found.append(str(items[i + 1]))
        for value in [*env.values(), *items]:
            _, _, password = url_credentials(str(value)) if "@" in str(value) else ("", None, None)
            if password:
                found.append(password)
        return [s for s in found if s]

    def config(self, data: Any, key: str = "") -> Any:
        """A JSON-like config snapshot with secrets hidden, at any depth: every ``env`` table
        as an environment, every list of strings as a command line (``args``), ``api_key``
        hidden, any other string scrubbed. (Other keys are settings, not variable names:
        ``tokenizer`` is not a token.)"""
        if isinstance(data, dict):
            if key == "env" and all(isinstance(v, str) for v in data.values()):
                return self.env({str(k): v for k, v in data.items()})
            return {k: (REDACTED if k == "api_key" and v else self.config(v, str(k)))
                    for k, v in data.items()}
        if isinstance(data, list):
            if data and all(isinstance(x, str) for x in data):
                return self.argv(data)
            return [self.config(x, key) for x in data]
        return self.text(data) if isinstance(data, str) else data
