"""One naming on the command line: ``-c/--config`` and ``-q/--quiet`` wherever a config is read
or progress printed, one list syntax (comma-separated and repeated), choices that ``--help``
lists, no ``<bool>`` beside a flag, one name per idea (old spellings kept as hidden aliases),
exit 2 for a results folder without runs."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from e2e.cli import app
from e2e.commands._typer import RENAMED

runner = CliRunner()
GROUP = typer.main.get_group(app)


def _commands(group=GROUP, prefix=()):
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


COMMANDS = dict(_commands())


def _visible(command):
    return [p for p in command.params if getattr(p, "opts", None) and not p.hidden]


def _choices(param) -> tuple:
    descriptor = getattr(param, "type_descriptor", None)
    return tuple(descriptor.choices or ()) if descriptor is not None and descriptor.is_choice else ()


def _help(path) -> str:
    result = runner.invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "e2e")
def test_no_flag_shows_a_bool_type_and_every_choice_is_listed(path):
    text = _help(path)
    assert "<bool>" not in text
    command = COMMANDS.get(path)
    for param in _visible(command) if command else []:
        choices = _choices(param)
        if choices:  # an enum-like option: its choices in --help
            assert f"<{'|'.join(str(c) for c in choices)}>" in text, (path, param.opts)


ENUMS = {("run", "--format"), ("sweep", "--executor"), ("gsm8k", "--executor"),
         ("gsm8k", "--format"), ("report", "--format"), ("capacity", "--executor"),
         ("nightly", "--executor"), ("history", "--format"), ("history", "--spec-mode"),
         ("bisect", "--spec-mode"), ("export", "--format")}


@pytest.mark.parametrize("name,flag", sorted(ENUMS))
def test_options_that_take_a_choice_are_choices(name, flag):
    param = next(p for p in COMMANDS[(name,)].params if flag in getattr(p, "opts", ()))
    assert _choices(param), (name, flag)
    assert f"<{'|'.join(_choices(param))}>" in _help((name,))


def test_config_and_quiet_have_their_short_names_everywhere():
    for path, command in COMMANDS.items():
        for param in _visible(command):
            if "--config" in param.opts:
                assert "-c" in param.opts, path
            if "--quiet" in param.opts:
                assert "-q" in param.opts, path
    reads_config = {p for p, c in COMMANDS.items() if any("--config" in x.opts for x in _visible(c))}
    assert {("run",), ("sweep",), ("gsm8k",), ("capacity",), ("nightly",), ("bisect",),
            ("arms",), ("build",), ("unit",)} <= reads_config
    prints_progress = {("run",), ("sweep",), ("gsm8k",), ("report",), ("capacity",), ("nightly",),
                       ("bisect",), ("micro",), ("build",)}
    for path in prints_progress:
        assert any("--quiet" in x.opts for x in _visible(COMMANDS[path])), path


def test_every_list_takes_commas_and_repeats():
    lists = [(path, p) for path, c in COMMANDS.items() for p in _visible(c)
             if getattr(p, "multiple", False)]
    assert len(lists) >= 10
    for path, param in lists:
        if param.opts[0] == "--arm-setting":  # KEY=VALUE, a value may hold a comma (JSON)
            continue
        assert "comma-separated or repeated" in param.help, (path, param.opts)


def _units(output: str) -> list[str]:
    return re.findall(r"^\[\d+/\d+\] (\S+)", output, flags=re.M)


def test_both_list_syntaxes_plan_the_same_sweep(tmp_path):
    base = ["sweep", "--dry-run", "--results", str(tmp_path), "--order-seed", "3", "--no-dspark"]
    commas = runner.invoke(app, base + ["--arms", "main,pr", "--concurrency", "1,4"])
    repeated = runner.invoke(app, base + ["--arms", "main", "--arms", "pr", "--concurrency", "1",
                                          "--concurrency", "4"])
    assert commas.exit_code == repeated.exit_code == 0, commas.output
    assert _units(commas.output) == _units(repeated.output)
    assert {u.split("-c")[0] for u in _units(commas.output)} == {"main", "pr"}
    bad = runner.invoke(app, base + ["--concurrency", "1,four"])
    assert bad.exit_code == 2 and "--concurrency 'four': give whole numbers" in bad.output


def test_old_spellings_still_parse_and_are_hidden():
    for name, renamed in RENAMED.items():
        command = COMMANDS[(name,)]
        text = _help((name,))
        for old, new in renamed.items():
            assert re.search(rf"{re.escape(old)}(?![\w-])", text) is None, (name, old)
            assert new in text
            param = next(p for p in command.params if new in p.opts)
            value = "2026-01-02" if name == "nightly" else "3"
            ctx = command.make_context(name, [old, value])
            assert str(ctx.params[param.name]) == value, (name, old)
            ctx = command.make_context(name, [f"{old}={value}"])
            assert str(ctx.params[param.name]) == value
    visible = {o for c in COMMANDS.values() for p in _visible(c) for o in p.opts}
    assert not visible & {"--report-from", "--repeats"}  # one name: --report-from-run, --runs
    assert not any("--baseline" in p.opts for p in _visible(COMMANDS[("nightly",)]))


def test_json_is_format_json_and_the_two_cannot_disagree(tmp_path):
    from e2e.results.store import write_run
    from test_aggregate import make_record

    for i, tpot in enumerate([10.0, 10.2, 9.9, 10.1], start=1):
        (tmp_path / f"main-{i}").mkdir()
        write_run(tmp_path / f"main-{i}", make_record("main", 1, i, tpot=tpot))
    import json

    a = runner.invoke(app, ["report", str(tmp_path), "--format", "json", "-q"])
    b = runner.invoke(app, ["report", str(tmp_path), "--json", "-q"])
    assert a.exit_code == b.exit_code == 0, a.output
    assert json.loads(a.stdout)["experiment"] == json.loads(b.stdout)["experiment"] == "exp"
    clash = runner.invoke(app, ["report", str(tmp_path), "--json", "--format", "github"])
    assert clash.exit_code == 2 and "--json is --format json" in clash.output
    assert "report written" not in a.stderr  # -q: no notes


@pytest.mark.parametrize("argv", [["report", "FOLDER"], ["report", "FOLDER", "--format", "github"],
                                  ["plan", "--target-effect", "1%", "FOLDER"], ["export", "FOLDER"]])
def test_a_results_folder_without_runs_is_exit_2_like_a_missing_one(argv, tmp_path):
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        if folder.name == "empty":
            folder.mkdir()
        result = runner.invoke(app, [str(folder) if a == "FOLDER" else a for a in argv])
        assert result.exit_code == 2, (argv, folder.name, result.output)
        assert result.output.count("error:") == 1 and "Traceback" not in result.output


def test_a_misspelt_metric_or_field_gets_did_you_mean(tmp_path):
    result = runner.invoke(app, ["plan", "--target-effect", "1%", "--metric", "tpot_ms_maen",
                                 str(tmp_path)])
    assert result.exit_code == 2 and "did you mean 'tpot_ms_mean'" in result.output
    from e2e.analysis.sweep.frame import select

    with pytest.raises(ValueError, match="did you mean 'output_len'"):
        list(select([], {"output_lne": "1"}))


def test_the_readmes_first_command_is_unchanged_and_parses():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    first = ("python3 -m venv .venv && .venv/bin/pip install -e . && "
             ".venv/bin/e2e run --arm pr --concurrency 1 --dspark")
    assert first in readme
    ctx = COMMANDS[("run",)].make_context("run", ["--arm", "pr", "--concurrency", "1", "--dspark"])
    assert (ctx.params["arm"], ctx.params["concurrency"], ctx.params["dspark"]) == ("pr", 1, True)


def test_only_takes_commas_between_pairs_and_keeps_them_inside_a_value():
    from e2e.commands._report import _only

    assert _only(["arm=main,concurrency=1", "arrival=poisson 3 req/s, at most 8 in flight"]) == {
        "arm": "main", "concurrency": "1", "arrival": "poisson 3 req/s, at most 8 in flight"}
    from e2e.errors import ConfigError

    with pytest.raises(ConfigError, match="give FIELD=VALUE"):
        _only(["arm=main", "pr"])


@pytest.mark.parametrize("name", ["run", "gsm8k"])
def test_run_and_gsm8k_take_format_json_and_the_old_json(name):
    from e2e.commands._options import output_format
    from e2e.errors import ConfigError

    command = COMMANDS[(name,)]
    new = command.make_context(name, ["--format", "json"]).params
    old = command.make_context(name, ["--json"]).params
    assert output_format(new["format_"], new["json_"]) == output_format(old["format_"], old["json_"]) == "json"
    assert output_format(None, False) == "text"
    with pytest.raises(ConfigError, match="--json is --format json"):
        output_format("text", True)
