"""A server's error body reaches the PR comment, report.md and report/index.html (through an
invalid run's reason in the report's warnings) and the nightly summary (its problems): it
must stay one line of text there. Tried with the bodies that broke them (a forged headline
row, an open HTML comment, a remote image), then with any text hypothesis makes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from e2e.render.markup import md_text
from e2e.render import render_github
from e2e.render.html_report import render_html
from e2e.render.markdown import render_markdown
from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.summary import ReportWarning
from test_aggregate import make_record

GFM = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")

FORGED = ("upstream error\n| 1 | TPOT (ms) | 2.0 | 1.0 | 🟢 −50 % faster |\n\n## All good\n"
          "<!-- the rest is hidden\n![x](https://evil.example/pixel.png) <img src=x> @octocat "
          "[click](javascript:alert(1)) `code` *b* ~~s~~ &lt;i&gt; \u2028next\u202eline")


def _summary(message: str):
    records = [make_record(arm, 1, r, tpot=10.0 + r * 0.01) for arm in ("main", "pr")
               for r in range(1, 5)]
    summary = summarize(records)
    warning = ReportWarning(message, arm="pr", concurrency=1, spec_mode="base")
    return dataclasses.replace(summary, warnings=(*summary.warnings, warning))


def _lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def _unsafe_tokens(text: str) -> list[str]:
    """What a Markdown renderer with raw HTML on (GitHub allows some) would make of text that
    is not e2e's: raw HTML, images, links, code spans, emphasis."""
    bad = []
    for block in GFM.parse(text):
        if block.type in ("html_block",):
            bad.append(block.content)
        for child in block.children or []:
            if child.type in ("html_inline", "image", "link_open", "code_inline", "s_open",
                              "em_open", "strong_open"):
                bad.append(f"{child.type}: {child.content or child.attrs}")
    return bad


def _check(text: str, marker: str) -> None:
    lines = _lines_with(text, marker)
    assert len(lines) == 1, lines                       # the message is one line
    assert _unsafe_tokens(lines[0]) == [], lines[0]
    assert GFM.render(lines[0]).count("<tr") == 0


def test_a_forged_error_body_stays_one_line_of_text_everywhere():
    summary = _summary("MARK " + FORGED)
    md = render_markdown(summary, plot_names=())
    _check(md, "MARK")
    comment = render_github(summary)
    _check(comment, "MARK")
    page = render_html(md, (), title="t").decode()
    assert "<img" not in page and "<!--" not in page and "<a " not in page.split("MARK")[1][:2000]


def test_the_nightly_summary_keeps_problems_to_one_line():
    from e2e.analysis.nightly.judge import judge_night
    from e2e.results import Baseline
    from e2e.render import SummaryContext, render_summary
    from test_nightly_judge import BASE_RUNS, RULES, TPOT, cell

    base = Baseline("2026-01-01", (cell(TPOT, BASE_RUNS),), "last passing night")
    judgement = judge_night("2026-01-02", [cell(TPOT, (10.0, 10.02, 9.98))], base, RULES,
                            problems=["MARK " + FORGED])
    ctx = SummaryContext(experiment="nightly", config_hash="h" * 12, night_dir="n", builds={},
                         arm_overrides={}, notes=("NOTE " + FORGED,))
    text = render_summary(judgement, ctx)
    _check(text, "MARK")
    _check(text, "NOTE")


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_any_text_is_one_line_of_plain_text(text):
    line = "- ⚠ where: " + md_text(text)
    assert "\n" not in line and "\r" not in line
    assert _unsafe_tokens(line) == [], (text, line)
    rendered = GFM.render(line)
    assert "<li>" in rendered and rendered.count("<li>") == 1


def test_the_comment_never_exceeds_its_limit_however_wide_the_table():
    """1,100 arms made a 73,125-byte comment: the head and the header rows were never cut.
    Here the limit is made small instead of the table wide: the comment stays under it, marker
    first, with the note."""
    from e2e.render.github import COMMENT_MARKER

    records = [make_record(arm, 1, r, tpot=10.0 + r * 0.01)
               for arm in ("main", "pr", "flag-off") for r in range(1, 5)]
    summary = summarize(records)
    for limit in (120, 300, 500, 800, 1500, 3000):
        text = render_github(summary, limit=limit)
        assert len(text.encode("utf-8")) <= limit, (limit, len(text.encode()))
        assert text.startswith(COMMENT_MARKER)


def test_a_comment_of_many_arms_fits_githubs_limit():
    from e2e.render import COMMENT_LIMIT
    from e2e.render.github import fit_comment

    header = "| concurrency | metric | " + " | ".join(f"arm-{i:04d}" for i in range(1100)) + " |"
    head = ["<!-- e2e-report -->", "### e2e report", "", "x" * 70_000, ""]
    text = fit_comment(head, [["#### Headline", "", header, "|---|" * 1100, "| 1 | t |", ""]],
                       limit=COMMENT_LIMIT, link="https://ci.example.org/r", tail=["Full"])
    assert len(text.encode("utf-8")) <= COMMENT_LIMIT and "Truncated" in text
