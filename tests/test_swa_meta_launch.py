"""The one launch's cached runner (``e2e.kernels.swa_meta._launch``): the first launch of a
specialisation goes through Triton's JIT and keeps the compiled kernel's runner, later ones
call the runner with integer pointers; anything Triton would compile differently for (a
dtype, an unaligned pointer, a specialised int's value, an int past 31 bits, the flags)
takes the JIT again. Triton is replaced by a recorder, so this runs anywhere; the real
launch is checked against vLLM's ops on the GPU (docs/explanation/kernels.md) and under
``TRITON_INTERPRET=1`` in tests/test_swa_meta.py."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from e2e.kernels import meta_check, swa_meta  # noqa: E402


class Recorder:
    """Stands in for the jitted kernel and its compiled kernel: ``kernel[(N,)](...)`` records
    a JIT launch and returns the 'compiled kernel' (itself), whose ``[(N, 1, 1)]`` is its
    runner (itself again), which records a direct launch."""

    def __init__(self) -> None:
        self.jit: list[tuple] = []
        self.direct: list[tuple] = []

    def __getitem__(self, grid):
        if len(grid) == 3:  # compiled[(grid, 1, 1)]: the runner
            return self

        def launch(*args, num_warps):
            self.jit.append((grid, args, num_warps))
            return self
        return launch

    def __call__(self, *args):
        self.direct.append(args)


@pytest.fixture
def kernel(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(swa_meta, "_KERNEL", rec)
    monkeypatch.setattr(swa_meta, "_DIRECT", True)
    monkeypatch.setattr(swa_meta, "_SHAPES", {})
    return rec


def call(b, buf, **over):
    args = dict(
        slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"][: b.num_tokens],
        query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
        replay_start=b.replay_start, token_to_req=buf["token_to_req"],
        indices_out=buf["indices_out"], lens_out=buf["lens_out"],
        ragged_out=buf["ragged_buffer"], indptr_out=buf["indptr_buffer"],
        num_tokens=b.num_tokens, window=meta_check.WINDOW, block_size=b.block_size,
        noncausal=False)
    args.update(over)
    swa_meta.swa_decode_meta(**args)


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    b = meta_check._batch("8", g, "cpu", seq_lens=[300] * 8, query_len=1, block_size=64,
                          noncausal=False)
    return b, meta_check.buffers(b)


def test_the_first_launch_compiles_and_later_ones_call_the_runner_with_int_pointers(kernel, batch):
    b, buf = batch
    call(b, buf)
    assert len(kernel.jit) == 1 and kernel.direct == []
    (grid, jit_args, warps), = kernel.jit
    assert grid == (b.num_tokens,) and warps == 4
    call(b, buf)
    call(b, buf)
    assert len(kernel.jit) == 1 and len(kernel.direct) == 2
    args = kernel.direct[0]
    # the same arguments, tensors replaced by their pointers
    assert [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in jit_args] == list(args)
    assert all(type(a) in (int, bool) for a in args)


@pytest.mark.parametrize("change", ["dtype", "window", "block_size", "noncausal", "replay",
                                    "warps"])
def test_what_triton_compiles_for_is_in_the_key(kernel, batch, change):
    b, buf = batch
    call(b, buf)
    over = {"dtype": dict(slot_mapping=b.slot_mapping.to(torch.int32)),
            "window": dict(window=64), "block_size": dict(block_size=32),
            "noncausal": dict(noncausal=True, replay_start=None), "replay": dict(replay_start=None),
            "warps": dict(warps=8)}[change]
    call(b, buf, **over)
    assert len(kernel.jit) == 2, "a different specialisation reused another's runner"
    call(b, buf, **over)
    assert len(kernel.jit) == 2 and len(kernel.direct) == 1  # and then it has its own


def test_an_unaligned_pointer_or_a_wide_int_always_takes_the_jit(kernel, batch):
    b, buf = batch
    call(b, buf)
    unaligned = buf["token_to_req"][1:]  # 4 bytes past a 16-byte boundary
    call(b, buf, token_to_req=unaligned)
    call(b, buf, token_to_req=unaligned)
    call(b, buf, window=1 << 31)
    assert len(kernel.jit) == 4 and kernel.direct == []


def test_direct_false_goes_through_the_jit_every_time(kernel, batch):
    b, buf = batch
    for _ in range(3):
        call(b, buf, direct=False)
    assert len(kernel.jit) == 3 and kernel.direct == []
