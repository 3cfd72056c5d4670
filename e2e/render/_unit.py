"""``e2e unit``'s validation matrix as Markdown (``unit.md``): one row per test, one column
per arm and mutant, then each arm's failures and each mutant's verdict. Pure; the standard
library alone."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = ["unit_markdown"]


class _Column(Protocol):  # e2e.commands._unit.Column
    name: str
    arm: str
    settings: dict
    noop: str | None
    mutant: bool


def unit_markdown(cols: Sequence[_Column], results: Mapping[str, Mapping[str, str]],
                  caught: Mapping[str, Sequence[str]]) -> str:
    """``results``: column name -> {test id: "passed" | "failed" | "skipped"}; ``caught``:
    mutant name -> the tests that catch it (fail on it and pass on its arm)."""
    tests = sorted({t for r in results.values() for t in r})
    mark = {"passed": "pass", "failed": "**FAIL**", "skipped": "skip", None: "—"}
    head = [c.name + (f" (mutant of {c.arm})" if c.mutant else "") for c in cols]
    lines = ["# Unit validation matrix", "",
             "| test | " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
    for t in tests:
        lines.append(f"| {t} | " + " | ".join(mark[results[c.name].get(t)] for c in cols) + " |")
    lines.append("")
    for c in cols:
        failed = sum(o == "failed" for o in results[c.name].values())
        if c.mutant:
            hit = caught[c.name]
            what = ", ".join(filter(None, [
                f"plugin {json.dumps(c.settings, sort_keys=True)}",
                f"{c.noop} made a no-op" if c.noop else None]))
            lines.append(f"- mutant **{c.name}** ({what}): " + (
                f"caught by {len(hit)} test(s): {', '.join(hit)}" if hit
                else "**not caught by any test**"))
        else:
            lines.append(f"- arm {c.name}: {failed} of {len(results[c.name])} tests fail")
    return "\n".join(lines) + "\n"
