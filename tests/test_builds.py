"""Server builds: a git ref checked out and installed into a managed environment (against a
small repository made here, with a fake server entry point), bad refs, failed installs, and
provenance that tells builds apart."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from e2e.arms import ServerLaunch
from e2e.session.builds import managed_env_dir, prepare
from e2e.config import BuildSpec, GitSource
from e2e.errors import BuildError
from e2e.session.server import start

pytestmark = pytest.mark.slow  # the whole module is the slow tier

FAKE_SERVER = textwrap.dedent('''
    """A stand-in for vLLM's OpenAI server: answers /health, reports its version."""
    import argparse, http.server, json
    from vllm import __version__

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _ = parser.parse_known_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"version": __version__}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    http.server.HTTPServer((args.host, args.port), Handler).serve_forever()
''')


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def fake_vllm_repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    repo = tmp_path / "fake-vllm"
    pkg = repo / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    (repo / "vllm" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (repo / "vllm" / "entrypoints" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(FAKE_SERVER)
    (repo / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "vllm"
        version = "0.0.1"
        [tool.setuptools.packages.find]
        include = ["vllm*"]
    '''))
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v1", cwd=repo)
    git("tag", "v1", cwd=repo)
    return repo


def test_git_ref_build_installs_and_serves(fake_vllm_repo, tmp_path):
    spec = BuildSpec(git=GitSource(repo=str(fake_vllm_repo), ref="v1"))
    build = prepare(spec)
    commit = git("rev-parse", "v1", cwd=fake_vllm_repo)
    info = build.describe()
    assert info["kind"] == "git" and info["git_commit"] == commit and info["git_ref"] == "v1"
    assert Path(info["worktree"], "vllm", "__init__.py").exists()
    # the editable install is the worktree's code, and the fake server starts and stops
    launch = ServerLaunch(arm="main", python=build.python, args=("--model", "x"))
    server = start(launch, tmp_path / "server.log", startup_timeout_s=60)
    try:
        assert server.alive()
    finally:
        server.stop()
    assert not server.alive()
    assert prepare(spec).python == build.python  # prepared once, reused


def test_bad_ref_fails_clearly_and_leaves_nothing(fake_vllm_repo):
    spec = BuildSpec(git=GitSource(repo=str(fake_vllm_repo), ref="no-such-branch"))
    with pytest.raises(BuildError, match="'no-such-branch' does not name a commit"):
        prepare(spec)
    assert not (managed_env_dir(spec).parent).exists() or not list(
        managed_env_dir(spec).parent.glob("env-*/bin"))


def test_failed_install_shows_the_log_and_removes_the_env(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    spec = BuildSpec(requirements=["e2e-no-such-package-anywhere==0.0.0"])
    with pytest.raises(BuildError) as info:
        prepare(spec)
    assert "pip install e2e-no-such-package-anywhere==0.0.0 failed" in str(info.value)
    assert "last lines" in str(info.value)
    assert not managed_env_dir(spec).exists()


def test_existing_interpreter_must_exist(tmp_path):
    with pytest.raises(BuildError, match="does not exist"):
        prepare(BuildSpec(python=str(tmp_path / "nope" / "python")))


def _wheel(folder: Path, version: str) -> Path:
    """A wheel of the fake vLLM (what a PR's CI uploads), made by hand: pip installs it."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"vllm-{version}-py3-none-any.whl"
    info = f"vllm-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/__init__.py", f'__version__ = "{version}"\n')
        z.writestr("vllm/entrypoints/__init__.py", "")
        z.writestr("vllm/entrypoints/openai/__init__.py", "")
        z.writestr("vllm/entrypoints/openai/api_server.py", FAKE_SERVER)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: e2e-test\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return wheel


def _version_of(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import vllm; print(vllm.__version__)"],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_a_wheel_build_installs_it_and_a_rebuilt_wheel_gets_its_own_env(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    wheel = _wheel(tmp_path / "dist", "0.0.2")
    spec = BuildSpec(wheel=str(wheel))
    build = prepare(spec)
    info = build.describe()
    assert info["kind"] == "wheel" and info["wheel"] == str(wheel)
    assert info["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert _version_of(build.python) == "0.0.2"
    launch = ServerLaunch(arm="pr", python=build.python, args=("--model", "x"))
    server = start(launch, tmp_path / "server.log", startup_timeout_s=60)
    try:
        assert server.alive()
    finally:
        server.stop()
    # the same file name with other contents (the branch moved, CI built again): a new env
    (tmp_path / "dist2").mkdir()
    rebuilt = _wheel(tmp_path / "dist2", "0.0.3")
    wheel.write_bytes(rebuilt.read_bytes())
    again = prepare(spec)
    assert again.python != build.python and _version_of(again.python) == "0.0.3"


def test_a_wheel_url_is_downloaded_once(tmp_path, monkeypatch):
    import functools
    import http.server
    import threading

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    wheel = _wheel(tmp_path / "served", "0.0.4")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(wheel.parent))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/{wheel.name}"
        build = prepare(BuildSpec(wheel=url))
        assert _version_of(build.python) == "0.0.4"
        assert build.describe()["wheel"] == url
        missing = BuildSpec(wheel=url.replace("0.0.4", "9.9.9"))
        with pytest.raises(BuildError, match="cannot download the wheel"):
            prepare(missing)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert prepare(BuildSpec(wheel=url)).python == build.python  # no server: from the cache


def test_a_missing_wheel_file_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    with pytest.raises(BuildError, match="does not exist; fix build.wheel"):
        prepare(BuildSpec(wheel=str(tmp_path / "nope-1.0-py3-none-any.whl")))
