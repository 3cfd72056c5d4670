"""The one-launch decode SWA metadata build (``swa_decode_meta``): e2e's own Triton kernel.

vLLM 0.32's DeepSeek-V4/V4.1 ROCm SWA builder, for a decode batch, launches: ``torch.ge``
(``is_valid_token``), a fill (``decode_swa_lens[N:] = 0``), the token → request map, the
window kernel (``_compute_swa_indices_and_lens_kernel``, or
``ComputeDSparkNoncausalSWAIndicesKernel`` for the DSpark draft block), then
``build_ragged_indices_from_dense`` (count, cumsum, compact into 3 fresh tensors) and
``_copy_ragged_to_graph_buffers`` (2 device copies): 8 kernels, 2 copies and 4 allocations per
build on the H200. ``swa_decode_meta`` does all of it in one launch:

- ``is_valid_token[:S] = slot_mapping >= 0`` (``S = slot_mapping.numel()``);
- ``token_to_req[:N]``: the request each token belongs to (0 past the mapped tokens);
- the dense window indices ``indices[t, :width]`` (−1 past the length and on invalid
  tokens) and ``lens[t]``, exactly as the wheel's window kernels write them: causal
  ``[max(pos − window + 1, 0, replay_start[req]), pos]``, or the DSpark block's
  ``[max(prefix − window, 0), seq_len)``;
- ``lens[N:lens_len] = 0``;
- the ragged packing of those rows straight into the graph buffers
  (``ragged_out[:indptr[N]]``, ``indptr_out[:N + 1]``), with the same filter as
  ``build_ragged_indices_from_dense`` (column < length, value ≥ 0).

Design: one program per row, and no program waits on another. A row's kept count needs no
tile read: it is its span ``min(length, width)`` less the positions that fall in blocks
with a negative number, so every program derives every row's count from the lengths and a
``rows x blocks`` slice of the block table, takes its own offset as the sum of the counts
before it, and writes its row (dense and ragged; a row with a negative block ranks its
entries with a scan). A single program holding the whole tile was measured first: 7.5 µs
at 32 rows in a CUDA graph (0.52x main), against 2.4-3.0 µs for this design
(docs/explanation/kernels.md).

It covers decode batches of up to ``MAX_ROWS`` (32) tokens and rows up to ``MAX_WIDTH``
(256) wide; ``covers(n, width)`` says whether a batch is covered. Other batches take the
in-place path (the caller's fallback).

``swa_decode_meta_reference`` is the same in plain torch (any device); ``cpu_window_and_pack``
is inject mode's CPU analogue (window indices and packing in one pass over the batch).
"""

from __future__ import annotations

import torch

from e2e.kernels.reference import keep_mask

__all__ = ["MAX_ROWS", "MAX_WIDTH", "covers", "swa_decode_meta", "swa_decode_meta_reference",
           "cpu_window_and_pack"]

MAX_ROWS = 32
MAX_WIDTH = 256
_FILL_BLOCK = 1024
_REQ_BLOCK = 32

_KERNEL = None


def covers(num_tokens: int, width: int) -> bool:
    """True when one ``swa_decode_meta`` launch builds a decode batch of ``num_tokens`` rows
    ``width`` wide."""
    return 0 < num_tokens <= MAX_ROWS and 0 < width <= MAX_WIDTH


