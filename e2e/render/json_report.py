"""The ``--json`` documents of ``e2e run``, ``e2e report`` and ``e2e gsm8k``: pure functions
from e2e's records and summaries to JSON-able dicts, and ``dumps`` to text.

Every document has ``schema_version`` (this module's ``SCHEMA_VERSION``) and ``kind``
(``e2e.run``, ``e2e.report``, ``e2e.gsm8k``). Keys are documented in docs/reference/json.md. Versions:
  1: first version.
A key may be added without a new version; a key removed, renamed or changing meaning bumps
it. Numbers that are not finite (an infinite spread) are written as null, so every document
is strict JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from e2e.results.records import RunRecord
from e2e.analysis.outputs import (
    Agreement, CellCache, GSM8KArm, GSM8KReport, GSM8KSection, OutputAgreement, merge_calls
)
from e2e.analysis.sweep import Summary

__all__ = ["SCHEMA_VERSION", "run_json", "report_json", "gsm8k_json", "dumps"]

SCHEMA_VERSION = 1


def _clean(value: Any) -> Any:
    """Non-finite floats -> None, tuples -> lists, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(document: dict[str, Any]) -> str:
    """One document as strict JSON text (indented, keys in the documented order)."""
    return json.dumps(_clean(document), indent=2, allow_nan=False, ensure_ascii=False)


def run_json(folder: Path, record: RunRecord) -> dict[str, Any]:
    """``e2e run --json``: one run's identity, spec, validity and metrics.

    ``metrics`` holds every field of the run's ``RunMetrics`` (latencies in ms, throughputs
    per second, null where undefined) or is null when no request finished."""
    spec = record.spec
    return _clean({
        "schema_version": SCHEMA_VERSION,
        "kind": "e2e.run",
        "experiment": record.experiment,
        "run_id": record.run_id,
        "folder": str(folder),
        "valid": record.valid,
        "invalid_reasons": list(record.invalid_reasons),
        "warnings": list(record.warnings),
        "spec": {**spec.model_dump(mode="json"), "spec_mode": spec.spec_mode,
                 "cell": spec.cell},
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "record_schema_version": record.schema_version,
        "metrics": record.metrics.model_dump(mode="json") if record.metrics is not None else None,
    })


def report_json(summary: Summary) -> dict[str, Any]:
    """``e2e report --json``: every cell (median and range of the reported runs), every
    comparison with the baseline, and the warnings, as ``e2e.analysis.sweep.aggregate.summarize`` made them."""
    return _clean({
        "schema_version": SCHEMA_VERSION,
        "kind": "e2e.report",
        "experiment": summary.experiment,
        "baseline": summary.baseline,
        "arms": list(summary.arms),
        "concurrencies": list(summary.concurrencies),
        "spec_modes": list(summary.spec_modes),
        "report_from_run": summary.report_from_run,
        "confidence": summary.confidence,
        "min_effect_pct": summary.min_effect_pct,
        "equivalence_pct": summary.equivalence_pct,
        "n_comparisons": summary.n_comparisons,
        "interval_method": summary.interval_method,
        "counts": {"total": summary.counts.total, "reported": summary.counts.reported,
                   "warmup": summary.counts.warmup, "invalid": summary.counts.invalid},
        "metrics": [{"key": m.key, "label": m.label, "unit": m.unit,
                     "higher_is_better": m.higher_is_better, "definition": m.definition}
                    for m in summary.metrics],
        "cells": [{"arm": c.arm, "concurrency": c.concurrency, "spec_mode": c.spec_mode,
                   "metric": c.metric, "n": c.n, "repeats": list(c.repeats),
                   "values": list(c.values), "median": c.median, "low": c.low, "high": c.high,
                   "spread": c.spread, "load": summary.load_label(c.concurrency, c.spec_mode)}
                  for c in summary.cells],
        "comparisons": [{"arm": c.arm, "baseline": c.baseline, "concurrency": c.concurrency,
                         "spec_mode": c.spec_mode, "metric": c.metric, "ratio": c.ratio,
                         "pct": c.pct,
                         "interval_pct": ({"low": c.interval[0], "high": c.interval[1]}
                                          if c.interval is not None else None),
                         "confidence": c.confidence, "verdict": c.verdict, "method": c.method,
                         "design": c.design,
                         "n_arm": c.n_arm, "n_baseline": c.n_baseline, "n_blocks": c.n_blocks,
                         "median_ratio": c.median_ratio, "mde_pct": c.mde_pct,
                         "noise_pct": c.noise_pct, "noise_floored": c.noise_floored,
                         "p_value": c.p_value, "tost_p": c.tost_p, "p_holm": c.p_holm,
                         "survives_holm": c.survives, "equivalence_pct": c.equivalence_pct,
                         "role": c.role, "df": c.df, "prior_df": c.prior_df,
                         "time_model": c.time_model, "rho": c.rho}
                        for c in summary.comparisons],
        "pinned_acceptance": list(summary.pinned),
        "workloads": [{"arm": w.arm, "concurrency": w.concurrency, "spec_mode": w.spec_mode,
                       "load": summary.load_label(w.concurrency, w.spec_mode),
                       "workload": w.workload, "arrival": w.arrival, "warmup_requests": w.warmup,
                       "runs": w.runs, "prefix_cache_hit_rate": list(w.hit_rate),
                       "schedule_lateness_ms": [{"p50": a, "p99": b, "max": c}
                                                for a, b, c in w.lateness_ms],
                       "segments": [{"name": s.name, "runs": s.runs,
                                     "ttft_ms_mean": s.ttft_ms_mean,
                                     "tpot_ms_mean": s.tpot_ms_mean} for s in w.segments]}
                      for w in summary.workloads],
        "attributions": [{"arm": a.arm, "baseline": a.baseline, "concurrency": a.concurrency,
                          "spec_mode": a.spec_mode, "tpot_from": a.source,
                          "reading": a.reading, "sentence": a.sentence,
                          "residual": a.residual,
                          **{name: {"metric": c.metric, "pct": c.pct,
                                    "interval_pct": ({"low": c.interval[0], "high": c.interval[1]}
                                                     if c.interval is not None else None),
                                    "verdict": c.verdict, "method": c.method}
                             for name, c in (("tpot", a.tpot), ("verify_step", a.verify),
                                             ("acceptance_length", a.acceptance))}}
                         for a in summary.attributions],
        "warnings": [{"message": w.message, "arm": w.arm, "concurrency": w.concurrency,
                      "spec_mode": w.spec_mode, "metric": w.metric}
                     for w in summary.warnings],
        **_outputs(summary),
    })


