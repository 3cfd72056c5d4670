"""Where e2e keeps what it builds (server environments, the tiny model), how it reads the files
a user gives (bounded: ``read_bounded``, ``read_toml``) and how it writes files.

Every result file is written atomically: to a temporary file in the same folder, flushed and
fsynced, then renamed over the target, so a crash or Ctrl-C leaves the old file or the new
one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from e2e.errors import ConfigError, ResultsError

__all__ = ["e2e_home", "atomic_write_bytes", "atomic_write_text", "atomic_write_json",
           "write_files", "atomic_dir", "replace_dir", "fsync_dir", "sha256_file", "tree_hash", "within",
           "read_bounded", "MAX_READ_BYTES", "read_toml", "no_links", "umask", "as_umask_allows", "flocked"]

MAX_READ_BYTES = 256 << 20  # an input file e2e reads whole (an import) is at most this big


def e2e_home() -> Path:
    """``$E2E_HOME``, or ``~/.cache/e2e``: server environments, models, the server lock."""
    return Path(os.environ.get("E2E_HOME") or Path.home() / ".cache" / "e2e")


def _explain(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"cannot write {path}: the disk is full; free space and rerun (finished results are intact)"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"cannot write {path}: {exc.strerror}; choose a writable --results folder"
    return f"cannot write {path}: {exc}"


def within(root: Path, path: Path, what: str = "a file") -> Path:
    """``path`` if it resolves inside ``root`` (symlinks followed, so a link that leads out
    is refused), else raise ResultsError. Every write under a results folder or an export
    folder goes through it; the names in the path are checked before (e2e.names.check_name)."""
    root_real = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != root_real and root_real not in real.parents:
        raise ResultsError(f"refusing to write {what} at {path}: it resolves to {real}, outside "
                           f"{root_real} (a symbolic link that leads out?)")
    return Path(path)


def no_links(root: Path, path: Path, what: str = "a file") -> Path:
    """``path`` if no folder from ``root`` (exclusive) down to ``path`` (inclusive) is a
    symbolic link, else ResultsError naming it. For the folders e2e makes inside a results
    folder (``report/``, ``report/plots/``, ``export/<format>/``, ``.attempts/``): anyone who
    can write to the results folder can put a link there, and ``within`` follows links on
    both sides, so a link there would take every write (or a moved run) with it."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:  # not under root: only the folder itself
        root, parts = path.parent, (path.name,)
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise ResultsError(f"refusing to write {what} through {current}: it is a symbolic "
                               f"link (to {os.readlink(current)}); remove it and run again")
    return path


def _kind(mode: int) -> str:
    import stat

    return ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def read_bounded(path: Path, limit: int = MAX_READ_BYTES, *,
                 expect: str = "a smaller file", regular: bool = False) -> bytes:
    """The bytes of ``path`` (a file a user gave), at most ``limit`` of them: a larger file
    (or an endless one, /dev/zero) is bad input (ConfigError, exit 2), not filled memory.
    ``regular``: only a regular file is read; a named pipe, a device or a socket is refused
    before a byte is read (opened without blocking: a FIFO with no writer would wait forever)."""
    import stat

    path = Path(path)
    try:
        if regular:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                os.close(fd)
                raise ConfigError(f"{path} is {_kind(mode)}, not a regular file: give {expect}")
            os.set_blocking(fd, True)
            handle = os.fdopen(fd, "rb")
        else:
            handle = open(path, "rb")
        with handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise ConfigError(f"{path} is larger than {limit >> 20} MiB (or endless): give "
                          f"{expect}")
    return data


