"""Where a unit's server comes from: the handle a workload uses, and the pair of functions
that resolve an arm's launch and serve it (fresh servers by default; ``e2e.session.external`` for a
server e2e did not start; tests put a scripted server here to force faults)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from e2e.arms import ServerLaunch
from e2e.session.launch import server_launch
from e2e.session.server import ServerOptions, serve

__all__ = ["ServerHandle", "Servers"]


class ServerHandle(Protocol):
    """What a workload may use of a running server."""

    base_url: str
    model: str
    argv: list[str]
    log_path: Path

    def headers(self) -> dict[str, str]: ...

    def scrape_metrics(self) -> str: ...

    def alive(self) -> bool: ...


@dataclass(frozen=True)
class Servers:
    """Where a unit's server comes from: ``launch`` resolves an arm into its launch (building
    a managed environment when needed), ``serve`` starts it and stops it on exit. The real
    ones by default; tests put a scripted server here to force faults."""

    launch: Callable[..., ServerLaunch] = server_launch
    serve: Callable[[ServerLaunch, Path, ServerOptions],
                    AbstractContextManager[ServerHandle]] = serve
