"""e2e's one-launch decode SWA metadata build (``e2e.kernels.swa_meta``) against its torch
reference on the adversarial batches of ``e2e.kernels.meta_check`` (CPU: under
``TRITON_INTERPRET=1``; on a GPU also inside a CUDA graph), and inject mode's one-pass CPU
analogue. Against vLLM's own ops: tests/test_rocm_real.py (CPU) and the H200 figures in
docs/explanation/kernels.md."""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from e2e.kernels import meta_check, swa_meta  # noqa: E402
from e2e.kernels.reference import reference_ragged  # noqa: E402
from e2e.plugin.inject import swa_window_indices  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"
CASES = ("1 token, 1 long", "at/around the window", "padded graph batch",
         "invalid inside, wide table", "negative block number", "bounded replay",
         "dspark block x 8, padded", "negative block number, dspark", "32 rows, long")


def reference_mismatches(b: meta_check.Batch) -> list[str]:
    buf = meta_check.buffers(b)
    views = meta_check.run_meta(b, buf)
    want = swa_meta.swa_decode_meta_reference(
        slot_mapping=b.slot_mapping, query_start_loc=b.query_start_loc, seq_lens=b.seq_lens,
        block_table=b.block_table, replay_start=None if b.noncausal else b.replay_start,
        num_tokens=b.num_tokens, window=meta_check.WINDOW, width=b.width,
        block_size=b.block_size, noncausal=b.noncausal)
    valid, t2r, dense, lens, ragged, indptr = want
    n, s = b.num_tokens, b.slot_mapping.numel()
    got = {"is_valid_token": buf["is_valid_token"][:s], "token_to_req": buf["token_to_req"][:n],
           "dense rows": buf["indices_out"][:n, 0], "lens": buf["lens_out"][:n],
           "indptr": views[1], "ragged rows": buf["ragged_buffer"][: int(indptr[-1])]}
    exp = {"is_valid_token": valid, "token_to_req": t2r, "dense rows": dense, "lens": lens,
           "indptr": indptr, "ragged rows": ragged}
    bad = [k for k in got if got[k].shape != exp[k].shape or not torch.equal(got[k], exp[k])]
    if not bool((buf["lens_out"][n:] == 0).all()):
        bad.append("lens past the batch not zeroed")
    if not bool((buf["ragged_buffer"][int(indptr[-1]):] == -9).all()):
        bad.append("wrote past indptr[N]")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_one_launch_matches_its_reference(name):
    b = next(x for x in meta_check.batches(seed=1, device=DEVICE, random_cases=0) if x.name == name)
    assert b.num_tokens <= swa_meta.MAX_ROWS
    assert reference_mismatches(b) == []


@pytest.mark.slow
def test_random_batches_match_their_reference():
    cases = [b for b in meta_check.batches(seed=2, device=DEVICE, random_cases=3)
             if b.name.startswith("random")]
    assert len(cases) == 3
    assert [(b.name, reference_mismatches(b)) for b in cases] == [(b.name, []) for b in cases]


def test_a_negative_block_really_drops_entries():
    """The case exercises the scan branch: some in-window slot ids are negative."""
    b = next(x for x in meta_check.batches(seed=1, device=DEVICE, random_cases=0)
             if x.name == "negative block number")
    buf = meta_check.buffers(b)
    meta_check.run_meta(b, buf)
    n = b.num_tokens
    lens = buf["lens_out"][:n].clamp(max=b.width)
    assert int(buf["indptr_buffer"][n]) < int(lens.sum())


def test_covers_and_refuses_what_it_does_not_cover():
    assert swa_meta.covers(1, 128) and swa_meta.covers(32, 192) and swa_meta.covers(32, 256)
    assert not swa_meta.covers(0, 128) and not swa_meta.covers(33, 128)
    assert not swa_meta.covers(8, 257)
    b = next(meta_check.batches(seed=0, random_cases=0))
    buf = meta_check.buffers(b)
    with pytest.raises(ValueError, match="covers 1..32 rows"):
        swa_meta.swa_decode_meta(
            slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"],
            query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
            replay_start=None, token_to_req=buf["token_to_req"], indices_out=buf["indices_out"],
            lens_out=buf["lens_out"], ragged_out=buf["ragged_buffer"],
            indptr_out=buf["indptr_buffer"], num_tokens=33, window=128, block_size=64,
            noncausal=False)


def test_cpu_window_and_pack_is_window_then_pack_in_one_pass():
    g = torch.Generator().manual_seed(4)
    table = torch.randperm(4 * 80, generator=g).reshape(4, 80).to(torch.int32)
    rows = torch.tensor([0, 1, 1, 3, 2])
    positions = torch.tensor([0, 127, 128, 1000, 5])
    dense_buf = torch.full((5 * 128,), -3, dtype=torch.int32)
    lens_buf = torch.full((8,), -3, dtype=torch.int32)
    ragged = torch.full((8 * 128,), -9, dtype=torch.int32)
    indptr = torch.full((9,), -9, dtype=torch.int32)
    swa_meta.cpu_window_and_pack(table, rows, positions, 16, 128, dense_buf, lens_buf, ragged,
                                 indptr)
    dense, lens = swa_window_indices(table, rows, positions, 16, 128)
    flat, want = reference_ragged(dense, lens)
    assert torch.equal(dense_buf.view(5, 128), dense) and torch.equal(lens_buf[:5], lens)
    assert torch.equal(indptr[:6], want) and torch.equal(ragged[: flat.numel()], flat)
    assert bool((ragged[flat.numel():] == -9).all())


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_one_launch_replays_in_a_cuda_graph_with_new_inputs():
    b = next(x for x in meta_check.batches(seed=3, device="cuda", random_cases=0)
             if x.name == "32 rows, long")
    buf = meta_check.buffers(b)
    meta_check.run_meta(b, buf)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        meta_check.run_meta(b, buf)
    b.seq_lens.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    fresh = meta_check.buffers(b)
    meta_check.run_meta(b, fresh)
    n = b.num_tokens
    assert torch.equal(buf["indptr_buffer"][: n + 1], fresh["indptr_buffer"][: n + 1])
    kept = int(fresh["indptr_buffer"][n])
    assert torch.equal(buf["ragged_buffer"][:kept], fresh["ragged_buffer"][:kept])
