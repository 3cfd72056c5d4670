"""The open-loop arrival schedule.

Method (as ``vllm bench serve``): inter-arrival gaps are drawn from a gamma distribution with
shape ``burstiness`` and scale ``1 / (rate * burstiness)`` (mean ``1 / rate``); shape 1 is the
exponential, i.e. Poisson arrivals; shape < 1 is burstier, > 1 more regular. The cumulative
times are then rescaled so that the last arrival falls exactly at ``n / rate``, which removes
the 1-2 % run-to-run spread of the sum of ``n`` random gaps from the offered rate (vllm bench
does the same). Seeded: the same seed gives the same schedule for every arm.
"""

from __future__ import annotations

import numpy as np

__all__ = ["arrival_times"]


def arrival_times(n: int, rate: float, *, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """Seconds from the load's start at which each of ``n`` requests is sent (ascending)."""
    if n <= 0:
        return np.zeros(0)
    if not rate > 0 or not burstiness > 0:
        raise ValueError(f"rate and burstiness must be > 0 (got {rate}, {burstiness})")
    rng = np.random.Generator(np.random.PCG64([seed, 0x0A77]))
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    times = np.cumsum(gaps)
    return times * ((n / rate) / times[-1])
