"""PNG renderer: a ``Summary`` -> one plot per (spec mode, metric), plus the comparison's
forest and strip plots (``e2e.render._forest``), as bytes (no I/O).

Each plot shows the metric against concurrency (log-2 axis), one line per arm through the
cell medians with a shaded band and error bars for the min–max range of the reported runs.
Uses matplotlib's Agg canvas directly (no pyplot, no global backend switch).
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from e2e.analysis import Summary
from e2e.render._forest import render_comparison_plots

__all__ = ["render_plots"]


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


def render_plots(summary: Summary) -> dict[str, bytes]:
    """{"<metric>-<spec mode>.png": PNG bytes} for every metric with data in a spec mode, and
    the forest (``forest-*.png``) and strip (``strip-*.png``) plots of the comparisons."""
    out: dict[str, bytes] = {}
    for mode in summary.spec_modes:
        for m in summary.metrics_in(mode):
            png = _plot(summary, mode, m.key)
            if png is not None:
                out[f"{m.key}-{mode}.png"] = png
    out.update(render_comparison_plots(summary))
    return out
