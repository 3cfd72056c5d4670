"""An already-running server that e2e measures but did not start (``--base-url``,
``[server] external``): a ``Servers`` for the session that starts and stops nothing.

What can be learned from the server is recorded: ``/version``, ``/v1/models`` (the served
model name requests must use), and ``/metrics`` when it exists (the spec-decode counters and
the server's TPOT histogram). Exact input lengths need token-id prompts: a server that
rejects them is refused before anything is measured, never sent text instead. The API key
comes from the environment only (``$E2E_API_KEY``, else ``$OPENAI_API_KEY``) and is redacted
like any other. No server log exists, so the plugin check is recorded as skipped. A server on
this host (a loopback address) is known by the processes that hold its listening socket
(``local_pids``): they and their children are the server under test, never "other processes"
in the run's interference figures.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import base64
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from e2e.arms import ServerLaunch
from e2e.session.launch import server_launch
from e2e.errors import ConfigError, ServerError
from e2e.redact import mask_url, remember, scrub
from e2e.session.http import METRICS_LIMIT, PROBE_LIMIT, Answer, fetch
from e2e.session._servers import Servers

__all__ = ["ExternalServer", "external_servers", "api_key_from_env", "parse_base_url",
           "describe_server"]

_TIMEOUT = 30.0     # each probe's whole answer (connect, headers, body): e2e.session.http
_MAX_BODY = PROBE_LIMIT  # an answer to /v1/models or /version larger than this is not one


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: Annotated[str, Field(min_length=1, max_length=1024)]


class _Models(BaseModel):
    """``/v1/models`` as e2e reads it: ``{"data": [{"id": ...}, ...]}``."""

    model_config = ConfigDict(extra="allow")
    data: Annotated[list[_Model], Field(max_length=10_000)]


class _Version(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: Annotated[str, Field(max_length=256)] | None = None


def parse_base_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the server's base URL, (user, password) or None) from ``--base-url``: http or https,
    a host, no query or fragment; a trailing ``/`` or ``/v1`` dropped (e2e adds ``/v1/...``
    itself); credentials taken out of the URL (sent as HTTP basic auth, never stored). Bad
    input is a ConfigError (exit 2)."""
    text = str(url).strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"--base-url {mask_url(text)!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--base-url {mask_url(text)!r} must be an http:// or https:// URL "
                          "with a host, e.g. http://host:8000")
    if parts.query or parts.fragment:
        raise ConfigError(f"--base-url {mask_url(text)!r} has a ?query or #fragment; give the "
                          "server's address only, e.g. http://host:8000")
    if any(c.isspace() or ord(c) < 32 for c in text):
        raise ConfigError(f"--base-url {mask_url(text)!r} holds whitespace or control characters")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{port}" if port is not None else "")
    credentials = None
    if parts.username is not None or parts.password is not None:
        from urllib.parse import unquote

        credentials = (unquote(parts.username or ""), unquote(parts.password or ""))
        remember(parts.password, credentials[1], parts.username and
                 f"{parts.username}:{parts.password}")
    return urlunsplit((parts.scheme, netloc, path, "", "")), credentials


