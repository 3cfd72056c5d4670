"""What e2e's vLLM plugin is made of: the files a server imports from e2e, and their hash.

The plugin and the packing kernels are part of the measurement (the arms differ only in what
they run), so the server says which code it ran and the driver checks it against its own:
both compute ``plugin_sha256`` over the same files, the server from the folder it imported
e2e from, the driver from its checkout. Standard library only: this runs in every server
process."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["PARTS", "plugin_files", "plugin_sha256", "package_dir", "digest_of"]

# Relative to the e2e package: everything the plugin imports from e2e (tests/test_plugin_source
# checks that importing every module of the plugin loads nothing of e2e outside these).
PARTS = ("__init__.py", "arm_settings.py", "plugin", "kernels")


def package_dir() -> Path:
    """The e2e package folder this code was imported from."""
    return Path(__file__).resolve().parent.parent


def plugin_files(package: Path) -> list[Path]:
    """The plugin's source files under ``package`` (an e2e package folder), sorted."""
    found: list[Path] = []
    for part in PARTS:
        path = package / part
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(found, key=lambda p: p.relative_to(package).as_posix())


def digest_of(files: dict[str, bytes]) -> str:
    """sha256 over (relative path, content) pairs, in path order, each length-prefixed."""
    digest = hashlib.sha256()
    for name in sorted(files):
        raw = name.encode()
        digest.update(len(raw).to_bytes(4, "big") + raw)
        digest.update(len(files[name]).to_bytes(8, "big") + files[name])
    return digest.hexdigest()


def plugin_sha256(package: Path | None = None) -> str:
    """sha256 over the relative paths and contents of the plugin's source files."""
    package = package or package_dir()
    return digest_of({p.relative_to(package).as_posix(): p.read_bytes()
                      for p in plugin_files(package)})