def _output_agreement(a: OutputAgreement) -> dict[str, Any]:
    return {"reference": a.reference, "reference_mode": a.reference_mode, "arm": a.arm,
            "spec_mode": a.spec_mode, "concurrency": a.concurrency, "repeats": list(a.repeats),
            "compared": a.compared, "identical": a.identical, "diverged": len(a.diverged),
            "first_divergent_token": ({"median": a.position_median, "min": a.position_min,
                                       "max": a.position_max} if a.diverged else None),
            "divergences": [{"index": d.index, "position": d.position,
                             "repeats": list(d.repeats)} for d in a.diverged]}


def _hit_rate(c: CellCache) -> dict[str, Any]:
    return {"arm": c.arm, "concurrency": c.concurrency, "spec_mode": c.spec_mode,
            "rates": list(c.rates), "median": c.median, "low": c.low, "high": c.high}


def _outputs(summary: Summary) -> dict[str, Any]:
    """``outputs``, ``prefix_cache`` and ``merge`` (empty where outputs were not compared)."""
    s = summary.outputs
    if s is None:
        return {}
    return {
        "outputs": {"confidence": s.confidence, "aa_arms": list(s.aa_arms), "n_tests": s.n_tests,
                    "notes": list(s.notes), "comparisons": [
                        {"kind": c.kind, "arm": c.arm, "concurrency": c.concurrency,
                         "spec_mode": c.spec_mode, "verdict": c.verdict,
                         "p_value": c.p_value, "p_holm": c.p_holm,
                         **_output_agreement(c.agreement),
                         "yardsticks": [_output_agreement(y) for y in c.yardsticks],
                         "prefix_cache": (None if c.cache is None else {
                             "reference": c.cache.reference.median,
                             "arm": c.cache.other.median,
                             "difference": c.cache.difference, "flagged": c.cache.flagged})}
                        for c in s.comparisons]},
        "prefix_cache": [_hit_rate(c) for c in s.caches],
        "merge": [{"arm": m.arm, "call": m.call, "reasons": list(m.reasons), "cells": [
            {"concurrency": e.concurrency, "spec_mode": e.spec_mode,
             "speed": None if e.speed is None else {
                 "metric": e.speed.metric, "pct": e.speed.pct, "verdict": e.speed.verdict,
                 "interval_pct": ({"low": e.speed.interval[0], "high": e.speed.interval[1]}
                                  if e.speed.interval is not None else None)},
             "speed_reads": e.speed_reads,
             "outputs": None if e.outputs is None else e.outputs.verdict,
             "outputs_reads": e.outputs_reads, "cache_flagged": e.cache_flagged}
            for e in m.cells]} for m in merge_calls(summary)],
    }


def _agreement(a: Agreement | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {"reference": a.reference, "arm": a.arm, "n": a.n, "same": a.same,
            "share": a.share, "flipped": list(a.flipped),
            "reference_only_correct": list(a.reference_only_correct),
            "arm_only_correct": list(a.arm_only_correct), "p_value": a.p_value}


def _arm(a: GSM8KArm) -> dict[str, Any]:
    return {"label": a.label, "arm": a.arm, "occurrence": a.occurrence, "name": a.name,
            "n": a.n, "correct": a.correct, "accuracy_strict": a.accuracy_strict,
            "accuracy_flexible": a.accuracy_flexible, "acceptance_length": a.acceptance_length,
            "agreement": _agreement(a.agreement)}


def _section(s: GSM8KSection) -> dict[str, Any]:
    return {"experiment": s.experiment, "spec_mode": s.spec_mode, "limit": s.limit,
            "title": s.title, "data_kind": s.data_kind, "arms": [_arm(a) for a in s.arms],
            "warnings": list(s.warnings)}


def gsm8k_json(report: GSM8KReport) -> dict[str, Any]:
    """``e2e gsm8k --json``: per evaluation (spec mode, limit) each arm's strict-match
    accuracy and its per-document agreement with main (exact McNemar p-value)."""
    return _clean({
        "schema_version": SCHEMA_VERSION,
        "kind": "e2e.gsm8k",
        "sections": [_section(s) for s in report.sections],
    })
