"""The torch reference for packing dense SWA window indices into ragged form.

Plain tensor operations, no Triton, no CUDA needed: it runs on CPU tensors (a vLLM CPU
server, the tests) and on GPU tensors alike. Every Triton path is tested against it.

Semantics (shared by every path): entry ``(r, c)`` of ``indices`` (``[N, W]`` or
``[N, 1, W]``) is kept when ``c < clamp(lengths[r], 0, W)``, ``v >= 0`` and, if
``num_rows`` is given, ``v < num_rows``. Kept entries keep their row-major order;
``indptr`` is int32 ``[N + 1]`` with ``indptr[0] = 0`` and ``indptr[r + 1] - indptr[r]``
the entries kept from row ``r``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["as_rows", "keep_mask", "reference_ragged", "pack_reference"]


def as_rows(indices: torch.Tensor) -> torch.Tensor:
    """``indices`` as a ``[N, W]`` view (``[N, 1, W]`` and other trailing shapes flattened)."""
    if indices.dim() == 2:
        return indices
    if indices.dim() == 0:
        raise ValueError("indices must have a row dimension, got a scalar")
    return indices.reshape(indices.shape[0], math.prod(indices.shape[1:]))


def keep_mask(indices: torch.Tensor, lengths: torch.Tensor, num_rows: int | None = None) -> torch.Tensor:
    """Boolean ``[N, W]``: which entries the packing keeps (method: broadcast compares)."""
    rows = as_rows(indices)
    n, w = rows.shape
    lens = lengths.reshape(-1).to(device=rows.device, dtype=torch.int64)
    if lens.numel() != n:
        raise ValueError(f"expected one length per row: {lens.numel()} lengths for {n} rows")
    lens = lens.clamp(min=0, max=w)
    cols = torch.arange(w, device=rows.device)
    keep = (cols[None, :] < lens[:, None]) & (rows >= 0)
    if num_rows is not None:
        keep &= rows.to(torch.int64) < num_rows  # int64: a bound past 2**31 must not wrap
    return keep


def reference_ragged(
    indices: torch.Tensor, lengths: torch.Tensor, num_rows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(flat, indptr)``: the kept entries (int32, exactly ``indptr[N]`` long) and
    the int32 ``[N + 1]`` row offsets. Method: boolean mask, row-major masked select, cumsum."""
    rows = as_rows(indices)
    keep = keep_mask(rows, lengths, num_rows)
    flat = rows[keep].to(torch.int32)
    indptr = torch.zeros(rows.shape[0] + 1, dtype=torch.int32, device=rows.device)
    if rows.shape[0]:
        torch.cumsum(keep.sum(dim=1), dim=0, out=indptr[1:])
    return flat, indptr


def pack_reference(
    indices: torch.Tensor,
    lengths: torch.Tensor,
    indices_out: torch.Tensor,
    indptr_out: torch.Tensor,
    num_rows: int | None = None,
) -> None:
    """Write the packing into caller buffers, like the Triton paths: ``indptr_out[:N + 1]``
    and ``indices_out[:indptr[N]]``; nothing else is written. Reads the count back to the
    host (a device sync on a GPU), so it is a reference, not a graph-capturable path."""
    flat, indptr = reference_ragged(indices, lengths, num_rows)
    if indptr_out.numel() < indptr.numel():
        raise ValueError(f"indptr_out holds {indptr_out.numel()}, needs {indptr.numel()}")
    if indices_out.numel() < flat.numel():
        raise ValueError(f"indices_out holds {indices_out.numel()}, needs {flat.numel()}")
    indptr_out[: indptr.numel()].copy_(indptr)
    indices_out[: flat.numel()].copy_(flat)
