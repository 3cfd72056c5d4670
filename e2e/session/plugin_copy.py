"""The driver's own plugin, made visible to its servers.

vLLM loads general plugins through the ``vllm.general_plugins`` entry point of any
distribution on the server's ``sys.path``. Rather than installing e2e into the server's
environment (stateful: the environment is shared by every checkout that uses it, so its
servers would run whichever checkout installed it last), e2e copies the plugin's source
(``e2e.plugin.source.PARTS``: e2e's ``__init__``, ``arm_settings``, ``plugin/`` and
``kernels/``) as it is
when the run starts into a content-addressed folder and puts that folder first on each
server's ``PYTHONPATH``, beside a generated ``e2e-<version>.dist-info`` that declares the
entry point::

    $E2E_HOME/plugin/<plugin_sha256[:16]>/
        e2e/__init__.py, e2e/arm_settings.py, e2e/plugin/..., e2e/kernels/...
        e2e-<version>.dist-info/{METADATA, entry_points.txt, top_level.txt}

The folder is immutable once made (renamed into place whole), so two checkouts with the same
plugin share it, and one checkout's edits or deletion never reach another's servers. Every
file in it is importable by every server (it is first on their ``PYTHONPATH``), so before each
use it must hold exactly what e2e wrote, byte for byte, and nothing else (``_unexpected``): a
``sitecustomize.py`` or a ``vllm/`` beside ``e2e/`` would run in every server (the second
would replace the engine) while the plugin's hash still matched; a symlink (the folder
itself or anything in it) could point anywhere; a ``__pycache__`` could hold bytecode that
Python prefers to the checked source. Any of these, and the folder is set aside and made
again from the snapshot. Servers get ``PYTHONDONTWRITEBYTECODE=1`` (``SERVER_ENV``) so they
never write bytecode into it themselves. ``importlib.metadata`` keeps one
distribution per name, the first on ``sys.path``, and vLLM keeps one plugin per entry-point
name, so a server whose environment still has an ``e2e`` installed loads this one plugin,
once (tests/test_plugin_source.py checks both against vLLM's loader).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import e2e
from e2e.paths import e2e_home, fsync_dir
from e2e.plugin.source import digest_of, package_dir, plugin_files

__all__ = ["PluginTree", "plugin_tree", "server_pythonpath", "SERVER_ENV"]

ENTRY_POINTS = "[vllm.general_plugins]\ne2e = e2e.plugin:register\n"
# what a server's environment needs so that it leaves the folder as it found it
SERVER_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True)
class PluginTree:
    """The plugin a run's servers load: its hash, the folder put on their ``PYTHONPATH``, and
    the driver's e2e package it was copied from."""

    sha256: str
    folder: Path
    copied_from: Path

    @property
    def package(self) -> Path:
        """The e2e folder inside ``folder``: what the server's applied line names."""
        return self.folder / "e2e"

    def describe(self) -> dict:
        return {"plugin_sha256": self.sha256, "folder": str(self.folder),
                "copied_from": str(self.copied_from)}


def _snapshot(package: Path) -> tuple[dict[str, bytes], str]:
    """The plugin's files as bytes, read once, and the hash of exactly those bytes (the same
    digest as ``plugin_sha256``), so an edit during the copy cannot split the two."""
    files = {p.relative_to(package).as_posix(): p.read_bytes() for p in plugin_files(package)}
    return files, digest_of(files)


def _dist_info() -> dict[str, bytes]:
    """The generated ``e2e-<version>.dist-info`` files, by name."""
    return {"METADATA": (f"Metadata-Version: 2.1\nName: e2e\nVersion: {e2e.__version__}\n"
                         "Summary: e2e's vLLM plugin, copied for one run's servers\n").encode(),
            "entry_points.txt": ENTRY_POINTS.encode(), "top_level.txt": b"e2e\n",
            "INSTALLER": b"e2e\n"}


def _expected(files: dict[str, bytes]) -> dict[str, bytes]:
    """Every file the folder holds, by path relative to it: the plugin's sources under
    ``e2e/`` and the dist-info."""
    info = f"e2e-{e2e.__version__}.dist-info"
    return {**{f"e2e/{name}": data for name, data in files.items()},
            **{f"{info}/{name}": data for name, data in _dist_info().items()}}


def _write_tree(target: Path, files: dict[str, bytes]) -> None:
    for name, data in _expected(files).items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _unexpected(folder: Path, files: dict[str, bytes]) -> str | None:
    """Why ``folder`` is not exactly the tree ``_write_tree`` makes of ``files`` (None when
    it is): a missing, extra or altered file or folder, or a symlink anywhere, the folder
    itself included (never followed: every entry is looked at without following links)."""
    want = _expected(files)
    dirs = {p.as_posix() for name in want for p in Path(name).parents if str(p) != "."}
    try:
        if folder.is_symlink():
            return "it is a symlink"
        if not folder.is_dir():
            return "it is missing"
        seen: set[str] = set()
        for top, subdirs, names in os.walk(folder, followlinks=False):
            for name in [*subdirs, *names]:
                path = Path(top) / name
                rel = path.relative_to(folder).as_posix()
                if path.is_symlink():
                    return f"{rel} is a symlink"
                if name in subdirs:
                    if rel not in dirs:
                        return f"{rel}/ is not e2e's"
                elif rel not in want:
                    return f"{rel} is not e2e's"
                elif not path.is_file() or path.read_bytes() != want[rel]:
                    return f"{rel} was altered"
                else:
                    seen.add(rel)
        missing = sorted(set(want) - seen)
        return f"{missing[0]} is missing" if missing else None
    except OSError as exc:
        return f"it is unreadable ({exc.strerror or exc})"


_made: dict[tuple[Path, Path], tuple[PluginTree, dict[str, bytes]]] = {}
_lock = threading.Lock()


def plugin_tree(package: Path | None = None, *, create: bool = True) -> PluginTree:
    """The folder holding this e2e's plugin for its servers, made once per process (so every
    unit of one run loads the code as it was when the run started). ``create`` False names
    the folder without making it (a dry run)."""
    package = (package or package_dir()).resolve()
    key = (package, e2e_home().resolve())
    with _lock:
        if key in _made:  # the snapshot this process took first, rewritten if it went missing
            tree, files = _made[key]
            sha, root = tree.sha256, tree.folder.parent
        else:
            files, sha = _snapshot(package)
            root = e2e_home() / "plugin"
            tree = PluginTree(sha256=sha, folder=root / sha[:16], copied_from=package)
        if not create:
            return tree
        if _unexpected(tree.folder, files) is not None:
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:16]}.", dir=root))
            try:
                _write_tree(tmp, files)
                aside = root / f".{sha[:16]}.broken.{os.getpid()}"
                if os.path.lexists(tree.folder):  # altered: set it aside, then replace
                    os.rename(tree.folder, aside)
                try:
                    os.rename(tmp, tree.folder)
                except OSError:  # another e2e made it meanwhile
                    if _unexpected(tree.folder, files) is not None:
                        raise
                fsync_dir(root)
                if os.path.islink(aside):  # a link is removed, never what it points at
                    os.unlink(aside)
                elif os.path.lexists(aside):
                    shutil.rmtree(aside, ignore_errors=True)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        _made[key] = (tree, files)
        return tree


def server_pythonpath(tree: PluginTree, existing: str | None) -> str:
    """``PYTHONPATH`` for a server: the plugin's folder first, then what was there."""
    return os.pathsep.join([str(tree.folder), *([existing] if existing else [])])
