"""The plugin's own provenance: the hash of the plugin's and kernels' sources, the
content-addressed copy e2e puts first on every server's PYTHONPATH, what vLLM's loader makes
of it next to an installed e2e, and the checks that refuse a server or a Ray host running
other code than the driver's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import e2e
from e2e.errors import E2EError
from e2e.execute.ray import check_host_plugin, driver_plugin
from e2e.plugin.source import PARTS, package_dir, plugin_files, plugin_sha256
from e2e.plugin import provenance_fields
from e2e.session.plugin_log import applied_fields, check_plugin
from e2e.session import plugin_check
from e2e.session.plugin_copy import plugin_tree, server_pythonpath

PR = {"draft_update": True, "packing": "inplace"}
PACKAGE = Path(e2e.__file__).resolve().parent


def copy_package(target: Path) -> Path:
    """A second checkout's e2e package (what a clone holds)."""
    shutil.copytree(PACKAGE, target / "e2e", ignore=shutil.ignore_patterns("__pycache__"))
    return target / "e2e"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_hash_covers_the_plugin_and_kernels_and_changes_with_a_kernel(tmp_path):
    names = {p.relative_to(PACKAGE).as_posix() for p in plugin_files(PACKAGE)}
    assert "__init__.py" in names and "plugin/inject.py" in names
    assert "kernels/triton_paths.py" in names
    assert all(n == "__init__.py" or n.split("/")[0] in PARTS for n in names)
    clone = copy_package(tmp_path / "clone")
    assert plugin_sha256(clone) == plugin_sha256(PACKAGE)
    (clone / "session" / "_session.py").write_text("# not the plugin\n")
    assert plugin_sha256(clone) == plugin_sha256(PACKAGE)  # only the plugin's files count
    kernel = clone / "kernels" / "reference.py"
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    assert plugin_sha256(clone) != plugin_sha256(PACKAGE)


def test_the_copy_is_content_addressed_and_made_again_when_altered(home, tmp_path):
    dry = plugin_tree(create=False)
    assert not dry.folder.exists() and dry.sha256 == plugin_sha256(PACKAGE)
    tree = plugin_tree()
    assert tree.folder == home / "plugin" / tree.sha256[:16] and tree.copied_from == PACKAGE
    assert plugin_sha256(tree.package) == tree.sha256
    info = tree.folder / f"e2e-{e2e.__version__}.dist-info"
    assert (info / "entry_points.txt").read_text() == (
        "[vllm.general_plugins]\ne2e = e2e.plugin:register\n")
    assert "Name: e2e" in (info / "METADATA").read_text()
    # two checkouts with the same plugin share one folder; a changed kernel gets its own
    clone = copy_package(tmp_path / "clone")
    assert plugin_tree(clone).folder == tree.folder
    kernel = clone / "kernels" / "reference.py"
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    other = copy_package(tmp_path / "other")
    (other / "kernels" / "reference.py").write_text(kernel.read_text())
    changed = plugin_tree(other)
    assert changed.folder != tree.folder and changed.sha256 == plugin_sha256(other)
    # the snapshot is taken once per process: a later edit of the checkout does not leak in,
    # and a copy someone altered is made again from the snapshot
    (other / "kernels" / "reference.py").write_text("# edited after the run started\n")
    (changed.package / "kernels" / "reference.py").write_text("# tampered\n")
    again = plugin_tree(other)
    assert again == changed and plugin_sha256(again.package) == changed.sha256
    assert server_pythonpath(tree, "/a:/b") == f"{tree.folder}{os.pathsep}/a:/b"
    assert server_pythonpath(tree, None) == str(tree.folder)


