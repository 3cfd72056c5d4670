"""Input nested deeper than Python's recursion limit is bad input, not a RecursionError: a
results folder's order.json and a nightly's --arm-setting value (exit 2, one line that says
what to do)."""

from __future__ import annotations

from typer.testing import CliRunner

from e2e.cli import app

runner = CliRunner()


def _one_line_exit_2(got) -> str:
    assert got.exit_code == 2, got.output
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    assert "Traceback" not in got.output and "RecursionError" not in got.output
    return " ".join(got.output.split())


def test_a_deep_order_json_is_named_not_a_recursion_error(tmp_path):
    folder = tmp_path / "r" / "default"
    folder.mkdir(parents=True)
    (folder / "order.json").write_text("[" * 5000 + "]" * 5000)
    said = _one_line_exit_2(runner.invoke(app, ["sweep", "--dry-run", "--runs", "1",
                                                "--results", str(tmp_path / "r")]))
    assert "order.json: unreadable or unknown order" in said


def test_a_deep_arm_setting_is_named_not_a_recursion_error(tmp_path):
    deep = "[" * 20_000 + "]" * 20_000
    said = _one_line_exit_2(runner.invoke(app, ["nightly", "--dry-run", "--arm-setting",
                                                f"step_delay_us={deep}", "--results",
                                                str(tmp_path / "r")]))
    assert "--arm-setting step_delay_us: its value nests too deeply" in said
    assert len(said) < 300  # one line, not the value echoed
