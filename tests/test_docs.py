"""The docs a user reads hold together: every relative link and #anchor resolves (GitHub's
anchor rule), no dated measurement or issue number outside docs/measurements/ and the
changelog, the generated reference is what its generator prints today, and every ``e2e ...``
line of the README and the tutorials parses against the real command tree (options, choices,
types), none of them run."""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path

import pytest
import typer.main
from typer._click.exceptions import BadParameter, UsageError  # typer vendors its click

from e2e.commands import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *DOCS]
USER_PAGES = [ROOT / "README.md",
              *(p for p in DOCS if "measurements" not in p.relative_to(ROOT / "docs").parts)]
COMMAND_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorial").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code (where a link or a date is literal)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, every character that is
    not a letter, digit, space, hyphen or underscore dropped, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "")                                # code marks
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_slug_rule_matches_githubs():
    assert slug("The order: a Williams design") == "the-order-a-williams-design"
    assert slug("`[arms.<name>]`") == "armsname"
    assert slug("With the speculator: per position, verify step or acceptance, acceptance held "
                "fixed") == ("with-the-speculator-per-position-verify-step-or-acceptance-"
                             "acceptance-held-fixed")
    assert slug("Capacity at an SLO: `e2e capacity`") == "capacity-at-an-slo-e2e-capacity"
    assert slug("More than one core: `LoadSpec.workers`") == "more-than-one-core-loadspecworkers"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert page.exists(), page
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bof mine\b|\bissues? \d+|(?<![\w/&])#\d{2,}\b", re.I)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_dated_measurement_or_issue_number_in_user_docs(page):
    """Dates, issue numbers and first-person asides belong in docs/measurements/ and the
    changelog; a date inside code (an example `--date`, a JSON timestamp) is a value, not one."""
    found = [m.group(0) for m in DATED.finditer(_prose(page.read_text(encoding="utf-8")))]
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_the_generated_reference_is_what_the_generator_prints():
    generator = runpy.run_path(str(ROOT / "docs" / "reference" / "generate.py"))
    for name, make in generator["OUTPUTS"].items():
        on_disk = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert on_disk == make(), (f"docs/reference/{name} is stale: run "
                                   "python docs/reference/generate.py")


def test_the_reference_names_every_command_and_every_top_level_key():
    from e2e.config import Experiment

    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in typer.main.get_group(app).commands:
        assert f"## `e2e {name}`" in cli, name
    config = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    for key in Experiment.model_fields:
        assert f"| `{key}` |" in config, key


# --- every command line a user copies --------------------------------------------------------

SHELL_BLOCK = re.compile(r"^[ \t]*```(?:sh|bash|console|shell)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)


def command_lines(page: Path) -> list[list[str]]:
    """Every `e2e ...` invocation in a page's shell blocks, as argv after `e2e` (continuations
    joined, comments, pipes, `&&`, `;` and redirections cut)."""
    out = []
    for block in SHELL_BLOCK.findall(page.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            segment: list[str] = []
            for token in [*lexer, ";"]:
                if token and set(token) <= set("|&;<>()"):
                    if segment and (segment[0] == "e2e" or segment[0].endswith("/e2e")):
                        out.append(segment[1:])
                    segment = []
                    skip = token.endswith(">")  # the redirection's target
                    continue
                if segment == [] and locals().get("skip"):
                    skip = False
                    continue
                segment.append(token)
            # a "2" before ">" belongs to the redirection
            out = [argv[:-1] if argv and argv[-1].isdigit() and f"{argv[-1]}>" in line
                   else argv for argv in out]
    return out


def _command(argv: list[str]):
    command = typer.main.get_group(app)
    path = ["e2e"]
    while hasattr(command, "commands") and argv and argv[0] in command.commands:
        path.append(argv[0])
        command, argv = command.commands[argv[0]], argv[1:]
    return command, " ".join(path), argv


def parse(argv: list[str]) -> dict:
    """The command's parameters as click parses them (options, choices, types, callbacks of
    eager flags aside), without running it. A path that must exist on the reader's machine
    (a results folder, a config of their own) is the one error not counted."""
    command, name, rest = _command(argv)
    assert not hasattr(command, "commands"), f"`e2e {' '.join(argv)}`: no such command"
    try:
        return command.make_context(name, list(rest)).params
    except BadParameter as exc:
        if "does not exist" in str(exc.message):
            return {}
        raise AssertionError(f"`e2e {' '.join(argv)}`: {exc.format_message()}") from None
    except UsageError as exc:
        raise AssertionError(f"`e2e {' '.join(argv)}`: {exc.format_message()}") from None


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_parses(page):
    lines = command_lines(page)
    assert lines, f"{page.relative_to(ROOT)} shows no e2e command"
    for argv in lines:
        parse(argv)


def test_the_command_extractor_and_parser_catch_what_they_should(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```sh\ne2e report results/x --format github \\\n  --link URL > c.md  # x\n"
                    "e2e run --json 2>/dev/null | jq .\nray start --head\n```\n")
    assert command_lines(page) == [["report", "results/x", "--format", "github", "--link", "URL"],
                                   ["run", "--json"]]
    with pytest.raises(AssertionError, match="No such option"):
        parse(["run", "--no-such-flag"])
    with pytest.raises(AssertionError, match="github|choice|invalid"):
        parse(["report", str(tmp_path), "--format", "githb"])
    with pytest.raises(AssertionError, match="no such command"):
        parse(["import"])


def _dry_runnable() -> list[tuple[str, list[str]]]:
    """Every command line of the README and the tutorials whose command has --dry-run, with
    it, and whose config file (if it names one) is in this checkout."""
    out = []
    for page in COMMAND_PAGES:
        for argv in command_lines(page):
            command, _, rest = _command(argv)
            if hasattr(command, "commands") or not any(
                    "--dry-run" in getattr(p, "opts", ()) for p in command.params):
                continue
            config = next((rest[i + 1] for i, a in enumerate(rest[:-1])
                           if a in ("-c", "--config")), None)
            if config is not None and not (ROOT / config).is_file():
                continue  # the reader's own file (my.toml)
            line = (str(page.relative_to(ROOT)), argv + ([] if "--dry-run" in argv else ["--dry-run"]))
            if line not in out:
                out.append(line)
    return out


@pytest.mark.slow  # each dry run plans the whole command (a few seconds each)
@pytest.mark.parametrize("page,argv", _dry_runnable(), ids=lambda v: v if isinstance(v, str)
                         else " ".join(v))
def test_every_command_with_a_dry_run_runs_as_shown(page, argv, tmp_path):
    """The README's and the tutorials' commands run verbatim as dry runs (nothing built,
    started or written), each in its own process (e2e micro's dry run must set
    TRITON_INTERPRET before Triton loads), from a folder beside this checkout's configs."""
    import os
    import subprocess
    import sys

    (tmp_path / "configs").symlink_to(ROOT / "configs")
    done = subprocess.run([sys.executable, "-m", "e2e.cli", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "E2E_HOME": str(tmp_path / "home"),
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (page, argv, (done.stdout + done.stderr)[-2000:])
    assert not any((tmp_path / "results").rglob("run.json"))
