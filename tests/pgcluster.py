"""A throwaway PostgreSQL server for the store's tests: ``initdb`` into a temporary folder,
``pg_ctl start`` on 127.0.0.1 and a free port with password (SCRAM) authentication, stopped
and removed afterwards. No mock: the Debian ``postgresql`` package's own binaries.

As root (CI, this container) initdb refuses to run, so the cluster belongs to the
``postgres`` user the package creates and every command runs through ``runuser -u postgres``.
Without the binaries the tests skip, except under CI (``CI=true``), where that is a failure:
.ci/run installs them."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD_VAR = "E2E_TEST_PGPASSWORD"


def bindir() -> Path | None:
    """Where initdb and pg_ctl are: pg_config's bindir, Debian's versioned folder, or PATH."""
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        path = Path(out.stdout.strip())
        if (path / "initdb").exists():
            return path
    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(found).parent
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return Path(shutil.which("initdb")).resolve().parent
    return None


def binaries_or_skip() -> Path:
    found = bindir()
    if found is None:
        why = "PostgreSQL's initdb/pg_ctl are not installed (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; .ci/run installs them")
        pytest.skip(why)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    folder: Path
    port: int
    password: str
    bindir: Path
    user: str | None  # the OS user the server runs as (None: this one)

    def url(self, database: str = "e2e") -> str:
        """The store URL: no password in it; ``${E2E_TEST_PGPASSWORD}`` stands for it."""
        return (f"postgresql+psycopg://postgres:${{{PASSWORD_VAR}}}@127.0.0.1:{self.port}/"
                f"{database}")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def psql(self, sql: str, database: str = "e2e") -> str:
        env = {**os.environ, "PGPASSWORD": self.password}
        psql = shutil.which("psql") or str(self.bindir / "psql")
        return subprocess.run([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                               "-d", database, "-At", "-c", sql], capture_output=True,
                              text=True, check=True, env=env, timeout=60).stdout

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop",
                 check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> Cluster:
    bins = binaries_or_skip()
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
            user = "postgres"
        except KeyError:
            pytest.fail("running as root without a 'postgres' user: initdb refuses root")
    folder = Path(tempfile.mkdtemp(prefix="e2e-pg-"))
    password = "t3st-" + os.urandom(6).hex()
    (folder / "pw").write_text(password + "\n")
    if user:
        shutil.chown(folder, user)
        shutil.chown(folder / "pw", user)
    cluster = Cluster(folder=folder, port=_free_port(), password=password, bindir=bins, user=user)
    try:
        cluster.run("initdb", "-D", str(folder / "data"), "-U", "postgres",
                    f"--pwfile={folder / 'pw'}", "--auth-local=trust",
                    "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -p {cluster.port} -k {folder} "
                   "-c fsync=off -c max_connections=50")
        cluster.run("pg_ctl", "-D", str(folder / "data"), "-o", options,
                    "-l", str(folder / "server.log"), "-w", "-t", "60", "start")
        cluster.psql("CREATE DATABASE e2e", database="postgres")
    except subprocess.CalledProcessError as exc:
        log = (folder / "server.log").read_text() if (folder / "server.log").exists() else ""
        cluster.stop()
        raise RuntimeError(f"could not start PostgreSQL: {exc.stderr}\n{log}") from exc
    return cluster
