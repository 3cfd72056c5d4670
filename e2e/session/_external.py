"""An already-running server that e2e measures but did not start (``--base-url``,
``[server] external``): a ``Servers`` for the session that starts and stops nothing.

What can be learned from the server is recorded: ``/version``, ``/v1/models`` (the served
model name requests must use), and ``/metrics`` when it exists (the spec-decode counters and
the server's TPOT histogram). Exact input lengths need token-id prompts: a server that
rejects them is refused before anything is measured, never sent text instead. The API key
comes from the environment only (``$E2E_API_KEY``, else ``$OPENAI_API_KEY``) and is redacted
like any other. No server log exists, so the plugin check is recorded as skipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from e2e.arms import ServerLaunch
from e2e.session._launch import server_launch
from e2e.errors import ConfigError, ServerError
from e2e.session._servers import Servers

__all__ = ["ExternalServer", "external_servers", "api_key_from_env"]

_TIMEOUT = 30.0


def api_key_from_env() -> str | None:
    return os.environ.get("E2E_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


@dataclass
class ExternalServer:
    """A handle on a server e2e did not start (see ``e2e.session._session.ServerHandle``)."""

    base_url: str
    model: str
    api_key: str | None = None
    log_path: Path | None = None  # none: e2e cannot see an external server's log
    argv: list[str] = field(default_factory=list)  # e2e did not start it: no command line

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _get(self, path: str) -> httpx.Response:
        return httpx.get(self.base_url + path, headers=self.headers(), timeout=_TIMEOUT)

    def scrape_metrics(self) -> str:
        """``/metrics``, or "" when the server exports none (no spec counters then)."""
        try:
            response = self._get("/metrics")
        except httpx.HTTPError as exc:
            raise ServerError(f"could not read {self.base_url}/metrics: {exc}") from exc
        return response.text if response.status_code == 200 else ""

    def alive(self) -> bool:
        try:
            return self._get("/v1/models").status_code == 200
        except httpx.HTTPError:
            return False


def _describe(base_url: str, headers: dict[str, str]) -> tuple[str, dict]:
    """(served model name, facts) from /v1/models and /version; a clear error when the URL
    is not an OpenAI-compatible server."""
    try:
        models = httpx.get(base_url + "/v1/models", headers=headers, timeout=_TIMEOUT)
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the external server {base_url}: {exc}; is it "
                          "running, and is --base-url right (e.g. http://host:8000)?") from exc
    if models.status_code in (401, 403):
        raise ServerError(f"{base_url}/v1/models answered {models.status_code}: set the API "
                          "key in $E2E_API_KEY (or $OPENAI_API_KEY)")
    if models.status_code != 200:
        raise ServerError(f"{base_url}/v1/models answered {models.status_code}: not an "
                          "OpenAI-compatible server?")
    ids = [m.get("id") for m in models.json().get("data", []) if m.get("id")]
    if not ids:
        raise ServerError(f"{base_url}/v1/models lists no model")
    facts: dict = {"models": ids}
    with contextlib.suppress(httpx.HTTPError, ValueError):
        version = httpx.get(base_url + "/version", headers=headers, timeout=_TIMEOUT)
        if version.status_code == 200:
            facts["version"] = version.json().get("version")
    return ids[0], facts


def _check_token_ids(server: ExternalServer) -> None:
    """Refuse a server that does not take a prompt of token ids (exact input lengths need
    them); e2e never falls back to text."""
    body = {"model": server.model, "prompt": [1, 2, 3, 4], "max_tokens": 1, "temperature": 0.0}
    try:
        response = httpx.post(server.base_url + "/v1/completions", json=body,
                              headers=server.headers(), timeout=_TIMEOUT)
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach {server.base_url}/v1/completions: {exc}") from exc
    if response.status_code != 200:
        raise ConfigError(
            f"the external server {server.base_url} refused a prompt of token ids "
            f"(HTTP {response.status_code}: {response.text[:200]}); e2e sends token ids to "
            "get exact input lengths and will not send text instead: measure a server that "
            "accepts them (vLLM and SGLang do)")
    usage = response.json().get("usage") or {}
    if usage.get("prompt_tokens") != 4:
        raise ConfigError(
            f"the external server {server.base_url} counted {usage.get('prompt_tokens')} "
            "prompt tokens for a prompt of 4 token ids: it does not take token ids as they are")


def external_servers(url: str) -> Servers:
    """``Servers`` for the session that measure the server at ``url``."""
    base_url = url.rstrip("/")
    key = api_key_from_env()
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    def launch(experiment, arm, *, dspark, progress=lambda message: None, **kwargs):
        local = server_launch(experiment, arm, dspark=dspark, python=Path(sys.executable),
                              dry=False)  # the model's tokenizer draws the prompts
        served, facts = _describe(base_url, headers)
        _check_token_ids(ExternalServer(base_url=base_url, model=served, api_key=key))
        return ServerLaunch(arm=arm, python=Path(sys.executable), args=(), env={},
                            host=base_url, model=served, model_hash=local.model_hash,
                            api_key=key, build={"kind": "external", "url": base_url, **facts},
                            kind=local.kind, tokenizer=local.model)

    @contextlib.contextmanager
    def serve(launch: ServerLaunch, log_path: Path, options) -> Iterator[ExternalServer]:
        Path(log_path).write_text(f"external server {base_url}: e2e neither started nor "
                                  "stopped it and cannot see its log\n")
        yield ExternalServer(base_url=base_url, model=launch.model, api_key=key)

    return Servers(launch=launch, serve=serve)
