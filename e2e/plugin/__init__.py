"""e2e's vLLM general plugin (entry point group ``vllm.general_plugins``).

vLLM calls ``register()`` in every process it starts. The arm's settings arrive as JSON in
``E2E_PLUGIN_SETTINGS``; with none, the plugin does nothing. Each call logs one line that
starts with ``e2e-plugin:`` saying what it applied or why it applied nothing; e2e reads the
server log for it before measuring.
"""

from __future__ import annotations

import json
import logging
import os

PLUGIN_ENV = "E2E_PLUGIN_SETTINGS"
log = logging.getLogger("e2e.plugin")


def _say(message: str) -> None:
    # vLLM configures its own loggers; print keeps the line in the server log whatever they do.
    print(f"e2e-plugin: {message} (pid {os.getpid()})", flush=True)


def register() -> None:
    raw = os.environ.get(PLUGIN_ENV)
    if not raw:
        _say(f"nothing to apply ({PLUGIN_ENV} is not set)")
        return
    try:
        settings = json.loads(raw)
    except ValueError as exc:
        _say(f"not applied: {PLUGIN_ENV} is not JSON: {exc}")
        return
    _say(f"not applied: settings {settings} need the packing hooks, which this e2e lacks")
