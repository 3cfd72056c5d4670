"""The packing paths' micro-benchmark (``e2e micro``), as the reference change measured it.

Pipeline: options → ``MicroSpec`` → inputs per shape (the same indices and lengths for
every path; ``frac_negative`` of entries −1) → correctness check of every path against the
torch reference → op counts (``torch.profiler``) → ``runs`` interleaved runs of ``calls``
eager calls and ``calls`` graph-replayed calls per (shape, path) → median of runs
``report_from``..``runs`` → the result dict (micro.json), which ``e2e.render`` writes with its
Markdown and PNG under ``--out`` (``write_micro``).

The statistics (``median_of_runs``, ``check_targets``) are pure functions of the result dict;
timing lives in ``e2e.kernels.bench``. ``--dry-run`` runs everything on the CPU under ``TRITON_INTERPRET=1``
(no graph timings, no op counts): a functional check, not a measurement.

The host cost of one eager call of the one-launch build (``e2e.kernels.host_cost``: beside
an empty launch and, given vLLM's ops, vLLM's own build; where the time goes) is measured in
the same process and recorded under ``host``, with its target among ``targets``.

JSON schema versions: 1 — first version; 2 — ``host`` (the one launch's eager host cost).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from e2e.errors import ConfigError, E2EError

__all__ = [
    "SCHEMA_VERSION", "DEFAULT_ROWS", "BENCH_PATHS", "MicroSpec", "make_inputs",
    "median_of_runs", "check_targets", "run_micro", "parse_int_list", "FLOOR", "FLOOR_DIRECT",
]

SCHEMA_VERSION = 2
DEFAULT_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384)
BENCH_PATHS = ("main", "inplace", "fused")
FLOOR = "empty"  # an empty Triton launch through Triton's JIT dispatch: the floor
FLOOR_DIRECT = "empty-direct"  # the same kernel through the paths' direct runner


@dataclass(frozen=True)
class MicroSpec:
    """One benchmark's settings (validated on construction)."""

    rows: tuple[int, ...] = DEFAULT_ROWS
    cols: int = 128
    runs: int = 4
    report_from: int = 2
    calls: int = 500
    graph_calls: int = 20
    paths: tuple[str, ...] = BENCH_PATHS
    frac_negative: float = 0.05
    num_rows: int = 65536
    seed: int = 0
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not self.rows or min(self.rows) < 1:
            raise ConfigError("--rows needs one or more positive row counts")
        if self.cols < 1:
            raise ConfigError("--cols must be at least 1")
        if not 1 <= self.report_from <= self.runs:
            raise ConfigError(f"--report-from-run must be in 1..--runs ({self.runs}), got {self.report_from}")
        if self.calls < 1 or self.graph_calls < 1:
            raise ConfigError("--calls and --graph-calls must be at least 1")
        unknown = [p for p in self.paths if p not in BENCH_PATHS]
        if unknown or not self.paths:
            raise ConfigError(f"--paths: unknown {unknown}; choose from {', '.join(BENCH_PATHS)}")
        if not 0.0 <= self.frac_negative < 1.0:
            raise ConfigError("the −1 fraction must be in [0, 1)")


# --------------------------------------------------------------------------- pure functions


