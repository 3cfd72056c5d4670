"""Planted secrets (issue 24): values a test puts into a config's server API key, arguments and
environment, and the walk that proves none of them reached a file or a terminal. Planting
leaves the server's behaviour as it was: the API key is one the client sends (``server.api_key``,
given again as a literal ``--api-key`` argument), the token an environment variable no server
reads. ``server.build.env`` is not planted for a real server: it is part of the managed
environment's identity, so a new value would build a new environment
(tests/test_hostile.py plants it for a session of the scripted vLLM)."""

from __future__ import annotations

import os
from pathlib import Path

from e2e.paths import e2e_home


SKIPPED = {"envs", "models"}  # the e2e home's environments and models: not e2e's writing


def files_under(root: Path) -> list[Path]:
    """Every file under ``root``, not following links, nor into an environment or a model."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        found += [Path(folder) / n for n in names if not os.path.islink(Path(folder) / n)]
    return found


def holds(root: Path, secret: str) -> list[str]:
    """The files under ``root`` whose bytes hold ``secret``."""
    return [str(p) for p in files_under(root) if secret.encode() in p.read_bytes()]


class Planted:
    """One test's secrets; every value holds ``mark``, which the walk looks for."""

    def __init__(self, tag: str) -> None:
        self.mark = f"PLANTED{tag}"
        self.api_key = f"sk-{self.mark}-key"
        self.token = f"tok-{self.mark}"

    def toml(self, text: str) -> str:
        """A config's text with the secrets in its ``[server]`` table (args and env inline)."""
        args, env = 'args = ["--enforce-eager",', 'env = { VLLM_CPU_KVCACHE_SPACE = "1",'
        assert text.count(args) == 1 and text.count(env) == 1
        text = text.replace(args, f'args = ["--api-key", "{self.api_key}", "--enforce-eager",')
        text = text.replace(env, f'env = {{ E2E_PLANTED_TOKEN = "{self.token}", '
                                 'VLLM_CPU_KVCACHE_SPACE = "1",')
        text = text.replace("[server]\n", f'[server]\napi_key = "{self.api_key}"\n', 1)
        assert text.count(self.mark) == 3
        return text

    def server(self, server) -> dict:
        """``override("server", ...)`` values that plant the secrets into ``server``."""
        return {"api_key": self.api_key, "args": ["--api-key", self.api_key, *server.args],
                "env": {**server.env, "E2E_PLANTED_TOKEN": self.token}}

    def leaks(self, *roots: Path, output: str = "") -> list[str]:
        """Where the mark appears: files under ``roots`` and the e2e home, and the output."""
        found = [f for root in (*roots, e2e_home()) if Path(root).is_dir()
                 for f in holds(root, self.mark)]
        return found + (["the output"] if self.mark in output else [])
