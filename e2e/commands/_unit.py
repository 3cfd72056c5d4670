"""``e2e unit``: the validation matrix. The reference change validated itself by running its
tests against main, the change, a null arm (the flag forced off) and a no-op refresh, and
showing which test fails where. This runs the config's ``[unit] tests`` once per arm (the
arm's plugin settings in ``E2E_UNIT_SETTINGS``, its name in ``E2E_UNIT_ARM``) and once per
``[[unit.mutants]]`` entry (an arm with a setting forced and/or a function made a no-op,
``E2E_UNIT_NOOP``), each in a fresh ``pytest`` process, and renders which test fails on which
column and whether each mutant is caught (at least one test fails that passes on the mutant's
arm). Writes ``unit.json`` and ``unit.md`` (``e2e.render.unit_markdown``) under ``--out``.

What it does not do (yet): run a vLLM tree's own tests against each arm's build; the tests
run with the driver's Python against e2e's plugin (the CPU default's arms share one build).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from e2e.errors import ConfigError, E2EError
from e2e.session import shielded

__all__ = ["Column", "columns", "run_column", "caught", "unit_command"]


@dataclass(frozen=True)
class Column:
    name: str
    arm: str
    settings: dict
    noop: str | None = None
    mutant: bool = False


def columns(experiment, arms: list[str] | None = None) -> list[Column]:
    """The arms (given, else ``[unit] arms``, else the non-opt-in arms), then the mutants."""
    names = arms or experiment.unit.arms or [n for n, a in experiment.arms.items() if not a.opt_in]
    out = [Column(n, n, dict(experiment.arm(n).plugin)) for n in names]
    for m in experiment.unit.mutants:
        base = experiment.arm(m.arm)
        out.append(Column(m.name, m.arm, {**base.plugin, **m.plugin}, m.noop, mutant=True))
    seen = set()
    for c in out:
        if c.name in seen:
            raise ConfigError(f"e2e unit: two columns are named {c.name!r}")
        seen.add(c.name)
    return out


def _test_paths(tests: list[str], *, confined: bool = False) -> list[str]:
    """The test files, each existing; ``confined`` (a config's ``[unit] tests``): each must lie
    inside the current folder or e2e's repository (a config from elsewhere must not run
    files from anywhere on the host)."""
    import e2e

    root = Path(e2e.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").exists():
        root = None
    paths = []
    for t in tests:
        p = Path(t)
        if not p.exists() and root is not None and (root / t).exists():
            p = root / t
        if not p.exists():
            raise ConfigError(f"[unit] tests: {t} does not exist (relative paths resolve against "
                              "the current folder, then e2e's repository)")
        if confined:
            real = p.resolve()
            homes = [Path.cwd().resolve(), *([root.resolve()] if root is not None else [])]
            if not any(real == h or real.is_relative_to(h) for h in homes):
                raise ConfigError(f"[unit] tests: {t} resolves to {real}, outside the current "
                                  "folder and e2e's repository; pass it with --tests to run it")
        paths.append(str(p))
    return paths


def _stop_group(child: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the child's process group, SIGKILL after ``grace_s``."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.wait(grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # whatever of the group is left
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(5)


def run_column(column: Column, tests: list[str], *, timeout_s: float = 1800) -> dict[str, str]:
    """``{test id: "passed" | "failed" | "skipped"}`` for one column (a fresh pytest)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "E2E_UNIT_ARM": column.name,
               "E2E_UNIT_SETTINGS": json.dumps(column.settings, sort_keys=True)}
        env.pop("E2E_UNIT_NOOP", None)
        if column.noop:
            env["E2E_UNIT_NOOP"] = column.noop
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "-p", "e2e.commands._unit_noop", f"--junitxml={report}", *tests]
        # its own process group, stopped with everything it started on any way out (Ctrl-C
        # or SIGTERM to e2e alone, a timeout): a pytest left running would outlive e2e. The
        # spawn and the stop are shielded: a signal between Popen and the try, or a second
        # Ctrl-C while the stop waits (it cut the wait short before the SIGKILL, and a test
        # that ignores SIGTERM outlived e2e), is acted on once the child is stopped
        child = None
        try:
            with shielded():
                child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True,
                                         start_new_session=True)
            stdout, stderr = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with shielded():
                _stop_group(child)
            raise E2EError(f"e2e unit: the tests of column {column.name} ran past "
                           f"{timeout_s:.0f} s") from None
        except BaseException:
            if child is not None:
                with shielded():
                    _stop_group(child)
            raise
        if not report.exists() or child.returncode not in (0, 1):
            tail = (stdout + stderr)[-1500:]
            raise E2EError(f"e2e unit: pytest could not run the tests of column {column.name} "
                           f"(exit {child.returncode}):\n{tail}")
        outcomes = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            test = f"{Path(case.get('file') or case.get('classname', '')).name}::{case.get('name')}"
            if case.get("classname") and not case.get("file"):
                test = f"{case.get('classname').rsplit('.', 1)[-1]}.py::{case.get('name')}"
            kinds = {child.tag for child in case}
            outcomes[test] = ("failed" if kinds & {"failure", "error"} else
                              "skipped" if "skipped" in kinds else "passed")
        return outcomes


def caught(results: dict[str, dict[str, str]], column: Column) -> list[str]:
    """The tests that fail on a mutant and pass on the mutant's arm."""
    base = results.get(column.arm, {})
    return sorted(t for t, o in results[column.name].items()
                  if o == "failed" and base.get(t) == "passed")


def unit_command(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Experiment config (TOML).")] = None,
    arms: Annotated[list[str] | None, typer.Option(
        metavar="ARM[,ARM...]", show_default=False,
        help="Arms, comma-separated or repeated \\[default: \\[unit] arms, else a sweep's "
             "arms].")] = None,
    tests: Annotated[list[str] | None, typer.Option(
        metavar="FILE[,FILE...]", show_default=False,
        help="Test files, comma-separated or repeated \\[default: \\[unit] tests].")] = None,
    out: Annotated[Path, typer.Option(help="Folder for unit.json and unit.md.")] = Path("results/unit"),
) -> None:
    """Run the config's tests on every arm and mutant and render which test fails where."""
    from e2e.console import guard

    # console.guard: SIGTERM acts as Ctrl-C, both stop the pytest child's whole group (exit
    # 130); an e2e error prints as every command's does
    raise SystemExit(guard(lambda: _unit(config, arms, tests, out),
                           interrupted="the tests were stopped"))


def _unit(config, arms, tests, out) -> int:
    from e2e.config import load_experiment
    from e2e.paths import atomic_write_json, atomic_write_text
    from e2e.render import unit_markdown

    experiment = load_experiment(config)
    from e2e.commands._options import csv_list

    cols = columns(experiment, csv_list(arms))
    files = _test_paths(list(csv_list(tests) or experiment.unit.tests), confined=not tests)
    if not files:
        raise ConfigError("e2e unit: no tests; set [unit] tests in the config or pass --tests")
    results = {}
    for c in cols:
        typer.echo(f"running {len(files)} test file(s) on {c.name}", err=True)
        results[c.name] = run_column(c, files)
    mutants = {c.name: caught(results, c) for c in cols if c.mutant}
    text = unit_markdown(cols, results, mutants)
    doc = {"schema_version": 1, "experiment": experiment.name, "tests": files,
           "columns": [c.__dict__ for c in cols], "results": results, "mutants": mutants}
    atomic_write_json(out / "unit.json", doc)
    atomic_write_text(out / "unit.md", text)
    typer.echo(text)
    typer.echo(f"wrote {out / 'unit.json'}, {out / 'unit.md'}")
    return 0
