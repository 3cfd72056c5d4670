"""The --json documents (e2e.render.json_report): keys and values on hand-made records, strict
JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.analysis.sweep.aggregate import summarize
from e2e.plan import RunSpec
from e2e.results.gsm8k import ArmResult, EvalInfo, SampleVerdict
from e2e.render.json_report import SCHEMA_VERSION
from e2e.render import dumps, gsm8k_json, report_json, run_json
from e2e.results.records import RunMetrics, RunRecord, ServerInfo
from e2e.analysis.outputs.gsm8k import GSM8KReport, summarize_gsm8k

RUN_KEYS = ["schema_version", "kind", "experiment", "run_id", "folder", "valid",
            "invalid_reasons", "warnings", "spec", "started_at", "finished_at",
            "record_schema_version", "metrics"]


def record(arm: str, repeat: int, tpot: float, *, valid: bool = True,
           metrics: bool = True) -> RunRecord:
    spec = RunSpec(arm=arm, concurrency=4, dspark=False, prompts=128, input_len=1031,
                   output_len=509, seed=0, warmup_requests=2, repeat=repeat)
    mx = RunMetrics(requests=128, ok_requests=128, duration_s=20.0, input_tokens=131968,
                    output_tokens=65152, ttft_ms_mean=50.0, tpot_ms_mean=tpot,
                    tpot_ms_median=tpot, output_throughput_tok_s=3257.6)
    return RunRecord(
        experiment="exp", run_id=spec.run_id, spec=spec, arm_settings={},
        config={"name": "exp", "report_from_run": 2, "arms": {"main": {}, "pr": {}}},
        server=ServerInfo(argv=["vllm"], env={}, base_url="http://127.0.0.1:1", model="m"),
        provenance={}, started_at="2026-11-30T04:00:00+00:00",
        finished_at="2026-11-30T04:01:00+00:00", metrics=mx if metrics else None, valid=valid,
        invalid_reasons=[] if valid else ["2 request(s) failed"],
        warnings=["acceptance length 1.000: nothing accepted"] if not valid else [])


def roundtrip(doc: dict[str, Any]) -> dict[str, Any]:
    return json.loads(dumps(doc))


def test_run_json_keys_and_values() -> None:
    rec = record("pr", 3, 6.5)
    doc = roundtrip(run_json(Path("results/exp/pr-c4-base-r3"), rec))
    assert list(doc) == RUN_KEYS
    assert (doc["schema_version"], doc["kind"]) == (SCHEMA_VERSION, "e2e.run")
    assert (doc["run_id"], doc["folder"], doc["valid"]) == ("pr-c4-base-r3", "results/exp/pr-c4-base-r3", True)
    assert doc["spec"] == {"arm": "pr", "concurrency": 4, "dspark": False, "prompts": 128,
                           "input_len": 1031, "output_len": 509, "seed": 0,
                           "warmup_requests": 2, "repeat": 3, "windows": 1, "request_rate": None,
                           "burstiness": 1.0, "max_concurrency": None, "duet": None, "slot": None,
                           "workload": None,
                           "spec_mode": "base",
                           "cell": "pr-c4-base"}
    assert set(doc["metrics"]) == set(RunMetrics.model_fields)
    assert doc["metrics"]["tpot_ms_mean"] == 6.5 and doc["metrics"]["acceptance_length"] is None


def test_run_json_of_an_invalid_run_without_metrics() -> None:
    doc = roundtrip(run_json(Path("f"), record("pr", 1, 1.0, valid=False, metrics=False)))
    assert doc["valid"] is False and doc["metrics"] is None
    assert doc["invalid_reasons"] == ["2 request(s) failed"]
    assert doc["warnings"] == ["acceptance length 1.000: nothing accepted"]


def test_report_json_keys_and_values() -> None:
    runs = [record("main", k, t) for k, t in ((1, 99.0), (2, 10.0), (3, 10.2), (4, 9.9))]
    runs += [record("pr", k, t) for k, t in ((1, 99.0), (2, 9.0), (3, 9.1), (4, 8.9))]
    summary = summarize(runs)
    doc = roundtrip(report_json(summary))
    assert list(doc) == ["schema_version", "kind", "experiment", "baseline", "arms",
                         "concurrencies", "spec_modes", "report_from_run", "confidence",
                         "min_effect_pct", "equivalence_pct", "n_comparisons",
                         "interval_method", "counts", "metrics", "cells",
                         "comparisons", "pinned_acceptance", "workloads", "attributions",
                         "warnings"]
    assert (doc["kind"], doc["experiment"], doc["baseline"], doc["arms"]) == \
        ("e2e.report", "exp", "main", ["main", "pr"])
    assert doc["counts"] == {"total": 8, "reported": 6, "warmup": 2, "invalid": 0}
    assert {m["key"] for m in doc["metrics"]} >= {"tpot_ms_mean", "ms_per_verify_step"}
    cell = next(c for c in doc["cells"] if c["arm"] == "pr" and c["metric"] == "tpot_ms_mean")
    assert cell == {"arm": "pr", "concurrency": 4, "spec_mode": "base", "metric": "tpot_ms_mean",
                    "n": 3, "repeats": [2, 3, 4], "values": [9.0, 9.1, 8.9], "median": 9.0,
                    "low": 8.9, "high": 9.1, "spread": pytest.approx(0.2 / 9.0),
                    "load": "concurrency 4"}
    comp = next(c for c in doc["comparisons"] if c["metric"] == "tpot_ms_mean")
    expected = summary.comparison("pr", 4, "base", "tpot_ms_mean")
    assert expected is not None
    assert comp["ratio"] == expected.ratio and comp["pct"] == pytest.approx(expected.pct)
    assert comp["median_ratio"] == pytest.approx(0.9)  # 9.0 / 10.0, the medians' ratio
    assert comp["method"] == "model" and comp["n_blocks"] == 3
    assert comp["role"] == expected.role and comp["df"] == expected.df
    assert comp["mde_pct"] == expected.mde_pct and comp["survives_holm"] == expected.survives
    assert comp["verdict"] == expected.verdict == "faster"
    assert comp["interval_pct"] == {"low": expected.interval[0], "high": expected.interval[1]}  # type: ignore[index]
    assert (comp["n_arm"], comp["n_baseline"]) == (3, 3)


def test_report_json_warnings_and_non_finite_numbers() -> None:
    runs = [record("main", k, t) for k, t in ((2, 10.0), (3, 10.0))]
    runs += [record("pr", 2, 9.0), record("pr", 3, 1.0, valid=False)]
    doc = roundtrip(report_json(summarize(runs)))
    warning = next(w for w in doc["warnings"] if w["arm"] == "pr" and "invalid" in w["message"])
    assert (warning["concurrency"], warning["spec_mode"], warning["metric"]) == (4, "base", None)
    comp = next(c for c in doc["comparisons"] if c["metric"] == "tpot_ms_mean")
    assert comp["verdict"] == "too few runs" and comp["interval_pct"] is None
    assert json.loads(dumps({"x": float("inf"), "y": [float("nan")]})) == {"x": None, "y": [None]}


def verdicts(right: list[int], n: int = 6) -> list[SampleVerdict]:
    return [SampleVerdict(doc_id=i, prompt_hash=f"h{i}", strict=i in right) for i in range(n)]


def arm_result(label: str, arm: str, occurrence: int, correct: int) -> ArmResult:
    return ArmResult(experiment="exp", label=label, arm=arm, occurrence=occurrence,
                     spec_mode="base", limit=6, concurrency=4, data={"kind": "local"},
                     lm_eval_version="0.4.13", lm_eval_argv=["lm_eval"], base_url="u", model="m",
                     n=6, accuracy_strict=correct / 6, started_at="t", finished_at="t", wall_s=1.0)


def test_gsm8k_json_keys_and_values() -> None:
    info = EvalInfo(experiment="exp", spec_mode="base", limit=6, data={"kind": "local"},
                    lm_eval_version="0.4.13", arms=("main", "main.r2", "pr"))
    section = summarize_gsm8k(info, [
        (arm_result("main", "main", 1, 3), verdicts([0, 1, 2])),
        (arm_result("main.r2", "main", 2, 3), verdicts([0, 1, 2])),
        (arm_result("pr", "pr", 1, 3), verdicts([0, 1, 5])),
    ])
    doc = roundtrip(gsm8k_json(GSM8KReport(sections=(section,))))
    assert list(doc) == ["schema_version", "kind", "sections"] and doc["kind"] == "e2e.gsm8k"
    (sec,) = doc["sections"]
    assert (sec["spec_mode"], sec["limit"], sec["title"], sec["data_kind"]) == \
        ("base", 6, "base (limit 6)", "local")
    assert any("--limit 6" in w for w in sec["warnings"])
    assert [a["name"] for a in sec["arms"]] == ["main", "main (repeat)", "pr"]
    main, repeat, pr = sec["arms"]
    assert main["agreement"] is None and main["accuracy_strict"] == 0.5
    assert repeat["agreement"]["same"] == 6 and repeat["agreement"]["flipped"] == []
    assert pr["agreement"] == {
        "reference": "main", "arm": "pr", "n": 6, "same": 4, "share": pytest.approx(4 / 6),
        "flipped": [2, 5], "reference_only_correct": [2], "arm_only_correct": [5],
        "p_value": pytest.approx(1.0)}
    assert list(pr) == ["label", "arm", "occurrence", "name", "n", "correct", "accuracy_strict",
                        "accuracy_flexible", "acceptance_length", "agreement"]
