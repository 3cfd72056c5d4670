"""The strings a config gives, checked as the schema reads them: the field types and
validators that ``e2e.config``'s models use for CPU sets, environment tables and argument
lists, wheels and an arm's plugin settings. Each raises ValueError, which pydantic reports
key by key (``e2e.console.validated``).

    CpuList                  '0', '0-3', '0,2' (``e2e.names.parse_cpus``)
    EnvTable, ArgList        what a process's environment and argv can hold
    check_wheel(value)       a path or an http(s) URL of a ``.whl`` (installed in
                             ``e2e.session``'s builds)
    plugin_settings(value)   settings e2e's vLLM plugin accepts (``e2e.plugin.settings``)
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator

from e2e.errors import E2EError
from e2e.names import parse_cpus
from e2e.plugin.settings import PluginSettings
from e2e.redact import copied, scrub

__all__ = ["CpuList", "EnvTable", "ArgList", "check_wheel", "plugin_settings"]


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


# Here, not in e2e.plugin: the plugin's files are part of the measurement (hashed, and loaded
# in every server), and it imports nothing of e2e outside itself and e2e.kernels.
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
