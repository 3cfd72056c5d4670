"""The report is rendered whole, then written once (``e2e.paths.write_files``): a renderer that
fails leaves the folder's earlier report as it was, not half of a new one."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.paths import write_files
from e2e.render import build_report
from test_render import golden_records, write_results


def test_a_renderer_that_fails_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    exp = write_results(tmp_path, [r for r in golden_records()
                                   if r.spec.concurrency == 1 and not r.spec.dspark])
    old = exp / "report" / "report.md"
    old.parent.mkdir()
    old.write_text("the earlier report\n", encoding="utf-8")

    def broken(summary):
        raise RuntimeError("the plot renderer failed")

    monkeypatch.setattr("e2e.render.report.render_plots", broken)
    with pytest.raises(RuntimeError, match="plot renderer"):
        build_report(exp)
    assert old.read_text(encoding="utf-8") == "the earlier report\n"
    assert sorted(p.name for p in old.parent.iterdir()) == ["report.md"]


def test_write_files_writes_in_order_and_prunes_only_what_the_glob_names(tmp_path: Path) -> None:
    (tmp_path / "plots").mkdir()
    for name in ("plots/gone.png", "plots/kept.png", "plots/notes.txt", "other.png"):
        (tmp_path / name).write_bytes(b"old")
    written = write_files(tmp_path, {"a.md": b"a", "plots/kept.png": b"new", "b.csv": b"b"},
                          prune="plots/*.png")
    assert written == [tmp_path / "a.md", tmp_path / "plots/kept.png", tmp_path / "b.csv"]
    assert (tmp_path / "plots/kept.png").read_bytes() == b"new"
    assert not (tmp_path / "plots/gone.png").exists()
    assert (tmp_path / "plots/notes.txt").exists() and (tmp_path / "other.png").exists()


def test_the_report_is_rendered_from_what_was_read_once(tmp_path: Path) -> None:
    """Everything the report needs is read into one value (``read_report_input``); summarizing
    and rendering it touch no file: the folder can be gone and the same report comes out."""
    import shutil

    from e2e.render.report import read_report_input, render_report, summary_of

    exp = write_results(tmp_path, [r for r in golden_records()
                                   if r.spec.concurrency == 1 and not r.spec.dspark])
    (exp / "capacity.json").write_text("{}", encoding="utf-8")
    read = read_report_input(exp)
    assert read.whole and len(read.records) > 0 and read.capacity == str(exp / "capacity.json")
    written = build_report(exp)
    on_disk = {p.relative_to(written.report_dir).as_posix(): p.read_bytes() for p in written.paths}
    shutil.rmtree(exp)
    report = render_report(summary_of(read))
    assert report.summary.capacity == str(exp / "capacity.json")
    assert report.files == on_disk
