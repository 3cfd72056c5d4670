"""Reads a server's log for the line e2e's vLLM plugin writes in every process it touches."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plugin_check"]


def plugin_check(log_path: Path, settings: dict) -> str | None:
    """None when the arm has no plugin settings or they were applied; else the reason."""
    if not settings:
        return None
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError as exc:
        return f"cannot read the server log {log_path}: {exc}"
    if "e2e-plugin: applied" in text:
        return None
    if "e2e-plugin:" in text:
        lines = [line for line in text.splitlines() if "e2e-plugin:" in line]
        return lines[-1].split("e2e-plugin:", 1)[1].strip()
    return ("e2e's vLLM plugin logged nothing: is e2e installed in the server environment "
            "(the vllm.general_plugins entry point)?")
