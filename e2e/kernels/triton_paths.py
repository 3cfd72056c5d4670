"""Triton packing paths: main (allocate, count, scan, compact, copy), in place, fused.

Every path applies the same filter (``reference.py`` states it) through the same jitted
helper, ``_tile``, so there is one implementation of the filtering:

- ``pack_main``: the reference's shape of work. Allocates ``counts``, ``indptr`` and a flat
  ``N * W`` scratch, runs count → scan → compact into them, then copies ``indptr`` and the
  whole scratch into the caller's (graph) buffers: 5 launches (3 kernels, 2 device copies),
  3 allocations. The copy length must be known on the host without a sync, so it is the
  scratch's ``N * W``: slots ``[indptr[N], N * W)`` of ``indices_out`` receive scratch
  contents. Nothing past ``N * W`` is written.
- ``pack_inplace`` (``build_ragged_indices_from_dense_out``): counts go into
  ``indptr_out[1:]``, the scan runs in place, compaction writes into ``indices_out``:
  3 kernels, no allocation, no copy, capturable in a CUDA graph. Nothing past
  ``indptr[N]`` is written.
- ``pack_fused``: one launch. Up to 16 rows one program does everything. Beyond, programs
  of ``ROWS`` rows take a ticket (so each waits only on programs that have started), count
  their rows, publish the total to a workspace slot, wait for every earlier slot (a
  decoupled look-back), then write their ``indptr`` slots and compact their rows from
  registers; the last program to finish zeroes the workspace, so launches and graph replays
  always start clean. This spreads the work over ``ceil(N / ROWS)`` programs instead of
  one program holding the whole tile (which spills and serialises at 384 rows), without
  the redundant re-counting of earlier rows that an earlier version did (13 µs at 384 rows
  in a graph, against 3.9 µs now; docs/explanation/kernels.md). Rows wider than ``BW`` loop over
  column chunks. Nothing past ``indptr[N]`` is written. One fused launch in flight per
  device at a time (the workspace is shared).

All three launch through ``_launch``, which calls a cached compiled-kernel runner after the
first launch of each specialisation (Triton's JIT dispatch costs several µs on the host).

Importing this module imports Triton; set ``TRITON_INTERPRET=1`` before importing it to run
the kernels on CPU tensors.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

from e2e.kernels.reference import as_rows

__all__ = [
    "pack_main",
    "pack_inplace",
    "pack_fused",
    "build_ragged_indices_from_dense_out",
    "build_ragged_indices_from_dense",
    "refresh_decode_swa_ragged",
    "empty_launch",
    "empty_launch_direct",
    "fused_config",
]

_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------- kernels


@triton.jit
def _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT: tl.constexpr, BW: tl.constexpr):
    """Load the ``[len(rows), BW]`` tile at column ``c0``; return (values, keep as int32)."""
    cols = c0 + tl.arange(0, BW)
    m = rmask[:, None] & (cols[None, :] < W) & (cols[None, :] < lens[:, None])
    offs = rows.to(tl.int64)[:, None] * stride + cols[None, :]
    v = tl.load(idx_ptr + offs, mask=m, other=-1).to(tl.int32)
    keep = m & (v >= 0)
    if HAS_LIMIT:
        keep = keep & (v < limit)
    return v, keep.to(tl.int32)


@triton.jit(do_not_specialize=["N", "limit"])
def _count_kernel(idx_ptr, len_ptr, counts_ptr, N, W, stride, limit,
                  HAS_LIMIT: tl.constexpr, COUNT_OFF: tl.constexpr,
                  ROWS: tl.constexpr, BW: tl.constexpr):
    """counts[COUNT_OFF + r] = kept entries of row r, ``ROWS`` rows per program."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < N
    lens = tl.load(len_ptr + rows, mask=rmask, other=0)
    acc = tl.zeros([ROWS, BW], dtype=tl.int32)
    for c0 in range(0, W, BW):
        _v, k = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
        acc += k
    tl.store(counts_ptr + COUNT_OFF + rows, tl.sum(acc, axis=1), mask=rmask)