@pytest.mark.slow
def test_importing_the_plugin_from_the_copy_loads_nothing_else_of_e2e(home):
    """The copy holds only PARTS: every module the plugin (inject and ROCm modes) and the
    kernels import must be among them, or the server would import it from elsewhere (or
    fail) and the hash would not cover it."""
    tree = plugin_tree()
    probe = (
        "import json, sys\n"
        "import e2e.plugin, e2e.plugin.inject, e2e.plugin.rocm, e2e.arm_settings\n"
        "import e2e.kernels, e2e.kernels.reference, e2e.kernels.bench\n"
        "try:\n    import e2e.kernels.triton_paths\nexcept ImportError:\n    pass\n"
        "print(json.dumps({m: getattr(v, '__file__', None) for m, v in sys.modules.items()"
        " if m == 'e2e' or m.startswith('e2e.')}))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree.folder)}, cwd=home.parent,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "e2e.plugin.inject" in modules and "e2e.kernels.reference" in modules
    outside = {m: f for m, f in modules.items()
               if f is None or not Path(f).resolve().is_relative_to(tree.package)}
    assert outside == {}


def test_the_applied_line_says_what_the_plugin_is_made_of():
    fields = provenance_fields()
    assert fields == f" | plugin_sha256={plugin_sha256()} source={package_dir()}"
    line = (f"e2e-plugin: applied in worker (pid 7, CPUModelRunner): arm=pr mode=inject "
            f"packing=inplace | settings={json.dumps(PR, sort_keys=True)}{fields}")
    assert applied_fields(line) == {"settings": PR, "plugin_sha256": plugin_sha256(),
                                    "source": str(package_dir())}
    later = line + " | packed_by=something-new"  # a field added after ours still parses
    assert applied_fields(later)["plugin_sha256"] == plugin_sha256()
    old = line.split(" | plugin_sha256=")[0]  # the format before the hash
    assert applied_fields(old) == {"settings": PR, "plugin_sha256": None, "source": None}


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.log"
    path.write_text(text)
    return path


def test_the_check_refuses_another_plugin_and_an_unhashed_one_saying_what_to_do(tmp_path):
    ours = plugin_sha256()
    head = (f"e2e-plugin: applied in worker (pid 7, CPUModelRunner): arm=pr mode=inject "
            f"packing=inplace | settings={json.dumps(PR, sort_keys=True)}")
    good = _log(tmp_path, f"{head} | plugin_sha256={ours} source=/x/e2e\n")
    info = check_plugin(good, PR, ours, "/checkout/e2e")
    assert info.check == "passed"
    assert (info.plugin_sha256, info.source, info.expected_sha256, info.copied_from) == (
        ours, "/x/e2e", ours, "/checkout/e2e")

    other = _log(tmp_path, f"{head} | plugin_sha256={'0' * 64} source=/first/clone/e2e\n")
    info = check_plugin(other, PR, ours, "/checkout/e2e")
    assert info.check == "failed" and info.plugin_sha256 == "0" * 64
    assert "the server ran e2e's plugin from /first/clone/e2e (plugin_sha256 000000000000)" \
        in info.detail
    assert f"not this e2e's (plugin_sha256 {ours[:12]}, copied from /checkout/e2e)" in info.detail
    assert "uninstall e2e" in info.detail

    unhashed = _log(tmp_path, head + "\n")
    reason = plugin_check(unhashed, PR, ours)
    assert reason.startswith("the server's plugin does not say what it is made of")
    assert "pip uninstall e2e" in reason
    assert plugin_check(unhashed, PR) is None  # no expectation (an external server's log)


def test_a_plugin_vllm_could_not_import_is_named(tmp_path):
    log = _log(tmp_path, "INFO start\nERROR [plugins] Failed to load plugin e2e\nTraceback "
               "(most recent call last):\n  File \"x.py\", line 1, in <module>\n"
               "ModuleNotFoundError: No module named 'e2e'\n")
    reason = plugin_check(log, PR, plugin_sha256())
    assert reason.startswith("vLLM could not load e2e's plugin: ModuleNotFoundError: No "
                             "module named 'e2e'")


def test_a_ray_host_with_another_plugin_is_refused_naming_both(tmp_path):
    driver = driver_plugin()
    check_host_plugin(driver, "host-a", "abcdef0123456789")  # the same e2e: nothing to say
    check_host_plugin(None, "host-a", "abcdef0123456789")
    with pytest.raises(E2EError) as info:
        check_host_plugin({**driver, "plugin_sha256": "f" * 64, "source": "/drv/e2e",
                           "hostname": "driver-host"}, "host-b", "abcdef0123456789")
    text = str(info.value)
    assert text.startswith("host host-b (node abcdef012345) has another e2e")
    assert f"(plugin_sha256 {plugin_sha256()[:12]}, from {package_dir()})" in text
    assert "from /drv/e2e on driver-host" in text and "no unit ran on it" in text


@pytest.mark.server
def test_vllm_loads_the_copy_once_ahead_of_an_installed_e2e(server_python, home):
    """vLLM 0.32's loader (``load_plugins_by_group``) next to an environment that has an e2e
    installed: ``importlib.metadata`` keeps the first distribution named e2e on sys.path (the
    copy), so one ``e2e`` entry point loads, from the copy."""
    tree = plugin_tree()
    probe = (
        "import json\n"
        "from importlib.metadata import distributions, entry_points\n"
        "from vllm.plugins import DEFAULT_PLUGINS_GROUP, load_plugins_by_group\n"
        "eps = [e for e in entry_points(group=DEFAULT_PLUGINS_GROUP) if e.name == 'e2e']\n"
        "found = load_plugins_by_group(DEFAULT_PLUGINS_GROUP)\n"
        "import e2e.plugin\n"
        "print(json.dumps({'eps': [e.value for e in eps], 'loaded': [k for k in found if k == 'e2e'],"
        " 'module': e2e.plugin.__file__, 'dists': sum(d.metadata['Name'] == 'e2e'"
        " for d in distributions())}))\n")
    out = subprocess.run([str(server_python), "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree.folder)}, cwd=home.parent,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["eps"] == ["e2e.plugin:register"] and got["loaded"] == ["e2e"]
    assert Path(got["module"]).resolve().is_relative_to(tree.package)
    assert got["dists"] >= 1
