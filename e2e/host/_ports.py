"""Who listens on a TCP port of this host: a server is known by its process, not its port.

    strangers(port, pids)   -> list[str] | None   listeners on ``port`` that none of ``pids`` holds
    port_holders(port)      -> list[int]          the processes that hold ``port``'s listeners

Method: the kernel lists every listening socket of this network namespace with its inode
(``/proc/net/tcp``, ``tcp6``); a process holds a socket when one of its fds links to
``socket:[<inode>]``. A server e2e started answers on its port only if one of its process
group's processes holds every socket listening there: another program that bound the port
first (between e2e's check that it was free and the server's bind), or beside it with
``SO_REUSEPORT``, would answer some or all of the requests. Read through ``e2e.host._procfs``.
"""

from __future__ import annotations

from collections.abc import Iterable

from e2e.host import _procfs as procfs

__all__ = ["strangers", "port_holders"]


def _holders(inodes: set[int]) -> dict[int, list[int]]:
    """inode -> the pids (of those whose fds this process may read) that hold it."""
    found: dict[int, list[int]] = {}
    if not inodes:
        return found
    for pid in procfs.pids():
        for inode in procfs.socket_inodes(pid) & inodes:
            found.setdefault(inode, []).append(pid)
    return found


def _name(pid: int) -> str:
    stat = procfs.proc_stat(pid)
    return f"pid {pid} ({stat.name})" if stat is not None else f"pid {pid}"


def strangers(port: int, pids: Iterable[int]) -> list[str] | None:
    """Who else listens on ``port``: one clause per listening socket that none of ``pids``
    holds ("pid 4242 (python3) holds one", naming its holder where this user may see it); []
    when every listener is theirs; "nothing listens on port N" when none does; None where the
    host does not say (no ``/proc``)."""
    listening = procfs.listening_sockets(port)
    if listening is None:
        return None
    if not listening:
        return [f"nothing listens on port {port}"]
    ours: set[int] = set()
    for pid in pids:
        ours |= procfs.socket_inodes(pid)
    others = listening - ours
    holders = _holders(others)
    return [(", ".join(_name(p) for p in sorted(holders[inode])) + " holds one" if inode in holders
             else "a process this user cannot see (another user's, or gone) holds one")
            for inode in sorted(others)]


def port_holders(port: int) -> list[int]:
    """The pids (this user may see) that hold a socket listening on ``port``."""
    listening = procfs.listening_sockets(port) or set()
    return sorted({p for pids in _holders(listening).values() for p in pids})
