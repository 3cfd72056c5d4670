"""What moved a speculator cell's TPOT: the verify step or acceptance (``attribute``).

e2e defines ms per verify step = mean TPOT × acceptance length (``e2e.metrics``), so for every
run ln TPOT = ln(ms per verify step) − ln(acceptance length), and for the change of an arm
against the baseline

    Δ ln TPOT = Δ ln(ms per verify step) − Δ ln(acceptance length).

Each term is the arm's contrast of the same cell model (``cell_model``: ln y on block + slot +
arm over the same runs), one response at a time; least squares is linear in y, so on the same
runs the three contrasts obey the identity exactly (``residual`` says how far they are from it:
0 up to rounding unless a run lacks one of the figures or a fallback method was used), and each
keeps its own interval. A verify step that moved while acceptance did not (its interval covers
0) puts the change on the target model's step: the kernel's; the reverse puts it on the draft.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from e2e.analysis.sweep.summary import Comparison
from e2e.metrics import SERVER_VERIFY_STEP

__all__ = ["Attribution", "attribute", "TERMS", "IDENTITY_TOLERANCE"]

TERMS: tuple[tuple[str, str, str], ...] = (
    ("client", "tpot_ms_mean", "ms_per_verify_step"),
    ("server", "server_tpot_ms_mean", SERVER_VERIFY_STEP),
)
"""(TPOT source, its TPOT metric, the ms per verify step built from it)."""

IDENTITY_TOLERANCE = 1e-6
"""|Δ ln TPOT − (Δ ln verify − Δ ln acceptance)| above this: the terms are not of the same runs."""

_READINGS = {
    "verify step": "the change is the verify step's (the kernel's)",
    "acceptance": "the change is acceptance's (the draft's), not the verify step's",
    "both": "both moved: the verify step and acceptance",
    "neither": "neither the verify step nor acceptance moved beyond the noise",
    "too few runs": "too few runs for an interval",
}


def _moved(comp: Comparison) -> bool | None:
    """True when the comparison's interval excludes 0; None without an interval."""
    if comp.interval is None:
        return None
    low, high = comp.interval
    return low > 0.0 or high < 0.0


@dataclass(frozen=True)
class Attribution:
    """One arm's change of TPOT in one speculator cell, split into its verify step and its
    acceptance length (``tpot``, ``verify``, ``acceptance``: the report's comparisons of the
    three metrics; ``source`` says whose TPOT, the client's or the server's)."""

    arm: str
    baseline: str
    concurrency: int
    spec_mode: str
    source: str
    tpot: Comparison
    verify: Comparison
    acceptance: Comparison

    @property
    def residual(self) -> float:
        """Δ ln TPOT − (Δ ln verify − Δ ln acceptance): 0 when the three are of the same runs."""
        return (math.log(self.tpot.ratio) - math.log(self.verify.ratio)
                + math.log(self.acceptance.ratio))

    @property
    def consistent(self) -> bool:
        return abs(self.residual) <= IDENTITY_TOLERANCE

    @property
    def reading(self) -> str:
        """``verify step``, ``acceptance``, ``both``, ``neither`` or ``too few runs``: which of
        the two intervals excludes 0."""
        verify, accept = _moved(self.verify), _moved(self.acceptance)
        if verify is None or accept is None:
            return "too few runs"
        if verify and accept:
            return "both"
        return "verify step" if verify else "acceptance" if accept else "neither"

    @property
    def sentence(self) -> str:
        return _READINGS[self.reading]


def attribute(comparisons: Sequence[Comparison]) -> tuple[Attribution, ...]:
    """Every (arm, concurrency, speculator spec mode, TPOT source) whose TPOT, ms per verify
    step and acceptance length all have a comparison, in the comparisons' order."""
    index = {(c.arm, c.concurrency, c.spec_mode, c.metric): c for c in comparisons}
    out: list[Attribution] = []
    seen: set[tuple] = set()
    for c in comparisons:
        key = (c.arm, c.concurrency, c.spec_mode)
        if c.spec_mode == "base" or key in seen:
            continue
        seen.add(key)
        accept = index.get((*key, "acceptance_length"))
        if accept is None:
            continue
        for source, tpot_key, verify_key in TERMS:
            tpot, verify = index.get((*key, tpot_key)), index.get((*key, verify_key))
            if tpot is not None and verify is not None:
                out.append(Attribution(c.arm, c.baseline, c.concurrency, c.spec_mode, source,
                                       tpot, verify, accept))
    return tuple(out)
