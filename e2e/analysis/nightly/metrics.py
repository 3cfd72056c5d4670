"""What the nightly measures and judges, as the judge reads it: its load metrics
(``NIGHTLY_METRICS``), a thresholds table's threshold for a cell's metric (``judged_threshold``),
the names of the cells relative to a reference arm (``e2e.results.relative_arm``, a record's naming
kept with the records in ``e2e.results``), and a night's default
level (``DEFAULT_NIGHT_ALPHA``). The ``[nightly]`` table that holds the thresholds is
``e2e.nightly.settings``'."""

from __future__ import annotations

from e2e.analysis.sweep.headline import BURST_SHARE, HEADLINE, headline_metric
from e2e.analysis.sweep.summary import METRICS, Metric

__all__ = ["NIGHTLY_METRICS", "nightly_metric", "judged_threshold", "judged_metrics",
           "DEFAULT_NIGHT_ALPHA"]

# The report's metrics (the server's own TPOT among them: on the CPU default the client-side
# TPOT of the tiny model says little, as the API server often flushes a request's tokens in
# one burst on a busy host; ms per verify step from the server's TPOT, e2e.analysis.sweep.aggregate)
# plus the share of a run's stream that reached the client in bursts (a run-level flag,
# recorded when the run has it): the nightly records, judges if asked, and plots the same cells.
NIGHTLY_METRICS: tuple[Metric, ...] = METRICS + (
    Metric(BURST_SHARE, "burst share of the client stream", "fraction", False,
           "share of a run's stream that reached the client in bursts (client TPOT then "
           "understates decode time)"),
)
_LOAD_METRICS = {m.key for m in NIGHTLY_METRICS}
def judged_threshold(thresholds: dict, spec_mode: str, metric_key: str,
                     concurrency: int) -> float | None:
    """A load metric's threshold in % from a thresholds table (the metric's own, else the
    table's ``headline`` one when the metric is the cell's headline), None if not judged."""
    table = thresholds.get(spec_mode, {})
    if metric_key in table:
        return table[metric_key]
    if HEADLINE in table and metric_key == headline_metric(concurrency, spec_mode):
        return table[HEADLINE]
    return None


def judged_metrics(thresholds: dict, spec_mode: str, concurrency: int) -> list[str]:
    """The load metrics a thresholds table judges in one cell (``headline`` resolved)."""
    return [headline_metric(concurrency, spec_mode) if key == HEADLINE else key
            for key in thresholds.get(spec_mode, {})]


def nightly_metric(key: str) -> Metric:
    for m in NIGHTLY_METRICS:
        if m.key == key:
            return m
    raise KeyError(f"unknown metric {key!r}; known: {', '.join(sorted(_LOAD_METRICS))}")


DEFAULT_NIGHT_ALPHA = 0.002
"""A night's chance of a false regression over its judged ratio cells: 40 nights x 0.002 =
0.08, with the two-night rule's share (``SUSPECT_LEVEL``) under the 0.1 a series of 40
unchanged nights may be falsely failed (a bound: nights share their history, so the events
overlap; bench/nightly_series_simulation.py measures it)."""
