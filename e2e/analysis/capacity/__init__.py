"""A capacity search's margins and estimate."""

from __future__ import annotations

from e2e.analysis.capacity.criterion import (
    capacity_censored, capacity_margin, capacity_margin_terms
)
from e2e.analysis.capacity.estimate import capacity_estimate, capacity_ratio

__all__ = [
    "capacity_censored", "capacity_estimate", "capacity_margin", "capacity_margin_terms",
    "capacity_ratio"
]
