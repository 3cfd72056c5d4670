"""Pick the fused kernel's launch config on a GPU: ``python -m e2e.kernels.tune``.

For each row count, times every candidate ``(ROWS, PRE_ROWS, num_warps)`` inside a CUDA
graph (device µs per call, median of 3) beside the in-place path, checks each against the
torch reference, and prints one line per (rows, config), best first per shape. The winners
are written into ``triton_paths.fused_config`` by hand, with the table in docs/kernels.md.
"""

from __future__ import annotations

import itertools
import statistics
import sys

import torch

from e2e.kernels import bench, reference_ragged
from e2e.kernels import triton_paths as tp
from e2e.micro import make_inputs


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
        cands = [(r, p, w) for r, p, w in itertools.product((4, 8, 16, 32), (32, 64, 128), (4, 8)) if r < n]
        if n <= 64:
            cands += [(n, 16, 4), (n, 16, 8)]
        for rows, pre, warps in cands:
            tp._FUSED[(n, cols)] = (triton_cdiv(n, rows), rows, bw, pre, cols <= bw, warps)
            out.fill_(-7)
            ptr.fill_(-7)
            tp.pack_fused(idx, lens, out, ptr, 65536)
            ok = torch.equal(ptr, want) and torch.equal(out[: int(want[-1])], flat)
            us = _graph_us(lambda: tp.pack_fused(idx, lens, out, ptr, 65536))
            results.append((us, rows, pre, warps, ok))
        tp._FUSED.pop((n, cols), None)
        for us, rows, pre, warps, ok in sorted(results)[:6]:
            print(f"rows={n:4d} ROWS={rows:3d} PRE={pre:4d} warps={warps} graph_us={us:6.2f} "
                  f"inplace_graph_us={base:6.2f} ok={ok}", flush=True)
        print(f"rows={n:4d} default={tp.fused_config(n, cols)}", flush=True)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


if __name__ == "__main__":
    main(tuple(int(x) for x in sys.argv[1].split(",")) if len(sys.argv) > 1 else (16, 32, 64, 128, 256, 384))
