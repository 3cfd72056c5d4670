"""The capacity plot: goodput share against offered rate per arm, the objective's goodput line,
and each arm's capacity with its interval (matplotlib's Agg canvas, as the report's plots)."""

from __future__ import annotations

import io
import math
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

__all__ = ["render_capacity_plot"]

MAX_TICKS = 16


def render_capacity_plot(result: Any) -> bytes | None:
    """PNG bytes of a ``CapacityResult``, or None when no run has a goodput share."""
    fig = Figure(figsize=(6.8, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    drawn = False
    for name, arm in result.arms.items():
        runs = [r for r in arm.runs if r["goodput_share"] is not None]
        if not runs:
            continue
        rates = sorted({r["rate"] for r in runs})
        means = [100 * sum(r["goodput_share"] for r in runs if r["rate"] == x)
                 / sum(1 for r in runs if r["rate"] == x) for x in rates]
        line, = ax.plot(rates, means, marker="o", label=name)
        ax.scatter([r["rate"] for r in runs], [100 * r["goodput_share"] for r in runs],
                   s=12, alpha=0.5, color=line.get_color())
        est = arm.estimate
        if est is not None and math.isfinite(est.rate):
            lo = est.low if math.isfinite(est.low) and est.low > 0 else min(rates)
            hi = est.high if math.isfinite(est.high) else max(rates)
            ax.axvspan(lo, hi, alpha=0.12, color=line.get_color())
            ax.axvline(est.rate, color=line.get_color(), linestyle="--", linewidth=1)
        drawn = True
    if not drawn:
        return None
    ax.axhline(result.objective.goodput_pct, color="black", linestyle=":", linewidth=1,
               label=f"goodput objective {result.objective.goodput_pct:g} %")
    ax.set_xscale("log")
    plain = FuncFormatter(lambda x, _: f"{x:g}")
    measured = sorted({r["rate"] for arm in result.arms.values() for r in arm.runs})
    if len(measured) <= MAX_TICKS:  # a tick at every rate measured: a log axis over less than
        ax.set_xticks(measured)     # a decade would label none of 11.8, 13.1, 16
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(axis="x", labelsize=7, labelrotation=45)
    else:
        ax.xaxis.set_minor_formatter(plain)
        ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.xaxis.set_major_formatter(plain)
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("goodput (% of requests meeting every objective)")
    ax.set_title(f"capacity at {result.objective}\n dashed: capacity, band: "
                 f"its {int(round(100 * _confidence(result)))} % interval", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _confidence(result: Any) -> float:
    return next((a.estimate.confidence for a in result.arms.values() if a.estimate), 0.95)