def parse_int_list(values: list[str] | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """``["1,2", "4"]`` → ``(1, 2, 4)``; ``None`` or empty → ``default``."""
    if not values:
        return default
    try:
        return tuple(int(x) for v in values for x in str(v).split(",") if x.strip())
    except ValueError as exc:
        raise ConfigError(f"expected whole numbers separated by commas, got {values}") from exc


def median_of_runs(per_run: list[float | None], report_from: int) -> float | None:
    """Median of runs ``report_from``..end (1-based: 2 drops the first, warm-up run)."""
    kept = [v for v in per_run[report_from - 1:] if v is not None]
    return statistics.median(kept) if kept else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def check_targets(result: dict) -> list[dict]:
    """The issue's H200 targets, judged on medians, worst shape reported:
    in-place eager ≤ 0.75 × main; fused eager ≤ 0.5 × main and ≤ 1.5 × the empty launch;
    fused in a graph ≤ in-place in a graph. A target whose paths were not run is absent.
    The fused path is also judged against the empty kernel launched the way the paths
    launch theirs (the direct runner), the stricter floor."""
    shapes = result["shapes"]
    specs = [
        ("in-place eager ≥ 25 % faster than main", "eager", "inplace", "main", 0.75),
        ("fused eager ≥ 2× faster than main", "eager", "fused", "main", 0.5),
        ("fused eager within 1.5× of the empty launch", "eager", "fused", FLOOR, 1.5),
        ("fused eager within 1.5× of the empty direct launch", "eager", "fused", FLOOR_DIRECT, 1.5),
        ("fused in a CUDA graph ≤ in-place in a graph", "graph", "fused", "inplace", 1.0),
    ]
    targets = []
    for name, mode, path, base, bound in specs:
        ratios = []
        for shape in shapes:
            med = shape["median_us"]
            ratios.append((_ratio(med.get(path, {}).get(mode), med.get(base, {}).get(mode)), shape["rows"]))
        if any(r is None for r, _ in ratios):
            continue
        worst, worst_rows = max(ratios)
        targets.append({"target": name, "bound": bound, "worst_ratio": worst, "worst_rows": worst_rows,
                        "met": worst <= bound})
    return targets


# --------------------------------------------------------------------------- measuring


def make_inputs(rows: int, cols: int, *, frac_negative: float, num_rows: int, seed: int, device):
    """Dense int32 ``[rows, cols]`` indices in ``[0, num_rows)`` with ``frac_negative`` of them
    −1, and int32 lengths: ``cols`` for most rows, uniform in ``[0, cols]`` for about 1 in 8."""
    import torch

    gen = torch.Generator().manual_seed(seed * 1_000_003 + rows * 7919 + cols)
    indices = torch.randint(0, num_rows, (rows, cols), generator=gen, dtype=torch.int32)
    indices[torch.rand((rows, cols), generator=gen) < frac_negative] = -1
    lengths = torch.full((rows,), cols, dtype=torch.int32)
    short = torch.rand(rows, generator=gen) < 0.125
    lengths[short] = torch.randint(0, cols + 1, (int(short.sum()),), generator=gen, dtype=torch.int32)
    return indices.to(device), lengths.to(device)


def _environment(device) -> dict:
    import torch
    import triton

    env = {"device": str(device), "torch": torch.__version__, "triton": triton.__version__,
           "cuda": torch.version.cuda, "python": platform.python_version(), "gpu": None, "driver": None,
           "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1"}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=True)
            env["driver"] = out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            env["driver"] = None
    return env


@dataclass
class _Case:
    rows: int
    calls: dict[str, Any] = field(default_factory=dict)  # name -> zero-argument callable
    eager: dict[str, list[float]] = field(default_factory=dict)
    graph: dict[str, list[float | None]] = field(default_factory=dict)
    graphs: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, dict] = field(default_factory=dict)
    correct: dict[str, bool] = field(default_factory=dict)


def _device(spec: MicroSpec):
    if spec.dry_run:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise E2EError("--dry-run needs TRITON_INTERPRET=1 before Triton is imported; "
                           "run it in a fresh process")
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as exc:
        raise E2EError(f"e2e micro needs torch and Triton ({exc.name} is missing); install "
                       "the kernels extra: pip install -e '.[kernels]'") from None

    if spec.dry_run:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise E2EError("e2e micro needs a CUDA GPU (torch sees none); use --dry-run for a CPU check")
    return torch.device("cuda", torch.cuda.current_device())


