"""CSV renderer: a ``Summary`` -> ``cells.csv`` and ``comparisons.csv`` as bytes (no I/O).

Every cell and every comparison, one row each, full float precision; values and repeats of
a cell are ``;``-joined in repeat order; warnings affecting a cell are ``;``-joined.
"""

from __future__ import annotations

import pandas as pd

from e2e.aggregate import Summary, metric

__all__ = ["render_csv", "cells_frame", "comparisons_frame"]

CELL_COLUMNS = ["arm", "concurrency", "spec_mode", "metric", "unit", "n", "median", "low", "high",
                "spread", "repeats", "values", "warnings"]
COMPARISON_COLUMNS = ["arm", "baseline", "concurrency", "spec_mode", "metric", "unit",
                      "higher_is_better", "n_arm", "n_baseline", "ratio", "pct", "pct_low",
                      "pct_high", "confidence", "verdict", "method"]


def cells_frame(summary: Summary) -> pd.DataFrame:
    rows = []
    for c in summary.cells:
        rows.append({
            "arm": c.arm, "concurrency": c.concurrency, "spec_mode": c.spec_mode,
            "metric": c.metric, "unit": metric(c.metric).unit, "n": c.n,
            "median": c.median, "low": c.low, "high": c.high, "spread": c.spread,
            "repeats": ";".join(map(str, c.repeats)),
            "values": ";".join(repr(v) for v in c.values),
            "warnings": "; ".join(w.message for w in
                                  summary.warnings_for(c.arm, c.concurrency, c.spec_mode, c.metric)),
        })
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def comparisons_frame(summary: Summary) -> pd.DataFrame:
    rows = []
    for c in summary.comparisons:
        m = metric(c.metric)
        rows.append({
            "arm": c.arm, "baseline": c.baseline, "concurrency": c.concurrency,
            "spec_mode": c.spec_mode, "metric": c.metric, "unit": m.unit,
            "higher_is_better": m.higher_is_better, "n_arm": c.n_arm, "n_baseline": c.n_baseline,
            "ratio": c.ratio, "pct": c.pct,
            "pct_low": None if c.interval is None else c.interval[0],
            "pct_high": None if c.interval is None else c.interval[1],
            "confidence": c.confidence, "verdict": c.verdict, "method": c.method,
        })
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def render_csv(summary: Summary) -> dict[str, bytes]:
    """{"cells.csv": ..., "comparisons.csv": ...}, UTF-8, ``\\n`` line ends."""
    return {
        "cells.csv": cells_frame(summary).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        "comparisons.csv": comparisons_frame(summary).to_csv(index=False, lineterminator="\n")
        .encode("utf-8"),
    }
