"""Reads a server's log for the lines e2e's vLLM plugin writes (see ``e2e.plugin``) and says
whether the arm's settings were applied *in a worker process*, where they take effect, and
whether the plugin that applied them is the driver's own (its ``plugin_sha256``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e.results.records import PluginInfo

__all__ = ["plugin_check", "check_plugin", "applied_settings", "applied_fields"]

_PREFIX = "e2e-plugin:"
_APPLIED = "e2e-plugin: applied in worker"
_SETTINGS = " | settings="
_FIELD = " | "


def applied_fields(line: str) -> dict | None:
    """An applied line's parts: ``settings`` (the JSON after `` | settings=`` up to the next
    `` | ``), and when the plugin said them, ``plugin_sha256`` and ``source`` (the folder it
    was imported from, to the end of its field); None when the line is not one."""
    if _APPLIED not in line or _SETTINGS not in line:
        return None
    raw, *rest = line.rsplit(_SETTINGS, 1)[1].split(_FIELD)
    try:
        settings = json.loads(raw.strip())
    except ValueError:
        return None
    if not isinstance(settings, dict):
        return None
    out: dict = {"settings": settings, "plugin_sha256": None, "source": None}
    for part in rest:
        if part.startswith("plugin_sha256="):
            sha, _, source = part.partition(" source=")
            out["plugin_sha256"] = sha.split("=", 1)[1].strip() or None
            out["source"] = source.strip() or None
    return out


def applied_settings(text: str) -> list[dict]:
    """The settings of every ``applied in worker`` line of a log, in order."""
    return [f["settings"] for f in map(applied_fields, text.splitlines()) if f]


def _applied_line(text: str, wanted: dict) -> str | None:
    for line in text.splitlines():
        fields = applied_fields(line)
        if fields and fields["settings"] == wanted:
            return line
    return None


def _provenance_problem(line: str, expected: str, expected_from: str | None) -> str | None:
    fields = applied_fields(line) or {}
    got, source = fields.get("plugin_sha256"), fields.get("source")
    ours = f"this e2e's (plugin_sha256 {expected[:12]}" + (
        f", copied from {expected_from})" if expected_from else ")")
    if got is None:
        return ("the server's plugin does not say what it is made of (no plugin_sha256 on its "
                "applied line): it is an older e2e, imported ahead of " + ours + " that e2e "
                "put first on the server's PYTHONPATH; uninstall e2e from the server's "
                "environment (<server python> -m pip uninstall e2e) or install this e2e there")
    if got != expected:
        return (f"the server ran e2e's plugin from {source or 'an unknown folder'} "
                f"(plugin_sha256 {got[:12]}), not {ours}: something in the server's "
                "environment imports another e2e ahead of the PYTHONPATH e2e gives it (a .pth "
                "or sitecustomize that prepends to sys.path, an interpreter run with -E or -I, "
                "a wrapper script that resets PYTHONPATH, or a Python older than 3.11 started "
                "in a folder holding another e2e); remove it, or uninstall e2e from "
                "that environment, and rerun")
    return None


def check_plugin(log_path: Path, settings: dict, expected: str | None = None,
                 expected_from: str | None = None) -> PluginInfo:
    """``plugin_check`` as a record: ``check`` is ``passed``, ``no settings`` or ``failed``
    (``detail`` then says why); on success ``mode`` (``inject``, ``rocm``) and ``where`` (the
    process and class that applied the settings), ``plugin_sha256`` and ``source`` (what the
    server's plugin is made of, where it was imported from) come from the worker's applied
    line, ``expected_sha256`` is the driver's."""
    problem = plugin_check(log_path, settings, expected, expected_from)
    fields: dict = {}
    line = ""
    if settings:
        try:
            text = Path(log_path).read_text(errors="replace")
        except OSError:
            text = ""
        line = _applied_line(text, json.loads(json.dumps(settings))) or ""
        fields = applied_fields(line) or {}
    found = dict(plugin_sha256=fields.get("plugin_sha256"), source=fields.get("source"),
                 expected_sha256=expected, copied_from=expected_from)
    if problem:
        return PluginInfo(check="failed", settings=settings, detail=problem, **found)
    if not settings:
        return PluginInfo(check="no settings", expected_sha256=expected,
                          copied_from=expected_from)
    mode = re.search(r" mode=(\S+)", line)
    where = re.search(r"applied in worker \(([^)]*)\)", line)
    return PluginInfo(check="passed", settings=settings, mode=mode.group(1) if mode else None,
                      where=where.group(1) if where else None, **found)


def plugin_check(log_path: Path, settings: dict, expected: str | None = None,
                 expected_from: str | None = None) -> str | None:
    """None when the arm has no plugin settings, or when a worker process logged that it
    applied exactly these settings (and, given ``expected``, with a plugin whose
    ``plugin_sha256`` is that: the driver's own); otherwise the reason the run must not be
    measured."""
    if not settings:
        return None
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError as exc:
        return f"cannot read the server log {log_path}: {exc}"
    wanted = json.loads(json.dumps(settings))
    applied = applied_settings(text)
    if wanted in applied:
        if expected is None:
            return None
        return _provenance_problem(_applied_line(text, wanted) or "", expected, expected_from)
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
    failed = _load_failure(text)
    if failed:
        return (f"vLLM could not load e2e's plugin: {failed}; the folder e2e puts first on the "
                "server's PYTHONPATH should hold it: rerun (e2e makes it again), and check "
                "that nothing in the server's environment shadows the e2e package")
    return ("e2e's vLLM plugin logged nothing: the server did not load it (e2e puts it first "
            "on the server's PYTHONPATH with a vllm.general_plugins entry point named 'e2e'): "
            "check that the server's interpreter honours PYTHONPATH (not -E/-I) and that "
            "VLLM_PLUGINS, if set, names e2e")


def _load_failure(text: str) -> str | None:
    """The exception vLLM logged when it failed to import the ``e2e`` plugin, if it did."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Failed to load plugin e2e" in line:
            for later in lines[i + 1:i + 80]:
                found = re.search(r"^\s*(?:\S+ )?(\w+(?:Error|Exception): .*)$", later)
                if found and not later.lstrip().startswith("File "):
                    return found.group(1).strip()
            return line.strip()
    return None