def _kernel():
    """The jitted kernel, defined on first use (imports Triton; ``TRITON_INTERPRET`` is set
    the way ``e2e.kernels.load_triton_paths`` sets it)."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    from e2e.kernels import load_triton_paths

    load_triton_paths()  # sets TRITON_INTERPRET=1 where there is no GPU, imports Triton
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["N", "S", "num_reqs", "lens_len", "idx_stride", "bt_stride"])
    def swa_decode_meta_kernel(
            slot_ptr, valid_ptr, qsl_ptr, seq_ptr, bt_ptr, replay_ptr, t2r_ptr,
            idx_ptr, lens_ptr, ragged_ptr, indptr_ptr,
            N, S, num_reqs, lens_len, idx_stride, bt_stride, window, width, block_size,
            NONCAUSAL: tl.constexpr, HAS_REPLAY: tl.constexpr, ROWS: tl.constexpr,
            BW: tl.constexpr, NB: tl.constexpr, RB: tl.constexpr, FB: tl.constexpr):
        me = tl.program_id(0)  # this program's token (row)
        # is_valid_token = slot_mapping >= 0 and lens[N:] = 0, strided over the programs
        for s0 in range(me * FB, S, N * FB):
            offs = s0 + tl.arange(0, FB)
            m = offs < S
            sl = tl.load(slot_ptr + offs, mask=m, other=-1)
            tl.store(valid_ptr + offs, sl >= 0, mask=m)
        for z0 in range(N + me * FB, lens_len, N * FB):
            offs = z0 + tl.arange(0, FB)
            tl.store(lens_ptr + offs, tl.zeros([FB], dtype=tl.int32), mask=offs < lens_len)
        # every row's window, from the batch's lengths (no tile reads)
        t = tl.arange(0, ROWS)
        tm = t < N
        valid = (tl.load(slot_ptr + t, mask=tm, other=-1) >= 0) & tm
        req = tl.zeros([ROWS], dtype=tl.int32)
        for r0 in range(0, num_reqs, RB):
            r = r0 + tl.arange(0, RB)
            ends = tl.load(qsl_ptr + 1 + r, mask=r < num_reqs, other=0x7FFFFFFF)
            req += tl.sum((ends[None, :] <= t[:, None]).to(tl.int32), axis=1)
        req = tl.minimum(req, num_reqs - 1)
        qs = tl.load(qsl_ptr + req, mask=tm, other=0)
        qe = tl.load(qsl_ptr + req + 1, mask=tm, other=0)
        seq = tl.load(seq_ptr + req, mask=tm, other=0)
        prefix_len = seq - (qe - qs)
        if NONCAUSAL:
            start = tl.maximum(prefix_len - window, 0)
            end = seq
        else:
            pos = prefix_len + t - qs
            start = tl.maximum(pos - (window - 1), 0)
            if HAS_REPLAY:
                start = tl.maximum(start, tl.load(replay_ptr + req, mask=tm, other=0))
            end = pos + 1
        length = tl.where(valid, end - start, 0)
        span = tl.maximum(tl.minimum(length, width), 0)  # the columns the packing may keep
        # each row's kept count: its span less the positions in blocks with a negative number
        j = (start // block_size)[:, None] + tl.arange(0, NB)[None, :]
        lo = tl.maximum(j * block_size, start[:, None])
        hi = tl.minimum((j + 1) * block_size, (start + span)[:, None])
        overlap = tl.maximum(hi - lo, 0)
        blocks = tl.load(bt_ptr + req.to(tl.int64)[:, None] * bt_stride + j,
                         mask=overlap > 0, other=0)
        cnt = tl.sum(tl.where(blocks >= 0, overlap, 0), axis=1)
        mine = t == me
        before = tl.sum(tl.where(t < me, cnt, 0), axis=0)
        my_cnt = tl.sum(tl.where(mine, cnt, 0), axis=0)
        my_start = tl.sum(tl.where(mine, start, 0), axis=0)
        my_span = tl.sum(tl.where(mine, span, 0), axis=0)
        my_req = tl.sum(tl.where(mine, req, 0), axis=0)
        tl.store(lens_ptr + t, length, mask=mine)
        mapped = tl.load(qsl_ptr + num_reqs)
        tl.store(t2r_ptr + t, tl.where(t < mapped, req, 0), mask=mine)
        tl.store(indptr_ptr + 1 + t, before + cnt, mask=mine)
        tl.store(indptr_ptr + tl.arange(0, 1), tl.zeros([1], dtype=tl.int32),
                 mask=(tl.arange(0, 1) + me) == 0)
        # this row: dense window indices, then its ragged entries at offset `before`
        c = tl.arange(0, BW)
        p = my_start + c
        inwin = c < my_span
        blk = tl.load(bt_ptr + my_req.to(tl.int64) * bt_stride + p // block_size, mask=inwin,
                      other=0)
        v = tl.where(inwin, blk * block_size + p % block_size, -1)
        tl.store(idx_ptr + me.to(tl.int64) * idx_stride + c, v, mask=c < width)
        keep = (inwin & (v >= 0)).to(tl.int32)
        if my_cnt == my_span:
            at = before + c
        else:
            at = before + tl.cumsum(keep, axis=0) - keep
        tl.store(ragged_ptr + at, v, mask=keep != 0)

    _KERNEL = swa_decode_meta_kernel
    return _KERNEL


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


# --------------------------------------------------------------------------- the launch
#
# The build is called eagerly on the host every decode step (8 builds a step at TP 4), so
# its host cost is the launch's: Triton's JIT dispatch binds and specialises 20 runtime
# arguments and 7 constexprs per call, and its launcher turns each of the 11 tensors into a
# device pointer by calling ``data_ptr()`` and asking the driver about it. The first launch
# of each specialisation goes through the JIT and keeps the compiled kernel's runner; later
# launches call that runner with the tensors' pointers as plain integers (which the launcher
# takes as they are). ``e2e micro`` prints the host cost beside an empty launch.

_SHAPES: dict[tuple[int, int, int], "_Shape"] = {}  # (N, width, block_size) -> its launches
_DIRECT: bool | None = None  # direct launches on (decided when the kernel is first made)


class _Shape:
    """One covered batch shape: its constexprs and the compiled runners launched for it,
    keyed by what else the compiled code depends on (see ``_launch``)."""

    __slots__ = ("rows", "bw", "nb", "runners")

    def __init__(self, num_tokens: int, width: int, block_size: int) -> None:
        if not covers(num_tokens, width):
            raise ValueError(f"swa_decode_meta covers 1..{MAX_ROWS} rows up to {MAX_WIDTH} "
                             f"wide, not {num_tokens} x {width}")
        if block_size < 1:
            raise ValueError(f"block_size must be positive, not {block_size}")
        self.rows = _pow2(num_tokens)
        self.bw = max(_pow2(width), 16)
        self.nb = _pow2(-(-width // block_size) + 1)
        self.runners: dict[tuple, object] = {}


def _shape(num_tokens: int, width: int, block_size: int) -> _Shape:
    """The cached ``_Shape``; ValueError for a batch ``covers`` rejects."""
    shape = _SHAPES[(num_tokens, width, block_size)] = _Shape(num_tokens, width, block_size)
    return shape


def _direct() -> bool:
    global _DIRECT
    if _DIRECT is None:
        import os

        _kernel()
        _DIRECT = (os.environ.get("TRITON_INTERPRET") != "1"
                   and os.environ.get("E2E_TRITON_DIRECT_LAUNCH", "1") != "0")
    return _DIRECT


def _launch(shape: _Shape, grid: int, warps: int, tensors: tuple, ints: tuple, consts: tuple,
            direct: bool = True) -> None:
    """``kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)``, through a cached
    runner where that is safe. ``shape`` fixes grid and the shape constexprs; the runner's key
    holds the rest the compiled code depends on: the two flag constexprs, warps, every
    tensor's dtype, the device, and the values of the three ints Triton specialises
    (``window``, ``width``, ``block_size``; the other six are ``do_not_specialize``). Only
    launches whose pointers are all 16-byte aligned and whose ints all fit in 31 bits use a
    runner (Triton specialises on both); the rest go through the JIT every time."""
    kernel = _KERNEL or _kernel()
    if direct and (_DIRECT if _DIRECT is not None else _direct()):
        ptrs = [t.data_ptr() for t in tensors]
        bits = 0
        for ptr in ptrs:
            bits |= ptr
        n, s, r, lens_len, idx_stride, bt_stride, window, width, block = ints
        if bits & 15 == 0 and (n | s | r | lens_len | idx_stride | bt_stride | window | block) >> 31 == 0:
            key = (consts[0], consts[1], warps, window, block, tensors[0].get_device(),
                   tuple([t.dtype for t in tensors]))
            runner = shape.runners.get(key)
            if runner is not None:
                runner(*ptrs, *ints, *consts)
                return
            compiled = kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)
            if compiled is not None and hasattr(compiled, "__getitem__"):
                shape.runners[key] = compiled[(grid, 1, 1)]
            return
    kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)


def swa_decode_meta(*, slot_mapping: torch.Tensor, is_valid_token: torch.Tensor,
                    query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                    block_table: torch.Tensor, replay_start: torch.Tensor | None,
                    token_to_req: torch.Tensor, indices_out: torch.Tensor,
                    lens_out: torch.Tensor, ragged_out: torch.Tensor, indptr_out: torch.Tensor,
                    num_tokens: int, window: int, block_size: int, noncausal: bool,
                    warps: int | None = None, direct: bool = True) -> None:
    """One launch: see the module docstring. ``indices_out`` is the builder's dense buffer
    (``[T, 1, width]`` or ``[T, width]``, rows of unit column stride); ``lens_out`` the whole
    lengths buffer (zeroed past ``num_tokens``); ``ragged_out`` / ``indptr_out`` the graph
    buffers. Nothing is allocated; the kept count stays on the device (``indptr_out[N]``).
    Raises ValueError for a batch ``covers`` rejects. ``direct=False`` launches through
    Triton's JIT dispatch every time (what ``e2e micro`` compares the cached runner with)."""
    width = indices_out.shape[-1]
    shape = _SHAPES.get((num_tokens, width, block_size)) or _shape(num_tokens, width,
                                                                   block_size)
    if indices_out.stride(-1) != 1 or block_table.stride(-1) != 1:
        raise ValueError("indices_out and block_table need unit column stride")
    has_replay = replay_start is not None
    _launch(shape, num_tokens, warps or 4,
            (slot_mapping, is_valid_token, query_start_loc, seq_lens, block_table,
             replay_start if has_replay else seq_lens, token_to_req, indices_out, lens_out,
             ragged_out, indptr_out),
            (num_tokens, slot_mapping.numel(), query_start_loc.numel() - 1, lens_out.numel(),
             indices_out.stride(0), block_table.stride(0), window, width, block_size),
            (bool(noncausal), has_replay, shape.rows, shape.bw, shape.nb, _REQ_BLOCK,
             _FILL_BLOCK), direct)


