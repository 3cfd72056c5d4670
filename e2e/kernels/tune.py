"""Pick the fused kernel's launch config on a GPU: ``python -m e2e.kernels.tune``.

For each row count, times every candidate ``(ROWS, num_warps)`` inside a CUDA
graph (device µs per call, median of 3) beside the in-place path, checks each against the
torch reference, and prints one line per (rows, config), best first per shape. The winners
are written into ``triton_paths.fused_config`` by hand, with the table in docs/explanation/kernels.md.
"""

from __future__ import annotations

import itertools
import statistics
import sys

import torch

from e2e.kernels import bench
from e2e.kernels.reference import reference_ragged
from e2e.kernels import triton_paths as tp
from e2e.kernels.triton_paths import _pow2
from e2e.kernels.micro import make_inputs


def _graph_us(call, graph_calls: int = 20, replays: int = 25) -> float:
    graph = bench.capture_graph(call, graph_calls)
    return statistics.median(bench.time_graph(graph, graph_calls, replays) for _ in range(3))


def main(rows_list=(16, 32, 64, 128, 256, 384), cols: int = 128) -> None:
    dev = torch.device("cuda")
    bw = 128
    for n in rows_list:
        idx, lens = make_inputs(n, cols, frac_negative=0.05, num_rows=65536, seed=0, device=dev)
        flat, want = reference_ragged(idx, lens, 65536)
        out = torch.empty(n * cols, dtype=torch.int32, device=dev)
        ptr = torch.empty(n + 1, dtype=torch.int32, device=dev)
        base = _graph_us(lambda: tp.pack_inplace(idx, lens, out, ptr, 65536))
        results = []
        cands = [(r, w) for r, w in itertools.product((2, 4, 8, 16), (2, 4, 8)) if r < n]
        if n <= 32:
            cands += [(_pow2(n), 4), (_pow2(n), 8)]
        for rows, warps in cands:
            grid = triton_cdiv(n, rows)
            tp._FUSED[(n, cols)] = (grid, rows, bw, max(2, _pow2(grid)), cols <= bw, warps)
            out.fill_(-7)
            ptr.fill_(-7)
            tp.pack_fused(idx, lens, out, ptr, 65536)
            ok = torch.equal(ptr, want) and torch.equal(out[: int(want[-1])], flat)
            us = _graph_us(lambda: tp.pack_fused(idx, lens, out, ptr, 65536))
            results.append((us, rows, warps, ok))
        tp._FUSED.pop((n, cols), None)
        for us, rows, warps, ok in sorted(results)[:5]:
            print(f"rows={n:4d} ROWS={rows:3d} warps={warps} graph_us={us:6.2f} "
                  f"inplace_graph_us={base:6.2f} ok={ok}", flush=True)
        print(f"rows={n:4d} default={tp.fused_config(n, cols)}", flush=True)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def host_breakdown(n: int = 64, cols: int = 128, calls: int = 2000) -> None:
    """Host µs per call of each piece of an eager fused call (``--host``)."""
    dev = torch.device("cuda")
    idx, lens = make_inputs(n, cols, frac_negative=0.05, num_rows=65536, seed=0, device=dev)
    out = torch.empty(n * cols, dtype=torch.int32, device=dev)
    ptr = torch.empty(n + 1, dtype=torch.int32, device=dev)
    tp.pack_fused(idx, lens, out, ptr, 65536)
    tp.empty_launch(idx)
    tp.empty_launch_direct(idx)
    grid, rows, bw, maxp, one, warps = tp.fused_config(n, cols)
    ws = tp._workspace(idx)
    tensors, ints = (idx, lens, out, ptr, ws), (n, cols, cols, 65536)
    consts = (True, rows, bw, maxp, one, grid > 1)
    pieces = {
        "empty (jit)": lambda: tp.empty_launch(idx),
        "empty (direct)": lambda: tp.empty_launch_direct(idx),
        "prep": lambda: tp._prep(idx, lens, out, ptr, 65536),
        "config": lambda: tp.fused_config(n, cols),
        "workspace": lambda: tp._workspace(idx),
        "_launch (fused)": lambda: tp._launch(tp._fused_kernel, grid, warps, tensors, ints, consts),
        "pack_fused": lambda: tp.pack_fused(idx, lens, out, ptr, 65536),
        "pack_inplace": lambda: tp.pack_inplace(idx, lens, out, ptr, 65536),
    }
    for name, fn in pieces.items():
        best = min(bench.time_eager(fn, calls, dev) for _ in range(3))
        print(f"host {name:16s} {best:7.2f} us/call", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--host"]:
    host_breakdown()
elif __name__ == "__main__":
    main(tuple(int(x) for x in sys.argv[1].split(",")) if len(sys.argv) > 1 else (4, 16, 32, 64, 128, 256, 384))

