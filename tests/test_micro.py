"""``e2e micro``: the pure statistics and renderers, and the command end to end (a CPU dry
run in a subprocess under ``TRITON_INTERPRET=1``; with a GPU, a tiny real run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from e2e.errors import ConfigError
from e2e.kernels.micro import (
    FLOOR,
    FLOOR_DIRECT,
    MicroSpec,
    check_targets,
    make_inputs,
    median_of_runs,
    parse_int_list,
)
from e2e.render.kernels import host_cost_markdown, micro_plot, steps_markdown
from e2e.render import micro_markdown, write_micro

pytestmark = pytest.mark.slow  # the whole module is the slow tier

REPO = Path(__file__).resolve().parents[1]


def _result(med: dict[int, dict[str, tuple[float, float]]]) -> dict:
    """A hand-made result: rows → path → (eager µs, graph µs)."""
    shapes = [{"rows": r, "median_us": {p: {"eager": e, "graph": g} for p, (e, g) in paths.items()},
               "runs_us": {}, "counts": {}, "correct": {p: True for p in paths if p != FLOOR}}
              for r, paths in med.items()]
    spec = MicroSpec(rows=tuple(med), runs=4, report_from=2)
    from dataclasses import asdict

    return {"schema_version": 1, "spec": asdict(spec), "shapes": shapes, "warnings": [],
            "environment": {"device": "cuda:0", "gpu": "Test GPU", "torch": "x", "triton": "y",
                            "cuda": "z", "driver": "d", "python": "3"}}


def test_median_of_runs_drops_warmup_runs():
    assert median_of_runs([100.0, 1.0, 3.0, 2.0], 2) == 2.0
    assert median_of_runs([100.0, 1.0, 3.0, 2.0], 1) == 2.5
    assert median_of_runs([None, None], 2) is None


def test_parse_int_list():
    assert parse_int_list(["1,2", "4"], (9,)) == (1, 2, 4)
    assert parse_int_list(None, (9,)) == (9,)
    with pytest.raises(ConfigError):
        parse_int_list(["1,x"], (9,))


def test_spec_validation():
    with pytest.raises(ConfigError):
        MicroSpec(runs=2, report_from=3)
    with pytest.raises(ConfigError):
        MicroSpec(paths=("main", "bogus"))
    with pytest.raises(ConfigError):
        MicroSpec(rows=())


def test_check_targets_judges_worst_shape():
    good = {"main": (100.0, 9.0), "inplace": (60.0, 6.0), "fused": (20.0, 3.0), FLOOR: (18.0, 1.0)}
    bad = {"main": (100.0, 9.0), "inplace": (80.0, 6.0), "fused": (30.0, 7.0), FLOOR: (18.0, 1.0)}
    targets = {t["target"]: t for t in check_targets(_result({1: good, 384: bad}))}
    assert len(targets) == 4
    inplace = targets["in-place eager ≥ 25 % faster than main"]
    assert not inplace["met"] and inplace["worst_rows"] == 384 and inplace["worst_ratio"] == pytest.approx(0.8)
    assert targets["fused eager ≥ 2× faster than main"]["met"]
    assert not targets["fused eager within 1.5× of the empty launch"]["met"]
    assert not targets["fused in a CUDA graph ≤ in-place in a graph"]["met"]
    assert all(t["met"] for t in check_targets(_result({1: good, 2: good})))


def test_render_markdown_and_plot():
    result = _result({1: {"main": (100.0, 9.0), "inplace": (60.0, 6.0), "fused": (20.0, 3.0),
                          FLOOR: (18.0, 1.0)}})
    result["targets"] = check_targets(result)
    md = micro_markdown(result)
    assert "| rows | main eager | inplace eager | fused eager | empty eager |" in md
    assert "| 1 | 100.0 | 60.0 | 20.0 | 18.0 | 9.00 | 6.00 | 3.00 | 1.00 |" in md
    assert "Test GPU" in md and "median of runs 2–4" in md
    png = micro_plot(result)
    if png is not None:
        assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_reports_show_every_entry_the_kernels_measure_in_their_order():
    """e2e.render names the results' entries itself (it must not import torch): a result
    keyed by the kernels' own names shows each of them, in the kernels' order."""
    from e2e.kernels import host_cost, step_bench

    names = ("main", "inplace", "fused", FLOOR, FLOOR_DIRECT)
    result = _result({1: {p: (10.0, 1.0) for p in names}})
    assert ("| rows | " + " | ".join(f"{p} eager" for p in names) + " | "
            + " | ".join(f"{p} graph" for p in names) + " |") in micro_markdown(result).splitlines()
    m = {**{i: 2.0 for i in host_cost.ITEMS}, **{p: 1.0 for p in host_cost.PARTS}}
    host = {"runs": 1, "calls": 1, "shapes": [{"name": "1 rows", "median_us": m, "meta_over_empty": 1.0}],
            "target": {"what": "x", "worst_ratio": 1.0, "worst_shape": "1 rows", "met": True}}
    lines = host_cost_markdown(host).splitlines()
    assert lines[4] == "| shape | " + " | ".join(host_cost.ITEMS) + " | meta / empty | meta / main |"
    assert lines[6] == "| 1 rows | " + " | ".join(["2.00"] * len(host_cost.ITEMS)) + " | 1.00 | 1.00 |"
    step = _step_result(meta_graph=3.0)
    step["target"] = step_bench.check_step_target(step)
    assert "| shape | " + " | ".join(step_bench.WAYS) + " |" in steps_markdown(step).splitlines()


def test_the_kernels_and_their_reports_need_no_pydantic(tmp_path):
    """On the GPU host (torch, Triton; no pydantic): e2e.kernels imports, and the reports of
    e2e micro and bench/kernels_step.py are written, without the report's stack."""
    code = f"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pydantic", "pydantic_core", "pandas", "scipy"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import e2e.kernels, e2e.kernels.micro, e2e.kernels.host_cost, e2e.kernels.step_bench