def run_micro(spec: MicroSpec, log=print, *, ops=None) -> dict:
    """Measure every (shape, path) of ``spec``, then the one launch's host cost (with
    vLLM's build beside it where ``ops``, ``e2e.kernels.vllm_ops``, is given); return the
    result dict (schema 2)."""
    device = _device(spec)
    import torch

    from e2e.kernels import PATHS, bench, load_triton_paths
    from e2e.kernels.reference import reference_ragged

    tpaths = load_triton_paths()

    on_gpu = device.type == "cuda"
    cases: list[_Case] = []
    for rows in spec.rows:
        indices, lengths = make_inputs(rows, spec.cols, frac_negative=spec.frac_negative,
                                       num_rows=spec.num_rows, seed=spec.seed, device=device)
        want_flat, want_indptr = reference_ragged(indices, lengths, spec.num_rows)
        kept = int(want_indptr[-1])
        case = _Case(rows)
        for name in spec.paths:
            fn = PATHS[name]
            out = torch.empty(rows * spec.cols, dtype=torch.int32, device=device)
            indptr = torch.empty(rows + 1, dtype=torch.int32, device=device)
            fn(indices, lengths, out.fill_(-7), indptr.fill_(-7), spec.num_rows)
            case.correct[name] = bool(torch.equal(indptr, want_indptr) and torch.equal(out[:kept], want_flat))
            case.calls[name] = (lambda f=fn, a=(indices, lengths, out, indptr, spec.num_rows): f(*a))
        case.calls[FLOOR] = (lambda x=indices: tpaths.empty_launch(x))
        case.calls[FLOOR_DIRECT] = (lambda x=indices: tpaths.empty_launch_direct(x))
        for name, call in case.calls.items():
            for _ in range(1 if spec.dry_run else 3):  # compile and warm
                call()
            if on_gpu:
                case.counts[name] = bench.count_ops(call, device).as_dict()
                case.graphs[name] = bench.capture_graph(call, spec.graph_calls)
        cases.append(case)
        log(f"prepared {rows} rows: correct={case.correct}")

    replays = max(1, spec.calls // spec.graph_calls)
    calls = 1 if spec.dry_run else spec.calls  # a dry run checks the pipeline: one call a run
    for run in range(1, spec.runs + 1):
        for case in cases:
            for name, call in case.calls.items():
                case.eager.setdefault(name, []).append(bench.time_eager(call, calls, device))
                g = case.graphs.get(name)
                case.graph.setdefault(name, []).append(
                    bench.time_graph(g, spec.graph_calls, replays) if g is not None else None)
        log(f"run {run}/{spec.runs} done")

    shapes = []
    for case in cases:
        med = {n: {"eager": median_of_runs(case.eager[n], spec.report_from),
                   "graph": median_of_runs(case.graph[n], spec.report_from)} for n in case.calls}
        shapes.append({"rows": case.rows, "median_us": med,
                       "runs_us": {n: {"eager": case.eager[n], "graph": case.graph[n]} for n in case.calls},
                       "counts": case.counts, "correct": case.correct})
    result = {"schema_version": SCHEMA_VERSION, "spec": asdict(spec), "environment": _environment(device),
              "shapes": shapes, "warnings": []}
    from e2e.kernels import host_cost

    result["host"] = host_cost.measure(device, ops=ops, runs=1 if spec.dry_run else 5,
                                       calls=1 if spec.dry_run else 1000,
                                       dry_run=spec.dry_run, log=log)
    if spec.dry_run:
        result["warnings"].append("dry run on the CPU under TRITON_INTERPRET=1: timings are not meaningful")
    else:
        t = result["host"]["target"]
        result["targets"] = check_targets(result) + [
            {"target": t["what"], "bound": t["bound"], "worst_ratio": t["worst_ratio"],
             "worst_rows": t["worst_shape"], "met": t["met"]}]
    for s in shapes:
        if not all(s["correct"].values()):
            result["warnings"].append(f"wrong results at {s['rows']} rows: {s['correct']}")
    return result
