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
- ``pack_fused``: one launch. Program ``p`` owns ``ROWS`` rows; it first counts the kept
  entries of every earlier row (a redundant, read-only prefix pass over at most ``N * W``
  values, which sit in L2), then packs its own rows. No inter-program communication, no
  workspace, no atomics, so it is deterministic and graph-safe, and the work is spread over
  ``ceil(N / ROWS)`` programs instead of one program holding the whole tile (which spills
  and serialises at 384 rows). Rows wider than ``BW`` are handled by looping over column
  chunks. Nothing past ``indptr[N]`` is written.

Importing this module imports Triton; set ``TRITON_INTERPRET=1`` before importing it to run
the kernels on CPU tensors.
"""

from __future__ import annotations

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


@triton.jit
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


@triton.jit
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


@triton.jit
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


@triton.jit
def _fused_kernel(idx_ptr, len_ptr, out_ptr, indptr_ptr, N, W, stride, limit,
                  HAS_LIMIT: tl.constexpr, ROWS: tl.constexpr, BW: tl.constexpr,
                  PRE_ROWS: tl.constexpr, ONE_CHUNK: tl.constexpr):
    """Count, scan and compact in one launch; see the module docstring for the design."""
    pid = tl.program_id(0)
    row0 = pid * ROWS
    # 1. prefix: kept entries of rows [0, row0), counted redundantly by this program.
    acc = tl.zeros([PRE_ROWS, BW], dtype=tl.int32)
    for p0 in range(0, row0, PRE_ROWS):
        prow = p0 + tl.arange(0, PRE_ROWS)
        pmask = prow < row0
        plens = tl.load(len_ptr + prow, mask=pmask, other=0)
        for c0 in range(0, W, BW):
            _pv, pk = _tile(idx_ptr, prow, pmask, plens, c0, W, stride, limit, HAS_LIMIT, BW)
            acc += pk
    prefix = tl.sum(tl.sum(acc, axis=1), axis=0)
    # 2. this program's rows.
    rows = row0 + tl.arange(0, ROWS)
    rmask = rows < N
    lens = tl.load(len_ptr + rows, mask=rmask, other=0)
    if ONE_CHUNK:
        v, k = _tile(idx_ptr, rows, rmask, lens, 0, W, stride, limit, HAS_LIMIT, BW)
        cnt = tl.sum(k, axis=1)
        incl = tl.cumsum(cnt, axis=0) + prefix
        tl.store(indptr_ptr + 1 + rows, incl, mask=rmask)
        pos = (incl - cnt)[:, None] + tl.cumsum(k, axis=1) - k
        tl.store(out_ptr + pos, v, mask=k != 0)
    else:
        cacc = tl.zeros([ROWS, BW], dtype=tl.int32)
        for c0 in range(0, W, BW):
            _v, k = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
            cacc += k
        cnt = tl.sum(cacc, axis=1)
        incl = tl.cumsum(cnt, axis=0) + prefix
        tl.store(indptr_ptr + 1 + rows, incl, mask=rmask)
        run = incl - cnt
        for c0 in range(0, W, BW):
            v, k = _tile(idx_ptr, rows, rmask, lens, c0, W, stride, limit, HAS_LIMIT, BW)
            pos = run[:, None] + tl.cumsum(k, axis=1) - k
            tl.store(out_ptr + pos, v, mask=k != 0)
            run += tl.sum(k, axis=1)
    if pid == 0:
        tl.store(indptr_ptr, 0)


@triton.jit
def _empty_kernel(x_ptr):
    """Does nothing: its launch is the floor every eager path pays at least once."""
    pass


# --------------------------------------------------------------------------- launch configs

_STAGED: dict[tuple[int, int], tuple[int, int, int, int]] = {}
_FUSED: dict[tuple[int, int], tuple[int, int, int, int, bool, int]] = {}
_SCAN_BLOCK = 1024


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
    """(grid, ROWS, BW, PRE_ROWS, ONE_CHUNK, num_warps) for the fused kernel at ``N x W``.

    Few rows: one program owns them all. More rows: ``ROWS`` rows per program, and the
    redundant prefix pass reads ``PRE_ROWS x BW`` values per step with 8 warps."""
    cfg = _FUSED.get((n, w))
    if cfg is None:
        bw = min(max(_pow2(w), 16), 128)
        if n <= 16:
            rows, pre, warps = max(_pow2(n), 1), 16, 4
        else:
            rows, pre, warps = 16, max(16, 8192 // bw), 8
        cfg = (max(1, triton.cdiv(n, rows)), rows, bw, pre, w <= bw, warps)
        _FUSED[(n, w)] = cfg
    return cfg


def _prep(indices: torch.Tensor, lengths: torch.Tensor, indptr_out: torch.Tensor, num_rows):
    if indices.dim() != 2:
        indices = as_rows(indices)
    if indices.shape[1] > 1 and indices.stride(1) != 1:
        indices = indices.contiguous()
    if lengths.dim() != 1 or not lengths.is_contiguous():
        lengths = lengths.reshape(-1).contiguous()
    n = indices.shape[0]
    if lengths.shape[0] != n:
        raise ValueError(f"expected one length per row: {lengths.shape[0]} lengths for {n} rows")
    if indptr_out.numel() < n + 1:
        raise ValueError(f"indptr_out holds {indptr_out.numel()} entries, needs {n + 1}")
    if num_rows is None or num_rows > _INT32_MAX:
        has_limit, limit = False, 0
    else:
        has_limit, limit = True, max(int(num_rows), -1)
    return indices, lengths, n, indices.shape[1], has_limit, limit


# --------------------------------------------------------------------------- paths


def pack_inplace(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """In-place path: count into ``indptr_out[1:]``, scan in place, compact into
    ``indices_out``. 3 kernels, no allocation, no copy; CUDA-graph capturable."""
    indices, lengths, n, w, has_limit, limit = _prep(indices, lengths, indptr_out, num_rows)
    grid, rows, bw, warps = _staged_config(n, w)
    stride = indices.stride(0)
    _count_kernel[(grid,)](indices, lengths, indptr_out, n, w, stride, limit,
                           HAS_LIMIT=has_limit, COUNT_OFF=1, ROWS=rows, BW=bw, num_warps=warps)
    _scan_kernel[(1,)](indptr_out, indptr_out, n, SRC_OFF=1, BLOCK=_SCAN_BLOCK, num_warps=4)
    _compact_kernel[(grid,)](indices, lengths, indptr_out, indices_out, n, w, stride, limit,
                             HAS_LIMIT=has_limit, ROWS=rows, BW=bw, num_warps=warps)


def pack_main(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """Main path, as the reference builds it: 3 allocations (counts, indptr, flat scratch),
    count → scan → compact into them, then 2 device copies into the caller's buffers."""
    indices, lengths, n, w, has_limit, limit = _prep(indices, lengths, indptr_out, num_rows)
    if indices_out.numel() < n * w:
        raise ValueError(f"indices_out holds {indices_out.numel()} entries, the main path copies {n * w}")
    grid, rows, bw, warps = _staged_config(n, w)
    stride = indices.stride(0)
    dev = indices.device
    counts = torch.empty(n, dtype=torch.int32, device=dev)
    indptr = torch.empty(n + 1, dtype=torch.int32, device=dev)
    flat = torch.empty(n * w, dtype=torch.int32, device=dev)
    _count_kernel[(grid,)](indices, lengths, counts, n, w, stride, limit,
                           HAS_LIMIT=has_limit, COUNT_OFF=0, ROWS=rows, BW=bw, num_warps=warps)
    _scan_kernel[(1,)](counts, indptr, n, SRC_OFF=0, BLOCK=_SCAN_BLOCK, num_warps=4)
    _compact_kernel[(grid,)](indices, lengths, indptr, flat, n, w, stride, limit,
                             HAS_LIMIT=has_limit, ROWS=rows, BW=bw, num_warps=warps)
    indptr_out[: n + 1].copy_(indptr)
    indices_out[: n * w].copy_(flat)


def pack_fused(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """Fused path: one launch, ``ceil(N / ROWS)`` programs, each with a redundant prefix
    count; writes ``indptr_out[:N + 1]`` and ``indices_out[:indptr[N]]`` only."""
    indices, lengths, n, w, has_limit, limit = _prep(indices, lengths, indptr_out, num_rows)
    grid, rows, bw, pre, one, warps = fused_config(n, w)
    _fused_kernel[(grid,)](indices, lengths, indices_out, indptr_out, n, w, indices.stride(0), limit,
                           HAS_LIMIT=has_limit, ROWS=rows, BW=bw, PRE_ROWS=pre, ONE_CHUNK=one,
                           num_warps=warps)


def empty_launch(x: torch.Tensor) -> None:
    """Launch a kernel that does nothing (the eager floor, timed beside the paths)."""
    _empty_kernel[(1,)](x)


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
