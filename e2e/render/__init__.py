"""Every writer of bytes for a report: Markdown, CSV, PNG, JSON; ``build_report`` reads a
results folder, aggregates and writes them.
"""

from e2e.render._json import dumps, gsm8k_json, report_json, run_json
from e2e.render._report import ReportOutput, build_report
from e2e.render._csv import render_csv
from e2e.render._markdown import render_markdown
from e2e.render._plots import render_plots

__all__ = [
    "ReportOutput", "build_report", "dumps", "gsm8k_json", "render_csv", "render_markdown",
    "render_plots", "report_json", "run_json"
]
