"""PNG pictures of the comparison: forest plots and strip plots, as bytes (no I/O).

* ``forest-<metric>-<spec mode>.png``: every arm against the baseline at every concurrency, one
  row each: the point estimate (geometric-mean change, %), its interval, the equivalence band
  ±X % (grey, vertical) and the row's MDE (±MDE around 0, shaded on the row), the verdict beside it.
* ``strip-<metric>-c<concurrency>-<spec mode>.png``: every reported run of one cell, arms side by
  side, each round a line through its runs of every arm: the pairing the blocked comparison uses
  (a round lying high or low on every arm is drift, and it cancels).

Plotted metrics: the headline metric of each (concurrency, spec mode) (``headline_metric``) and
the server's mean TPOT when present. Uses matplotlib's Agg canvas directly (no pyplot).
"""

from __future__ import annotations

import io

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from e2e.analysis.sweep import Summary, headline_metric, metric

__all__ = ["render_comparison_plots", "comparison_plot_names", "plotted_metrics", "forest_figure"]

_EXTRA = ("server_tpot_ms_mean",)


def plotted_metrics(summary: Summary) -> list[tuple[str, int, str]]:
    """(spec mode, concurrency, metric) of every strip plot: the headline metric of each cell
    group plus the server's mean TPOT, where the summary has comparisons for it."""
    out: list[tuple[str, int, str]] = []
    have = {(c.spec_mode, c.concurrency, c.metric) for c in summary.comparisons}
    for mode in summary.spec_modes:
        for conc in summary.concurrencies:
            for key in (headline_metric(conc, mode), *_EXTRA):
                if (mode, conc, key) in have and (mode, conc, key) not in out:
                    out.append((mode, conc, key))
    return out


def _forest_keys(summary: Summary) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    for mode, _conc, key in plotted_metrics(summary):
        if (mode, key) not in keys:
            keys.append((mode, key))
    return keys


def comparison_plot_names(summary: Summary) -> tuple[str, ...]:
    """The file names ``render_comparison_plots`` returns, in its order (for links)."""
    names = [f"forest-{key}-{mode}.png" for mode, key in _forest_keys(summary)]
    names += [f"strip-{key}-c{conc}-{mode}.png" for mode, conc, key in plotted_metrics(summary)]
    return tuple(names)


def _png(fig: Figure) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _forest(summary: Summary, mode: str, key: str) -> bytes:
    return _png(forest_figure(summary, mode, key))


def forest_figure(summary: Summary, mode: str, key: str) -> Figure:
    """The forest plot of one (spec mode, metric): each comparison's row labelled with its
    verdict and the method the report's tables name (``Comparison.method_name``)."""
    m = metric(key)
    comps = [c for c in summary.comparisons
             if c.spec_mode == mode and c.metric == key and c.interval is not None]
    comps.sort(key=lambda c: (c.concurrency, summary.arms.index(c.arm)))
    fig = Figure(figsize=(7.6, 1.7 + 0.55 * max(len(comps), 1)), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    band = summary.equivalence_pct
    ax.axvspan(-band, band, color="0.85", zorder=0, label=f"equivalence ±{band:g} %")
    ax.axvline(0.0, color="0.3", lw=0.8, zorder=1)
    labels = []
    for y, c in enumerate(reversed(comps)):
        if c.mde_pct is not None:
            ax.fill_between([-c.mde_pct, c.mde_pct], y - 0.3, y + 0.3, color="tab:orange", alpha=0.18,
                            lw=0, zorder=1, label="±MDE (80 % power)" if y == 0 else None)
        lo, hi = c.interval
        color = {"faster": "tab:green", "slower": "tab:red", "higher": "tab:blue",
                 "lower": "tab:purple", "equivalent": "0.25"}.get(c.verdict, "0.55")
        ax.plot([lo, hi], [y, y], color=color, lw=2.2, zorder=2)
        ax.plot([c.pct], [y], "o", color=color, zorder=3)
        mark = " †" if c.survives is False else ""
        ax.annotate(f"{c.verdict}{mark} ({c.method_name})",
                    (hi, y), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
        labels.append(f"{c.arm} @ c{c.concurrency}")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_ylim(-1.6, len(labels) - 0.3)  # an empty strip at the bottom for the legend
    ax.set_xlabel(f"change of the geometric mean vs {summary.baseline}, % "
                  f"({summary.confidence * 100:g} % interval)")
    ax.set_title(f"{summary.experiment}: {m.label}, {mode}", fontsize=10)
    left, right = ax.get_xlim()
    ax.set_xlim(left, right + 0.35 * (right - left))  # room for the verdicts
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=7, ncol=2)
    return fig


def _strip(summary: Summary, mode: str, conc: int, key: str) -> bytes:
    m = metric(key)
    cells = [summary.cell(a, conc, mode, key) for a in summary.arms]
    arms = [(i, c) for i, c in enumerate(cells) if c is not None]
    fig = Figure(figsize=(1.6 + 1.4 * len(summary.arms), 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    rounds = sorted({r for _, c in arms for r in c.repeats})
    cmap = colormaps["viridis"]
    for k, rnd in enumerate(rounds):
        xs, ys = [], []
        for i, c in arms:
            for rep, v in zip(c.repeats, c.values):
                if rep == rnd:
                    xs.append(i)
                    ys.append(v)
        color = cmap(k / max(len(rounds) - 1, 1))
        ax.plot(xs, ys, "-o", color=color, alpha=0.85, lw=1.2, ms=5, label=f"round {rnd}")
    for i, c in arms:
        ax.plot([i - 0.25, i + 0.25], [c.median, c.median], color="black", lw=2)
    ax.set_xticks(range(len(summary.arms)))
    ax.set_xticklabels(list(summary.arms))
    ax.set_xlim(-0.5, len(summary.arms) - 0.5)
    ax.set_ylabel(f"{m.label} ({m.unit})")
    ax.set_title(f"{summary.experiment}: {m.label}, concurrency {conc}, {mode}\n"
                 "each line is one round (runs back to back); bar: median", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def render_comparison_plots(summary: Summary) -> dict[str, bytes]:
    """{file name: PNG bytes}: a forest plot per plotted (metric, spec mode) and a strip plot per
    plotted (metric, concurrency, spec mode); names as ``comparison_plot_names``."""
    out: dict[str, bytes] = {}
    for mode, key in _forest_keys(summary):
        out[f"forest-{key}-{mode}.png"] = _forest(summary, mode, key)
    for mode, conc, key in plotted_metrics(summary):
        out[f"strip-{key}-c{conc}-{mode}.png"] = _strip(summary, mode, conc, key)
    return out
