"""Result and site files are as readable as the umask says (issue 34 item 14): a team is told
to publish the dashboard and share results, so a web server or a teammate must be able to
read them; a user who wants them private sets umask 077, and gets that."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from e2e.paths import atomic_dir, atomic_write_bytes, umask
from e2e.results.store import new_partial_dir


@pytest.fixture(params=[0o022, 0o077, 0o002])
def mask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_files_and_folders_follow_the_umask(tmp_path, mask):
    assert umask() == mask
    atomic_write_bytes(tmp_path / "site" / "index.html", b"<html>")
    assert mode(tmp_path / "site" / "index.html") == 0o666 & ~mask
    folder = new_partial_dir(tmp_path / "r", "exp", "main-c1-base-r1")
    assert mode(folder) == 0o777 & ~mask
    with atomic_dir(tmp_path / "made") as tmp:
        (tmp / "x").write_text("x")
    assert mode(tmp_path / "made") == 0o777 & ~mask


def test_the_dashboard_is_readable_by_a_web_server(tmp_path, mask):
    from e2e.render import write_site

    for path in write_site({"index.html": b"x", "plotly.min.js": b"y"}, tmp_path / "site"):
        assert mode(path) == 0o666 & ~mask
