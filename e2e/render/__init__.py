"""Every writer of bytes for a report: Markdown, CSV, PNG, JSON, HTML (``report/index.html``)
and a GitHub comment (``render_github``, under GitHub's size limits); ``build_report`` reads
everything a results folder's report needs once, summarizes it, renders the whole report and
writes it once (``read_summary``: the same reading of the runs alone, ``e2e plan``'s); ``e2e plan``'s table (``format_advice``). GSM8K's report: ``gsm8k_markdown``, ``gsm8k_csv``, ``gsm8k_json``, and
``write_gsm8k_report`` beside its evaluations. The kernels' reports (``e2e micro``:
``micro_markdown``, ``write_micro``, ``write_steps``; the rest in ``e2e.render.kernels``) and
``e2e unit``'s matrix (``unit_markdown``). The nightly's: a night's summary
(``render_summary``, ``render_summary_github`` for GitHub, ``render_trends``' PNGs) and the
dashboard of its store (``site_files``: Jinja2 templates, ``templates/*.html.j2``; ``write_site``).

The kernels' writers and the unit matrix need the standard library alone, and load with this
face: ``bench/kernels_step.py`` runs on GPU hosts that have torch and Triton but
not the report's stack (pydantic, pandas, SciPy). ``e2e capacity``'s plot:
``render_capacity_plot``. Every other name loads its module, with
the others of the report, the first time it is asked for (``__getattr__``); the nightly's
names load theirs (with the nightly's settings and judgement) apart from the report's.
"""

from e2e.render.kernels import micro_markdown, write_micro, write_steps
from e2e.render._unit import unit_markdown

__all__ = [
    "COMMENT_LIMIT", "ReportOutput", "SiteData", "SummaryContext", "build_report",
    "cell_history_text", "dumps", "format_advice", "gsm8k_csv", "gsm8k_json", "gsm8k_markdown",
    "history_nights_text", "micro_markdown", "read_summary", "render_capacity_plot",
    "render_github", "render_summary", "render_summary_github", "render_trends", "report_json",
    "run_json", "site_files", "toml_text", "unit_markdown", "write_gsm8k_report", "write_micro",
    "write_site", "write_steps"
]

_NIGHTLY = ("SiteData", "SummaryContext", "render_summary", "render_summary_github",
            "render_trends", "site_files", "write_site")


def __getattr__(name: str) -> object:
    """The report's writers, loaded together the first time one is asked for; the nightly's
    summary and dashboard likewise."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _NIGHTLY:
        from e2e.render.dashboard import SiteData, site_files, write_site
        from e2e.render.nightly import (SummaryContext, render_summary, render_summary_github,
                                         render_trends)
    else:
        from e2e.render._capacity import render_capacity_plot
        from e2e.render.github import COMMENT_LIMIT, render_github
        from e2e.render._gsm8k import gsm8k_csv, gsm8k_markdown, write_gsm8k_report
        from e2e.render._history import cell_history_text, history_nights_text
        from e2e.render.json_report import dumps, gsm8k_json, report_json, run_json
        from e2e.render._plan import format_advice
        from e2e.render.report import ReportOutput, build_report, read_summary
        from e2e.render._toml import toml_text

    loaded = {k: v for k, v in locals().items() if k in __all__}
    globals().update(loaded)
    return loaded[name]
