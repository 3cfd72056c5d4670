"""Markdown renderer: a ``Summary`` -> the report text (no I/O).

Layout: a headline table in the reference layout (``concurrency | metric | <arms> | <arm> vs
<baseline>``; mean TPOT at concurrency 1, median TPOT above it, ms per verify step with the
speculator, plus acceptance length rows), a table of every metric per spec mode, the warnings
(numbered; each number appears next to the figures it affects as ``⚠N``), and how every figure
is defined.
"""

from __future__ import annotations

from e2e.aggregate import (
    MAX_ACCEPTANCE_MOVE,
    MAX_SPREAD,
    MIN_RUNS,
    Cell,
    Comparison,
    Metric,
    ReportWarning,
    Summary,
    metric,
)

__all__ = ["render_markdown", "format_value", "format_cell", "format_pct", "format_comparison",
           "headline_metric"]

MINUS = "\u2212"
DASH = "\u2013"
MISSING = "\u2014"
WARN = "\u26a0"
_MODE_TITLE = {"base": "without speculator", "dspark": "with the DSpark speculator"}


def format_value(x: float) -> str:
    """Digits by magnitude: 1523, 152.3, 6.73, 0.512."""
    a = abs(x)
    if a >= 1000:
        s = f"{x:.0f}"
    elif a >= 100:
        s = f"{x:.1f}"
    elif a >= 1:
        s = f"{x:.2f}"
    else:
        s = f"{x:.3f}"
    return s.replace("-", MINUS)


def format_cell(cell: Cell | None) -> str:
    """``6.73 (6.65–6.74)``: median (minimum–maximum) of the reported runs."""
    if cell is None:
        return MISSING
    if cell.n == 1:
        return f"{format_value(cell.median)} (1 run)"
    return f"{format_value(cell.median)} ({format_value(cell.low)}{DASH}{format_value(cell.high)})"


def format_pct(x: float) -> str:
    """Signed, one decimal, with a true minus sign: ``−3.1``, ``+0.4``, ``0.0``."""
    s = f"{x:+.1f}"
    if s in ("+0.0", "-0.0"):
        return "0.0"
    return s.replace("-", MINUS)


def format_comparison(comp: Comparison | None) -> str:
    """``−3.1 % [−4.0, −2.2] faster``."""
    if comp is None:
        return MISSING
    if comp.interval is None:
        return f"{format_pct(comp.pct)} % ({comp.verdict})"
    lo, hi = comp.interval
    return f"{format_pct(comp.pct)} % [{format_pct(lo)}, {format_pct(hi)}] {comp.verdict}"


def headline_metric(concurrency: int, spec_mode: str) -> str:
    """The reference's headline figure: mean TPOT at concurrency 1, median TPOT above it,
    ms per verify step with the speculator."""
    if spec_mode == "dspark":
        return "ms_per_verify_step"
    return "tpot_ms_mean" if concurrency == 1 else "tpot_ms_median"


def _metric_name(m: Metric, spec_mode: str | None = None) -> str:
    name = m.label if m.unit in ("tokens/step",) or m.key == "ms_per_verify_step" else f"{m.label} ({m.unit})"
    if spec_mode == "dspark":
        name += ", DSpark"
    return name


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


class _Markers:
    """Numbers the summary's warnings 1..N, in order, for ``⚠N`` markers."""

    def __init__(self, warnings: tuple[ReportWarning, ...]) -> None:
        self.number = {id(w): i for i, w in enumerate(warnings, start=1)}

    def suffix(self, summary: Summary, arm: str, conc: int, mode: str, key: str) -> str:
        hits = [self.number[id(w)] for w in summary.warnings_for(arm, conc, mode, key)]
        return f" {WARN}{','.join(map(str, hits))}" if hits else ""


def _header(summary: Summary, first: list[str]) -> list[str]:
    compared = summary.compared_arms
    head = first + list(summary.arms) + [f"{a} vs {summary.baseline}" for a in compared]
    align = ["---:" if h == "concurrency" else "---" for h in first]
    align += ["---:"] * (len(summary.arms) + len(compared))
    return [_row(head), "|" + "|".join(align) + "|"]


def _figures(summary: Summary, markers: _Markers, conc: int, mode: str, key: str) -> list[str]:
    out = []
    for arm in summary.arms:
        cell = summary.cell(arm, conc, mode, key)
        text = format_cell(cell)
        if cell is not None or summary.warnings_for(arm, conc, mode, key):
            text += markers.suffix(summary, arm, conc, mode, key)
        out.append(text)
    out += [format_comparison(summary.comparison(a, conc, mode, key)) for a in summary.compared_arms]
    return out


def _has_row(summary: Summary, conc: int, mode: str, key: str) -> bool:
    return any(summary.cell(a, conc, mode, key) is not None for a in summary.arms)


def _has_group(summary: Summary, conc: int, mode: str) -> bool:
    return any(c.concurrency == conc and c.spec_mode == mode for c in summary.cells) or any(
        w.concurrency == conc and w.spec_mode == mode for w in summary.warnings)


