"""Reads a server's log for the lines e2e's vLLM plugin writes (see ``e2e.plugin``) and says
whether the arm's settings were applied *in a worker process*, where they take effect."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e.results import PluginInfo

__all__ = ["plugin_check", "check_plugin", "applied_settings"]

_PREFIX = "e2e-plugin:"
_APPLIED = "e2e-plugin: applied in worker"
_SETTINGS = " | settings="


def applied_settings(text: str) -> list[dict]:
    """The settings of every ``applied in worker`` line of a log, in order."""
    found = []
    for line in text.splitlines():
        if _APPLIED not in line or _SETTINGS not in line:
            continue
        raw = line.rsplit(_SETTINGS, 1)[1].strip()
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _applied_line(text: str, wanted: dict) -> str | None:
    for line in text.splitlines():
        if _APPLIED in line and _SETTINGS in line:
            try:
                if json.loads(line.rsplit(_SETTINGS, 1)[1].strip()) == wanted:
                    return line
            except ValueError:
                continue
    return None


def check_plugin(log_path: Path, settings: dict) -> PluginInfo:
    """``plugin_check`` as a record: ``check`` is ``passed``, ``no settings`` or ``failed``
    (``detail`` then says why); on success ``mode`` (``inject``, ``rocm``) and ``where`` (the
    process and class that applied the settings) come from the worker's applied line."""
    problem = plugin_check(log_path, settings)
    if problem:
        return PluginInfo(check="failed", settings=settings, detail=problem)
    if not settings:
        return PluginInfo(check="no settings")
    text = Path(log_path).read_text(errors="replace")
    line = _applied_line(text, json.loads(json.dumps(settings))) or ""
    mode = re.search(r" mode=(\S+)", line)
    where = re.search(r"applied in worker \(([^)]*)\)", line)
    return PluginInfo(check="passed", settings=settings, mode=mode.group(1) if mode else None,
                      where=where.group(1) if where else None)


def plugin_check(log_path: Path, settings: dict) -> str | None:
    """None when the arm has no plugin settings, or when a worker process logged that it
    applied exactly these settings; otherwise the reason the run must not be measured."""
    if not settings:
        return None
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError as exc:
        return f"cannot read the server log {log_path}: {exc}"
    wanted = json.loads(json.dumps(settings))
    applied = applied_settings(text)
    if wanted in applied:
        return None
    if applied:
        return (f"the worker applied plugin settings {applied[-1]}, not this arm's {wanted}")
    lines = [line.split(_PREFIX, 1)[1].strip() for line in text.splitlines() if _PREFIX in line]
    refused = [line for line in lines if line.startswith("not applied")]
    if refused:
        return f"e2e's vLLM plugin {refused[-1]}"
    if lines:
        return ("e2e's vLLM plugin ran but no worker process applied the settings "
                "(is the model served by the code the plugin patches?); it logged: "
                + " / ".join(lines[-3:]))
    return ("e2e's vLLM plugin logged nothing: is e2e installed in the server environment "
            "(the vllm.general_plugins entry point)?")
