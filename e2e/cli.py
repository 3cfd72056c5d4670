"""The entry point of the ``e2e`` command (``pyproject.toml``: ``e2e = "e2e.cli:app"``). The
commands are in ``e2e.commands``; nothing imports this module."""

from __future__ import annotations

import sys

from e2e.commands import app

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
