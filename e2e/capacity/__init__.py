"""Capacity at an SLO, per arm (``e2e capacity``): the highest open-loop request rate whose
runs meet an objective, by bracketing and bisection with repeats at the boundary, with an
interval (a censored line over every run, read at the rate a typical fresh server meets the
objective); the ratio of each arm's capacity to the baseline's, with an interval; a plot of
goodput against rate (``e2e.render.render_capacity_plot``). docs/explanation/load.md ("Capacity at an SLO") has the method and a measurement.

This package is the pipeline: what to run next (``next_rates``) and running it (``capacity``).
Its records (``Objective``, ``MarginRun``, ``Capacity``, ``Step``, ``ArmSearch``,
``CapacityResult``) are ``e2e.results``'; a run's margin and the estimate (``margin``,
``censored``, ``estimate``, ``ratio``) are ``e2e.analysis``'.
"""

from e2e.capacity.run import capacity
from e2e.capacity.search import SearchSettings

__all__ = [
    "SearchSettings", "capacity"
]
