"""Packing dense SWA window indices into ragged ``(indices, indptr)`` form.

Every path, called by name through ``PATHS``, has one signature and writes into the
caller's buffers; none returns anything (``indptr_out[N]`` holds the kept count, on the
device)::

    PATHS[name](indices: Tensor,        # int32 [N, W] or [N, 1, W]
                lengths: Tensor,        # int [N]; < 0 counts as 0, > W as W
                indices_out: Tensor,    # int32, >= N * W entries (always enough)
                indptr_out: Tensor,     # int32, >= N + 1 entries
                num_rows: int | None = None) -> None

    name        what it does                                         writes
    "main"      3 allocs; count, scan, compact; 2 device copies      indptr_out[:N+1], indices_out[:N*W]
    "inplace"   3 kernels straight into the buffers; graph-safe      indptr_out[:N+1], indices_out[:indptr[N]]
    "fused"     1 launch; graph-safe                                 indptr_out[:N+1], indices_out[:indptr[N]]
    "torch"     the torch reference (any device; syncs on a GPU)     indptr_out[:N+1], indices_out[:indptr[N]]

Entry ``(r, c)`` is kept when ``c < W``, ``c < lengths[r]``, ``v >= 0`` and, if given,
``v < num_rows``; kept entries keep their row-major order; ``indptr[0] = 0``.

Also here: ``build_ragged_indices_from_dense(indices, lengths, num_rows=None) -> (flat,
indptr)`` (allocating wrapper, ``flat`` has capacity ``N * W``),
``build_ragged_indices_from_dense_out(...)`` (= ``PATHS["inplace"]``),
``refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, num_rows=None, *,
path="inplace")`` (draft-step refresh, capture once in a CUDA graph). The torch reference,
``reference_ragged(indices, lengths, num_rows=None) -> (flat, indptr)``, is
``e2e.kernels.reference``'s.

Importing this package imports torch but not Triton: the Triton paths load on first use,
so ``TRITON_INTERPRET=1`` (CPU tensors) may be set any time before that; where torch sees
no CUDA device and the variable is unset, the first use sets it. Without Triton
installed only ``PATHS["torch"]`` and the reference work; the others raise ImportError.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping

from e2e.kernels.reference import pack_reference

__all__ = ["PATHS", "load_triton_paths", "refresh_decode_swa_ragged"]

PackFn = Callable[..., None]

PATH_NAMES: tuple[str, ...] = ("main", "inplace", "fused", "torch")
_TRITON_FUNCS = {"main": "pack_main", "inplace": "pack_inplace", "fused": "pack_fused"}


def load_triton_paths():
    """The ``e2e.kernels.triton_paths`` module, imported on first call (imports Triton).

    On a machine where torch sees no CUDA device and ``TRITON_INTERPRET`` is unset, this
    sets ``TRITON_INTERPRET=1`` first: Triton reads it when the kernels are defined, and
    the interpreter is the only way they run on CPU tensors."""
    name = "e2e.kernels.triton_paths"
    if name not in sys.modules and "TRITON_INTERPRET" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    return importlib.import_module(name)


class _Paths(Mapping):
    """Read-only name → path mapping that imports Triton only when a Triton path is read."""

    def __getitem__(self, name: str) -> PackFn:
        if name == "torch":
            return pack_reference
        if name not in _TRITON_FUNCS:
            raise KeyError(f"unknown packing path {name!r}; choose from {', '.join(PATH_NAMES)}")
        return getattr(load_triton_paths(), _TRITON_FUNCS[name])

    def __iter__(self) -> Iterator[str]:
        return iter(PATH_NAMES)

    def __len__(self) -> int:
        return len(PATH_NAMES)


PATHS: Mapping[str, PackFn] = _Paths()


def build_ragged_indices_from_dense(indices, lengths, num_rows=None):
    """Allocating API: ``(flat, indptr)``; see ``triton_paths.build_ragged_indices_from_dense``."""
    return load_triton_paths().build_ragged_indices_from_dense(indices, lengths, num_rows)


def build_ragged_indices_from_dense_out(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """The in-place path (3 kernels, no allocation, no copy)."""
    load_triton_paths().pack_inplace(indices, lengths, indices_out, indptr_out, num_rows)


def refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, num_rows=None, *,
                              path: str = "inplace") -> None:
    """Rebuild a draft step's ragged buffers in place; see ``triton_paths``."""
    load_triton_paths().refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, num_rows,
                                             path=path)
