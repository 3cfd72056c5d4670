"""The docs a user reads hold together: every relative link and #anchor resolves (GitHub's
anchor rule), no dated measurement or issue number outside docs/measurements/ and the
changelog, the generated reference is what its generator prints today (which refuses a config
key without a description), and every ``e2e ...`` line of the README and the tutorials parses
against the real command tree (options, choices, types), none of them run."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import runpy
import shlex
import shutil
import types
import typing
from pathlib import Path
from typing import Any

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
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
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


# Pages still being rewritten elsewhere, with the exact links and images of theirs that do not
# resolve (the lists below work alike: a listed entry gone from its page fails, so they shrink).
KNOWN_BROKEN: dict[str, list[str]] = {}


def _unexcused(page: Path, found: list[str], known: dict[str, list[str]]) -> list[str]:
    excused = known.get(str(page.relative_to(ROOT)), [])
    gone = [name for name in excused if name not in found]
    assert not gone, f"{page.relative_to(ROOT)} no longer gives {gone}: drop them from the list"
    return [name for name in found if name not in excused]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    """Links and images alike."""
    assert page.exists(), page
    broken, targets = [], LINK.findall(_prose(page.read_text(encoding="utf-8")))
    for target in _unexcused(page, targets, KNOWN_BROKEN):
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


def _generator() -> types.ModuleType:
    """docs/reference/generate.py as a module of its own (its globals can be patched)."""
    spec = importlib.util.spec_from_file_location("_generate", ROOT / "docs" / "reference" /
                                                  "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_row_of_the_config_reference_has_a_description():
    rows = [line for line in (ROOT / "docs" / "reference" / "config.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("| `")]
    assert len(rows) > 100  # every key of every table, not a few
    empty = [row.split(" |", 1)[0] for row in rows if row.rstrip().endswith("|  |")]
    assert not empty, f"config keys without a description: {empty}"


def test_the_generator_refuses_a_config_key_without_a_description(tmp_path, monkeypatch, capsys):
    from pydantic import Field

    from e2e.config import Table

    class Inner(Table):
        described: int = Field(1, description="Has one.")
        bare: int = 2

    class Planted(Table):
        name: str = Field(description="Has one.")
        inner: Inner = Field(default_factory=Inner)
        blank: str = Field("", description="  ")

    generator = _generator()
    with pytest.raises(generator.Undescribed) as caught:
        generator.config_markdown([(Planted, "")])
    head, *keys = str(caught.value).splitlines()
    assert head.startswith("3 config key(s) have no description")
    assert [k.split("  (")[0].strip() for k in keys] == ["inner", "blank", "[inner] bare"]
    assert keys[2].endswith("Inner.bare)")  # where to add it

    # writing and --check alike: exit 1 naming the keys, and no file written
    monkeypatch.setattr(generator, "HERE", tmp_path)
    monkeypatch.setattr(generator, "OUTPUTS", {
        "cli.md": lambda: "fine\n",
        "config.md": lambda: generator.config_markdown([(Planted, "")])})
    for argv in ([], ["--check"]):
        assert generator.main(argv) == 1
        err = capsys.readouterr().err
        assert "3 config key(s) have no description" in err and "[inner] bare" in err
    assert list(tmp_path.iterdir()) == []


def test_the_reference_names_every_command_and_every_top_level_key():
    from e2e.config import Experiment

    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in typer.main.get_group(app).commands:
        assert f"## `e2e {name}`" in cli, name
    config = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    for key in Experiment.model_fields:
        assert f"| `{key}` |" in config, key


# --- every name a page gives exists ----------------------------------------------------------

NAME_PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS]
MODULE_NAME = re.compile(r"(?<![\w.\"'/-])e2e(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
PYTHON_M = re.compile(r"\bpython3?(?:\.\d+)?\s+-m\s+([A-Za-z_][\w.]*)")
# a path of this checkout; not one in a home folder or after `REV:` (`git show REV:path`)
REPO_PATH = re.compile(r"(?<![\w./~$:-])((?:configs|bench|e2e|tests|examples|docs|\.ci)/"
                       r"[\w./*-]*[\w*])(?![\w<])")
# `[load] input_len`, `[arms.<name>.build]`, `[[unit.mutants]]`; a lone `[word]` is a table
# only with a dot or a key after it (`[DONE]`, `[invalid]`, `[N]` are not)
TABLE_KEY = re.compile(r"^\[\[?([a-z][\w<>-]*(?:\.[\w<>-]+)*)\]\]?(?:\s+([a-z_][\w-]*)\b)?")
E2E_IN_CODE = re.compile(r"^e2e\s+([a-z][\w-]*)(?:\s+([a-z][\w-]*))?")


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _runs_as_main(parts: list[str]) -> bool:
    """``python -m`` of it does something: a module with a ``__main__`` guard, or a package
    with a ``__main__.py``."""
    module = _module_file(parts)
    if module is None:
        return False
    if module.name == "__init__.py":
        return (module.parent / "__main__.py").is_file()
    return "__name__ == \"__main__\"" in module.read_text(encoding="utf-8")


@functools.cache
def _top_level_names(path: Path) -> frozenset[str]:
    """What a module defines or imports at its top level (in `if`/`try` blocks too) and names
    in its ``__all__`` (a lazy face)."""
    names: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and \
                        isinstance(node.value, (ast.List, ast.Tuple)):
                    names.update(e.value for e in node.value.elts
                                 if isinstance(e, ast.Constant) and isinstance(e.value, str))
            elif isinstance(node, (ast.If, ast.Try)):
                walk(node.body + getattr(node, "orelse", []) +
                     [s for h in getattr(node, "handlers", []) for s in h.body])
    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    return frozenset(names)


@functools.cache
def _emitted_strings() -> frozenset[str]:
    """Every string literal of e2e's code that reads like a dotted name (a JSON document's
    ``kind`` such as "e2e.run" is a value the code writes, not a module)."""
    out = set()
    for path in (ROOT / "e2e").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith("e2e."):
                out.add(node.value)
    return frozenset(out)


def python_name_exists(name: str) -> bool:
    """``e2e.x.y`` (or ``e2e.x:attr``) resolves as Python resolves it: the longest leading part
    that is a module of this checkout is imported, and the rest is looked up on it, attribute
    by attribute (a name a face no longer exports, or one imported only for type checking, does
    not resolve)."""
    if name in _emitted_strings():
        return True
    dotted, _, attr = name.partition(":")
    parts = dotted.split(".") + ([attr] if attr else [])
    for i in range(len(parts), 0, -1):
        if _module_file(parts[:i]) is None:
            continue
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:  # an optional dependency of that module
            if (exc.name or "").split(".")[0] == "e2e":
                raise
            return i == len(parts) or parts[i] in _top_level_names(_module_file(parts[:i]))
        for part in parts[i:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def _config_tables() -> dict[str, Any]:
    from e2e.config import Experiment
    from e2e.nightly.settings import NightlySettings

    return {**Experiment.model_fields, "nightly": NightlySettings}


def _models_of(ann: Any) -> tuple[list[type], bool]:
    """The models a field's annotation holds and whether it is a table of free names first
    (``dict[str, Model]``: ``[arms.<name>]``); ``[..., True]`` with no model: free keys."""
    from pydantic import BaseModel

    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _models_of(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        found = [_models_of(a) for a in typing.get_args(ann)]
        return [m for ms, _ in found for m in ms], any(d for _, d in found)
    if origin is dict:
        models, _ = _models_of(typing.get_args(ann)[1])
        return models, True
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann], False
    return [], False


def config_key_exists(table: str, key: str | None = None) -> bool:
    """``[table] key`` names a table and a key of the experiment config; ``<name>`` or any name
    stands where the config takes names of one's own (an arm, a speculator profile), and keys
    inside a table of free keys (``env``, ``plugin``, a profile) are not checked."""
    fields: dict[str, Any] | None = _config_tables()
    parts = [*table.split("."), *([key] if key else [])]
    i = 0
    while i < len(parts):
        if fields is None:
            return False  # a key below a value that is not a table
        field = fields.get(parts[i]) or next(
            (f for f in fields.values() if getattr(f, "alias", None) == parts[i]), None)
        if field is None:
            return False
        models, named = _models_of(field if isinstance(field, type) else field.annotation)
        if named and not models:
            return True  # a table of free keys
        i += 2 if named else 1  # skip a name of one's own
        fields = {k: v for m in models for k, v in m.model_fields.items()} if models else None
    return True


TOML_BLOCK = re.compile(r"^[ \t]*```toml[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)
TOML_LINE = re.compile(r"^\s*(?:\[\[?\s*([\w.<>-]+)\s*\]\]?|([A-Za-z_][\w-]*)\s*=)")


def _unknown_command(words: list[str]) -> str | None:
    """``e2e <words...>`` up to the first word that is no command of the tree, or None."""
    command = typer.main.get_group(app)
    for i, word in enumerate(words):
        if not hasattr(command, "commands"):
            return None  # a command's arguments
        if word not in command.commands:
            return " ".join(["e2e", *words[:i + 1]])
        command = command.commands[word]
    return None


def stale_names(page: Path) -> list[str]:
    """Every module, ``python -m`` module, repository path, config table or key and e2e
    command that ``page`` names and this checkout does not have. A measurement may say what a
    thing was called when it was measured, as "then `old name`"."""
    text = page.read_text(encoding="utf-8")
    if page.parent.name == "measurements":
        text = re.sub(r"\bthen `[^`]+`", "", text)
    out = [m.group(0) for m in MODULE_NAME.finditer(text) if not python_name_exists(m.group(0))]
    for m in PYTHON_M.finditer(text):
        parts = m.group(1).rstrip(".").split(".")
        if parts[0] in ("e2e", "bench", "tests") and not _runs_as_main(parts):
            out.append(f"python -m {m.group(1)}")
    for m in REPO_PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
            out.append(path)
    for span in INLINE_CODE.finditer(FENCE.sub("", text)):
        code = span.group(0).strip("`").strip()
        if (m := TABLE_KEY.match(code)) and (m.group(2) or "." in m.group(1)) and \
                not config_key_exists(m.group(1), m.group(2)):
            out.append(code)
        if (m := E2E_IN_CODE.match(code)) and \
                (unknown := _unknown_command([w for w in m.groups() if w])):
            out.append(unknown)
    for block in TOML_BLOCK.findall(text):
        table, depth = "", 0
        for line in block.splitlines():
            inside, depth = depth > 0, depth + sum(
                {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
                for c in re.sub(r'"[^"]*"|#.*', "", line))  # a value across lines
            if inside or not (m := TOML_LINE.match(line)):
                continue
            table, key = (m.group(1), None) if m.group(1) else (table, m.group(2))
            if not (config_key_exists(table, key) if table else config_key_exists(key)):
                out.append(f"[{table}] {key}" if key else f"[{table}]")
    out += [unknown for argv in shell_commands(text) if (unknown := _unknown_command(argv))]
    return out


# Pages still being rewritten elsewhere, with the exact names they give that this checkout
# does not have.
KNOWN_STALE: dict[str, list[str]] = {}


@pytest.mark.parametrize("page", NAME_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_file_command_and_config_key_a_page_names_exists(page):
    stale = _unexcused(page, stale_names(page), KNOWN_STALE)
    assert not stale, f"{page.relative_to(ROOT)} names what this checkout does not have: {stale}"


SOURCES = sorted((ROOT / "e2e").rglob("*.py"))


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_a_docstring_or_comment_gives_resolves(source):
    """A docstring or comment of e2e that names ``e2e.<module>.<name>`` names where it is
    defined (or a face that exports it), as ``python_name_exists`` resolves it."""
    stale = [m.group(0) for m in MODULE_NAME.finditer(source.read_text(encoding="utf-8"))
             if not python_name_exists(m.group(0).rstrip("."))]
    assert not stale, f"{source.relative_to(ROOT)} names what this checkout does not have: {stale}"


# A folder of one machine: temporary folders and home folders (e2e's own ~/.cache/e2e and
# libpq's ~/.pgpass are documented places, not one machine's).
MACHINE_PATH = re.compile(r"(?<![\w.$/-])(?:/tmp/|/var/tmp/|/var/folders/|/private/var/|/root/"
                          r"|/home/|/Users/|~/(?!\.cache/e2e\b|\.pgpass\b))[^\s`'\"),;\]]*")
# How a log reads: where and when something was measured, by whom, beside what.
LOG_PHRASE = re.compile(
    r"\bmeasured (?:here|first|on (?:a|the) (?:shared|busy|quiet|\d+-core|H\d00|device)\b)"
    r"|\b(?:made|ran|printed|measured|showed) here\b|\b\d[\d.–-]* ?(?:ms|µs|s|%) here\b"
    r"|\bthis (?:session|VM)\b|\bthe (?:busy|shared|development|device) machine\b"
    r"|\bother agents?\b|\bthe issue(?:'s)?\b|\bthe design notes\b|\b(?:we|our|ours)\b", re.I)


# Pages still being rewritten elsewhere, with the machine paths and log phrases they hold.
KNOWN_LOGGED: dict[str, list[str]] = {}


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_path_or_log_phrasing_in_user_docs(page):
    """A user page says what a thing is, how to use it and why it works: a temporary or home
    folder of the machine a page was written on (in its examples too) or a line of a log
    ("measured here", "on the busy machine") belongs in docs/measurements/."""
    text = page.read_text(encoding="utf-8")
    found = ([m.group(0) for m in MACHINE_PATH.finditer(text)] +
             [m.group(0) for m in LOG_PHRASE.finditer(_prose(text))])
    found = _unexcused(page, found, KNOWN_LOGGED)
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_name_path_and_log_checks_catch_what_they_should(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("Use `e2e.slo.goodput` or `e2e.micro`, `python -m e2e.micro --dry-run`,\n"
                    "`configs/nightly-duet.toml`, `[load] input_length`, `[arms.pr.bild] git`,\n"
                    "`e2e microbench`; but `e2e.slo.parse_slo`, `e2e.plugin:register`,\n"
                    "`configs/pr-template.toml`, `[arms.pr.build] git`, `[speculators.x] y`,\n"
                    "`[nightly] baseline`, `e2e import vllm-bench`, `[DONE]` and \"e2e.run\".\n"
                    "```toml\n[load]\ninput_len = 1\nprompts = 8\n[duet]\nswap = true\n```\n"
                    "```sh\ne2e sweeep -c my.toml\ne2e sweep -c my.toml\n```\n")
    found = stale_names(page)  # names resolve against this checkout, wherever the page is
    assert found == ["e2e.slo.goodput", "e2e.micro", "e2e.micro", "python -m e2e.micro",
                     "configs/nightly-duet.toml", "[load] input_length", "[arms.pr.bild] git",
                     "e2e microbench", "[load] prompts", "e2e sweeep"], found
    assert python_name_exists("e2e.commands.app") and not python_name_exists("e2e.stats")
    # a module's attribute is followed; a name bound only for type checking is not there
    assert python_name_exists("e2e.results.nightly_store.Store.cells")
    assert not python_name_exists("e2e.results.store.writing.nope")
    assert not python_name_exists("e2e.nightly.night.GSM8KPlan")
    assert not python_name_exists("e2e.results.writing")  # not in the face: in results.store
    assert config_key_exists("server.build.git", "ref") and not config_key_exists("load.x", "y")
    assert [m.group(0) for m in MACHINE_PATH.finditer(
        "--results /tmp/h16/res, /root/.cache/e2e/x, /home/me/vllm, ~/src, but "
        "~/.cache/e2e/envs/, results/tmp/x and $TMPDIR")] == [
        "/tmp/h16/res", "/root/.cache/e2e/x", "/home/me/vllm", "~/src"]
    assert [m.group(0).lower() for m in LOG_PHRASE.finditer(
        "Everything below was measured on a shared 2-core machine while other agents ran; "
        "1.3 ms here on the busy machine. Measured first. A run made here.")] == [
        "measured on a shared", "other agents", "1.3 ms here", "the busy machine",
        "measured first", "made here"]


# --- every command line a user copies --------------------------------------------------------

SHELL_BLOCK = re.compile(r"^[ \t]*```(?:sh|bash|console|shell)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)


def command_lines(page: Path) -> list[list[str]]:
    """Every `e2e ...` invocation in a page's shell blocks, as argv after `e2e` (continuations
    joined, comments, pipes, `&&`, `;` and redirections cut)."""
    return shell_commands(page.read_text(encoding="utf-8"))


def shell_commands(text: str) -> list[list[str]]:
    """`command_lines` of a page's text."""
    out = []
    for block in SHELL_BLOCK.findall(text):
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