def _runs_sentence(summary: Summary) -> str:
    k = summary.report_from_run
    c = summary.counts
    if k == 1:
        which = "every run of each cell is reported (no warmup)"
    elif k == 2:
        which = "run 1 of each cell is a warmup, runs 2 and later are reported"
    else:
        which = f"runs 1{DASH}{k - 1} of each cell are warmups, runs {k} and later are reported"
    ns = sorted({cell.n for cell in summary.cells})
    per = (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}{DASH}{ns[-1]}") if ns else "0"
    return (
        f"Runs: {c.total} recorded; {c.reported} reported, {c.warmup} warmup, {c.invalid} invalid "
        f"(invalid runs are never used). {which[0].upper() + which[1:]}; "
        f"{per} reported run{'s' if per != '1' else ''} per cell."
    )


def render_markdown(summary: Summary) -> str:
    """The whole report as Markdown text (ends with a newline)."""
    markers = _Markers(summary.warnings)
    lines: list[str] = [f"# e2e report: {summary.experiment}", ""]
    lines.append(_runs_sentence(summary))
    lines.append(
        f"Arms: {', '.join(summary.arms)}; baseline: {summary.baseline}. "
        "Cells are median (min–max) of the reported runs; "
        f"“X vs {summary.baseline}” is the change of the median with its "
        f"{summary.confidence * 100:g} % interval and verdict (see “How to read this”).")
    lines.append("")

    lines += ["## Headline", ""]
    lines += _header(summary, ["concurrency", "metric"])
    body = 0
    for mode in summary.spec_modes:
        keys_by_conc = [(conc, headline_metric(conc, mode)) for conc in summary.concurrencies]
        if mode == "dspark":
            keys_by_conc += [(conc, "acceptance_length") for conc in summary.concurrencies]
        for conc, key in keys_by_conc:
            if not _has_group(summary, conc, mode):
                continue
            if key == "acceptance_length" and not _has_row(summary, conc, mode, key):
                continue
            lines.append(_row([str(conc), _metric_name(metric(key), mode)]
                              + _figures(summary, markers, conc, mode, key)))
            body += 1
    if body == 0:
        lines.append(_row(["", "no data"] + [""] * (len(summary.arms) + len(summary.compared_arms))))
    lines.append("")

    lines += ["## All metrics", ""]
    for mode in summary.spec_modes:
        lines += [f"### {mode} ({_MODE_TITLE.get(mode, mode)})", ""]
        lines += _header(summary, ["concurrency", "metric"])
        for conc in summary.concurrencies:
            for m in summary.metrics_in(mode):
                if _has_row(summary, conc, mode, m.key):
                    lines.append(_row([str(conc), _metric_name(m)]
                                      + _figures(summary, markers, conc, mode, m.key)))
        lines.append("")

    lines += ["## Warnings", ""]
    if summary.warnings:
        for i, w in enumerate(summary.warnings, start=1):
            if w.arm is None:
                where = "report"
            else:
                where = f"{w.arm} · concurrency {w.concurrency} · {w.spec_mode}"
                where += f" · {metric(w.metric).label}" if w.metric else " · every metric"
            lines.append(f"- {WARN}{i} {where}: {w.message}")
    else:
        lines.append("None.")
    lines.append("")

    lines += ["## How to read this", ""]
    lines.append(f"- **Cell**: all runs of one (arm, concurrency, spec mode); each run is a fresh "
                 f"server. A figure is the median (minimum{DASH}maximum) over the cell's reported runs "
                 f"(valid runs numbered {summary.report_from_run} or later).")
    lines.append(
        f"- **X vs {summary.baseline}**: (median of X ÷ median of {summary.baseline} − 1) × 100. "
        f"The bracket is its {summary.confidence * 100:g} % interval by a {summary.interval_method}: "
        "the Welch (unequal-variance) two-sample t-interval of the difference of the mean natural "
        "logs of the per-run values, back-transformed to a ratio. With few runs it widens by "
        "itself (t with few degrees of freedom), so it is not over-confident at 3 runs per arm. "
        "It bounds the ratio of geometric means; the figure before it is the ratio of medians; "
        "the two agree closely unless a run is an outlier.")
    lines.append(
        f"- **Verdict**: “faster” or “slower” when the interval excludes 0 %, the change lies on "
        f"the same side and is at least {summary.min_effect_pct:g} % (a minimum practical effect); "
        "otherwise “within noise”; “too few runs” when an arm has fewer than 2 reported runs. "
        "“faster” means better in the metric's direction: lower latency and ms per verify step, "
        "higher throughput and acceptance length.")
    lines.append("- **Headline metric**: mean TPOT at concurrency 1, median TPOT at higher "
                 "concurrency, ms per verify step with the speculator (raw TPOT follows the "
                 "acceptance length, which moves from run to run on random prompts).")
    for m in summary.metrics:
        lines.append(f"- **{m.label}** ({m.unit}, {'higher' if m.higher_is_better else 'lower'} is "
                     f"better): {m.definition}.")
    lines.append(f"- **Warnings**: fewer than {MIN_RUNS} reported runs; spread (max − min) / median "
                 f"above {MAX_SPREAD * 100:g} % (acceptance length: above "
                 f"{MAX_ACCEPTANCE_MOVE * 100:g} %); invalid runs (excluded, counted).")
    return "\n".join(lines) + "\n"