def swa_decode_meta_reference(*, slot_mapping, query_start_loc, seq_lens, block_table,
                              replay_start, num_tokens: int, window: int, width: int,
                              block_size: int, noncausal: bool):
    """The same outputs in plain torch: ``(is_valid_token [S], token_to_req [N], indices
    [N, width], lens [N], ragged [indptr[N]], indptr [N + 1])``. Method: per-token
    arithmetic with broadcast compares, gather from the block table, masked select."""
    dev = slot_mapping.device
    n = num_tokens
    valid_all = slot_mapping >= 0
    t = torch.arange(n, device=dev)
    qsl = query_start_loc.to(torch.int64)
    num_reqs = qsl.numel() - 1
    req = (qsl[1:][None, :] <= t[:, None]).sum(dim=1).clamp(max=num_reqs - 1)
    t2r = torch.where(t < qsl[num_reqs], req, 0).to(torch.int32)
    valid = valid_all[:n]
    qs, qe = qsl[req], qsl[req + 1]
    seq = seq_lens.to(torch.int64)[req]
    prefix = seq - (qe - qs)
    if noncausal:
        start = (prefix - window).clamp(min=0)
        end = seq
    else:
        pos = prefix + t - qs
        start = (pos - (window - 1)).clamp(min=0)
        if replay_start is not None:
            start = torch.maximum(start, replay_start.to(torch.int64)[req])
        end = pos + 1
    lens = torch.where(valid, end - start, 0)
    c = torch.arange(width, device=dev)
    p = start[:, None] + c[None, :]
    inwin = valid[:, None] & (c[None, :] < lens[:, None])
    safe = torch.where(inwin, p, 0)
    blk = block_table.to(torch.int64)[req[:, None], safe // block_size]
    dense = torch.where(inwin, blk * block_size + safe % block_size, -1).to(torch.int32)
    keep = keep_mask(dense, lens)
    ragged = dense[keep]
    indptr = torch.zeros(n + 1, dtype=torch.int32, device=dev)
    torch.cumsum(keep.sum(dim=1), dim=0, out=indptr[1:])
    return valid_all, t2r, dense, lens.to(torch.int32), ragged, indptr


def cpu_window_and_pack(block_table: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                        block_size: int, window: int, indices_out: torch.Tensor,
                        lens_out: torch.Tensor, ragged_out: torch.Tensor,
                        indptr_out: torch.Tensor) -> None:
    """Inject mode's CPU analogue of the one launch: the dense window rows, their lengths and
    their ragged packing in one pass, written into persistent buffers (``indices_out`` flat,
    ``>= N * window``). Token at position p attends to max(0, p − window + 1) .. p."""
    n = rows.numel()
    positions = positions.to(torch.int64)
    lens = torch.clamp(positions + 1, max=window)
    cols = torch.arange(window, dtype=torch.int64)
    pos = (positions + 1 - lens)[:, None] + cols[None, :]
    valid = cols[None, :] < lens[:, None]
    pos = torch.where(valid, pos, 0)
    blocks = block_table[rows.to(torch.int64)[:, None], pos // block_size].to(torch.int64)
    dense = indices_out[: n * window].view(n, window)
    dense.copy_(torch.where(valid, blocks * block_size + pos % block_size, -1))
    lens_out[:n] = lens
    keep = valid & (dense >= 0)
    indptr_out[0] = 0
    torch.cumsum(keep.sum(dim=1), dim=0, dtype=torch.int32, out=indptr_out[1: n + 1])
    torch.masked_select(dense, keep, out=ragged_out[: int(indptr_out[n])])