MAX_CONFIG_BYTES = 4 << 20  # a config is kilobytes; anything past this (or endless) is refused


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable or malformed file is a ConfigError."""
    if not Path(path).exists():
        raise ConfigError(f"{path}: no such config file")
    try:  # bounded: --config /dev/zero is bad input, not 23 GB of memory
        return tomllib.loads(read_bounded(path, MAX_CONFIG_BYTES,
                                          expect="a config file").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a config: its tables or arrays nest too deeply") from None


@contextlib.contextmanager
def flocked(path: Path, *, shared: bool = False, deadline: float,
            busy: Callable[[str], Exception]) -> Iterator[None]:
    """Hold an flock on ``path`` (created if absent, never through a symbolic link) for the
    block: exclusive, or ``shared``. The kernel drops it when its holder dies, so a crashed e2e
    leaves no stale lock. While another process holds it, retry each second until
    ``deadline`` (``time.monotonic()``), then raise ``busy(holder)``, ``holder`` being the pid
    the last exclusive holder wrote into the file ("unknown" if none). The file's contents are
    bytes anyone may have written: ``holder`` shows them escaped (``_holder``). Anything
    but a regular file at ``path`` (a link, a FIFO, a folder, a device) is refused
    (ConfigError, exit 2) before it is read or waited on."""
    import fcntl
    import stat

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = (os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))  # O_NONBLOCK: a FIFO there must not block the open
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            kind = "a symbolic link" if exc.errno == errno.ELOOP else "a folder"
            raise ConfigError(f"refusing to lock {path}: it is {kind}, not a regular file; "
                              "remove it and run again") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"refusing to lock {path}: it is {_kind(mode)}, not a regular "
                              "file; remove it and run again")
        os.set_blocking(fd, True)
        lock = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        while True:
            try:
                fcntl.flock(fd, lock | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy(_holder(os.pread(fd, 32, 0))) from None
                time.sleep(1.0)
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(data: bytes) -> str:
    """What a lock file says of its holder: the pid e2e wrote, or any other bytes escaped
    (``\\xff``, ``\\x1b``: never decoded, never acted on by a terminal); "unknown" if empty."""
    data = data.strip()
    if not data:
        return "unknown"
    if data.isdigit():
        return data.decode("ascii")
    return data.decode("latin-1").encode("unicode_escape").decode("ascii")


def umask() -> int:
    """This process's umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # elsewhere: set and put back at once
    os.umask(old)
    return old


def as_umask_allows(path: Path | int, *, folder: bool = False) -> None:
    """Give a file (or folder) that ``mkstemp``/``mkdtemp`` made (0600/0700, whatever the
    umask) the mode a plain ``open``/``mkdir`` would have: results and sites are meant to be
    read by a teammate or a web server; a user who wants them private sets umask 077."""
    mode = (0o777 if folder else 0o666) & ~umask()
    if isinstance(path, int):
        os.fchmod(path, mode)
    else:
        os.chmod(path, mode)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        as_umask_allows(fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        fsync_dir(path.parent)
    except OSError as exc:
        raise ResultsError(_explain(exc, path)) from exc
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def write_files(folder: Path, files: dict[str, bytes], *, prune: str | None = None) -> list[Path]:
    """The one writer of a set of rendered files (a report): each of ``files`` (a path under
    ``folder`` -> its bytes) written atomically, in order; then, with ``prune`` (a glob under
    ``folder``, e.g. ``plots/*.png``), each file it matches that ``files`` has not is removed
    (one of an earlier set, whose metric is gone, would mislead). The paths written."""
    folder = Path(folder)
    written = [folder / name for name in files]
    for path, data in zip(written, files.values()):
        atomic_write_bytes(path, data)
    for stale in folder.glob(prune) if prune else ():
        if stale.relative_to(folder).as_posix() not in files:
            with contextlib.suppress(OSError):
                stale.unlink()
    return written


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def fsync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` (a rename into it) durable: fsync the directory."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the kernel,
    the C library or the file system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(new: Path, final: Path, keep_old: Path | None = None) -> None:
    """Put the folder ``new`` at ``final`` with one atomic step, so that ``final`` is always
    either the old folder or the new one, never absent or half of either. An old ``final`` is
    moved to ``keep_old`` (or removed when None) only after the new one is in place. Both
    parent folders are fsynced. Raises OSError."""
    new, final = Path(new), Path(final)
    if not final.exists():
        os.rename(new, final)
    elif _exchange(new, final):  # the old folder now sits at ``new``
        if keep_old is not None:
            keep_old.parent.mkdir(parents=True, exist_ok=True)
            os.rename(new, keep_old)
            fsync_dir(keep_old.parent)
        else:
            import shutil

            shutil.rmtree(new)
    else:  # no atomic exchange here: the old folder is set aside first, for a moment
        aside = keep_old or final.with_name(f".{final.name}.old")
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.rename(final, aside)
        os.rename(new, final)
        if keep_old is None:
            import shutil

            shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(final.parent)
    if new.parent != final.parent:
        fsync_dir(new.parent)


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success rename it to ``final`` (which must not
    exist), on any error remove it, so ``final`` is either complete or absent."""
    import shutil

    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        as_umask_allows(tmp, folder=True)
        yield tmp
        os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read 1 MiB at a time (a wheel, an imported file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_hash(root: Path) -> str:
    """One sha256 over every file's relative path and content under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()
