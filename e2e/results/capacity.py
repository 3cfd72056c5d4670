"""``e2e capacity``'s typed records: the objective a run is held to, one run as the estimate
reads it, an arm's capacity with its interval, one step of an arm's search, the search, and the
whole result (``capacity.json`` is written from it, ``capacity.png`` drawn from it). Values
only: the margin and the estimate are ``e2e.analysis``' (``margin``, ``estimate``, ``ratio``),
the search's decisions ``e2e.capacity``'s (``next_rates``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from e2e.errors import ConfigError
from e2e.plan import RunSpec
from e2e.slo import SLO, parse_slo

__all__ = ["P99_FIELDS", "Objective", "objective_of", "MarginRun", "Capacity", "Step",
           "ArmSearch", "CapacityResult"]

P99_FIELDS = {"ttft": "ttft_ms_p99", "tpot": "tpot_ms_p99", "e2e": "e2el_ms_p99"}
"""The figures an objective's p99 may name, and the ``RunMetrics`` field holding each."""


class Objective(BaseModel):
    """The capacity objective: at least ``goodput_pct`` % of requests meeting every objective
    of ``slo``, and the p99 of every figure ``p99`` names within it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slo: SLO
    goodput_pct: float = Field(gt=0, le=100)
    p99: SLO | None = None

    def __str__(self) -> str:
        names = "".join(f"p99 {k} <= {v:g} ms, " for k, v in self.targets().items())
        return f"{names}goodput >= {self.goodput_pct:g} % at {self.slo}"

    def targets(self) -> dict[str, float]:
        if self.p99 is None:
            return {}
        return {k: getattr(self.p99, f"{k}_ms") for k in P99_FIELDS
                if getattr(self.p99, f"{k}_ms") is not None}


def objective_of(slo: str | None, goodput_pct: float, p99: str | None = None) -> Objective:
    """Parse ``--slo``, ``--goodput`` and ``--p99`` into an Objective; a bad one is a
    ConfigError."""
    if not slo:
        raise ConfigError("capacity needs an SLO: give --slo, e.g. --slo tpot=20ms,ttft=500ms")
    if not (isinstance(goodput_pct, (int, float)) and 0 < goodput_pct <= 100):
        raise ConfigError(f"--goodput {goodput_pct}: a share in percent, above 0 and at most 100")
    return Objective(slo=parse_slo(slo), goodput_pct=float(goodput_pct),
                     p99=parse_slo(p99) if p99 else None)


@dataclass(frozen=True)
class MarginRun:
    """One run: its offered ``rate``, its ``margin`` and how it is censored: "above" (m* at
    least the margin: the share's ceiling), "below" (at most: its floor, or nothing measured),
    or "" (the margin as measured)."""

    rate: float
    margin: float
    censored: str = ""


@dataclass(frozen=True)
class Capacity:
    """An arm's capacity (requests/s) with its interval at ``confidence`` (0 or ∞: open),
    the search's boundary ``lo``–``hi``, the fit's slope and run spread (margin units), the
    runs it read, and ``replicates`` (ln C drawn from its confidence distribution; ±∞ where
    open), which ``ratio`` pairs."""

    rate: float
    low: float
    high: float
    confidence: float
    lo: float
    hi: float
    replicates: tuple[float, ...]
    slope: float = math.nan
    spread: float = math.nan
    runs: int = 0
    method: str = "censored line over every run, profile likelihood"

    @property
    def closed(self) -> bool:
        return 0 < self.low and math.isfinite(self.high)


@dataclass(frozen=True)
class Step:
    """What to do next: ``runs`` to make (rate, repeat), or done with the bracket, or
    stopped (``why``: the objective is met at ``max_rate`` or missed at ``min_rate``)."""

    phase: str                      # bracket | bisect | repeats | widen | done | above | below
    runs: tuple[tuple[float, int], ...] = ()
    lo: float | None = None
    hi: float | None = None
    why: str = ""


@dataclass
class ArmSearch:
    """One arm's search: its runs (every measured unit), where it stands, its estimate."""

    arm: str
    runs: list[dict] = field(default_factory=list)
    step: Step | None = None
    given_up: str | None = None
    estimate: Capacity | None = None
    extra: RunSpec | None = None  # in duets, a finished search's next partner run

    @property
    def status(self) -> str:
        return "given up" if self.given_up else self.step.phase if self.step else "not started"


@dataclass
class CapacityResult:
    arms: dict[str, ArmSearch]
    baseline: str
    objective: Objective
    ratios: dict[str, tuple[float, float, float]]
    folder: Path
    ran: int = 0