from e2e.render import write_micro, write_steps
result, step = json.loads(sys.argv[1]), json.loads(sys.argv[2])
write_micro(result, {str(tmp_path)!r})
text, _ = write_steps(step, {str(tmp_path)!r})
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pandas", "scipy")))
"""
    result = _result({1: {"main": (10.0, 1.0), FLOOR: (5.0, 0.5)}})
    step = _step_result(meta_graph=3.0)
    step["target"] = {"what": "x", "worst_ratio": 0.3, "worst_shape": "8 rows", "bound": 0.35,
                      "met": True}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(result), json.dumps(step)],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == ["[]"]
    assert (tmp_path / "micro.md").read_text() == micro_markdown(result)
    assert (tmp_path / "step.md").read_text() == steps_markdown(step)


def test_inputs_are_deterministic_and_have_the_negative_fraction():
    a, la = make_inputs(64, 128, frac_negative=0.05, num_rows=1000, seed=0, device="cpu")
    b, lb = make_inputs(64, 128, frac_negative=0.05, num_rows=1000, seed=0, device="cpu")
    assert torch.equal(a, b) and torch.equal(la, lb)
    assert 0.03 < (a == -1).float().mean().item() < 0.07
    assert a.max().item() < 1000 and la.max().item() <= 128 and la.min().item() >= 0


def _interpreter_broken_by_numpy() -> bool:
    """Triton's interpreter before 3.7 calls int() on 1-element arrays, which NumPy >= 2.4
    refuses (triton-lang/triton#9171, fixed by #9172); seen with Triton 3.6 + NumPy 2.5 on
    the H200 image."""
    try:
        import numpy
        import triton
    except ImportError:
        return False
    version = lambda v: tuple(int(x) for x in v.split("+")[0].split(".")[:2])  # noqa: E731
    return version(triton.__version__) < (3, 7) and version(numpy.__version__) >= (2, 4)


@pytest.mark.skipif(_interpreter_broken_by_numpy(), reason="Triton < 3.7 interpreter with NumPy >= 2.4")
def test_micro_command_dry_run_end_to_end(tmp_path):
    """The whole command on the CPU: JSON, Markdown and PNG exist and are well formed."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "e2e.cli", "micro", "--dry-run", "--rows", "1,5", "--rows", "17", "--cols", "16",
         "--runs", "2", "--report-from", "2", "--calls", "2", "--graph-calls", "1", "--out", str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-8000:]
    data = json.loads((tmp_path / "micro.json").read_text())
    assert data["schema_version"] == 2 and data["spec"]["dry_run"] is True
    assert [s["rows"] for s in data["shapes"]] == [1, 5, 17]
    for shape in data["shapes"]:
        assert all(shape["correct"].values())
        assert set(shape["median_us"]) == {"main", "inplace", "fused", FLOOR, FLOOR_DIRECT}
        assert all(len(v["eager"]) == 2 for v in shape["runs_us"].values())
    host = data["host"]  # the one launch's eager host cost, beside an empty launch
    (one,) = host["shapes"]
    assert {"empty", "empty-direct", "meta", "meta-jit", "wrapper"} <= set(one["median_us"])
    assert one["meta_over_empty"] == one["median_us"]["meta"] / one["median_us"]["empty"]
    md = (tmp_path / "micro.md").read_text()
    assert "| 17 |" in md and "Dry run" in md
    assert "Host cost of one eager build" in md and "| 1 rows |" in md
    png = tmp_path / "micro.png"
    if png.exists():
        assert png.read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob("*.tmp"))


