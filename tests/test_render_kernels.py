"""The kernels' reports (``e2e micro``: micro.md with its host-cost section, step.md) and the
unit validation matrix (``e2e unit``: unit.md) byte for byte on hand-made results, against
``tests/golden/kernels/`` and ``tests/golden/unit.md``. The golden bytes were written by the
renderers before they moved into render/ (``E2E_UPDATE_GOLDEN=1`` rewrites them). Imports no
torch: the renderers do not need it."""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

import pytest

from e2e.render.kernels import host_cost_markdown, steps_markdown
from e2e.render import micro_markdown, unit_markdown

GOLDEN = Path(__file__).parent / "golden"

PATHS = ("main", "inplace", "fused")
FLOORS = ("empty", "empty-direct")
ITEMS = ("empty", "empty-direct", "meta", "meta-jit", "main")
WAYS = ("main", "pr", "fused", "meta")


def _host(with_main: bool) -> dict:
    shapes = []
    for i, name in enumerate(("1 rows", "8 rows", "DSpark block 8 x 4")):
        med = {"empty": 10.7 + i, "empty-direct": 6.25 + i, "meta": 21.5 + 2 * i,
               "meta-jit": 33.0 + i, "wrapper": 1.9, "launch": 12.5 + i,
               "runner (int pointers)": 8.0 + i, "runner (tensors)": 9.75 + i,
               "jit dispatch": 19.0 + i}
        if with_main:
            med["main"] = 140.0 + 10 * i
        shapes.append({"name": name, "rows": 1 + i, "median_us": med, "runs_us": {},
                       "meta_over_empty": med["meta"] / med["empty"]})
    worst = max(shapes, key=lambda s: s["meta_over_empty"])
    return {"runs": 5, "calls": 1000, "shapes": shapes,
            "target": {"what": "one launch eager <= 2 x an empty Triton launch", "bound": 2.0,
                       "worst_ratio": round(worst["meta_over_empty"], 3),
                       "worst_shape": worst["name"], "met": worst["meta_over_empty"] <= 2.0}}


def _micro(dry_run: bool) -> dict:
    shapes = []
    for rows in (1, 8, 384):
        med = {p: {"eager": 100.0 / (k + 1) + rows / 64, "graph": None if dry_run else 9.0 - k}
               for k, p in enumerate(PATHS)}
        med.update({f: {"eager": 18.0 + k, "graph": None if dry_run else 1.0 + k / 10}
                    for k, f in enumerate(FLOORS)})
        counts = {} if dry_run else {
            p: {"kernels": 3.0 if p == "main" else 1.0, "copies": 2.0 if p == "main" else 0.0,
                "memsets": 0.0, "allocations": 3.0 + (rows > 8) if p == "main" else 0.0}
            for p in (*PATHS, *FLOORS)}
        shapes.append({"rows": rows, "median_us": med, "runs_us": {}, "counts": counts,
                       "correct": {p: not (rows == 384 and p == "inplace") for p in PATHS}})
    result = {"schema_version": 2,
              "spec": {"rows": [1, 8, 384], "cols": 128, "runs": 4, "report_from": 2,
                       "calls": 500, "graph_calls": 20, "paths": list(PATHS),
                       "frac_negative": 0.05, "num_rows": 65536, "seed": 0, "dry_run": dry_run},
              "environment": {"device": "cpu" if dry_run else "cuda:0",
                              "gpu": None if dry_run else "NVIDIA H200", "torch": "2.9.0",
                              "triton": "3.5.0", "cuda": None if dry_run else "12.8",
                              "driver": None if dry_run else "570.1", "python": "3.12.3"},
              "shapes": shapes, "warnings": ["wrong results at 384 rows"],
              "host": _host(with_main=not dry_run)}
    if not dry_run:
        result["targets"] = [
            {"target": "in-place eager ≥ 25 % faster than main", "bound": 0.75,
             "worst_ratio": 0.5, "worst_rows": 384, "met": True},
            {"target": "fused eager within 1.5× of the empty launch", "bound": 1.5,
             "worst_ratio": 1.93, "worst_rows": 1, "met": False}]
    return result


def _steps() -> dict:
    shapes = []
    for name, rows in (("1 rows", 1), ("32 rows", 32), ("DSpark block 8 x 4", 32), ("384 rows", 384)):
        med = {w: {"eager": 40.0 + k + rows / 8, "graph": None if rows == 384 and w == "meta"
                   else 12.0 / (k + 1)} for k, w in enumerate(WAYS)}
        counts = {w: {"kernels": 6.0 - k, "copies": 2.0 if w == "main" else 0.0,
                      "memsets": 1.0, "allocations": 3.0 if w == "main" else 0.0}
                  for k, w in enumerate(WAYS) if not (rows == 384 and w == "fused")}
        shapes.append({"name": name, "rows": rows, "dspark": name.startswith("DSpark"),
                       "median_us": med, "counts": counts,
                       "correct": {w: rows != 32 or w != "pr" for w in WAYS}})
    return {"spec": {}, "step_builds": {"V4.1": 7, "V4": 3}, "shapes": shapes,
            "target": {"what": "one launch in a CUDA graph <= 0.35 x main per build, 1..32 rows",
                       "worst_ratio": 0.25, "worst_shape": "1 rows", "bound": 0.35,
                       "met": True}}


Column = namedtuple("Column", "name arm settings noop mutant", defaults=(None, False))  # e2e unit's


def _unit() -> str:
    cols = [Column("main", "main", {}), Column("pr", "pr", {"packing": "inplace"}),
            Column("pr-off", "pr", {"packing": "inplace", "flag": False}, mutant=True),
            Column("pr-noop", "pr", {"packing": "inplace"}, "e2e.plugin.inject:refresh",
                   mutant=True)]
    results = {"main": {"a.py::t1": "failed", "a.py::t2": "passed", "b.py::t3": "skipped"},
               "pr": {"a.py::t1": "passed", "a.py::t2": "passed", "b.py::t3": "passed"},
               "pr-off": {"a.py::t1": "failed", "a.py::t2": "passed"},
               "pr-noop": {"a.py::t1": "passed", "a.py::t2": "passed", "b.py::t3": "passed"}}
    return unit_markdown(cols, results, {"pr-off": ["a.py::t1"], "pr-noop": []})


CASES = {
    "kernels/micro.md": lambda: micro_markdown(_micro(dry_run=False)),
    "kernels/micro-dry-run.md": lambda: micro_markdown(_micro(dry_run=True)),
    "kernels/host.md": lambda: host_cost_markdown(_host(with_main=False)),
    "kernels/step.md": lambda: steps_markdown(_steps()),
    "unit.md": _unit,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_report_is_the_golden_bytes(name):
    data = CASES[name]().encode("utf-8")
    path = GOLDEN / name
    if os.environ.get("E2E_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    assert data == path.read_bytes()
