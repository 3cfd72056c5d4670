"""HTML renderer: the report's Markdown -> ``report/index.html`` (bytes, no I/O).

The same report a browser can open from disk or a CI artifact: the Markdown rendered with
markdown-it-py (GitHub's table syntax), each verdict coloured, the forest plots where the
headline is (the Markdown's own images), and the other plots the PNG renderer wrote after it
(strip plots first, then each metric against concurrency), by relative path (``plots/<name>``). No script, nothing from a network: the page is the tables and
the pictures, so it stays a few kilobytes beside the PNGs (the dashboard's interactive plots
carry plotly's 4.8 MB bundle once per site, which a report per night should not).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em auto;color:#222;max-width:1250px;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .55em;font-size:14px}
th{background:#f4f4f4}td{font-variant-numeric:tabular-nums}code{background:#f4f4f4;padding:0 .2em}
.slower,.lower-bad{color:#b00020;font-weight:600}.faster,.higher-good{color:#137333;font-weight:600}
.equivalent{color:#137333}.inconclusive{color:#666}
.plots{display:flex;flex-wrap:wrap;gap:.8em}.plots figure{margin:0;border:1px solid #ddd;padding:.3em}
.plots img{max-width:600px;width:100%}figcaption{font-size:13px;color:#555}
p>img{max-width:760px;width:100%;display:block;margin:.4em 0}
"""

_VERDICTS = re.compile(r"(?<![\w-])(faster|slower|equivalent ±[\d.]+ %|inconclusive)(?![\w-])")


def _mark(body: str) -> str:
    """Wrap verdict words inside table cells in a span with a class (colour)."""
    def cell(m: re.Match) -> str:
        inner = _VERDICTS.sub(lambda v: f'<span class="{v.group(1).split()[0]}">{v.group(1)}'
                              "</span>", m.group(2))
        return f"{m.group(1)}{inner}</td>"
    return re.sub(r"(<td[^>]*>)(.*?)</td>", cell, body, flags=re.S)


def render_html(markdown: str, plot_names: Iterable[str], *, title: str) -> bytes:
    """``report/index.html``: ``markdown`` as HTML (its images inline), then every other plot
    in ``plot_names``."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")
    body = _mark(md.render(markdown))
    # the forest plots are already inline under the headline (the Markdown's images)
    names = sorted((n for n in plot_names if not n.startswith("forest-")),
                   key=lambda n: (not n.startswith("strip-"), n))
    figures = "".join(
        f'<figure><a href="plots/{html.escape(n)}"><img src="plots/{html.escape(n)}" '
        f'alt="{html.escape(n)}"></a><figcaption>{html.escape(n[:-4])}'
        "</figcaption></figure>" for n in names)
    pictures = (f"<h2 id=plots>Plots</h2><div class=plots>{figures}</div>" if figures else "")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>'
            f"{html.escape(title)}</title><style>{_CSS}</style></head><body>{body}{pictures}"
            '<p><a href="report.md">report.md</a> · <a href="cells.csv">cells.csv</a> · '
            '<a href="comparisons.csv">comparisons.csv</a></p></body></html>\n').encode("utf-8")
