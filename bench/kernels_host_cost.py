"""The one launch's eager host cost on a GPU, in one process: optionally a committed version of
``swa_meta.py`` against today's side by side (``--before FILE``, e.g. from
``git show REV:e2e/kernels/swa_meta.py``), then the one launch against vLLM's ops on drawn
batches and in graph replay, then ``e2e micro``'s tables (with the host cost) and the per-step
table, written under ``--out``. Needs torch, Triton and a CUDA GPU; not pydantic.

    PYTHONPATH=$PWD python3 bench/kernels_host_cost.py --ops vllm032_ops.py \\
        [--before swa_meta_before.py] --out OUT
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=Path, required=True, help="vLLM's ops (e2e.kernels.vllm_ops extract)")
    ap.add_argument("--before", type=Path, help="an older swa_meta.py to time beside today's")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=25)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["E2E_VLLM_OPS"] = str(args.ops.resolve())
    import torch
    import triton

    print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda,
          torch.cuda.get_device_name(), "python", sys.version.split()[0], flush=True)
    from e2e.kernels import (bench, host_cost, load_triton_paths, meta_check, micro, step_bench,
                             swa_meta, vllm_ops)  # noqa: F401

    tp = load_triton_paths()
    ops = vllm_ops.load()
    dev = torch.device("cuda")
    if args.before:
        spec = importlib.util.spec_from_file_location("swa_meta_before", args.before)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        g = torch.Generator().manual_seed(5)
        res = {}
        for rows in (1, 8, 32):
            seq = torch.randint(1, 4000, (rows,), generator=g).tolist()
            b = meta_check._batch(f"{rows}", g, "cuda", seq_lens=seq, query_len=1, block_size=64,
                                  noncausal=False)
            bufs = [meta_check.buffers(b) for _ in range(3)]
            a0, a1 = host_cost._arguments(b, bufs[0]), host_cost._arguments(b, bufs[1])
            x = bufs[0]["lens_out"]
            fns = {"empty": lambda: tp.empty_launch(x),
                   "before": lambda: before.swa_decode_meta(**a0),
                   "after": lambda: swa_meta.swa_decode_meta(**a1),
                   "main": lambda: meta_check.run_vllm(ops, b, bufs[2])}
            for f in fns.values():
                for _ in range(5):
                    f()
            torch.cuda.synchronize()
            same = all(torch.equal(bufs[0][k], bufs[1][k]) for k in bufs[0])
            t = {k: [] for k in fns}
            for _ in range(5):
                for k, f in fns.items():
                    t[k].append(bench.time_eager(f, 1000, dev))
            med = {k: statistics.median(v) for k, v in t.items()}
            res[rows] = {"median_us": med, "runs_us": t, "same_outputs": same}
            print(f"rows {rows}: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
                  + f" | before/empty {med['before'] / med['empty']:.2f}"
                  f" after/empty {med['after'] / med['empty']:.2f} same={same}", flush=True)
        (args.out / "before_after.json").write_text(json.dumps(res, indent=1))
    bad, n = [], 0
    for seed in range(args.seeds):
        for b in meta_check.batches(seed, "cuda", random_cases=12):
            n += 1
            diff = meta_check.compare(ops, b)
            if diff:
                bad.append((seed, b.name, diff))
    print(f"compare vs vLLM ops: {n} batches, {len(bad)} differ {bad[:5]}", flush=True)
    print("graph replay check:", meta_check.graph_replay_check(ops) or "no difference", flush=True)
    from e2e.render.kernels import host_cost_markdown
    from e2e.render import write_micro, write_steps

    result = micro.run_micro(micro.MicroSpec(), log=lambda m: None, ops=ops)
    write_micro(result, args.out)
    print(host_cost_markdown(result["host"]), flush=True)
    steps = step_bench.measure_steps(step_bench.StepSpec(), ops_file=args.ops, log=lambda m: None)
    text, _ = write_steps(steps, args.out)
    print(text, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
