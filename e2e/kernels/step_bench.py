"""The whole decode SWA metadata build, per build and per decode step, on a GPU.

``e2e micro`` times the packing alone. A decode step of DeepSeek-V4.1 builds the SWA
metadata 7 times (V4: 3), and each build is the window computation *and* the packing. This
module times that whole build, as the devices run it, for four ways of doing it:

    main   vLLM 0.32's sequence (e2e.kernels.vllm_ops): validity mask, token map, lengths
           fill, window kernel, build_ragged_indices_from_dense (3 allocations, count,
           cumsum, compact), _copy_ragged_to_graph_buffers (2 copies)
    pr     the same window part, then e2e's in-place packing (3 kernels, no copy)
    fused  the same window part, then e2e's fused packing (1 kernel)
    meta   one swa_decode_meta launch (up to 32 rows; beyond, pr's sequence)

Per shape: every way is checked against main (ragged rows, indptr, dense rows, lengths),
then ``runs`` interleaved runs of ``calls`` eager builds (host clock) and graph replays of
``graph_calls`` builds (CUDA events); medians of runs ``report_from``..``runs``; launches,
copies, memsets and allocations per build from ``torch.profiler``. Per step = per build ×
builds per step. What it leaves out: vLLM's Python around the ops (the builder's dataclass,
``split_decodes_and_prefills``), the same on every way. ``measure_steps`` returns the result
(step.json); ``e2e.render`` writes it with its Markdown (``write_steps``).

    E2E_VLLM_OPS=vllm032_ops.py PYTHONPATH=$PWD python bench/kernels_step.py --out DIR   # on the GPU
    (or ``e2e micro --per-step``)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from e2e.kernels.micro import median_of_runs

__all__ = ["WAYS", "STEP_BUILDS", "StepSpec", "run_steps", "check_step_target", "load_ops",
           "measure_steps"]

WAYS = ("main", "pr", "fused", "meta")
STEP_BUILDS = {"V4.1": 7, "V4": 3}
TARGET = 0.35  # meta / main in a CUDA graph, per build, at 1..32 rows


@dataclass(frozen=True)
class StepSpec:
    rows: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 384)
    dspark_requests: tuple[int, ...] = (2, 8)  # DSpark draft blocks of 4 tokens per request
    runs: int = 4
    report_from: int = 2
    calls: int = 200
    graph_calls: int = 20
    seed: int = 0


@dataclass
class _Shape:
    name: str
    rows: int
    noncausal: bool
    calls: dict = field(default_factory=dict)
    graphs: dict = field(default_factory=dict)
    eager: dict = field(default_factory=dict)
    graph: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    correct: dict = field(default_factory=dict)


def _ways(ops, b, buf):
    """name -> a zero-argument build on ``buf`` for batch ``b``."""
    from e2e.kernels import PATHS, meta_check, swa_meta, vllm_ops

    window_args = dict(
        slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"][: b.num_tokens],
        query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
        replay_start=b.replay_start, token_to_req=buf["token_to_req"],
        indices_out=buf["indices_out"], lens_out=buf["lens_out"], num_tokens=b.num_tokens,
        num_mapped=b.num_mapped, window=meta_check.WINDOW, block_size=b.block_size,
        noncausal=b.noncausal)
    n, width = b.num_tokens, b.width
    dense = buf["indices_out"][:n].reshape(n, width)
    lens = buf["lens_out"][:n]

    def main():
        vllm_ops.decode_build_main(ops, ragged_buffer=buf["ragged_buffer"],
                                   indptr_buffer=buf["indptr_buffer"], **window_args)

    def packed(path):
        fn = PATHS[path]

        def build():
            vllm_ops.decode_window(ops, **window_args)
            fn(dense, lens, buf["ragged_buffer"], buf["indptr_buffer"])
        return build

    if swa_meta.covers(n, width):
        def meta():
            meta_check.run_meta(b, buf)
    else:
        meta = packed("inplace")
    return {"main": main, "pr": packed("inplace"), "fused": packed("fused"), "meta": meta}


def _state(buf, b):
    n = b.num_tokens
    kept = int(buf["indptr_buffer"][n])
    return (buf["ragged_buffer"][:kept].clone(), buf["indptr_buffer"][: n + 1].clone(),
            buf["indices_out"][:n].clone(), buf["lens_out"].clone(),
            buf["token_to_req"][:n].clone(), buf["is_valid_token"][:n].clone())


def run_steps(spec: StepSpec, ops, device, log=print) -> dict:
    import torch

    from e2e.kernels import bench, meta_check

    g = torch.Generator().manual_seed(spec.seed)
    shapes: list[_Shape] = []
    batches = []
    for rows in spec.rows:
        seq = torch.randint(1, 4000, (rows,), generator=g).tolist()
        batches.append((f"{rows} rows", meta_check._batch(
            f"{rows} rows", g, device, seq_lens=seq, query_len=1, block_size=64,
            noncausal=False)))
    for reqs in spec.dspark_requests:
        seq = torch.randint(4, 4000, (reqs,), generator=g).tolist()
        batches.append((f"DSpark block {reqs} x 4", meta_check._batch(
            "dspark", g, device, seq_lens=seq, query_len=4, block_size=64, noncausal=True)))
    for name, b in batches:
        shape = _Shape(name, b.num_tokens, b.noncausal)
        want = None
        for way in WAYS:
            buf = meta_check.buffers(b, max_tokens=max(512, b.num_tokens))
            fn = _ways(ops, b, buf)[way]
            fn()
            state = _state(buf, b)
            if want is None:
                want = state
            shape.correct[way] = all(torch.equal(x, y) for x, y in zip(want, state))
            shape.calls[way] = fn
            if device.type == "cuda":
                for _ in range(3):
                    fn()
                shape.counts[way] = bench.count_ops(fn, device).as_dict()
                shape.graphs[way] = bench.capture_graph(fn, spec.graph_calls)
        shapes.append(shape)
        log(f"prepared {name}: correct={shape.correct}")
    replays = max(1, spec.calls // spec.graph_calls)
    for run in range(1, spec.runs + 1):
        for shape in shapes:
            for way, fn in shape.calls.items():
                shape.eager.setdefault(way, []).append(bench.time_eager(fn, spec.calls, device))
                graph = shape.graphs.get(way)
                shape.graph.setdefault(way, []).append(
                    bench.time_graph(graph, spec.graph_calls, replays) if graph else None)
        log(f"run {run}/{spec.runs} done")
    out = []
    for s in shapes:
        med = {w: {"eager": median_of_runs(s.eager[w], spec.report_from),
                   "graph": median_of_runs(s.graph[w], spec.report_from)} for w in s.calls}
        out.append({"name": s.name, "rows": s.rows, "dspark": s.noncausal, "median_us": med,
                    "runs_us": {w: {"eager": s.eager[w], "graph": s.graph[w]} for w in s.calls},
                    "counts": s.counts, "correct": s.correct})
    result = {"spec": spec.__dict__, "step_builds": STEP_BUILDS, "shapes": out}
    result["target"] = check_step_target(result)
    return result


def check_step_target(result: dict) -> dict:
    """meta / main per build in a CUDA graph at 1..32 rows: worst ratio against TARGET."""
    worst = None
    for s in result["shapes"]:
        if s["rows"] > 32:
            continue
        a, b = s["median_us"]["meta"]["graph"], s["median_us"]["main"]["graph"]
        if not a or not b:
            continue
        r = a / b
        if worst is None or r > worst[0]:
            worst = (r, s["name"])
    return {"what": "one launch in a CUDA graph <= 0.35 x main per build, 1..32 rows",
            "worst_ratio": None if worst is None else round(worst[0], 3),
            "worst_shape": None if worst is None else worst[1], "bound": TARGET,
            "met": None if worst is None else worst[0] <= TARGET}


def load_ops(ops_file: Path | None = None):
    """vLLM's ops (``e2e.kernels.vllm_ops``): from ``ops_file`` (or ``$E2E_VLLM_OPS``), else
    from the installed vLLM. Raises ``E2EError`` (exit 2) with what to do when neither works."""
    import os

    from e2e.errors import ConfigError
    from e2e.kernels import vllm_ops

    if ops_file is not None:
        if not Path(ops_file).is_file():
            raise ConfigError(f"--vllm-ops {ops_file}: no such file")
        os.environ["E2E_VLLM_OPS"] = str(ops_file)
    try:
        return vllm_ops.load()
    except (ImportError, AttributeError, OSError, SyntaxError) as exc:
        raise ConfigError(
            f"the per-step table needs vLLM's own ops ({exc}); install vLLM or pass "
            "--vllm-ops FILE made by `python -m e2e.kernels.vllm_ops extract --python "
            "SERVER_ENV_PYTHON --out FILE`") from None


def measure_steps(spec: StepSpec, *, ops_file: Path | None = None, dry_run: bool = False,
                  log=print) -> dict:
    """Run the per-step table; its result with the environment it ran in. ``dry_run``: CPU
    under ``TRITON_INTERPRET=1``, one call, no graphs."""
    import torch

    from e2e.errors import E2EError
    from e2e.kernels import load_triton_paths

    if dry_run:
        device = torch.device("cpu")
        spec = StepSpec(rows=spec.rows, dspark_requests=spec.dspark_requests[:1], runs=1,
                        report_from=1, calls=1, graph_calls=1, seed=spec.seed)
    elif not torch.cuda.is_available():
        raise E2EError("the per-step table needs a CUDA GPU (torch sees none); use --dry-run")
    else:
        device = torch.device("cuda")
    load_triton_paths()
    ops = load_ops(ops_file)
    result = run_steps(spec, ops, device, log=log)
    import triton

    result["environment"] = {"device": str(device), "torch": torch.__version__,
                             "triton": triton.__version__,
                             "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                             "vllm_ops": getattr(ops, "VLLM_VERSION", None),
                             "dry_run": dry_run}
    return result
