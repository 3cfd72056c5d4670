"""`e2e unit`: the validation matrix on the CPU default (real pytest processes per arm and
mutant), the verdict logic on hand-made results, and bad configs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.commands._unit import Column, caught
from e2e.render import unit_markdown

pytestmark = pytest.mark.slow  # the whole module is the slow tier

ROOT = Path(__file__).resolve().parent.parent


def test_matrix_on_the_default_catches_both_mutants(tmp_path):
    done = subprocess.run([sys.executable, "-m", "e2e.cli", "unit", "--arms", "main,pr",
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((tmp_path / "unit.json").read_text())
    results = doc["results"]
    assert set(results) == {"main", "pr", "pr-flag-forced-off", "pr-noop-refresh"}
    assert all(o == "passed" for o in results["pr"].values()) and len(results["pr"]) >= 4
    assert sum(o == "failed" for o in results["main"].values()) >= 3  # main lacks the change
    assert doc["mutants"]["pr-flag-forced-off"] == [
        "test_plugin_arm.py::test_draft_steps_may_update_the_metadata_in_place"]
    assert doc["mutants"]["pr-noop-refresh"] == [
        "test_plugin_arm.py::test_draft_update_refreshes_the_graph_buffers"]
    md = (tmp_path / "unit.md").read_text()
    assert "| test | main | pr | pr-flag-forced-off (mutant of pr) |" in md
    assert "not caught" not in md


def test_a_mutant_no_test_catches_is_reported():
    cols = [Column("pr", "pr", {"packing": "inplace"}),
            Column("m", "pr", {"packing": "inplace"}, "x.y:z", mutant=True)]
    results = {"pr": {"a.py::t1": "passed", "a.py::t2": "failed"},
               "m": {"a.py::t1": "passed", "a.py::t2": "failed"}}
    assert caught(results, cols[1]) == []  # t2 fails on the arm too: not the mutant's doing
    md = unit_markdown(cols, results, {"m": caught(results, cols[1])})
    assert "mutant **m**" in md and "**not caught by any test**" in md
    assert "| a.py::t2 | **FAIL** | **FAIL** |" in md


def test_a_mutant_of_an_unknown_arm_is_a_clear_error(tmp_path):
    config = tmp_path / "c.toml"
    text = (ROOT / "configs" / "default.toml").read_text().replace(
        'name = "pr-noop-refresh"\narm = "pr"', 'name = "pr-noop-refresh"\narm = "nope"')
    config.write_text(text)
    done = subprocess.run([sys.executable, "-m", "e2e.cli", "unit", "--config", str(config),
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "nope" in done.stderr and "Traceback" not in done.stderr
