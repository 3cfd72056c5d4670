"""The command line as a user meets it: help that reads as sentences, ``--version``, and every
command's errors and Ctrl-C/SIGTERM through ``console.guard`` (``micro`` and ``plan`` had their
own ``error:`` lines and never turned SIGTERM into exit 130)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

import e2e
from e2e.cli import app
from e2e.session.builds import project_root

runner = CliRunner()


def test_version_names_the_release_and_the_checkout():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith(f"e2e {e2e.__version__}")
    assert project_root() == Path(e2e.__file__).resolve().parent.parent
    if (project_root() / ".git").exists():
        assert "(commit " in result.output


@pytest.mark.slow
def test_every_command_help_reads_as_sentences():
    """No docstring line break inside a sentence reaches a help text (the list in ``e2e
    --help`` wrapped descriptions mid-sentence)."""
    import typer.main

    group = typer.main.get_group(app)
    for name, command in group.commands.items():
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph, (name, paragraph)
        assert runner.invoke(app, [name, "--help"]).exit_code == 0, name


def _sigterm(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # what `kill <pid>` does to a running command
    raise AssertionError("SIGTERM did not interrupt")


@pytest.mark.parametrize("argv,target", [
    (["micro", "--dry-run", "--rows", "1", "--runs", "1", "--report-from", "1", "--calls", "1"],
     "e2e.kernels.micro.run_micro"),
    (["plan", "--target-effect", "1%", "RESULTS"], "e2e.render.read_summary"),
])
def test_micro_and_plan_go_through_the_guard(argv, target, tmp_path, monkeypatch):
    argv = [str(tmp_path) if a == "RESULTS" else a for a in argv]
    from e2e.results.store import write_run
    from test_aggregate import make_record

    (tmp_path / "r1").mkdir()
    write_run(tmp_path / "r1", make_record("main", 1, 1, tpot=5.0))
    module, name = target.rsplit(".", 1)
    import importlib

    monkeypatch.setattr(importlib.import_module(module), name, _sigterm)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        result = runner.invoke(app, argv)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output


def test_micro_and_plan_bad_input_is_exit_2_with_one_error_line(tmp_path):
    result = runner.invoke(app, ["micro", "--dry-run", "--runs", "2", "--report-from", "3",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 2 and "error:" in result.output and "report-from" in result.output
    result = runner.invoke(app, ["plan", "--target-effect", "lots", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("error:") == 1
    result = runner.invoke(app, ["plan", "--target-effect", "1%", "--metric", "nope",
                                 str(tmp_path)])
    assert result.exit_code == 2 and "nope" in result.output


def test_dry_run_prints_the_order_the_plan_runs(tmp_path):
    """The dry run's 'round k:' lines are the order of the units it lists (an opt-in arm such
    as mono is in neither)."""
    result = runner.invoke(app, ["sweep", "--dry-run", "--results", str(tmp_path),
                                 "--concurrency", "1", "--no-dspark"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    planned: dict[int, list[str]] = {}
    for line in lines:
        if line.startswith("[") and " round " in line:
            unit, _, rnd = line.split()[1:4]
            planned.setdefault(int(rnd), []).append(unit.split("-c1-")[0])
    described = {int(l.split()[1].rstrip(":")): l.split(":", 1)[1].split()
                 for l in lines if l.startswith("  round ")}
    assert planned and described == planned


def test_dry_run_says_whose_order_seed_it_shows(tmp_path):
    """A new folder: a seed drawn for the dry run (said so, and how to pin it); --order-seed N:
    that order, the same each time; a folder with an order.json: its recorded seed, and a
    different --order-seed for it is refused (exit 2), not a silent reordering."""
    def rounds(*extra):
        result = runner.invoke(app, ["sweep", "--dry-run", "--results", str(tmp_path),
                                     "--concurrency", "1", "--no-dspark", "--runs", "4", *extra])
        assert result.exit_code == 0, result.output
        return result.output, [l for l in result.output.splitlines() if l.startswith("  round ")]

    text, _ = rounds()
    assert "drawn for this dry run" in text and "give --order-seed" in text
    text, pinned = rounds("--order-seed", "5")
    assert "order seed 5 (--order-seed" in text and rounds("--order-seed", "5")[1] == pinned
    assert any(rounds("--order-seed", str(s))[1] != pinned for s in (6, 7, 8))
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "order.json").write_text('{"order": "williams", "seed": 5}')
    text, recorded = rounds()
    assert "order seed 5 (the folder's" in text and recorded == pinned
    result = runner.invoke(app, ["sweep", "--dry-run", "--results", str(tmp_path),
                                 "--order-seed", "6"])
    assert result.exit_code == 2 and "planned with order seed 5" in result.output


def test_swap_is_asked_with_the_windows_it_needs(tmp_path):
    """--duet --swap on the calibration config's 3 windows is refused with what to give
    (exit 2); with --windows 4 the dry run says the sides trade CPUs."""
    config = str(project_root() / "configs" / "calibration.toml")
    base = ["sweep", "--dry-run", "-c", config, "--results", str(tmp_path), "--duet", "--swap",
            "--arms", "main,main-repeat", "--no-dspark", "--runs", "2"]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 2 and "a multiple of 2" in refused.output
    shown = runner.invoke(app, [*base, "--windows", "4"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("trade CPUs between load windows") == 4  # 2 duets x 2 sides


def test_the_command_line_loads_no_statistics_stack_until_a_command_needs_it():
    """``import e2e.cli`` (every command's start, ``--help`` included) loads neither scipy nor
    statsmodels, matplotlib or torch: the analysis and render stages come with the command
    that uses them. A top-level import of e2e.analysis in a command module once made every
    command import scipy, and a process that had hidden torch (as the micro test does) failed
    inside scipy's import before any command ran."""
    import subprocess
    import sys

    code = ("import sys, e2e.cli; print(sorted(m for m in ('scipy', 'statsmodels', "
            "'matplotlib', 'torch') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
