"""PNG renderer: a ``Summary`` -> one plot per (spec mode, metric), the acceptance rate per
draft position, plus the comparison's forest and strip plots (``e2e.render.forest``), as
bytes (no I/O).

Each plot shows the metric against concurrency (log-2 axis), one line per arm through the
cell medians with a shaded band and error bars for the min–max range of the reported runs.
Uses matplotlib's Agg canvas directly (no pyplot, no global backend switch).
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from e2e.render.forest import render_comparison_plots
from e2e.analysis.sweep import Summary
from e2e.metrics import position_key, position_of

__all__ = ["render_plots", "positions_in", "per_position_plot_name"]


def _plot(summary: Summary, mode: str, key: str) -> bytes | None:
    m = next(x for x in summary.metrics if x.key == key)
    fig = Figure(figsize=(6.4, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    drawn = False
    for arm in summary.arms:
        cells = [c for c in (summary.cell(arm, conc, mode, key) for conc in summary.concurrencies)
                 if c is not None]
        if not cells:
            continue
        xs = [c.concurrency for c in cells]
        med = [c.median for c in cells]
        lo = [c.low for c in cells]
        hi = [c.high for c in cells]
        err = [[m_ - l for m_, l in zip(med, lo)], [h - m_ for m_, h in zip(med, hi)]]
        line = ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=arm)
        ax.fill_between(xs, lo, hi, alpha=0.15, color=line[0].get_color())
        drawn = True
    if not drawn:
        return None
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(summary.concurrencies))
    ax.set_xticklabels([str(c) for c in summary.concurrencies])
    ax.set_xlabel("concurrency")
    ax.set_ylabel(f"{m.label} ({m.unit})")
    title = f"{summary.experiment}: {m.label}, {mode}"
    ax.set_title(f"{title}\nmedian (min–max) of runs {summary.report_from_run}+ per cell", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def positions_in(summary: Summary, conc: int, mode: str) -> list[int]:
    """The draft positions (first = 1) with a cell at ``conc`` in ``mode``, in order."""
    have = {position_of(c.metric) for c in summary.cells
            if c.concurrency == conc and c.spec_mode == mode}
    return sorted(p for p in have if p is not None)


def _per_position_plot(summary: Summary, mode: str, conc: int) -> bytes | None:
    """Left: each arm's acceptance rate per draft position, median (min–max) of its reported
    runs. Right: each arm's change against the baseline per position with its interval."""
    positions = positions_in(summary, conc, mode)
    if not positions:
        return None
    fig = Figure(figsize=(10.0, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    arms = list(summary.arms)
    width = 0.8 / max(len(arms), 1)
    intervals = 0
    for i, arm in enumerate(arms):
        cells = [(p, summary.cell(arm, conc, mode, position_key(p))) for p in positions]
        cells = [(p, c) for p, c in cells if c is not None]
        if cells:
            xs = [p + (i - (len(arms) - 1) / 2) * width for p, _ in cells]
            med = [c.median for _, c in cells]
            err = [[c.median - c.low for _, c in cells], [c.high - c.median for _, c in cells]]
            left.errorbar(xs, med, yerr=err, marker="o", capsize=3, linestyle="-", label=arm)
        comps = [(p, summary.comparison(arm, conc, mode, position_key(p))) for p in positions]
        comps = [(p, c) for p, c in comps if c is not None and c.interval is not None]
        if comps:
            intervals += 1
            xs = [p + (i - (len(arms) - 1) / 2) * width for p, _ in comps]
            pct = [c.pct for _, c in comps]
            err = [[c.pct - c.interval[0] for _, c in comps],
                   [c.interval[1] - c.pct for _, c in comps]]
            right.errorbar(xs, pct, yerr=err, marker="o", capsize=3, linestyle="none",
                           label=f"{arm} vs {summary.baseline}",
                           color=f"C{i}")
    for ax in (left, right):
        ax.set_xticks(positions)
        ax.set_xlabel("draft position")
        ax.grid(True, alpha=0.3)
    left.set_ylim(0, 1.05)
    left.set_ylabel("acceptance rate (share of verify steps)")
    left.set_title(f"median (min–max) of runs {summary.report_from_run}+", fontsize=10)
    left.legend()
    right.axhline(0.0, color="grey", linewidth=1)
    right.set_ylabel(f"change against {summary.baseline}, %")
    right.set_title(f"{summary.confidence * 100:g} % interval", fontsize=10)
    if intervals:
        right.legend()
    else:
        right.text(0.5, 0.5, "no interval: too few runs", ha="center", va="center",
                   transform=right.transAxes, color="grey")
    fig.suptitle(f"{summary.experiment}: acceptance per draft position, concurrency {conc}, "
                 f"{mode}", fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def per_position_plot_name(conc: int, mode: str) -> str:
    return f"acceptance-per-position-c{conc}-{mode}.png"


def render_plots(summary: Summary) -> dict[str, bytes]:
    """{"<metric>-<spec mode>.png": PNG bytes} for every metric with data in a spec mode (the
    per-position acceptance rates in one ``acceptance-per-position-c<conc>-<mode>.png`` per
    cell group instead), and the forest (``forest-*.png``) and strip (``strip-*.png``) plots of
    the comparisons."""
    out: dict[str, bytes] = {}
    for mode in summary.spec_modes:
        for m in summary.metrics_in(mode):
            if position_of(m.key) is not None:
                continue
            png = _plot(summary, mode, m.key)
            if png is not None:
                out[f"{m.key}-{mode}.png"] = png
        for conc in summary.concurrencies:
            png = _per_position_plot(summary, mode, conc)
            if png is not None:
                out[per_position_plot_name(conc, mode)] = png
    out.update(render_comparison_plots(summary))
    return out
