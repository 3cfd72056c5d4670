"""Renderers: one per format, each turns a ``Summary`` into bytes and does no I/O.

``render_markdown`` -> str (the report text; encode as UTF-8 to write it),
``render_csv`` -> {file name: bytes}, ``render_plots`` -> {file name: PNG bytes}.
``e2e.render._report`` owns where the bytes go.
"""

from __future__ import annotations

from e2e.render._csv import render_csv
from e2e.render._markdown import render_markdown
from e2e.render._plots import render_plots

__all__ = ["render_markdown", "render_csv", "render_plots"]
