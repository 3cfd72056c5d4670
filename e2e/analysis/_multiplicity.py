"""Multiplicity: the family-wise rules over a report's primary comparisons."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["holm"]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order: sort ascending,
    p̃_(i) = max_{j<=i} min(1, (m − j + 1) · p_(j)). Controls the family-wise error rate."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return [float(x) for x in out]