@triton.jit(do_not_specialize=["N"])
def _scan_kernel(src_ptr, indptr_ptr, N, SRC_OFF: tl.constexpr, BLOCK: tl.constexpr):
    """indptr[0] = 0, indptr[1 + i] = sum(src[SRC_OFF : SRC_OFF + i + 1]); one program.

    In place when ``src_ptr + SRC_OFF == indptr_ptr + 1``: each chunk is loaded before the
    same slots are stored."""
    tl.store(indptr_ptr, 0)
    carry = tl.zeros([1], dtype=tl.int32)
    for s in range(0, N, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        m = offs < N
        c = tl.load(src_ptr + SRC_OFF + offs, mask=m, other=0).to(tl.int32)
        tl.store(indptr_ptr + 1 + offs, tl.cumsum(c, axis=0) + carry, mask=m)
        carry += tl.sum(c, axis=0)


@triton.jit(do_not_specialize=["N", "limit"])
def _compact_kernel(idx_ptr, len_ptr, indptr_ptr, out_ptr, N, W, stride, limit,
                    HAS_LIMIT: tl.constexpr, ROWS: tl.constexpr, BW: tl.constexpr):
    """out[indptr[r] + j] = the j-th kept entry of row r, ``ROWS`` rows per program."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < N
    lens = tl.load(len_ptr + rows, mask=rmask, other=0)
    run = tl.load(indptr_ptr + rows, mask=rmask, other=0)
    for c0 in range(0, W, BW):
        v, k = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
        pos = run[:, None] + tl.cumsum(k, axis=1) - k
        tl.store(out_ptr + pos, v, mask=k != 0)
        run += tl.sum(k, axis=1)


@triton.jit(do_not_specialize=["N", "limit"])
def _fused_kernel(idx_ptr, len_ptr, out_ptr, indptr_ptr, ws_ptr, N, W, stride, limit,
                  HAS_LIMIT: tl.constexpr, ROWS: tl.constexpr, BW: tl.constexpr,
                  MAXP: tl.constexpr, ONE_CHUNK: tl.constexpr, LOOKBACK: tl.constexpr):
    """Count, scan and compact in one launch; see the module docstring for the design.

    Workspace ``ws``: [0] ticket counter, [1] finished counter, [2 + b] block ``b``'s kept
    count + 1 (0: not yet published). All zero on entry; the last program to finish
    zeroes what the launch used."""
    if LOOKBACK:
        b = tl.atomic_add(ws_ptr, 1, sem="relaxed")  # logical block id, in start order
    else:
        b = tl.program_id(0)
    rows = b * ROWS + tl.arange(0, ROWS)
    rmask = rows < N
    lens = tl.load(len_ptr + rows, mask=rmask, other=0)
    if ONE_CHUNK:
        v, k = _tile(idx_ptr, rows, rmask, lens, 0, W, stride, limit, HAS_LIMIT, BW)
        cnt = tl.sum(k, axis=1)
    else:
        cacc = tl.zeros([ROWS, BW], dtype=tl.int32)
        for c0 in range(0, W, BW):
            _v, kc = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
            cacc += kc
        cnt = tl.sum(cacc, axis=1)
    incl = tl.cumsum(cnt, axis=0)
    prefix = tl.sum(cnt, axis=0) * 0
    if LOOKBACK:
        # publish this block's total, then wait for every earlier block's total.
        tl.atomic_xchg(ws_ptr + 2 + b, tl.sum(cnt, axis=0) + 1, sem="relaxed")
        offs = tl.arange(0, MAXP)
        before = offs < b
        flags = tl.load(ws_ptr + 2 + offs, mask=before, other=1, volatile=True)
        while tl.min(flags, axis=0) == 0:
            flags = tl.load(ws_ptr + 2 + offs, mask=before, other=1, volatile=True)
        prefix = tl.sum(tl.where(before, flags - 1, 0), axis=0)
        nprog = tl.num_programs(0)
        done = tl.atomic_add(ws_ptr + 1, 1)  # the last program to finish resets the workspace
        last = (tl.zeros([MAXP], dtype=tl.int32) + done) == nprog - 1
        tl.store(ws_ptr + 2 + offs, 0, mask=(offs < nprog) & last)
        tl.store(ws_ptr + offs, 0, mask=(offs < 2) & last)
    incl = incl + prefix
    tl.store(indptr_ptr + 1 + rows, incl, mask=rmask)
    tl.store(indptr_ptr + tl.arange(0, 1), 0, mask=(tl.arange(0, 1) + b) == 0)
    if ONE_CHUNK:
        pos = (incl - cnt)[:, None] + tl.cumsum(k, axis=1) - k
        tl.store(out_ptr + pos, v, mask=k != 0)
    else:
        run = incl - cnt
        for c0 in range(0, W, BW):
            v, k = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
            pos = run[:, None] + tl.cumsum(k, axis=1) - k
            tl.store(out_ptr + pos, v, mask=k != 0)
            run += tl.sum(k, axis=1)


@triton.jit
def _empty_kernel(x_ptr):
    """Does nothing: its launch is the floor every eager path pays at least once."""
    pass


# --------------------------------------------------------------------------- launching

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_DIRECT = not _INTERPRET and os.environ.get("E2E_TRITON_DIRECT_LAUNCH", "1") != "0"
_RUNNERS: dict[tuple, Any] = {}


def _launch(kernel, grid: int, warps: int, tensors: tuple, ints: tuple, consts: tuple) -> None:
    """``kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)``, the kernel's
    parameters being in that order (``ints``: ``N, W, stride, limit`` or a prefix of them).

    Direct launch: Triton's JIT dispatch (argument binding, specialisation key, option
    knobs) costs several µs per launch on the host. The first launch of each
    specialisation goes through it and keeps the compiled kernel's runner; later launches
    call that runner. The key holds everything the compiled code depends on: the kernel,
    grid, warps, constexpr values, device, the input dtypes (outputs are int32, checked by
    ``_prep``), Triton's specialisation of ``W`` and ``stride`` (== 1, divisible by 16;
    ``N`` and ``limit`` are ``do_not_specialize``, and every int is below 2**31), and
    pointer alignment: only launches whose pointers are all 16-byte aligned (every
    tensor torch allocates) use a runner; others always go through the JIT. Off under
    the interpreter and with ``E2E_TRITON_DIRECT_LAUNCH=0``."""
    if _DIRECT:
        ptrs = 0
        for t in tensors:
            ptrs |= t.data_ptr()
        if ptrs & 15 == 0:
            t0 = tensors[0]
            if len(ints) > 2:
                w, st = ints[1], ints[2]
                spec = (w == 1, w & 15 == 0, st == 1, st & 15 == 0)
            else:
                spec = None
            key = (kernel, grid, warps, consts, t0.get_device(), t0.dtype,
                   tensors[1].dtype if len(tensors) > 1 else None, spec)
            runner = _RUNNERS.get(key)
            if runner is not None:
                runner(*tensors, *ints, *consts)
                return
            compiled = kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)
            if compiled is not None:
                _RUNNERS[key] = compiled[(grid, 1, 1)]
            return
    kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)


# --------------------------------------------------------------------------- launch configs

_STAGED: dict[tuple[int, int], tuple[int, int, int, int]] = {}
_FUSED: dict[tuple[int, int], tuple[int, int, int, int, bool, int]] = {}
_SCAN_BLOCK = 1024
_MAX_BLOCKS = 1024  # fused programs per launch (workspace slots)
_WORKSPACE: dict[int, torch.Tensor] = {}


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def _staged_config(n: int, w: int) -> tuple[int, int, int, int]:
    """(grid, ROWS, BW, num_warps) for the count and compact kernels."""
    cfg = _STAGED.get((n, w))
    if cfg is None:
        bw = min(max(_pow2(w), 16), 128)
        rows = min(max(_pow2(n), 1), max(1, 2048 // bw))
        cfg = (max(1, triton.cdiv(n, rows)), rows, bw, 4)
        _STAGED[(n, w)] = cfg
    return cfg


def fused_config(n: int, w: int) -> tuple[int, int, int, int, bool, int]:
    """(grid, ROWS, BW, MAXP, ONE_CHUNK, num_warps) for the fused kernel at ``N x W``.

    Up to 16 rows: one program owns them all (no look-back). More: 4 rows per program
    (more if that would exceed ``_MAX_BLOCKS`` programs) chained by a decoupled look-back.
    Chosen with ``python -m e2e.kernels.tune`` on an H200 (docs/explanation/kernels.md)."""
    cfg = _FUSED.get((n, w))
    if cfg is None:
        bw = min(max(_pow2(w), 16), 128)
        if n <= 16:
            rows, warps = max(_pow2(n), 1), (4 if n <= 8 else 8)
        else:
            rows, warps = max(4, _pow2(triton.cdiv(n, _MAX_BLOCKS))), 4
        grid = max(1, triton.cdiv(n, rows))
        cfg = (grid, rows, bw, max(2, _pow2(grid)), w <= bw, warps)
        _FUSED[(n, w)] = cfg
    return cfg


def _workspace(like: torch.Tensor) -> torch.Tensor:
    """The fused kernel's look-back workspace on ``like``'s device: zeros, allocated once,
    left zeroed by every launch. Make the first multi-program call before any graph
    capture. One fused launch in flight per device at a time (calls on one stream are)."""
    ws = _WORKSPACE.get(like.get_device())
    if ws is None:
        device = like.device
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("pack_fused: call it once outside CUDA-graph capture first "
                               "(its workspace is allocated on first use)")
        ws = _WORKSPACE[like.get_device()] = torch.zeros(2 + _MAX_BLOCKS, dtype=torch.int32, device=device)
    return ws


def _prep(indices: torch.Tensor, lengths: torch.Tensor, indices_out: torch.Tensor,
          indptr_out: torch.Tensor, num_rows):
    """Normalise and check one call's arguments; return
    ``(indices [N, W] with unit column stride, lengths [N] contiguous, ints, has_limit)``
    with ``ints = (N, W, row stride, limit)``."""
    if indices.dim() != 2:
        indices = as_rows(indices)
    n, w = indices.shape
    s0, s1 = indices.stride()
    if s1 != 1 and w > 1:
        indices = indices.contiguous()
        s0 = w
    if lengths.dim() != 1 or (n > 1 and lengths.stride(0) != 1):
        lengths = lengths.reshape(-1).contiguous()
    if lengths.shape[0] != n:
        raise ValueError(f"expected one length per row: {lengths.shape[0]} lengths for {n} rows")
    if indptr_out.numel() <= n:
        raise ValueError(f"indptr_out holds {indptr_out.numel()} entries, needs {n + 1}")
    if indices_out.dtype is not torch.int32 or indptr_out.dtype is not torch.int32:
        raise TypeError("indices_out and indptr_out must be int32")
    if (s0 + w) * n >= _INT32_MAX:
        raise ValueError("indices must span fewer than 2**31 elements")
    if num_rows is None or num_rows > _INT32_MAX:
        return indices, lengths, (n, w, s0, 0), False
    return indices, lengths, (n, w, s0, max(int(num_rows), -1)), True


# --------------------------------------------------------------------------- paths


def pack_inplace(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """In-place path: count into ``indptr_out[1:]``, scan in place, compact into
    ``indices_out``. 3 kernels, no allocation, no copy; CUDA-graph capturable."""
    indices, lengths, ints, has_limit = _prep(indices, lengths, indices_out, indptr_out, num_rows)
    n = ints[0]
    grid, rows, bw, warps = _staged_config(n, ints[1])
    _launch(_count_kernel, grid, warps, (indices, lengths, indptr_out), ints, (has_limit, 1, rows, bw))
    _launch(_scan_kernel, 1, 4, (indptr_out, indptr_out), (n,), (1, _SCAN_BLOCK))
    _launch(_compact_kernel, grid, warps, (indices, lengths, indptr_out, indices_out), ints, (has_limit, rows, bw))


def pack_main(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """Main path, as the reference builds it: 3 allocations (counts, indptr, flat scratch),
    count → scan → compact into them, then 2 device copies into the caller's buffers."""
    indices, lengths, ints, has_limit = _prep(indices, lengths, indices_out, indptr_out, num_rows)
    n, w = ints[0], ints[1]
    if indices_out.numel() < n * w:
        raise ValueError(f"indices_out holds {indices_out.numel()} entries, the main path copies {n * w}")
    grid, rows, bw, warps = _staged_config(n, w)
    dev = indices.device
    counts = torch.empty(n, dtype=torch.int32, device=dev)
    indptr = torch.empty(n + 1, dtype=torch.int32, device=dev)
    flat = torch.empty(n * w, dtype=torch.int32, device=dev)
    _launch(_count_kernel, grid, warps, (indices, lengths, counts), ints, (has_limit, 0, rows, bw))
    _launch(_scan_kernel, 1, 4, (counts, indptr), (n,), (0, _SCAN_BLOCK))
    _launch(_compact_kernel, grid, warps, (indices, lengths, indptr, flat), ints, (has_limit, rows, bw))
    indptr_out[: n + 1].copy_(indptr)
    indices_out[: n * w].copy_(flat)


