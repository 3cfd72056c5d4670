"""Issue 34 item 15, the small ones: a missing folder is bad input (exit 2) for report, plan
and export; 200,000 unknown TOML keys print a screen, not 27 MB; an ``e2e history`` CSV cell
never starts a spreadsheet formula."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from e2e.cli import app


@pytest.mark.parametrize("args", [["report", "nope/x"], ["plan", "nope/x", "--target-effect", "1%"],
                                  ["export", "nope/x"]])
def test_a_missing_results_folder_is_bad_input(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "no such results folder" in result.output


@pytest.mark.slow
def test_many_unknown_keys_print_a_screen(tmp_path):
    config = tmp_path / "many.toml"
    config.write_text("".join(f"k{i} = 1\n" for i in range(200_000)))
    result = CliRunner().invoke(app, ["arms", "--config", str(config)])
    assert result.exit_code == 2
    assert len(result.output) < 10_000 and "more errors" in result.output


def test_history_csv_cells_never_start_a_formula():
    from e2e.render.markup import csv_safe

    frame = pd.DataFrame({"host": ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx",
                                   "runner-1"], "median": [1.0, -2.0, 3.0, 4.0, 5.0, 6.0]})
    out = csv_safe(frame)
    assert [h[0] for h in out["host"][:5]] == ["'"] * 5 and out["host"][5] == "runner-1"
    assert list(out["median"]) == [1.0, -2.0, 3.0, 4.0, 5.0, 6.0]
