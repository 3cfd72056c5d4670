"""Every writer of bytes for a report: Markdown, CSV, PNG, JSON, HTML (``report/index.html``)
and a GitHub comment (``render_github``, under GitHub's size limits); ``build_report`` reads a
results folder (``read_summary``: the one reading, ``e2e plan``'s too), aggregates and writes
them. GSM8K's report: ``gsm8k_markdown``, ``gsm8k_csv``,
``gsm8k_json``, and ``write_gsm8k_report`` beside its evaluations. The kernels' reports
(``e2e micro``: ``micro_markdown``, ``steps_markdown``, ``write_micro``, ...) and ``e2e
unit``'s matrix (``unit_markdown``). The nightly's: a night's summary (``render_summary``,
``render_summary_github`` for GitHub, ``render_trends``' PNGs) and the dashboard of its store
(``site_files``: Jinja2 templates, ``templates/*.html.j2``; ``write_site``).

The kernels' writers and the unit matrix need the standard library alone, and load with this
face: ``bench/kernels_step.py`` runs on GPU hosts that have torch and Triton but
not the report's stack (pydantic, pandas, SciPy). ``e2e capacity``'s plot:
``render_capacity_plot``. Every other name loads its module, with
the others of the report, the first time it is asked for (``__getattr__``); the nightly's
names load theirs (with the nightly's settings and judgement) apart from the report's.
"""

from e2e.render.kernels import (host_cost_markdown, micro_markdown, micro_plot, steps_markdown,
                                 write_micro, write_steps)
from e2e.render.markup import csv_safe, md_text
from e2e.render._unit import unit_markdown

__all__ = [
    "COMMENT_LIMIT", "COMMENT_MARKER", "ReportOutput", "SCHEMA_VERSION", "STEP_SUMMARY_LIMIT",
    "SiteData", "SummaryContext", "build_report", "cell_history_text", "comparison_plot_names",
    "csv_safe", "dumps", "fit_comment", "forest_figure", "format_cell",
    "format_headline_comparison", "format_pct", "format_value", "gsm8k_csv", "gsm8k_json",
    "gsm8k_markdown", "history_nights_text", "host_cost_markdown", "md_text", "metric_label",
    "micro_markdown", "micro_plot", "read_summary", "render_capacity_plot", "render_csv",
    "render_github", "render_html", "render_markdown", "render_plots", "render_summary",
    "render_summary_github", "render_trends", "report_json", "report_link", "run_json", "said",
    "site_files", "steps_markdown", "toml_text", "unit_markdown", "verdict_icon",
    "write_gsm8k_report", "write_micro", "write_site", "write_steps"
]

_NIGHTLY = ("SiteData", "SummaryContext", "metric_label", "render_summary", "report_link",
            "render_summary_github", "render_trends", "said", "site_files", "write_site")


def __getattr__(name: str) -> object:
    """The report's writers, loaded together the first time one is asked for; the nightly's
    summary and dashboard likewise."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _NIGHTLY:
        from e2e.render.dashboard import SiteData, report_link, site_files, write_site
        from e2e.render.nightly import (SummaryContext, metric_label, render_summary,
                                         render_summary_github, render_trends, said)
    else:
        from e2e.render._capacity import render_capacity_plot
        from e2e.render.csv_report import render_csv
        from e2e.render.forest import comparison_plot_names, forest_figure
        from e2e.render.github import (COMMENT_LIMIT, COMMENT_MARKER, STEP_SUMMARY_LIMIT,
                                        fit_comment, render_github, verdict_icon)
        from e2e.render._gsm8k import gsm8k_csv, gsm8k_markdown, write_gsm8k_report
        from e2e.render._history import cell_history_text, history_nights_text
        from e2e.render.html_report import render_html
        from e2e.render.json_report import SCHEMA_VERSION, dumps, gsm8k_json, report_json, run_json
        from e2e.render.markdown import (format_cell, format_headline_comparison, format_pct,
                                          format_value, render_markdown)
        from e2e.render.plots import render_plots
        from e2e.render._report import ReportOutput, build_report, read_summary
        from e2e.render._toml import toml_text

    loaded = {k: v for k, v in locals().items() if k in __all__}
    globals().update(loaded)
    return loaded[name]
