"""One Markdown table row and one alignment row, for every renderer of a Markdown table.

    md_row(["rows", "main", "pr"])      "| rows | main | pr |"
    md_rule(["---", "---:", "---:"])    "|---|---:|---:|"

Cells are put in as given: a cell of unknown origin is made one line of literal text by its
renderer first (``e2e.render.markup.md_text``, or escaping ``|``). Standard library only, so the
kernels' reports can use it on a GPU host without the report's stack.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["md_row", "md_rule"]


def md_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def md_rule(aligns: Iterable[str]) -> str:
    """``---`` for a left-aligned column, ``---:`` for a right-aligned one."""
    return "|" + "|".join(aligns) + "|"
