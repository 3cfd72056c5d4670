"""The errors e2e raises, each with a message a user can act on.

    E2EError
     ├── ConfigError          a config file or flag is wrong (names the file and the key)
     ├── BuildError           a server environment or model could not be made
     ├── ServerError          the server could not be started, reached or stopped
     │    ├── ServerStartError    it exited or never became healthy (carries the log's tail)
     │    └── ServerBusyError     another e2e holds the one-server-per-host lock
     │         └── HostNotQuietError   --require-quiet: another process uses the CPU/GPU
     ├── LoadError            the load generator could not drive the server
     └── ResultsError         results could not be written or read
          ├── ResultsBusyError    another e2e is writing runs into the same results folder
          └── NoSuchResults       the folder a command was pointed at is missing or has no runs (exit 2)

Lower-level errors (OSError, httpx, pydantic) are translated at the boundary with
``raise ... from exc``; the CLI prints ``str(error)`` and exits 1 (2 for bad input).
"""

from __future__ import annotations

__all__ = [
    "E2EError",
    "ConfigError",
    "BuildError",
    "ServerError",
    "ServerStartError",
    "ServerBusyError",
    "HostNotQuietError",
    "LoadError",
    "ResultsError",
    "ResultsBusyError",
    "NoSuchResults",
]


class E2EError(Exception):
    """Base of every error e2e reports to a user."""

    exit_code = 1


class ConfigError(E2EError):
    exit_code = 2


class BuildError(E2EError):
    pass


class ServerError(E2EError):
    pass


class ServerStartError(ServerError):
    pass


class ServerBusyError(ServerError):
    pass


class HostNotQuietError(ServerBusyError):
    """Another process is using the CPU or the GPU (``--require-quiet``); the message names it.
    Like a held lock, nothing is started and nothing is written."""


class LoadError(E2EError):
    pass


class ResultsError(E2EError):
    pass


class ResultsBusyError(ResultsError):
    """Another e2e holds the results folder's lock (``e2e.results.store.writing``); the message
    names its pid. Nothing is written."""


class NoSuchResults(ResultsError):
    """A results folder given on the command line does not exist, or holds no runs: bad input."""

    exit_code = 2
