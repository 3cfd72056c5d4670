"""Symbolic links inside a results folder never lead e2e's writes out of it: anyone who can
write to a shared results folder (a CI cache, a team's share) can put a link where e2e makes
``report/``, ``report/plots/``, ``export/<format>/``, ``.attempts/`` or ``.partial/``; each
is refused with the link named, and nothing lands (or moves) outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e.errors import ResultsError
from e2e.render import build_report
from e2e.results.store import finalize_unit, new_partial_dir
from test_render import calibration_records, write_results


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.mark.parametrize("link", ["report", "report/plots"])
def test_the_report_is_not_written_through_a_link(tmp_path, link):
    exp = write_results(tmp_path / "r", calibration_records())
    outside = tmp_path / "outside"
    outside.mkdir()
    (exp / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, exp / link)
    with pytest.raises(ResultsError, match="symbolic link"):
        build_report(exp)
    assert files_under(outside) == set()


def test_export_is_not_written_through_a_link(tmp_path):
    from typer.testing import CliRunner

    from e2e.cli import app

    exp = write_results(tmp_path / "r", calibration_records()[:4])
    outside = tmp_path / "outside"
    outside.mkdir()
    (exp / "export").mkdir()
    os.symlink(outside, exp / "export" / "vllm-bench")
    result = CliRunner().invoke(app, ["export", str(exp)])
    assert result.exit_code != 0 and "symbolic link" in result.output, result.output
    assert files_under(outside) == set()


def test_an_earlier_attempt_is_not_moved_through_a_link(tmp_path):
    root = tmp_path / "r" / "exp"
    outside = tmp_path / "outside"
    outside.mkdir()
    old = root / "main-c1-base-r1"
    old.mkdir(parents=True)
    (old / "run.json").write_text("{}")
    os.symlink(outside, root / ".attempts")
    partial = new_partial_dir(tmp_path / "r", "exp", "main-c1-base-r1")
    with pytest.raises(ResultsError, match="symbolic link"):
        finalize_unit(partial, old)
    assert files_under(outside) == set() and (old / "run.json").exists()


def test_a_partial_folder_is_not_made_through_a_link(tmp_path):
    root = tmp_path / "r" / "exp"
    root.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / ".partial")
    with pytest.raises(ResultsError, match="symbolic link"):
        new_partial_dir(tmp_path / "r", "exp", "main-c1-base-r1")
    assert files_under(outside) == set()
