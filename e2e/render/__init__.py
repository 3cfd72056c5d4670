"""Every writer of bytes for a report: Markdown, CSV, PNG, JSON, HTML (``report/index.html``)
and a GitHub comment (``render_github``, under GitHub's size limits); ``build_report`` reads a
results folder, aggregates and writes them.
"""

from e2e.render._json import dumps, gsm8k_json, report_json, run_json
from e2e.render._report import ReportOutput, build_report
from e2e.render._csv import render_csv
from e2e.render._github import (COMMENT_LIMIT, COMMENT_MARKER, STEP_SUMMARY_LIMIT, fit_comment,
                                render_github, verdict_icon)
from e2e.render._html import render_html
from e2e.render._markdown import render_markdown
from e2e.render._plots import render_plots
from e2e.render._toml import toml_text

__all__ = [
    "COMMENT_LIMIT", "COMMENT_MARKER", "ReportOutput", "STEP_SUMMARY_LIMIT", "build_report",
    "dumps", "fit_comment", "gsm8k_json", "render_csv", "render_github", "render_html",
    "render_markdown", "render_plots", "report_json", "run_json", "toml_text", "verdict_icon"
]
