"""``e2e report --format github`` (e2e.render.render_github) and ``report/index.html``
(e2e.render.html_report.render_html): a calibration-shaped sweep's comment is under GitHub's
64 KB, parses as GitHub Markdown (markdown-it-py's table rule, as GitHub's cmark-gfm) with one
row per headline cell and a verdict icon per comparison; a sweep too big for a comment is cut
to fit with a note and the link; the HTML view shows the tables and the forest and strip
plots."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from e2e.analysis.sweep.aggregate import summarize
from e2e.cli import app
from e2e.render import COMMENT_LIMIT, render_github
from e2e.render.github import COMMENT_MARKER, STEP_SUMMARY_LIMIT, verdict_icon
from test_aggregate import make_record
from test_render import calibration_records, write_results

pytestmark = pytest.mark.slow  # the whole module is the slow tier

MD = MarkdownIt("commonmark").enable("table")


def tables(text: str) -> list[list[list[str]]]:
    """Every table of ``text`` as GitHub would draw it: rows of cell texts (header first)."""
    tokens = MD.parse(text)
    out, rows, row, inside = [], [], None, False
    for t in tokens:
        if t.type == "table_open":
            rows = []
        elif t.type == "tr_open":
            row = []
        elif t.type in ("th_open", "td_open"):
            inside = True
        elif t.type == "inline" and inside:
            row.append(t.content)
        elif t.type in ("th_close", "td_close"):
            inside = False
        elif t.type == "tr_close":
            rows.append(row)
        elif t.type == "table_close":
            out.append(rows)
    return out


def test_calibration_comment_is_small_valid_and_has_the_verdicts(tmp_path):
    exp = write_results(tmp_path, calibration_records())
    result = CliRunner().invoke(app, ["report", str(exp), "--format", "github", "--link",
                                      "https://ci.example/artifacts/report/index.html"])
    assert result.exit_code == 0, result.output
    text = (exp / "report" / "github.md").read_text(encoding="utf-8")
    assert text in result.output
    size = len(text.encode("utf-8"))
    assert size < COMMENT_LIMIT
    assert text.startswith(COMMENT_MARKER + "\n")
    headline = tables(text)[0]
    assert headline[0][:3] == ["concurrency", "metric", "main"]
    assert "delay-500 vs main" in headline[0]
    body = headline[1:]
    assert len(body) == 1 and body[0][0] == "1"          # concurrency 1, base: the headline
    delay500 = body[0][headline[0].index("delay-500 vs main")]
    assert delay500.startswith("🔴 +") and "slower" in delay500
    aa = body[0][headline[0].index("main-repeat vs main")]
    assert aa.split()[0] in ("✅", "⚪")
    assert "[https://ci.example/artifacts/report/index.html]" in text
    assert "Truncated" not in text
    # the full report's tables come folded, still valid tables
    assert len(tables(text)) >= 2 and "<details>" in text and text.count("</details>") == \
        text.count("<details>")
    # report/index.html: the same report as a page, with the forest and strip plots
    page = (exp / "report" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in page and 'src="plots/forest-server_tpot_ms_mean-base.png"' in page
    assert 'src="plots/strip-server_tpot_ms_mean-c1-base.png"' in page
    assert '<span class="slower">slower</span>' in page
    assert "<script" not in page and "http" not in page.split("<body>")[1].split("plots/")[0]


ARMS = {f"arm-{i:02d}": {"plugin": {"packing": "main", "step_delay_us": 10 * i}}
        for i in range(1, 16)}
ARMS["main"] = {"plugin": {"packing": "main"}}


def big_records():
    """16 arms × 8 concurrencies × both spec modes × 3 runs: more than a comment holds."""
    recs = []
    for arm in ARMS:
        slow = 1 + 0.01 * (0 if arm == "main" else int(arm[-2:]))
        for conc in (1, 2, 4, 8, 16, 32, 64, 128):
            for rep in (1, 2, 3):
                j = 1 + 0.002 * ((rep * 7 + conc) % 5 - 2)
                recs.append(make_record(arm, conc, rep, tpot=10 * slow * j, arms=ARMS,
                                        report_from_run=1))
                recs.append(make_record(arm, conc, rep, dspark=True, tpot=8 * slow * j,
                                        acceptance=2.5, arms=ARMS, report_from_run=1))
    return recs


@pytest.fixture(scope="module")
def big():
    return summarize(big_records(), baseline="main")


def test_a_sweep_too_big_for_a_comment_is_cut_to_fit_with_a_note(big):
    link = "https://ci.example/r/index.html"
    full = render_github(big, link=link, limit=10 ** 9)
    assert len(full.encode()) > COMMENT_LIMIT          # the test needs a sweep that overflows
    text = render_github(big, link=link)
    assert len(text.encode()) <= COMMENT_LIMIT and text.startswith(COMMENT_MARKER)
    assert re.search(r"\*\*Truncated\*\* to fit GitHub's 65,536-byte limit: .* left out; "
                     r"see \[the full report\]\(https://ci.example/r/index.html\)", text)
    assert text.count("<details>") == text.count("</details>")
    head = tables(text)[0]
    assert len(head) == 1 + 8 * 3   # every headline row: base, dspark and acceptance × 8
    assert all(len(r) == len(head[0]) for r in head)   # no row cut in half
    summary = render_github(big, link=link, limit=STEP_SUMMARY_LIMIT)
    assert "Truncated" not in summary and summary == full


def test_icons_follow_the_metric_direction(big):
    slower = big.comparison("arm-15", 1, "base", "tpot_ms_mean")
    assert slower.verdict == "slower" and verdict_icon(slower) == "🔴"
    lower = big.comparison("arm-15", 1, "base", "output_throughput_tok_s")
    assert verdict_icon(lower) in ("", "⚪", "✅", "🔴", "🟢")
    assert verdict_icon(None) == ""


def test_bad_format_is_a_clear_error(tmp_path):
    exp = write_results(tmp_path, calibration_records())
    result = CliRunner().invoke(app, ["report", str(exp), "--format", "html"])
    text = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "'html' is not one of 'markdown', 'github', 'json'" in text


def test_the_nightly_summary_as_a_comment():
    """The nightly's summary-github.md: marker, status icon, an icon per verdict, and a night
    with thousands of judged cells still fits, its report linked."""
    from e2e.analysis.nightly.judge import Rules, judge_night
    from e2e.results import CellKey, NightCell
    from e2e.render import SummaryContext, render_summary_github

    rules = Rules(thresholds={"base": {"tpot_ms_median": 2.0}})
    def cells(date, level, n):
        return [NightCell(CellKey("load", f"arm-{i:04d}", 1, "base", "tpot_ms_median"),
                          tuple(level * (1 + d) for d in (0.0, 0.001, -0.001)), (2, 3, 4),
                          tuple(f"nightly/{date}/n/arm-{i:04d}-c1-base-r{k}" for k in (2, 3, 4)))
                for i in range(n)]
    base = judge_night("2026-01-01", cells("2026-01-01", 10.0, 3000), None, rules)
    from e2e.results import Baseline

    baseline = Baseline("2026-01-01", tuple(cells("2026-01-01", 10.0, 3000)), "last passing")
    j = judge_night("2026-01-02", cells("2026-01-02", 11.0, 3000), baseline, rules)
    assert base.status == "undecided" and j.status == "regression"  # base: no baseline
    ctx = SummaryContext(experiment="nightly", config_hash="h" * 64, night_dir="nightly/x",
                         builds={}, arm_overrides={}, report_path="nightly/x/report/report.md",
                         link_base="https://ci.example/results")
    text = render_summary_github(j, ctx)
    assert text.startswith(COMMENT_MARKER + "\n# 🔴 Nightly nightly 2026-01-02 — REGRESSION")
    assert len(text.encode()) <= COMMENT_LIMIT
    assert "see [the full report](https://ci.example/results/nightly/x/report/report.md)" in text
    small = render_summary_github(judge_night("2026-01-02", cells("2026-01-02", 10.0, 2),
                                              Baseline("2026-01-01", tuple(cells(
                                                  "2026-01-01", 10.0, 2)), "x"), rules), ctx)
    assert "| ⚪ no change beyond +0.2 % |" in small and "Truncated" not in small
    assert all(len(r) == len(tables(small)[0][0]) for r in tables(small)[0])