def test_every_whole_config_a_tutorial_shows_loads(tmp_path):
    """A TOML block of the README or a tutorial that is a whole config (it has a `name`), such
    as the CPU rehearsal's `my.toml`, validates as one."""
    import tomllib

    from e2e.config import load_experiment

    shown = [(page, block) for page in COMMAND_PAGES for block in
             TOML_BLOCK.findall(page.read_text(encoding="utf-8"))
             if "name" in tomllib.loads(block)]
    assert shown, "the CPU rehearsal's my.toml is a whole config"
    for page, block in shown:
        path = tmp_path / "my.toml"
        path.write_text(block, encoding="utf-8")
        load_experiment(path)  # a ConfigError names the key


# The reader's own config, as the README's and the tutorial's first step makes it.
READER_CONFIGS = {"my.toml": "configs/pr-template.toml"}


def _dry_runnable() -> list[tuple[str, list[str]]]:
    """Every command line of the README and the tutorials whose command has --dry-run, with
    it, and whose config file (if it names one) is in this checkout or is the reader's copy of
    a template (``my.toml``)."""
    out = []
    for page in COMMAND_PAGES:
        for argv in command_lines(page):
            command, _, rest = _command(argv)
            if hasattr(command, "commands") or not any(
                    "--dry-run" in getattr(p, "opts", ()) for p in command.params):
                continue
            config = next((rest[i + 1] for i, a in enumerate(rest[:-1])
                           if a in ("-c", "--config")), None)
            if config is not None and config not in READER_CONFIGS and \
                    not (ROOT / config).is_file():
                continue  # a file of the reader's own that no step makes
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
    TRITON_INTERPRET before Triton loads), from a folder beside this checkout's configs and
    the reader's copy of the PR template."""
    import os
    import subprocess
    import sys

    (tmp_path / "configs").symlink_to(ROOT / "configs")
    for name, template in READER_CONFIGS.items():  # `cp configs/pr-template.toml my.toml`
        shutil.copy(ROOT / template, tmp_path / name)
    done = subprocess.run([sys.executable, "-m", "e2e.cli", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "E2E_HOME": str(tmp_path / "home"),
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (page, argv, (done.stdout + done.stderr)[-2000:])
    assert not any((tmp_path / "results").rglob("run.json"))