def pack_fused(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """Fused path: one launch of ``ceil(N / ROWS)`` programs chained by a decoupled
    look-back; writes ``indptr_out[:N + 1]`` and ``indices_out[:indptr[N]]`` only."""
    indices, lengths, ints, has_limit = _prep(indices, lengths, indices_out, indptr_out, num_rows)
    grid, rows, bw, maxp, one, warps = fused_config(ints[0], ints[1])
    ws = _workspace(indices) if grid > 1 else indptr_out
    _launch(_fused_kernel, grid, warps, (indices, lengths, indices_out, indptr_out, ws),
            ints, (has_limit, rows, bw, maxp, one, grid > 1))


def empty_launch(x: torch.Tensor) -> None:
    """Launch a kernel that does nothing through Triton's ordinary JIT dispatch: the floor
    every eager path pays at least once."""
    _empty_kernel[(1,)](x)


def empty_launch_direct(x: torch.Tensor) -> None:
    """The same empty kernel through ``_launch``'s direct runner (the paths' launch cost)."""
    _launch(_empty_kernel, 1, 4, (x,), (), ())


build_ragged_indices_from_dense_out = pack_inplace


def build_ragged_indices_from_dense(indices, lengths, num_rows=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocating wrapper over the in-place path: returns ``(flat, indptr)`` where ``flat``
    has capacity ``N * W`` and its first ``indptr[N]`` entries are the packing (the count
    stays on the device; slice after reading it if an exact-size tensor is needed)."""
    rows = as_rows(indices)
    n, w = rows.shape
    flat = torch.empty(n * w, dtype=torch.int32, device=rows.device)
    indptr = torch.empty(n + 1, dtype=torch.int32, device=rows.device)
    pack_inplace(rows, lengths, flat, indptr, num_rows)
    return flat, indptr


def refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, num_rows=None, *,
                              path: str = "inplace") -> None:
    """Rebuild a draft step's ragged buffers in place from updated dense ``indices`` and
    ``lengths``. Record it once in a CUDA graph over static input tensors; refill those
    tensors (``copy_``) before each replay and the buffers follow. ``path`` is ``"inplace"``
    (the reference change's 3 kernels) or ``"fused"`` (one launch)."""
    if path == "inplace":
        pack_inplace(indices, lengths, indices_out, indptr_out, num_rows)
    elif path == "fused":
        pack_fused(indices, lengths, indices_out, indptr_out, num_rows)
    else:
        raise ValueError(f"refresh path must be 'inplace' or 'fused', not {path!r}")
