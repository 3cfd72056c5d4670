"""Renderers of a night (``e2e nightly``): the Markdown summary and the trend plots, as
text/bytes (no I/O).

The summary is short enough for a CI step summary or a chat message: the status, the build,
the baseline and the headline metrics on top, then what regressed (by how much, against which
night, with links to both nights' run folders), change points over the history, the
``e2e bisect`` command for a regressed git-built arm, what improved, the problems, and a
table of every judged cell. ``render_summary_github`` is the same summary as a comment that
fits GitHub's limits (``fit_comment``, as ``render_github`` cuts a report's).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from e2e.render.github import COMMENT_LIMIT, COMMENT_MARKER, fit_comment
from e2e.render.markup import md_link, md_text
from e2e.analysis.nightly import NIGHTLY_METRICS
from e2e.render._table import md_row
from e2e.results import EXIT_CODES, GSM8K_METRIC, CellVerdict, Judgement, NightCell, worse_end

__all__ = ["SummaryContext", "render_summary", "render_summary_github", "render_trends",
           "metric_label", "said"]

_HEADLINE = {"pass": "PASS", "regression": "REGRESSION", "incomplete": "INCOMPLETE",
             "undecided": "UNDECIDED", "blind": "BLIND"}
# the tables' rule row as the summary has always written it (md_rule writes "|---|")
_RULE = md_row(["---"] * 8)


def metric_label(key: str) -> tuple[str, str]:
    """(label, unit) of a metric key."""
    if key == GSM8K_METRIC:
        return "GSM8K strict-match", "%"
    m = next((m for m in NIGHTLY_METRICS if m.key == key), None)
    return (m.label, m.unit) if m else (key, "")


@dataclass(frozen=True)
class SummaryContext:
    """What the summary says about the night besides the judgement."""

    experiment: str
    config_hash: str
    night_dir: str                        # relative to the results folder
    builds: Mapping[str, Mapping[str, Any]]
    arm_overrides: Mapping[str, Any]
    report_path: str | None = None        # relative to the results folder
    trends_dir: str | None = None
    link_base: str | None = None
    confidence: float = 0.95
    notes: tuple[str, ...] = ()           # e.g. invalid attempts that were retried
    bisect: tuple[str, ...] = ()          # e2e bisect command lines for regressed git builds
    design: tuple[str, ...] = ()          # what a night of this design resolves (resolution)


def _url(ctx: SummaryContext, path: str | None) -> str | None:
    """``path`` (relative to the results folder) under the link base; None without either."""
    return f"{ctx.link_base.rstrip('/')}/{path}" if ctx.link_base and path else None


def _link(ctx: SummaryContext, text: str, path: str) -> str:
    """``text`` linked to ``path`` under the link base, else ``text`` and the path (also
    where the link would not be one e2e writes: ``md_link``)."""
    return md_link(text, _url(ctx, path)) or f"{text} `{path}`"


def _value(cell: NightCell | None, metric: str) -> str:
    if cell is None:
        return "—"
    scale = 100.0 if metric == GSM8K_METRIC else 1.0
    med, lo, hi = cell.median * scale, cell.low * scale, cell.high * scale
    digits = 2 if metric == GSM8K_METRIC else 3
    if len(cell.values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def _change(v: CellVerdict) -> str:
    if v.pct is None:
        return "—"
    if v.key.kind == "gsm8k":
        return f"{v.pct:+.2f} pp"
    return f"{v.pct:+.1f} %"


def _interval(v: CellVerdict) -> str:
    if v.interval is None:
        return "—"
    if v.key.kind == "gsm8k":
        p = f", McNemar p {v.p_value:.3g}" if v.p_value is not None else ""
        return f"{v.interval[0]:+.1f} … {v.interval[1]:+.1f} pp{p}"
    return f"{v.interval[0]:+.1f} … {v.interval[1]:+.1f} %"


def _threshold(v: CellVerdict) -> str:
    if v.threshold is None:
        return "—"
    return f"{v.threshold:g} pp" if v.key.kind == "gsm8k" else f"{v.threshold:g} %"


def _run_links(ctx: SummaryContext, which: str, dirs: tuple[str, ...]) -> str:
    if not dirs:
        return ""
    if ctx.link_base:
        return f"{which} " + " ".join(_link(ctx, d.rsplit("-", 1)[-1], d) for d in dirs)
    common = dirs[0].rsplit("-", 1)[0] + "-r*" if len(dirs) > 1 else dirs[0]
    return f"{which} `{common}`"


def _runs(ctx: SummaryContext, v: CellVerdict) -> str:
    parts = [_run_links(ctx, "tonight", v.tonight.run_dirs if v.tonight else ()),
             f"history: {len(v.history)} nights {md_text(v.history[0])} … {md_text(v.history[-1])}"
             if v.history
             else _run_links(ctx, "baseline", v.baseline.run_dirs if v.baseline else ())]
    return " · ".join(p for p in parts if p) or "—"


def said(v: CellVerdict) -> str:
    """What a night says of a cell: its call, or for a load cell without one "no change
    beyond X %" (X the interval's reach on the worse side), marked where X is past the
    threshold (the night could not see a change of the threshold's size); a call a busy night
    withheld is named."""
    x = worse_end(v)
    if v.withheld:
        return f"undecided: {v.withheld} {v.pct:+.1f} %, not called (measured beside other work)"
    if v.key.kind == "load" and v.verdict in ("noise", "undecided") and x is not None:
        if v.verdict == "noise":
            return f"no change beyond {x:+.1f} %"
        return f"no change beyond {x:+.1f} % (not resolved: past the {v.threshold:g} % threshold)"
    if v.verdict == "regressed" and v.regressed_since:
        return f"regressed (since {v.regressed_since})"
    return v.verdict


def _row(ctx: SummaryContext, v: CellVerdict, *, with_verdict: bool, icons: bool = False) -> str:
    label, unit = metric_label(v.key.metric)
    cells = [v.key.label(), f"{label} ({unit})", _value(v.baseline, v.key.metric),
             _value(v.tonight, v.key.metric), _change(v), _interval(v), _threshold(v)]
    if with_verdict:
        icon = _VERDICT_ICON.get(v.verdict, "") if icons else ""
        cells.append(f"{icon} {said(v)}" if icon else said(v))
    else:
        cells.append(_runs(ctx, v))
    return md_row(cells)


def _build_line(ctx: SummaryContext) -> str:
    parts = []
    for arm, facts in ctx.builds.items():
        engine = facts.get("engine_distribution") or "engine"
        version = facts.get("engine_version") or "?"
        sha = facts.get("engine_git_sha")
        pkgs = facts.get("packages_sha256")
        text = f"{arm}: {engine} {version}"
        if sha:
            text += f" @ {str(sha)[:12]}"
        if pkgs:
            text += f" (packages {str(pkgs)[:12]})"
        parts.append(text)
    line = "; ".join(parts) or "?"
    if ctx.arm_overrides:
        line += " · arm settings " + ", ".join(f"{k}={v}" for k, v in ctx.arm_overrides.items())
    return line


def _headlines(j: Judgement) -> list[str]:
    """One entry per spec mode: the load metrics judged, and why ms per verify step is built
    from the server's TPOT where it is."""
    out = []
    for mode in ("base", "dspark"):
        judged = [v for v in j.verdicts if v.key.kind == "load" and v.key.spec_mode == mode
                  and v.verdict != "not judged"]
        names: dict[str, str] = {}
        for v in judged:
            names.setdefault(metric_label(v.key.metric)[0], v.source)
        if names:
            out.append(f"{mode}: " + ", ".join(f"{n} ({why})" if why else n
                                                for n, why in names.items()))
    return out


def _outputs_lines(j: Judgement) -> list[str]:
    """Tonight's outputs against the reference's, one line per check, findings first."""
    lines = []
    for c in sorted(j.outputs, key=lambda c: not c.finding):
        if c.finding:
            effect = ("the night is a regression" if j.outputs_fail else
                      "reported only: outputs_fail = false")
            lines.append(f"- **Outputs: finding** — {md_text(c.line())} ({effect})")
        else:
            lines.append(f"- **Outputs**: {md_text(c.line())}")
    return lines


def _unresolved(j: Judgement, judged: int) -> str:
    """What an undecided or blind night did not resolve, for its title."""
    open_, building = j.by_verdict("undecided"), j.by_verdict("no baseline", "new cell")
    parts = []
    if open_:
        parts.append(f"{len(open_)} of {judged} judged cells not resolved")
    if building:
        parts.append(f"{len(building)} of {judged} judged cells have nothing to be judged "
                     "against yet")
    withheld = [v for v in open_ if v.withheld]
    if withheld:
        parts.append(f"{len(withheld)} call{'s' if len(withheld) != 1 else ''} withheld: "
                     "measured beside other work")
    stuck = max(open_, key=lambda v: v.undecided_nights, default=None)
    if j.status == "blind" and stuck is not None:
        parts.append(f"{stuck.key.label()} {metric_label(stuck.key.metric)[0]} undecided at its "
                     f"last look {stuck.undecided_nights} nights in a row: its history no longer "
                     f"resolves the {stuck.threshold:g} % threshold")
    return "; ".join(parts)


def render_summary(judgement: Judgement, ctx: SummaryContext, *, icons: bool = False) -> str:
    """The night's Markdown summary (``icons``: an icon before each verdict, for GitHub)."""
    j = judgement
    judged = [v for v in j.verdicts if v.verdict != "not judged"]
    regressed = j.by_verdict("regressed")
    improved = j.by_verdict("improved")
    head = f"{_HEADLINE[j.status]} (exit {EXIT_CODES[j.status]})"
    if j.status == "regression":
        parts = []
        if regressed:
            parts.append(f"{len(regressed)} of {len(judged)} judged cells regressed")
        steps = [c for c in j.changes if c.regression]
        if steps:
            parts.append(f"{len(steps)} change point{'s' if len(steps) != 1 else ''} made a "
                         "cell worse")
        if j.outputs_fail and j.output_findings:
            parts.append("outputs differ from the reference")
        head += ": " + "; ".join(parts)
    elif j.status == "incomplete":
        head += ": some cells could not be judged"
    elif j.status in ("undecided", "blind"):
        head += ": " + _unresolved(j, len(judged))
    lines = [f"# Nightly {ctx.experiment} {j.date} — {head}", ""]
    lines += _outputs_lines(j)
    lines.append(f"- **Build**: {_build_line(ctx)}")
    lines.append(f"- **Config**: `{ctx.config_hash[:12]}` · night folder "
                 + _link(ctx, "runs", ctx.night_dir))
    if j.baseline is None:
        lines.append("- **Baseline**: none (no earlier passing night with this config hash); "
                     "tonight's cells are recorded and become the baseline if nothing but the "
                     "missing baseline keeps the night from passing")
    else:
        status = "" if j.baseline.status == "pass" else f" (its status: {j.baseline.status})"
        lines.append(f"- **Baseline**: night {j.baseline.date}, {j.baseline.reason}{status}")
    histories = sorted({v.history for v in j.verdicts if v.history})
    for h in histories:
        lines.append(f"- **History**: the cells relative to the reference are judged against "
                     f"their ratio's history, {len(h)} nights {md_text(h[0])} … {md_text(h[-1])} "
                     "(a prediction interval over nights; once it holds its history_nights no "
                     "later night joins it, so a change is never absorbed)")
    for line in ctx.design:
        lines.append(f"- **What a night resolves**: {md_text(line)}")
    heads = _headlines(j)
    if heads:
        lines.append("- **Judged metrics**: " + "; ".join(heads))
    lines.append("")
    columns = ["cell", "metric", "baseline", "tonight", "change", "interval / floor", "threshold"]

    def header(last: str) -> list[str]:
        return [md_row(columns + [last]), _RULE]

    if regressed:
        lines += ["## Regressed", "", *header("runs")]
        lines += [_row(ctx, v, with_verdict=False) for v in regressed]
        lines.append("")
    if j.changes:
        lines += ["## Change points over the history", "",
                  md_row(["cell", "metric", "started", "level before → after", "change", "p",
                          "night-vs-night caught it", "verdict"]), _RULE]
        for c in j.changes:
            label, unit = metric_label(c.key.metric)
            verdict = "**regression**" if c.regression else c.reason
            lines.append(md_row([c.key.label(), f"{label} ({unit})", str(c.start),
                                 f"{c.before:.3f} → {c.after:.3f}", f"{c.pct:+.1f} %",
                                 f"{c.p_value:.3g}", "yes" if c.caught else "no", verdict]))
        lines.append("")
    if ctx.bisect:
        lines += ["## Find the commit", "", "A git-built arm regressed; this names the first bad "
                  "commit (builds and measures midpoints, resumable):", ""]
        lines += [f"    {line}" for line in ctx.bisect]
        lines.append("")
    if improved:
        lines += ["## Improved", "", *header("runs")]
        lines += [_row(ctx, v, with_verdict=False) for v in improved]
        lines.append("")
    blocked = j.by_verdict("missing", "too few runs", "no samples")
    if blocked or j.problems:
        lines += ["## Problems", ""]
        lines += [f"- {v.key.label()} {metric_label(v.key.metric)[0]}: {v.verdict} "
                  f"({md_text(v.reason)})" for v in blocked]
        lines += [f"- {md_text(p)}" for p in j.problems]  # may quote a server's answer
        lines.append("")
    if ctx.notes:
        lines += ["## Notes", ""] + [f"- {md_text(n)}" for n in ctx.notes] + [""]
    if judged:
        lines += ["## Every judged cell", "", *header("verdict")]
        lines += [_row(ctx, v, with_verdict=True, icons=icons) for v in judged]
        lines.append("")
    if any(v.history for v in j.verdicts):
        lines.append("Cells relative to the reference (`<arm>-vs-<reference>`): tonight's mean "
                     "log ratio against its history's, a prediction interval with the nights "
                     f"as a random effect at {ctx.confidence * 100:g} % (spent over the "
                     "night's looks); a cell regresses when the night's one-sided test crosses "
                     "its level (the night's alpha over its cells, spent over its looks) and "
                     "the change is at least half the threshold, and stays regressed until two "
                     "nights in a row show no change beyond half the threshold; without a call a "
                     "night says \"no change beyond\" the interval's worse end. ")
    lines.append("Values: median (min–max) of the reported runs; change: ratio of medians "
                 f"with a {ctx.confidence * 100:g} % Welch t-interval on log values (runs of both nights); a cell "
                 "regresses when the interval excludes no change and the change is at least "
                 "the threshold. GSM8K: per document against the baseline night, exact McNemar "
                 "test on the documents whose verdict changed and the accuracy change with its "
                 "interval; a regression needs p below the level and a drop of at least the "
                 "threshold. Change points: ruptures Pelt over each cell's nights, each confirmed "
                 "by a permutation test and the threshold (docs/explanation/nightly-judgement.md).")
    links = []
    if ctx.report_path:
        links.append(_link(ctx, "full report", ctx.report_path))
    if ctx.trends_dir:
        links.append(_link(ctx, "trend plots", ctx.trends_dir))
    if links:
        lines += ["", " · ".join(links)]
    return "\n".join(lines) + "\n"


_STATUS_ICON = {"pass": "✅", "regression": "🔴", "incomplete": "⚠️", "undecided": "❔",
                "blind": "⚫"}
_VERDICT_ICON = {"regressed": "🔴", "improved": "🟢", "noise": "⚪", "undecided": "❔",
                 "missing": "⚠️",
                 "too few runs": "⚠️", "no samples": "⚠️", "no baseline": "➖", "new cell": "➖"}


def render_summary_github(judgement: Judgement, ctx: SummaryContext, *,
                          limit: int | None = None) -> str:
    """The summary as a pull-request comment or step summary: ``render_summary`` with the
    hidden marker of ``e2e.render.render_github``, an icon per verdict, cut to whole sections and
    rows under ``limit`` bytes (default: GitHub's comment limit) with the report linked."""
    lines = render_summary(judgement, ctx, icons=True).splitlines()
    lines[0] = lines[0].replace("# Nightly", f"# {_STATUS_ICON.get(judgement.status, '')} "
                                             "Nightly", 1)
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    head = [COMMENT_MARKER] + lines[:starts[0] if starts else len(lines)]
    sections = [lines[a:b] + [""] for a, b in zip(starts, starts[1:] + [len(lines)])]
    return fit_comment(head, sections, limit=limit or COMMENT_LIMIT,
                       link=_url(ctx, ctx.report_path))


def render_trends(history: pd.DataFrame, *, experiment: str, config_hash: str) -> dict[str, bytes]:
    """{"<metric>.png": PNG bytes}: each metric over the nights of one config, one line per
    cell (median with min–max bars), regressed nights marked with a red cross."""
    rows = history[(history["experiment"] == experiment) & (history["config_hash"] == config_hash)]
    out: dict[str, bytes] = {}
    if rows.empty:
        return out
    dates = sorted(set(rows["date"]))
    x_of = {d: i for i, d in enumerate(dates)}
    for key in sorted(set(rows["metric"])):
        label, unit = metric_label(key)
        scale = 100.0 if key == GSM8K_METRIC else 1.0
        fig = Figure(figsize=(7.0, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        metric_rows = rows[rows["metric"] == key]
        for (arm, conc, mode, kind), g in metric_rows.groupby(
                ["arm", "concurrency", "spec_mode", "kind"], sort=True):
            g = g.sort_values("date")
            xs = [x_of[d] for d in g["date"]]
            med = [float(v) * scale for v in g["median"]]
            lo = [float(v) * scale for v in g["low"]]
            hi = [float(v) * scale for v in g["high"]]
            name = f"{arm} GSM8K {mode}" if kind == "gsm8k" else f"{arm} c{conc} {mode}"
            ax.errorbar(xs, med, yerr=[[m - l for m, l in zip(med, lo)],
                                       [h - m for m, h in zip(med, hi)]],
                        marker="o", capsize=3, label=name)
            bad = [(x, m) for x, m, v in zip(xs, med, g["verdict"]) if v == "regressed"]
            if bad:
                ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=120,
                           color="red", zorder=5, label=f"{name}: regressed")
        ax.set_xticks(range(len(dates)))
        ax.set_xticklabels(dates, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(f"{label} ({unit})")
        ax.set_title(f"nightly {experiment} ({config_hash[:12]}): {label}\n"
                     "median (min–max) of the reported runs per night", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
        out[f"{key}.png"] = buf.getvalue()
    return out
