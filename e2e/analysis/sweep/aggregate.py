"""Run records -> cells, comparisons with the baseline, warnings: ``summarize``, the whole stage.

Pure (no I/O), deterministic, and it returns one immutable ``Summary`` that every renderer
reads (and that the nightly judges). A *cell* is all runs of one (arm, concurrency, spec mode)
made with the same workload (input and output length, prompts, seed, the workload's kind and
parameters, the arrival process, the warmup: ``frame.WORKLOAD_FIELDS``) and the same server
settings (``e2e.plan.comparable_settings``); runs that differ in any of these are
never averaged: ``summarize`` refuses them, naming the field (``frame.comparable`` checks;
``select`` keeps one kind). A cell's figure for a metric is the median (range) of the
*reported* runs: valid runs whose repeat number is at least ``report_from_run`` (earlier ones
are warmups). Invalid runs are never used; they are counted and warned about next to the cell
they belong to. The stage's rooms, each called once, in this order: ``frame`` (records -> checked
runs: which may be compared, the arms, each run's slot and time), ``cells`` (runs -> cells
and their warnings), ``compare`` (the comparisons, noise, family); ``summary`` holds the
values; this module puts them in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from e2e.analysis.estimators.estimates import DEFAULT_EQUIVALENCE_PCT
from e2e.analysis.sweep.attribution import attribute
from e2e.analysis.sweep.cells import SPREAD_CAUSE, cells_of
from e2e.analysis.sweep.compare import compare
from e2e.analysis.sweep.frame import checked_runs
from e2e.analysis.sweep.summary import (
    DEFAULT_CONFIDENCE, DEFAULT_MIN_EFFECT_PCT, METRICS, SPEC_MODES, Cell, Comparison, Metric,
    NoiseRow, ReportWarning, RunCounts, Summary
)
from e2e.arms import default_profile
from e2e.plan import pinned_of
from e2e.results.records import RunRecord

__all__ = ["summarize"]

def _design_explained(warnings: list[ReportWarning],
                      comparisons: Sequence[Comparison]) -> list[ReportWarning]:
    """``warnings`` without the raw-spread ones of cells whose every comparison is the duet
    model's: the runs of a duet share its slow or fast moment, the model's blocks cancel it,
    and the comparison's interval and MDE already say what noise is left."""
    duet: dict[tuple, bool] = {}
    for c in comparisons:
        modelled = c.design == "duet" and c.method in ("model", "blocked")
        for arm in (c.arm, c.baseline):
            key = (arm, c.concurrency, c.spec_mode, c.metric)
            duet[key] = duet.get(key, True) and modelled
    return [w for w in warnings
            if not (w.cause == SPREAD_CAUSE
                    and duet.get((w.arm, w.concurrency, w.spec_mode, w.metric), False))]


def summarize(
    records: Iterable[RunRecord],
    *,
    baseline: str = "main",
    report_from_run: int | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
    extra_warnings: Sequence[ReportWarning] = (),
    metrics: Sequence[Metric] = METRICS,
    equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT,
    target_effect_pct: float | None = None,
) -> Summary:
    """Aggregate run records into cells, comparisons with ``baseline`` and warnings.

    ``report_from_run`` None takes the value from the records' config snapshot (2 if absent).
    Comparisons are blocked by round and host where runs pair up, Welch otherwise, with four
    verdicts (equivalence band ±``equivalence_pct`` %), the MDE, a noise floor and Holm's
    correction across all comparisons (see ``e2e.analysis.sweep.compare``). ``target_effect_pct``
    (default: ``equivalence_pct``) is the effect the noise table's "runs needed" aims at."""
    records = list(records)
    if not records:
        raise ValueError("no run records to summarize")
    runs = checked_runs(records, metrics, baseline=baseline, report_from_run=report_from_run)
    frame, start, arms = runs.frame, runs.start, runs.arms
    cells, workloads, cell_warnings = cells_of(frame, start, metrics)
    warnings = list(extra_warnings) + list(runs.warnings) + cell_warnings
    experiments = sorted(set(frame["experiment"]))
    concurrencies = tuple(sorted({int(c) for c in frame["concurrency"]}))
    spec_modes = tuple(m for m in SPEC_MODES if m in set(frame["spec_mode"]))
    reported_mask = frame["valid"] & (frame["repeat"] >= start)
    loads = sorted({(int(c), str(m), str(label)) for c, m, label
                    in zip(frame["concurrency"], frame["spec_mode"], frame["load"])
                    if str(label) != f"concurrency {int(c)}"})

    arm_rank = {a: i for i, a in enumerate(arms)}
    metric_rank = {m.key: i for i, m in enumerate(metrics)}
    mode_rank = {m: i for i, m in enumerate(SPEC_MODES)}

    def cell_key(c: Cell) -> tuple[int, int, int, int]:
        return (mode_rank[c.spec_mode], c.concurrency, metric_rank[c.metric], arm_rank[c.arm])

    cells.sort(key=cell_key)
    index = {(c.arm, c.concurrency, c.spec_mode, c.metric): c for c in cells}

    comparisons: list[Comparison] = []
    noise: tuple[NoiseRow, ...] = ()
    pooled: list[str] = []
    if baseline in arms:
        comparisons, noise, more, pooled = compare(
            cells, index, baseline=baseline, slots=runs.slots, times=runs.times,
            aa_arms=runs.aa_arms,
            confidence=confidence, min_effect_pct=min_effect_pct,
            equivalence_pct=equivalence_pct, target_effect_pct=target_effect_pct)
        warnings.extend(more)
        warnings = _design_explained(warnings, comparisons)

    def warning_key(w: ReportWarning) -> tuple:
        if w.arm is None:
            return (0, 0, 0, 0, 0)
        return (1, mode_rank.get(w.spec_mode or "", 9), w.concurrency or 0,
                arm_rank.get(w.arm, 99), -1 if w.metric is None else metric_rank[w.metric])

    warnings.sort(key=warning_key)
    invalid = int((~frame["valid"]).sum())
    return Summary(
        experiment=experiments[0] if len(experiments) == 1 else "+".join(experiments),
        baseline=baseline,
        arms=arms,
        concurrencies=concurrencies,
        spec_modes=spec_modes,
        report_from_run=start,
        counts=RunCounts(
            total=len(frame),
            reported=int(reported_mask.sum()),
            warmup=int((frame["valid"] & (frame["repeat"] < start)).sum()),
            invalid=invalid,
        ),
        cells=tuple(cells),
        comparisons=tuple(comparisons),
        warnings=tuple(warnings),
        confidence=confidence,
        min_effect_pct=min_effect_pct,
        metrics=tuple(metrics),
        equivalence_pct=equivalence_pct,
        noise=noise,
        aa_arms=runs.aa_arms,
        n_comparisons=sum(1 for c in comparisons if c.p_holm is not None),
        pooled=tuple(pooled),
        attributions=attribute(comparisons),
        speculators=tuple(sorted({name for r in records if r.spec.dspark
                                  for name in [default_profile((r.config or {}).get("speculators") or {})
                                               if isinstance(r.config, dict) else None]
                                  if name is not None})),
        pinned=tuple(sorted({p for r in records if r.spec.dspark
                             for p in [pinned_of(r.config)] if p is not None})),
        loads=tuple(loads),
        workloads=tuple(sorted(workloads, key=lambda w: (
            mode_rank[w.spec_mode], w.concurrency, arm_rank.get(w.arm, 99)))),
    )
