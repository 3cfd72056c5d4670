"""A report's warnings as a reader acts on them: one line per cause, not one per metric or cell
(``warning_lines``). The summary keeps each warning beside the numbers it affects; a line
names the cause once, then every cell it touched with that cell's own figures."""

from __future__ import annotations

from dataclasses import dataclass

from e2e.analysis.sweep.summary import ReportWarning, Summary, label_of

__all__ = ["WarningLine", "warning_lines"]


@dataclass(frozen=True)
class WarningLine:
    """One cause: its sentence, then each cell it touched with that cell's figures
    (``places``: "main c1 base (mean TPOT 12.0 %, median TPOT 9.1 %)"), and the warnings it
    stands for, in the summary's order."""

    cause: str
    places: tuple[str, ...]
    warnings: tuple[ReportWarning, ...]

    @property
    def text(self) -> str:
        return f"{self.cause}: {'; '.join(self.places)}" if self.places else self.cause


def _place(summary: Summary, w: ReportWarning) -> str:
    label = summary.load_label(w.concurrency, w.spec_mode)
    load = f"c{w.concurrency}" if label == f"concurrency {w.concurrency}" else label
    return f"{w.arm} {load} {w.spec_mode}"


def warning_lines(summary: Summary) -> tuple[WarningLine, ...]:
    """``summary.warnings`` grouped by cause (``ReportWarning.cause``, else the message
    itself), in the order each cause first appears; within a cause, one place per cell with
    its details (or the metrics it concerns), in the summary's order."""
    causes: dict[str, dict[str, list[str]]] = {}
    members: dict[str, list[ReportWarning]] = {}
    for w in summary.warnings:
        cause = w.cause or w.message
        places = causes.setdefault(cause, {})
        members.setdefault(cause, []).append(w)
        if w.arm is None:
            continue
        details = places.setdefault(_place(summary, w), [])
        detail = w.detail if w.cause else (label_of(w.metric) if w.metric else None)
        if detail and detail not in details:
            details.append(detail)
    return tuple(
        WarningLine(cause, tuple(f"{where} ({', '.join(d)})" if d else where
                                 for where, d in places.items()), tuple(members[cause]))
        for cause, places in causes.items())
