"""Arms: one server build plus its settings, turned into the exact command and environment
that start its server (``ServerLaunch``; resolved by ``e2e.session``, which builds the
environment and the model). Arguments are lists and never pass through a shell.
Also a speculator profile's rules (a ``[speculators.<name>]`` table: vLLM's speculative_config
plus e2e's ``pinned`` key): which profile runs without ``--spec`` (``default_profile``) and the
acceptance length a profile may pin (``check_pin``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.errors import ConfigError
from e2e.kinds import VLLM, ServerKind

__all__ = ["ServerLaunch", "PLUGIN_ENV", "ARM_ENV", "PIN_ENV", "environment_for", "PIN_KEY",
           "PIN_BASELINE", "check_pin", "default_profile"]

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
    # the driver's plugin on the server's PYTHONPATH (e2e.session.plugin_copy.PluginTree)
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


PIN_KEY = "pinned"
"""e2e's key in a speculator profile: hold acceptance at this length (docs/explanation/
statistics.md, "Acceptance held fixed")."""
PIN_BASELINE = "baseline"


def check_pin(value: Any, profile: dict[str, Any], where: str) -> None:
    """A pinned acceptance length is a number in [1, num_speculative_tokens + 1] (vLLM's own
    range for ``synthetic_acceptance_length``) or "baseline"; and the profile must not set
    vLLM's synthetic keys itself. Raises ConfigError. The profile's numbers are finite
    (``e2e.config`` checks them first, by the one number rule)."""
    clash = [k for k in ("rejection_sample_method", "synthetic_acceptance_length",
                         "synthetic_acceptance_rates") if k in profile]
    if clash:
        raise ConfigError(f"{where}: the profile also sets {', '.join(clash)}; give either "
                          f"{PIN_KEY} (e2e sets vLLM's synthetic sampling from it) or vLLM's keys")
    if value == PIN_BASELINE:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} = {value!r}: give an acceptance length (a number such as "
                          f"3.2) or \"{PIN_BASELINE}\" (the baseline arm's measured one)")
    k = profile.get("num_speculative_tokens")
    top = float(k) + 1.0 if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
    if not (1.0 <= value and (top is None or value <= top)):
        span = f"[1, {top:g}] (num_speculative_tokens + 1)" if top else "at least 1"
        raise ConfigError(f"{where} = {value!r}: an acceptance length is {span}")


def default_profile(speculators: dict[str, Any]) -> str | None:
    """The profile a speculator spec mode runs without ``--spec``: ``dspark`` where there is
    one (the reference experiment's name, and every config before ``--spec``), else the first
    table; None without any."""
    if "dspark" in speculators:
        return "dspark"
    return next(iter(speculators), None)