def test_micro_command_rejects_bad_options(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "e2e.cli", "micro", "--dry-run", "--runs", "2", "--report-from", "3",
                           "--out", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "report-from" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_micro_on_gpu_counts_and_graphs(tmp_path):
    from e2e.kernels.micro import run_micro

    result = run_micro(MicroSpec(rows=(1, 64), runs=2, report_from=2, calls=20, graph_calls=5), log=lambda m: None)
    write_micro(result, tmp_path)
    for shape in result["shapes"]:
        assert all(shape["correct"].values())
        counts = shape["counts"]
        assert counts["inplace"]["kernels"] == 3 and counts["inplace"]["allocations"] == 0
        assert counts["inplace"]["copies"] == 0
        assert counts["fused"]["kernels"] == 1 and counts["fused"]["allocations"] == 0
        assert counts["main"]["kernels"] == 3 and counts["main"]["copies"] == 2
        assert counts["main"]["allocations"] == 3
        assert all(v["graph"] is not None for v in shape["median_us"].values())
    assert len(result["targets"]) == 6  # the packing's five and the one launch's host cost
    for shape in result["host"]["shapes"]:  # every part timed on a GPU, the runner's too
        assert {"meta", "empty", "launch", "runner (int pointers)", "runner (tensors)",
                "jit dispatch"} <= set(shape["median_us"])
    assert (tmp_path / "micro.json").exists() and (tmp_path / "micro.md").exists()


# --- the per-step table (e2e.kernels.step_bench) ----------------------------------------------

def _step_result(meta_graph: float, main_graph: float = 10.0, rows: int = 8) -> dict:
    from e2e.kernels.step_bench import STEP_BUILDS, WAYS

    med = {w: {"eager": 50.0, "graph": main_graph} for w in WAYS}
    med["meta"] = {"eager": 20.0, "graph": meta_graph}
    counts = {w: {"kernels": 1.0, "copies": 0.0, "memsets": 0.0, "allocations": 0.0} for w in WAYS}
    return {"step_builds": STEP_BUILDS,
            "shapes": [{"name": f"{rows} rows", "rows": rows, "dspark": False, "median_us": med,
                        "counts": counts, "correct": {w: True for w in WAYS}},
                       {"name": "64 rows", "rows": 64, "dspark": False,
                        "median_us": {w: {"eager": 1.0, "graph": 99.0} for w in WAYS},
                        "counts": counts, "correct": {w: True for w in WAYS}}]}


def test_step_target_reads_only_1_to_32_rows():
    from e2e.kernels.step_bench import check_step_target

    met = check_step_target(_step_result(meta_graph=3.0))
    assert met["met"] is True and met["worst_ratio"] == 0.3 and met["worst_shape"] == "8 rows"
    missed = check_step_target(_step_result(meta_graph=4.0))
    assert missed["met"] is False and missed["worst_ratio"] == 0.4


def test_step_table_renders_per_build_and_per_step():
    from e2e.kernels.step_bench import check_step_target

    result = _step_result(meta_graph=3.0)
    result["target"] = check_step_target(result)
    md = steps_markdown(result)
    assert "| 8 rows | 50.0 | 50.0 | 50.0 | 20.0 | 10.0 | 10.0 | 10.0 | 3.00 | 0.30 |" in md
    assert "| 70.0 | 70.0 | 70.0 | 21.0 |" in md  # x 7 builds per V4.1 step
    assert "Every way matched main" in md and ": met." in md


def test_per_step_without_vllm_ops_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "e2e.cli", "micro", "--dry-run", "--rows", "1",
                           "--cols", "16", "--runs", "1", "--report-from", "1", "--calls", "1",
                           "--per-step", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1", "E2E_VLLM_OPS": ""})
    assert proc.returncode == 2, proc.stderr
    assert "needs vLLM's own ops" in proc.stderr and "Traceback" not in proc.stderr


def test_micro_without_torch_says_to_install_the_kernels_extra():
    """A base install (no kernels extra) asking for e2e micro gets one line, not a traceback,
    and exit 2 (what to do: install the extra), as ``--executor ray`` without Ray does."""
    code = ("import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
            "import importlib.util; real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n in ('torch', 'triton') "
            "else real(n, *a)\n"
            "from e2e.cli import app; app(['micro', '--dry-run', '--rows', '1'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "install the kernels extra: pip install -e '.[kernels]'" in proc.stderr + proc.stdout
