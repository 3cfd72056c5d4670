"""CSV renderer: a ``Summary`` -> ``cells.csv``, ``comparisons.csv`` and ``noise.csv`` as bytes
(no I/O).

Every cell and every comparison, one row each, full float precision; values and repeats of
a cell are ``;``-joined in repeat order; warnings affecting a cell are ``;``-joined; ``load``
says what the concurrency does not for an open loop (``poisson 3 req/s``, ``trace 2×``).
"""

from __future__ import annotations

import pandas as pd

from e2e.analysis.sweep import Summary, metric

__all__ = ["render_csv", "cells_frame", "comparisons_frame", "noise_frame"]

CELL_COLUMNS = ["arm", "concurrency", "spec_mode", "metric", "unit", "n", "median", "low", "high",
                "spread", "repeats", "values", "warnings", "load"]
COMPARISON_COLUMNS = ["arm", "baseline", "concurrency", "spec_mode", "metric", "unit",
                      "higher_is_better", "n_arm", "n_baseline", "ratio", "pct", "pct_low",
                      "pct_high", "confidence", "verdict", "method", "n_blocks", "dropped",
                      "median_ratio", "mde_pct", "noise_pct", "noise_floored", "p_value", "tost_p",
                      "equivalence_pct", "p_holm", "survives_holm", "unpaired_pct_low",
                      "unpaired_pct_high", "unpaired_mde_pct", "role", "df", "prior_df", "load"]
NOISE_COLUMNS = ["concurrency", "spec_mode", "metric", "noise_pct", "floored", "source", "n_blocks",
                 "mde_pct", "unpaired_mde_pct", "target_pct", "runs_for_target", "df", "prior_df"]


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
            "load": summary.load_label(c.concurrency, c.spec_mode),
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
            "confidence": c.confidence, "verdict": c.verdict, "method": c.method, "design": c.design,
            "n_blocks": c.n_blocks, "dropped": c.dropped, "median_ratio": c.median_ratio,
            "mde_pct": c.mde_pct, "noise_pct": c.noise_pct, "noise_floored": c.noise_floored,
            "p_value": c.p_value, "tost_p": c.tost_p, "equivalence_pct": c.equivalence_pct,
            "p_holm": c.p_holm, "survives_holm": c.survives,
            "unpaired_pct_low": None if c.unpaired_interval is None else c.unpaired_interval[0],
            "unpaired_pct_high": None if c.unpaired_interval is None else c.unpaired_interval[1],
            "unpaired_mde_pct": c.unpaired_mde_pct, "role": c.role, "df": c.df,
            "prior_df": c.prior_df, "load": summary.load_label(c.concurrency, c.spec_mode),
        })
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def noise_frame(summary: Summary) -> pd.DataFrame:
    rows = [{
        "concurrency": r.concurrency, "spec_mode": r.spec_mode, "metric": r.metric,
        "noise_pct": r.noise_pct, "floored": r.floored, "source": r.source, "n_blocks": r.n_blocks,
        "mde_pct": r.mde_pct, "unpaired_mde_pct": r.unpaired_mde_pct, "target_pct": r.target_pct,
        "runs_for_target": r.runs_for_target, "df": r.df, "prior_df": r.prior_df,
    } for r in summary.noise]
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


def render_csv(summary: Summary) -> dict[str, bytes]:
    """{"cells.csv": ..., "comparisons.csv": ..., "noise.csv": ...}, UTF-8, ``\\n`` line ends."""
    return {
        "cells.csv": cells_frame(summary).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        "comparisons.csv": comparisons_frame(summary).to_csv(index=False, lineterminator="\n")
        .encode("utf-8"),
        "noise.csv": noise_frame(summary).to_csv(index=False, lineterminator="\n").encode("utf-8"),
    }
