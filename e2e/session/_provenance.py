"""What ran: the host, e2e itself and the server's environment, recorded in every run.json."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

import e2e
from e2e.host import cpu_model
from e2e.plugin.source import plugin_sha256
from e2e.session.builds import environment_facts

__all__ = ["host_facts", "provenance", "source_facts"]


def _gpus() -> dict:
    if not shutil.which("nvidia-smi"):
        return {"count": 0}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {"count": 0, "error": "nvidia-smi failed"}
    rows = [[c.strip() for c in line.split(",")] for line in out if line.strip()]
    return {"count": len(rows), "names": [r[0] for r in rows],
            "driver": rows[0][1] if rows else None}


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        return None


def host_facts() -> dict:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": _gpus(),
    }


def _git(root: Path, *args: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=30,
                              check=True).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None


def source_facts(root: Path | None = None) -> dict:
    """What e2e source ran: its version, the checkout's commit, whether the checkout had
    changes not committed (``dirty``) and a hash of those changes (``diff_sha256``: the diff
    against HEAD plus untracked files' names and contents), ``source_sha256``, a hash of
    the package's own files, which also identifies a non-git install, ``plugin_sha256``, the
    hash of the part its servers run (``e2e.plugin.source``; a load run's ``plugin`` block
    says what the server's own plugin hashed to), and ``package``, the folder it ran from.
    ``root``: the checkout to read (default: the one e2e runs from, ``project_root``)."""
    from e2e.session.builds import project_root

    package = Path(e2e.__file__).resolve().parent
    facts: dict = {"version": e2e.__version__, "python": platform.python_version(),
                   "git_sha": None, "dirty": None, "diff_sha256": None,
                   "source_sha256": tree_hash_of(package),
                   "plugin_sha256": plugin_sha256(package), "package": str(package)}
    root = project_root() if root is None else root
    if root is None or not (root / ".git").exists():
        return facts
    head = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=all")
    if head is None or status is None:
        return facts
    facts["git_sha"] = head.strip()
    # a change to a tracked file counts, an untracked file only when it is source: the
    # results a run writes into the checkout (any folder name) never make it dirty, and are
    # never read whole to be hashed
    status = "\n".join(line for line in status.splitlines()
                       if line and (not line.startswith("??") or _is_source(line[3:])))
    facts["dirty"] = bool(status.strip())
    if facts["dirty"]:
        digest = hashlib.sha256((_git(root, "diff", "HEAD", "--binary") or "").encode())
        for line in sorted(status.splitlines()):
            if line.startswith("??"):
                path = root / line[3:]
                digest.update(line.encode())
                if path.is_file():
                    digest.update(path.read_bytes())
        facts["diff_sha256"] = digest.hexdigest()
    return facts


_SOURCE = (".py", ".pyi", ".pth", ".toml", ".cfg", ".ini", ".txt", ".sh", ".c", ".cu", ".h")


def _is_source(rel: str) -> bool:
    """An untracked path that could change what e2e runs (code, configs, requirements)."""
    return rel.strip('"').endswith(_SOURCE)


def tree_hash_of(package: Path) -> str:
    """sha256 over the relative paths and contents of a package's .py and .toml files."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".toml")
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def provenance(server_python: Path, build: dict | None = None) -> dict:
    """The provenance block of every unit's record (load run and GSM8K alike). An external
    server's environment is not e2e's to read: its build says what the server told."""
    external = (build or {}).get("kind") == "external"
    return {
        "build": build or {},
        "e2e": source_facts(),
        "server_env": ({"external": True} if external else
                       {"python_path": str(server_python), **environment_facts(server_python)}),
        "host": host_facts(),
    }
