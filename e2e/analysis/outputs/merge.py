"""One call per arm: is the change safe to merge, from the evidence the report holds.

Evidence per cell (concurrency, spec mode) of the arm, against the baseline:

- **speed**: the cell's headline comparison (``e2e.analysis.sweep.headline``). *Good*: faster or
  equivalent (a verdict that still holds after Holm's correction); *bad*: slower (and it
  holds); anything else (inconclusive, too few runs, a verdict Holm undoes, no comparison)
  shows nothing.
- **outputs**: the arm's output comparison against the baseline (``e2e.analysis.outputs.compare``).
  *Good*: identical, or diverges as much as an A/A that diverged itself; *bad*: diverges more
  than A/A; anything else (outputs not recorded, no A/A to judge against, a few divergent
  prompts beside an identical A/A, too few for the test) shows nothing.
- **cache**: the two cells' prefix-cache hit rates. Flagged (they differ by more than their own
  run-to-run spread): the speed comparison may be the cache's, so it shows nothing.

The call: ``NOT_SAFE`` when any cell has bad evidence; ``SAFE`` only when every cell of the arm
has good speed and good outputs and no flagged cache; else ``NOT_SHOWN``: missing or unclear
evidence never reads as safe. An A/A arm (a repeat of the baseline) is the yardstick, not a
change: its call is ``AA``. GSM8K agreement and capacity are not part of the call.
"""

from __future__ import annotations

from dataclasses import dataclass

from e2e.analysis.sweep.headline import headline_metric
from e2e.analysis.outputs.compare import OutputComparison
from e2e.analysis.sweep.summary import Comparison, Summary
from e2e.results import AS_AA, IDENTICAL, MORE_THAN_AA, NOT_RECORDED

__all__ = ["SAFE", "NOT_SAFE", "NOT_SHOWN", "AA", "CellEvidence", "MergeCall", "merge_calls"]

SAFE = "safe to merge"
NOT_SAFE = "not safe to merge"
NOT_SHOWN = "not shown safe"
AA = "the A/A (yardstick)"

GOOD, BAD, UNKNOWN = "good", "bad", "unknown"


@dataclass(frozen=True)
class CellEvidence:
    """One cell's evidence for an arm: the headline comparison, the output comparison and
    what each says (``good``/``bad``/``unknown``); ``cache_flagged`` when the hit rates of
    the arm's and the baseline's cells differ by more than their spread."""

    concurrency: int
    spec_mode: str
    speed: Comparison | None
    outputs: OutputComparison | None
    speed_reads: str
    outputs_reads: str
    cache_flagged: bool


@dataclass(frozen=True)
class MergeCall:
    """An arm's call (``SAFE``, ``NOT_SAFE``, ``NOT_SHOWN`` or ``AA``), the reasons behind
    it (one short phrase each, e.g. ``c4 base: slower``) and the evidence per cell."""

    arm: str
    call: str
    reasons: tuple[str, ...]
    cells: tuple[CellEvidence, ...]


def _speed_reads(comp: Comparison | None) -> str:
    if comp is None or comp.survives is False:
        return UNKNOWN
    if comp.verdict in ("faster", "equivalent"):
        return GOOD
    return BAD if comp.verdict == "slower" else UNKNOWN


def _outputs_reads(comp: OutputComparison | None) -> str:
    if comp is None:
        return UNKNOWN
    if comp.verdict == IDENTICAL:
        return GOOD
    if comp.verdict == AS_AA:  # good only where the A/A itself diverged: a few divergent
        # prompts beside an identical A/A are too few for the test, not a sign of no change
        return GOOD if any(y.diverged for y in comp.yardsticks) else UNKNOWN
    return BAD if comp.verdict == MORE_THAN_AA else UNKNOWN


def merge_calls(summary: Summary) -> tuple[MergeCall, ...]:
    """One ``MergeCall`` per arm compared with the baseline, in the summary's arm order
    (module docstring). The outputs come from ``summary.outputs`` (None: not recorded)."""
    outputs = summary.outputs
    calls = []
    for arm in summary.compared_arms:
        cells: list[CellEvidence] = []
        reasons: list[str] = []
        for mode in summary.spec_modes:
            for conc in summary.concurrencies:
                speed = summary.comparison(arm, conc, mode, headline_metric(conc, mode))
                out = outputs.find(arm, conc, mode, kind=("aa" if arm in summary.aa_arms
                                                          else "arm")) if outputs else None
                if speed is None and out is None:
                    continue  # the arm has no cell here
                flagged = bool(out is not None and out.cache is not None and out.cache.flagged)
                cell = CellEvidence(conc, mode, speed, out, _speed_reads(speed),
                                    _outputs_reads(out), flagged)
                cells.append(cell)
                where = f"c{conc} {mode}"
                if cell.speed_reads != GOOD:
                    reasons.append(f"{where}: speed " + (
                        "not measured" if speed is None else f"{speed.verdict} (not after Holm)"
                        if speed.survives is False else speed.verdict))
                if cell.outputs_reads != GOOD:
                    reasons.append(f"{where}: " + (
                        NOT_RECORDED if out is None or out.verdict == NOT_RECORDED
                        else f"outputs {out.verdict}" + (
                            f" ({len(out.agreement.diverged)} of {out.agreement.compared} "
                            "prompts diverged, the A/A's none)"
                            if out.verdict == AS_AA else "")))
                if flagged:
                    reasons.append(f"{where}: prefix-cache hit rates differ")
        reads = [c.speed_reads for c in cells] + [c.outputs_reads for c in cells]
        if arm in summary.aa_arms:
            call = AA
        elif BAD in reads:
            call = NOT_SAFE
        elif cells and all(r == GOOD for r in reads) and not any(c.cache_flagged for c in cells):
            call = SAFE
        else:
            call = NOT_SHOWN
        if not cells:
            reasons.append("no cell compared with the baseline")
        calls.append(MergeCall(arm, call, tuple(reasons), tuple(cells)))
    return tuple(calls)
