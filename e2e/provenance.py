"""What ran: the host, e2e itself and the server's environment, recorded in every run.json."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import e2e
from e2e.builds import environment_facts

__all__ = ["host_facts", "provenance"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


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
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": _gpus(),
    }


def _git_sha(root: Path | None) -> str | None:
    if root is None or not (root / ".git").exists():
        return None
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(server_python: Path, build: dict | None = None) -> dict:
    from e2e.builds import project_root

    return {
        "build": build or {},
        "e2e": {"version": e2e.__version__, "git_sha": _git_sha(project_root()),
                "python": platform.python_version()},
        "server_env": {"python_path": str(server_python), **environment_facts(server_python)},
        "host": host_facts(),
    }
