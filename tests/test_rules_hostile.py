"""One rule for every link and every name a user gives, the only way in.

Links (``e2e.names.safe_link``): the PR comment's ``--link``, the nightly's ``--link-base``
(summary.md and the CI step summary) and the dashboard's are relative paths or http(s) URLs
without a character no URL holds as written; a flag holding anything else is exit 2 before
anything is written, and a link is escaped for its context where it is written. Names
(``e2e.names.safe_name``, ``known_name``): a speculator profile is held to the name rule,
and ``--baseline`` must name an arm of the folder, refused with the names that exist (shown
escaped) otherwise. Each of the adversary's cases, then any text hypothesis makes, at the
function boundary and through the command line."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from e2e.analysis.sweep.aggregate import summarize
from e2e.cli import app
from e2e.config import parse_experiment
from e2e.errors import ConfigError
from e2e.names import check_link, check_name, known_name, safe_link
from e2e.render import render_github
from e2e.render.markdown import render_markdown
from e2e.render.dashboard import report_link
from test_aggregate import make_record
from test_render import calibration_records, write_results

GFM = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
runner = CliRunner()
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
CLI_FUZZ = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

# the adversary's links: raw HTML, a remote image after a closed target, another scheme
HOSTILE_LINKS = ['"><img src=x onerror=alert(1)>',
                 "https://x/) ![p](https://attacker.example/p.png",
                 "javascript:alert(1)", " JaVaScRiPt:alert(1)", "java\tscript:alert(1)",
                 "data:text/html,<script>alert(1)</script>", "https://x/\x1b]8;;evil\x07",
                 "https://x/\u202eexe.txt", "/\\evil.example", "https://x/\nnext"]
# the HTML e2e writes itself: the comment's marker, folded sections
OWN_HTML = re.compile(r"(<!-- e2e-report -->|<details><summary>[^<>]*</summary>|</details>)\n")
# what a terminal acts on (C0 but newline, DEL, C1, bidirectional controls)
TERMINAL_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# text for every name and link input: markup, escape sequences, controls, any unicode
TEXT = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(list("<>\"'`()[]!&@|\\*_~#:/ .-aZ09") +
                             ["\x1b[31m", "\x00", "\n", "\r", "\t", "\u202e", "\u2028",
                              "javascript:", "https://", "data:", "main"]),
             max_size=16).map("".join),
    st.sampled_from(HOSTILE_LINKS))


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def _unsafe(text: str) -> list[str]:
    """What a Markdown renderer with raw HTML on would make of ``text`` that no link or name
    of e2e's may make: raw HTML, an image, a link that is not relative or http(s), a second
    link where one was written."""
    bad = []
    for block in GFM.parse(text):
        if block.type == "html_block" and not OWN_HTML.fullmatch(block.content):
            bad.append(block.content)
        for child in block.children or []:
            if child.type == "html_inline" or (child.type == "image" and not re.fullmatch(
                    r"plots/[A-Za-z0-9_.-]+\.png", child.attrs.get("src", ""))):
                bad.append(f"{child.type}: {child.content}")  # (the report's plots are its own)
            if child.type == "link_open":
                href = child.attrs.get("href", "")
                if re.match(r"^\s*[A-Za-z][A-Za-z0-9+.-]*:", href) and not re.match(
                        r"^https?:", href, re.I):
                    bad.append(f"link to {href}")
    return bad


def _links(text: str) -> list[str]:
    return [child.attrs["href"] for block in GFM.parse(text) for child in block.children or []
            if child.type == "link_open"]


def _summary():
    records = [make_record(arm, 1, r, tpot=10.0 + r * 0.01) for arm in ("main", "pr")
               for r in range(1, 5)]
    return summarize(records)


def _night():
    from e2e.analysis.nightly.judge import judge_night
    from e2e.results import Baseline
    from test_nightly_judge import BASE_RUNS, RULES, TPOT, cell

    base = Baseline("2026-01-01", (cell(TPOT, BASE_RUNS),), "last passing night")
    return judge_night("2026-01-02", [cell(TPOT, (10.0, 10.02, 9.98))], base, RULES)


def _context(link_base: str | None):
    from e2e.render import SummaryContext

    return SummaryContext(experiment="nightly", config_hash="h" * 12, night_dir="nightly/n",
                          builds={}, arm_overrides={}, report_path="nightly/n/report/report.md",
                          trends_dir="nightly/n/trends", link_base=link_base)


# ------------------------------------------------------------- the PR comment's --link ----

@pytest.mark.parametrize("link", HOSTILE_LINKS)
def test_a_hostile_link_flag_is_exit_2_in_one_line_and_writes_nothing(tmp_path, link):
    exp = write_results(tmp_path, calibration_records()[:8])
    before = files_under(tmp_path)
    result = runner.invoke(app, ["report", str(exp), "--format", "github", "--link", link])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --link ") and result.output.count("\n") == 1
    assert not TERMINAL_CONTROL.search(result.output), result.output
    assert files_under(tmp_path) == before  # no report/, no github.md


def test_the_comment_writes_a_link_as_one_link_whatever_a_library_caller_gives():
    summary = _summary()
    for link in HOSTILE_LINKS:
        comment = render_github(summary, link=link)
        assert _unsafe(comment) == [], (link, _unsafe(comment))
        assert _links(comment) == [], link  # none of these is a link e2e writes
        assert "Full report: `report/report.md`" in comment
    # a URL that is one (no space), with a target that once closed early: one link, no image
    comment = render_github(summary, link="https://x/)![p](https://attacker.example/p.png")
    assert _unsafe(comment) == [] and _links(comment) == [
        "https://x/%29!%5Bp%5D%28https://attacker.example/p.png"]
    comment = render_github(summary, link="https://ci.example/r?a=1&b=2#x")
    assert _links(comment) == ["https://ci.example/r?a=1&b=2#x"]


# ------------------------------------------------------------ the nightly's --link-base ----

@pytest.mark.parametrize("link", HOSTILE_LINKS[:4])
def test_a_hostile_link_base_is_exit_2_before_the_night_starts(tmp_path, monkeypatch, link):
    import e2e.nightly.run

    started = []
    monkeypatch.setattr(e2e.nightly.run, "run_nightly", lambda *a, **k: started.append(a))
    for extra in ([], ["--dry-run"]):
        result = runner.invoke(app, ["nightly", "--results", str(tmp_path / "r"),
                                     "--date", "2026-01-02", "--link-base", link, *extra])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: --link-base ")
        assert result.output.count("\n") == 1 and not TERMINAL_CONTROL.search(result.output)
    assert started == [] and not (tmp_path / "r").exists()


def test_the_nightly_summaries_write_a_link_base_only_as_links():
    from e2e.render import render_summary, render_summary_github

    judgement = _night()
    for link in HOSTILE_LINKS:
        for text in (render_summary(judgement, _context(link)),
                     render_summary_github(judgement, _context(link))):
            assert _unsafe(text) == [], (link, _unsafe(text))
            assert _links(text) == [], link
            assert "full report `nightly/n/report/report.md`" in text
    text = render_summary(judgement, _context("https://ci.example/results"))
    assert set(_links(text)) == {"https://ci.example/results/nightly/n",
                                 "https://ci.example/results/nightly/n/report/report.md",
                                 "https://ci.example/results/nightly/n/trends"}
    assert "[full report](https://ci.example/results/nightly/n/report/report.md)" in text


def test_the_dashboard_refuses_a_hostile_link_base_and_encodes_its_own(tmp_path):
    for link in HOSTILE_LINKS[:3]:
        result = runner.invoke(app, ["dashboard", "--results", str(tmp_path / "r"),
                                     "--out", str(tmp_path / "site"), "--link-base", link])
        assert result.exit_code == 2 and result.output.startswith("error: --link-base ")
    assert not (tmp_path / "site").exists()
    # the default, the path from --out to --results, is a link even with a space in it
    from urllib.parse import quote

    assert report_link(quote("../my results"), "n/report/report.md") == \
        "../my%20results/n/report/index.html"
    assert report_link("../my results", "n/report/report.md") is None


# ------------------------------------------------------------ speculator profile names ----

HOSTILE_NAMES = ["<img src=x onerror=alert(1)>", "a\x1b[31mb", "![p](https://e.example/p.png)",
                 "x\ny", "../../etc", "a" * 65, "", "\u202eexe"]


def _raw_experiment(speculators: dict) -> dict:
    import tomllib

    from e2e.config import default_config_path

    raw = tomllib.loads(default_config_path().read_text())
    raw["speculators"] = speculators
    return raw


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_speculator_profile_is_held_to_the_name_rule(name):
    profile = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
    with pytest.raises(ConfigError, match="speculator profile name") as info:
        parse_experiment(_raw_experiment({name: profile}), source="c.toml")
    assert not TERMINAL_CONTROL.search(str(info.value)), str(info.value)


def test_a_config_with_a_hostile_profile_name_is_exit_2(tmp_path):
    from e2e.config import default_config_path

    config = tmp_path / "c.toml"
    config.write_text(default_config_path().read_text() + '\n[speculators."<img src=x '
                      'onerror=alert(1)>"]\nmethod = "ngram"\nnum_speculative_tokens = 3\n')
    result = runner.invoke(app, ["sweep", "--dry-run", "-c", str(config), "--results",
                                 str(tmp_path / "r")])
    assert result.exit_code == 2 and "speculator profile name" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", HOSTILE_NAMES[:4])
def test_spec_names_a_profile_by_the_name_rule(tmp_path, name):
    result = runner.invoke(app, ["sweep", "--dry-run", "--spec", name, "--results",
                                 str(tmp_path / "r")])
    assert result.exit_code == 2 and result.output.startswith("error: --spec "), result.output
    assert result.output.count("\n") == 1 and not TERMINAL_CONTROL.search(result.output)
    result = runner.invoke(app, ["sweep", "--dry-run", "--spec", "dspak"])
    assert result.exit_code == 2
    assert "unknown speculator profile 'dspak' (did you mean 'dspark'?)" in result.output


def test_a_profile_name_in_a_run_json_is_text_in_the_report_and_the_comment():
    """A run.json is a file anyone can edit: a profile's name read back from its config
    snapshot is escaped where the report and the PR comment name the speculator."""
    name = "<img src=x onerror=alert(1)> ![p](https://e.example/p.png)"
    records = []
    for arm in ("main", "pr"):
        for r in range(1, 5):
            rec = make_record(arm, 1, r, dspark=True, acceptance=2.5, tpot=10.0 + r * 0.01)
            config = {**rec.config, "speculators": {name: {"method": "ngram"}}}
            records.append(rec.model_copy(update={"config": config}))
    summary = summarize(records)
    assert summary.speculators == (name,)
    for text in (render_markdown(summary, plot_names=()), render_github(summary)):
        assert _unsafe(text) == [], _unsafe(text)
        assert "\\<img src=x onerror=alert(1)\\>" in text  # shown, as text


# ------------------------------------------------------------------------ --baseline ----

@pytest.mark.parametrize("command", [["report"], ["plan", "--target-effect", "1%"]])
def test_an_unknown_baseline_is_exit_2_with_the_arms_and_writes_nothing(tmp_path, command):
    exp = write_results(tmp_path, calibration_records()[:8])
    before = files_under(tmp_path)
    result = runner.invoke(app, [command[0], str(exp), *command[1:], "--baseline",
                                 "nope\x1b[31m<b>"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and not TERMINAL_CONTROL.search(result.output)
    assert "unknown baseline arm 'nope\\x1b[31m<b>'" in result.output
    assert result.output.rstrip().endswith("main, main-repeat")
    assert files_under(tmp_path) == before  # no report.md holding the name
    result = runner.invoke(app, [command[0], str(exp), *command[1:], "--baseline", "main-rep"])
    assert result.exit_code == 2 and "(did you mean 'main-repeat'?)" in result.output


def test_only_arm_names_an_arm_of_the_folder(tmp_path):
    exp = write_results(tmp_path, calibration_records()[:8])
    result = runner.invoke(app, ["report", str(exp), "--only", "arm=mian\x1b[2J"])
    assert result.exit_code == 2 and not TERMINAL_CONTROL.search(result.output)
    assert "unknown arm 'mian\\x1b[2J'" in result.output
    assert result.output.rstrip().endswith("main, main-repeat")
    assert not (exp / "report").exists()


def test_a_baseline_of_the_folder_is_taken_and_main_may_be_absent_by_default(tmp_path):
    """(The report with a baseline it has: test_render's build_report with baseline "pr".)"""
    exp = write_results(tmp_path, calibration_records()[:8])
    plan = ["plan", str(exp), "--target-effect", "1%"]
    result = runner.invoke(app, [*plan, "--baseline", "main-repeat"])
    assert result.exit_code == 0, result.output
    records = [make_record(arm, 1, r) for arm in ("a", "b") for r in range(1, 4)]
    other = write_results(tmp_path / "other", records)
    result = runner.invoke(app, ["plan", str(other), "--target-effect", "1%"])
    assert result.exit_code == 0, result.output  # no --baseline: main, absent, is no error
    result = runner.invoke(app, ["plan", str(other), "--target-effect", "1%", "--baseline",
                                 "main"])
    assert result.exit_code == 2 and result.output.rstrip().endswith(": a, b"), result.output


# ------------------------------------------------------------------ the rules, fuzzed ----

@FUZZ
@given(TEXT)
def test_fuzz_a_link_is_refused_or_written_as_safe_links(text):
    from e2e.render import render_summary

    written = render_summary(_fuzz_night, _context(text))
    assert _unsafe(written) == [], (text, _unsafe(written))
    try:
        safe_link(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and not TERMINAL_CONTROL.search(str(exc))
        assert _links(written) == []
        if text:  # "" is no link at the flag
            with pytest.raises(ConfigError):
                check_link(text, "--link")
        return
    assert check_link(text, "--link") == text
    assert not re.search(r"[\s\x00-\x1f\x7f-\x9f\"<>\\`]", text)
    assert _links(written), (text, written)  # the runs, the report, the trend plots


@FUZZ
@given(st.one_of(st.none(), TEXT), TEXT)
def test_fuzz_a_dashboard_link_is_relative_or_http(base, rel):
    link = report_link(base, rel)
    if link is None:
        return
    assert safe_link(link) == link
    assert not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", link) or re.match(r"^https?:", link, re.I)


@FUZZ
@given(TEXT)
def test_fuzz_any_link_given_to_the_comment_and_the_summaries_makes_no_markup(text):
    from e2e.render import render_summary_github

    for written in (render_github(_fuzz_summary, link=text, limit=4000),
                    render_summary_github(_fuzz_night, _context(text))):
        assert _unsafe(written) == [], (text, _unsafe(written))
        assert not TERMINAL_CONTROL.search(written.replace("\t", " ")), text
        assert len(_links(written)) <= 3


_fuzz_summary = _summary()
_fuzz_night = _night()


@FUZZ
@given(TEXT)
def test_fuzz_a_name_is_a_name_or_one_escaped_line(text):
    for check in (lambda v: check_name(v, "--spec"),
                  lambda v: known_name(v, ["main", "pr"], "baseline arm", "the arms in x")):
        try:
            got = check(text)
        except ConfigError as exc:
            message = str(exc)
            assert "\n" not in message and not TERMINAL_CONTROL.search(message), message
            continue
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", got)


@settings(FUZZ, max_examples=20)
@given(TEXT)
def test_fuzz_a_speculator_label_is_text_in_the_report(text):
    summary = dataclasses.replace(_fuzz_spec_summary, speculators=(text, "x"))
    for written in (render_markdown(summary, plot_names=()), render_github(summary)):
        assert _unsafe(written) == [], (text, _unsafe(written))


_fuzz_spec_summary = summarize([make_record(arm, 1, r, dspark=True, acceptance=2.5)
                                for arm in ("main", "pr") for r in range(1, 4)])


@pytest.mark.slow  # 48 commands: about 7 s
@CLI_FUZZ
@given(TEXT)
def test_fuzz_the_command_line_refuses_or_takes_a_link_a_baseline_and_a_spec(tmp_path_factory,
                                                                             text):
    """Through the command line: exit 0 or 2, never a traceback, no control character on the
    terminal, no markup in a file. (An accepted --link meets an empty folder, which is exit 2
    too: the render with any link is fuzzed above, here the boundary.)"""
    exp, empty = _cli_folders(tmp_path_factory)
    for args in (["report", str(empty), "--format", "github", "--link", text],
                 ["report", str(exp), "--baseline", text, "--quiet"],
                 ["plan", str(exp), "--target-effect", "1%", "--baseline", text],
                 ["sweep", "--dry-run", "--spec", text, "--results", str(empty)]):
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 2), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output
        assert not TERMINAL_CONTROL.search(result.output), (args, result.output)
        if result.exit_code == 2:
            assert result.output.startswith("error: ") and result.output.count("\n") == 1
    report = exp / "report" / "report.md"
    if report.exists():
        assert _unsafe(report.read_text(encoding="utf-8")) == []
    assert not (empty / "report").exists()


_folders: list[Path] = []


def _cli_folders(factory) -> list[Path]:
    if not _folders:
        root = factory.mktemp("cli")
        _folders.extend([write_results(root, calibration_records()[:8]), root / "empty"])
        _folders[1].mkdir()
    return _folders