def api_key_from_env() -> str | None:
    return os.environ.get("E2E_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


@dataclass
class ExternalServer:
    """A handle on a server e2e did not start (see ``e2e.session.session.ServerHandle``)."""

    base_url: str
    model: str
    api_key: str | None = None
    log_path: Path | None = None  # none: e2e cannot see an external server's log
    argv: list[str] = field(default_factory=list)  # e2e did not start it: no command line
    credentials: tuple[str, str] | None = None  # from the URL's user:password@, sent as auth

    def headers(self) -> dict[str, str]:
        return _auth_headers(self.api_key, self.credentials)

    def _get(self, path: str, limit: int = _MAX_BODY) -> Answer:
        return fetch(self.base_url + path, headers=self.headers(), timeout=_TIMEOUT,
                     limit=limit)

    def scrape_metrics(self) -> str:
        """``/metrics``, or "" when the server exports none (no spec counters then)."""
        try:
            response = self._get("/metrics", limit=METRICS_LIMIT)
        except httpx.HTTPError as exc:
            raise ServerError(f"could not read {self.base_url}/metrics: {exc}") from exc
        return response.text if response.status_code == 200 else ""

    def alive(self) -> bool:
        try:
            return self._get("/v1/models").status_code == 200
        except httpx.HTTPError:
            return False

    def local_pids(self) -> list[int]:
        """The processes that serve ``base_url`` when it is on this host (a loopback address
        or localhost): those holding its listening socket (``e2e.host.port_holders``; ones
        this user may see). [] for another host."""
        import ipaddress

        parts = urlsplit(self.base_url)
        host = (parts.hostname or "").lower()
        try:
            local = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
        if not local:
            return []
        from e2e.host import port_holders

        return port_holders(parts.port or (443 if parts.scheme == "https" else 80))


def _auth_headers(key: str | None, credentials: tuple[str, str] | None) -> dict[str, str]:
    if key:
        return {"Authorization": f"Bearer {key}"}
    if credentials:
        token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        remember(token)
        return {"Authorization": f"Basic {token}"}
    return {}


def _json(response: Answer, what: str):
    if len(response.content) > _MAX_BODY:
        raise ServerError(f"{what} answered {len(response.content)} bytes: not an "
                          "OpenAI-compatible answer")
    try:
        return response.json()
    except (ValueError, RecursionError):
        raise ServerError(f"{what} answered something that is not JSON "
                          f"({scrub(response.text[:80])!r}...): not an OpenAI-compatible "
                          "server?") from None


def describe_server(base_url: str, headers: dict[str, str]) -> tuple[str, dict]:
    """(served model name, facts) from /v1/models and /version; a clear error when the URL
    is not an OpenAI-compatible server (each answer checked: ``_Models``, ``_Version``)."""
    try:
        models = fetch(base_url + "/v1/models", headers=headers, timeout=_TIMEOUT,
                       limit=_MAX_BODY)
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the external server {base_url}: {exc}; is it "
                          "running, and is --base-url right (e.g. http://host:8000)?") from exc
    if models.status_code in (401, 403):
        raise ServerError(f"{base_url}/v1/models answered {models.status_code}: set the API "
                          "key in $E2E_API_KEY (or $OPENAI_API_KEY)")
    if models.status_code != 200:
        raise ServerError(f"{base_url}/v1/models answered {models.status_code}: not an "
                          "OpenAI-compatible server?")
    try:
        listed = _Models.model_validate(_json(models, f"{base_url}/v1/models"))
    except ValidationError:
        raise ServerError(f"{base_url}/v1/models did not answer an OpenAI model list "
                          '({"data": [{"id": ...}]}): not an OpenAI-compatible server?') from None
    ids = [m.id for m in listed.data]
    if not ids:
        raise ServerError(f"{base_url}/v1/models lists no model")
    facts: dict = {"models": ids}
    with contextlib.suppress(httpx.HTTPError, ValueError, ServerError):
        version = fetch(base_url + "/version", headers=headers, timeout=_TIMEOUT,
                        limit=_MAX_BODY)
        if version.status_code == 200:
            facts["version"] = _Version.model_validate(
                _json(version, f"{base_url}/version")).version  # ValidationError: a ValueError
    return ids[0], facts


def _check_token_ids(server: ExternalServer) -> None:
    """Refuse a server that does not take a prompt of token ids (exact input lengths need
    them); e2e never falls back to text."""
    body = {"model": server.model, "prompt": [1, 2, 3, 4], "max_tokens": 1, "temperature": 0.0}
    try:
        response = fetch(server.base_url + "/v1/completions", method="POST", json=body,
                         headers=server.headers(), timeout=_TIMEOUT, limit=_MAX_BODY)
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach {server.base_url}/v1/completions: {exc}") from exc
    if response.status_code in (401, 403):
        raise ServerError(f"{server.base_url}/v1/completions answered {response.status_code}: "
                          "set the API key in $E2E_API_KEY (or $OPENAI_API_KEY)")
    if response.status_code != 200:
        raise ConfigError(
            f"the external server {server.base_url} refused a prompt of token ids "
            f"(HTTP {response.status_code}: {response.text[:200]}); e2e sends token ids to "
            "get exact input lengths and will not send text instead: measure a server that "
            "accepts them (vLLM and SGLang do)")
    answer = _json(response, f"{server.base_url}/v1/completions")
    usage = (answer.get("usage") if isinstance(answer, dict) else None) or {}
    if not isinstance(usage, dict) or usage.get("prompt_tokens") != 4:
        raise ConfigError(
            f"the external server {server.base_url} counted {usage.get('prompt_tokens')} "
            "prompt tokens for a prompt of 4 token ids: it does not take token ids as they are")


def external_servers(url: str) -> Servers:
    """``Servers`` for the session that measure the server at ``url``."""
    base_url, credentials = parse_base_url(url)
    key = api_key_from_env()
    remember(key)
    headers = _auth_headers(key, credentials)
    shown = mask_url(url) if credentials else base_url  # what records and messages say

    def launch(experiment, arm, *, dspark, progress=lambda message: None, **kwargs):
        local = server_launch(experiment, arm, dspark=dspark, python=Path(sys.executable),
                              dry=False)  # the model's tokenizer draws the prompts
        served, facts = describe_server(base_url, headers)
        _check_token_ids(ExternalServer(base_url=base_url, model=served, api_key=key,
                                        credentials=credentials))
        return ServerLaunch(arm=arm, python=Path(sys.executable), args=(), env={},
                            host=base_url, model=served, model_hash=local.model_hash,
                            api_key=key, build={"kind": "external", "url": shown, **facts},
                            kind=local.kind, tokenizer=local.model)

    @contextlib.contextmanager
    def serve(launch: ServerLaunch, log_path: Path, options) -> Iterator[ExternalServer]:
        Path(log_path).write_text(f"external server {shown}: e2e neither started nor "
                                  "stopped it and cannot see its log\n")
        yield ExternalServer(base_url=base_url, model=launch.model, api_key=key,
                             credentials=credentials)

    return Servers(launch=launch, serve=serve)
