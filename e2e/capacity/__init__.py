"""Capacity at an SLO, per arm (``e2e capacity``): the highest open-loop request rate whose
runs meet an objective, by bracketing and bisection with repeats at the boundary, with an
interval (a censored line over every run, read at the rate a typical fresh server meets the
objective); the ratio of each arm's capacity to the baseline's, with an interval; a plot of
goodput against rate (``e2e.render.render_capacity_plot``). docs/explanation/load.md ("Capacity at an SLO") has the method and a measurement.
"""

from e2e.capacity._criterion import (Objective, censored, goodput_margin, margin, margin_terms,
                                     objective_of)
from e2e.capacity._estimate import Capacity, MarginRun, estimate, ratio
from e2e.capacity._run import CAPACITY_FILE, CAPACITY_PLOT, ArmSearch, CapacityResult, capacity
from e2e.capacity._search import SearchSettings, Step, boundary, next_rates, round_rate

__all__ = [
    "ArmSearch", "CAPACITY_FILE", "CAPACITY_PLOT", "Capacity", "CapacityResult", "MarginRun",
    "Objective", "SearchSettings", "Step", "boundary", "capacity", "censored", "estimate",
    "goodput_margin", "margin",
    "margin_terms", "next_rates", "objective_of", "ratio", "round_rate"]
