"""Arms: one server build plus its settings, turned into the exact command and environment
that start its server (``ServerLaunch``; resolved by ``e2e.session``, which builds the
environment and the model). Arguments are lists and never pass through a shell."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from e2e.kinds import VLLM, ServerKind

__all__ = ["ServerLaunch", "PLUGIN_ENV", "ARM_ENV", "PIN_ENV", "environment_for"]

PLUGIN_ENV = "E2E_PLUGIN_SETTINGS"
ARM_ENV = "E2E_ARM"
PIN_ENV = "E2E_PINNED_ACCEPTANCE"  # the pinned acceptance length (e2e.plugin.synthetic)


@dataclass(frozen=True)
class ServerLaunch:
    """What starts one arm's server, except the port (chosen when it starts)."""

    arm: str
    python: Path
    args: tuple[str, ...]  # after ``python -m <module>``, without --host/--port
    env: dict[str, str] = field(default_factory=dict)  # added to the parent's environment
    host: str = "127.0.0.1"
    model: str = ""
    model_hash: str | None = None
    api_key: str | None = None
    build: dict = field(default_factory=dict)  # what the build was made from (provenance)
    # the driver's plugin on the server's PYTHONPATH (e2e.session._plugin_tree.PluginTree)
    plugin: dict = field(default_factory=dict)

    kind: ServerKind = VLLM
    tokenizer: str | None = None  # where prompts' token ids come from (default: model)

    @property
    def external(self) -> bool:
        """An already-running server e2e did not start (``--base-url``)."""
        return self.build.get("kind") == "external"

    def argv(self, port: int) -> list[str]:
        return [str(self.python), *self.kind.entry, *self.args, "--host", self.host,
                "--port", str(port)]


def environment_for(launch: ServerLaunch) -> dict[str, str]:
    """The full environment the server process gets."""
    env = dict(os.environ)
    env.update(launch.env)
    return env
