"""The plugin folder under a poisoner: ``$E2E_HOME/plugin/<hash>/`` is first on every
server's ``PYTHONPATH``, and a CI runner's cache outlives jobs, so one job can plant files
there for the next. Whatever was planted, the folder a run hands its servers holds exactly
the hashed ``e2e/`` package and its dist-info: nothing beside it is importable, no symlink is
followed, no bytecode is trusted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import e2e
from e2e.plugin.source import plugin_sha256
from e2e.session.plugin_copy import SERVER_ENV, plugin_tree
from e2e.session import plugin_copy as _plugin_tree

INFO = f"e2e-{e2e.__version__}.dist-info"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def fresh() -> None:
    """A new e2e process: no snapshot remembered."""
    _plugin_tree._made.clear()


def listing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def exact(tree) -> None:
    folder = tree.folder
    assert not folder.is_symlink()
    assert {p.name for p in folder.iterdir()} == {"e2e", INFO}
    assert not any(p.is_symlink() for p in folder.rglob("*"))
    assert not any("__pycache__" in p.parts for p in folder.rglob("*"))
    assert plugin_sha256(tree.package) == tree.sha256
    assert {n for n in listing(folder) if not n.startswith("e2e/")} == {
        f"{INFO}/{n}" for n in ("METADATA", "entry_points.txt", "top_level.txt", "INSTALLER")}


def importable(folder: Path, module: str) -> str | None:
    """Where ``module`` is found with only ``folder`` first on the path (None: not there)."""
    probe = ("import importlib.util, sys\n"
             f"s = importlib.util.find_spec({module!r})\n"
             "print(s.origin if s and s.origin else '')\n")
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                         env={"PYTHONPATH": str(folder), "PATH": os.environ.get("PATH", ""),
                              "PYTHONSAFEPATH": "1", **SERVER_ENV}, timeout=60, cwd="/")
    origin = out.stdout.strip()
    return origin if origin and Path(origin).is_relative_to(folder) else None


PLANTS = {
    "sitecustomize.py": {"sitecustomize.py": b"import os; os.system('touch /tmp/pwned')\n"},
    "usercustomize.py": {"usercustomize.py": b"raise SystemExit(3)\n"},
    "a vllm package": {"vllm/__init__.py": b"raise SystemExit('not the engine')\n"},
    "a .pth file": {"evil.pth": b"import os\n"},
    "an extra plugin module": {"e2e/plugin/backdoor.py": b"print('hi')\n"},
    "planted bytecode": {"e2e/__pycache__/__init__.cpython-311.pyc": b"\x00" * 64},
    "an extra dist-info": {"vllm-9.9.dist-info/entry_points.txt": b"[console_scripts]\n"},
    "an altered METADATA": {f"{INFO}/METADATA": b"Name: e2e\n"},
    "an extra entry point": {f"{INFO}/entry_points.txt":
                             b"[vllm.general_plugins]\ne2e = e2e.plugin:register\n"
                             b"evil = os:system\n"},
}


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_a_planted_file_is_never_handed_to_a_server(home, name):
    tree = plugin_tree()
    for rel, data in PLANTS[name].items():
        path = tree.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    fresh()  # the next job on the runner
    again = plugin_tree()
    assert again.folder == tree.folder
    exact(again)
    for module in ("sitecustomize", "usercustomize", "vllm"):
        assert importable(again.folder, module) is None, module
    # within one process too: the folder is checked again before every unit
    (again.folder / "sitecustomize.py").write_text("x = 1\n")
    exact(plugin_tree())


def test_a_symlinked_folder_is_replaced_by_a_real_one(home, tmp_path):
    """The folder itself a symlink to a copy with matching hashes and a sitecustomize.py
    beside it: the link is removed (never what it points at) and a real folder made."""
    tree = plugin_tree()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tree.folder, elsewhere)
    (elsewhere / "sitecustomize.py").write_text("print('planted')\n")
    shutil.rmtree(tree.folder)
    os.symlink(elsewhere, tree.folder)
    fresh()
    exact(plugin_tree())
    assert (elsewhere / "sitecustomize.py").exists()  # what it pointed at is left alone


def test_a_symlink_inside_is_not_followed(home, tmp_path):
    tree = plugin_tree()
    target = tree.package / "plugin" / "inject.py"
    outside = tmp_path / "inject.py"
    outside.write_bytes(target.read_bytes())       # same bytes: the hash would still match
    target.unlink()
    os.symlink(outside, target)
    os.symlink(tmp_path, tree.folder / "vllm")      # and a package dir by link
    fresh()
    exact(plugin_tree())
    assert outside.exists()


_NAME = st.text(st.sampled_from("abcvlm_.-"), min_size=1, max_size=8).filter(
    lambda n: n not in (".", ".."))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plants=st.lists(st.tuples(st.sampled_from(["", "e2e/", "e2e/plugin/", "e2e/kernels/",
                                                  f"{INFO}/", "vllm/"]),
                                 _NAME, st.sampled_from([".py", ".pth", "", ".pyc", "/x.py"])),
                       min_size=1, max_size=4))
def test_whatever_is_planted_the_folder_is_exact(home, plants):
    """Any files planted anywhere in the folder (new names, or over the plugin's own): the
    next run's folder is exactly the plugin."""
    fresh()
    tree = plugin_tree()
    for where, name, ext in plants:
        path = tree.folder / f"{where}{name}{ext}"
        if path.is_dir() or any(p.is_file() for p in path.parents):
            continue  # a name already planted as the other kind (a file where a folder goes)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"planted\n")
    fresh()
    exact(plugin_tree())


def test_servers_write_no_bytecode_into_the_folder(home):
    from e2e.config import load_experiment
    from e2e.session import server_launch

    launch = server_launch(load_experiment(), "main", dspark=False, python=Path(sys.executable),
                           dry=True)
    assert launch.env["PYTHONDONTWRITEBYTECODE"] == "1"
