"""The packing paths against the torch reference: random shapes, edges, poisoned buffers,
the draft refresh, and (with a GPU) CUDA-graph capture and replay.

Without CUDA the Triton paths run under ``TRITON_INTERPRET=1`` on CPU tensors (set here
before Triton is imported); the GPU tests then skip.
"""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton")

from e2e.kernels import (PATH_NAMES, PATHS, build_ragged_indices_from_dense,
                         build_ragged_indices_from_dense_out, load_triton_paths,
                         refresh_decode_swa_ragged)  # noqa: E402
from e2e.kernels.reference import reference_ragged  # noqa: E402

tp = load_triton_paths()
DEVICE = torch.device("cuda") if HAS_CUDA else torch.device("cpu")
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
POISON = -12345
TRITON_PATHS = ("main", "inplace", "fused")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_case(n: int, w: int, seed: int, *, neg: float = 0.2, vmax: int = 50,
                len_lo: int | None = None, len_hi: int | None = None, dtype=torch.int32):
    """Fresh dense indices (some −1, some ≥ vmax) and lengths (some < 0, some > W)."""
    g = _gen(seed)
    idx = torch.randint(0, vmax + 10, (n, w), generator=g, dtype=torch.int32)
    idx[torch.rand((n, w), generator=g) < neg] = -1
    lo = -3 if len_lo is None else len_lo
    hi = w + 4 if len_hi is None else len_hi
    lens = torch.randint(lo, hi + 1, (n,), generator=g, dtype=dtype)
    return idx.to(DEVICE), lens.to(DEVICE)


def run_path(name, idx, lens, num_rows=None, extra=7):
    """Run path ``name`` into poisoned buffers; return (indices_out, indptr_out)."""
    n = idx.shape[0]
    out = torch.full((idx.numel() + extra,), POISON, dtype=torch.int32, device=DEVICE)
    indptr = torch.full((n + 1 + extra,), POISON, dtype=torch.int32, device=DEVICE)
    PATHS[name](idx, lens, out, indptr, num_rows)
    return out, indptr


def assert_matches_reference(name, idx, lens, num_rows=None):
    flat, want = reference_ragged(idx, lens, num_rows)
    out, indptr = run_path(name, idx, lens, num_rows)
    n, kept = want.numel() - 1, int(want[-1])
    assert torch.equal(indptr[: n + 1].cpu(), want.cpu()), f"{name}: indptr differs"
    assert torch.equal(out[:kept].cpu(), flat.cpu()), f"{name}: entries differ"
    assert (indptr[n + 1:] == POISON).all(), f"{name}: wrote past indptr[N]"
    # main copies its whole N*W scratch (documented); every other path stops at indptr[N]
    tail = idx.numel() if name == "main" else kept
    assert (out[tail:] == POISON).all(), f"{name}: wrote past entry {tail}"


# --------------------------------------------------------------------------- the reference itself


def test_reference_known_example():
    idx = torch.tensor([[5, -1, 7, 9], [1, 2, 3, 4], [-1, -1, 8, 0], [6, 6, 6, 6]], dtype=torch.int32)
    lens = torch.tensor([3, -2, 9, 2])  # 3 of 4; negative → 0; over W → W; 2 of 4
    flat, indptr = reference_ragged(idx, lens, num_rows=8)  # 8 is out of bounds
    assert indptr.tolist() == [0, 2, 2, 3, 5] and flat.tolist() == [5, 7, 0, 6, 6]
    flat, indptr = reference_ragged(idx, lens)
    assert indptr.tolist() == [0, 2, 2, 4, 6] and flat.tolist() == [5, 7, 8, 0, 6, 6]
    assert flat.dtype == indptr.dtype == torch.int32


# --------------------------------------------------------------------------- every path vs reference

SHAPES = [(1, 1), (1, 128), (2, 3), (5, 16), (16, 128), (17, 128), (37, 130), (100, 128), (9, 300)]


@pytest.mark.slow
@pytest.mark.parametrize("name", PATH_NAMES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_random_shapes(name, shape):
    n, w = shape
    seed = hash((name, n, w)) % 10_000
    idx, lens = random_case(n, w, seed)
    assert_matches_reference(name, idx, lens, num_rows=None)
    idx, lens = random_case(n, w, seed + 1)
    assert_matches_reference(name, idx, lens, num_rows=45)


@pytest.mark.parametrize("name", PATH_NAMES)
def test_edges(name):
    # N = 0 and W = 0
    assert_matches_reference(name, torch.empty(0, 8, dtype=torch.int32, device=DEVICE),
                             torch.empty(0, dtype=torch.int32, device=DEVICE))
    assert_matches_reference(name, torch.empty(3, 0, dtype=torch.int32, device=DEVICE),
                             torch.tensor([0, 2, -1], dtype=torch.int32, device=DEVICE))
    # [N, 1, W] input, int64 lengths, all −1 rows, lengths all past W, all negative
    idx, lens = random_case(6, 24, 11, dtype=torch.int64)
    assert_matches_reference(name, idx.reshape(6, 1, 24), lens)
    idx[2] = -1
    assert_matches_reference(name, idx, lens)
    assert_matches_reference(name, idx, torch.full((6,), 99, dtype=torch.int32, device=DEVICE))
    assert_matches_reference(name, idx, torch.full((6,), -5, dtype=torch.int32, device=DEVICE))
    # num_rows = 0 keeps nothing; a negative bound keeps nothing; a huge bound keeps all
    assert_matches_reference(name, idx, lens, num_rows=0)
    assert_matches_reference(name, idx, lens, num_rows=-3)
    assert_matches_reference(name, idx, lens, num_rows=2**40)
    # the largest int32 value is a valid index when no bound is given
    idx[0, 0] = 2**31 - 1
    assert_matches_reference(name, idx, torch.full((6,), 24, dtype=torch.int32, device=DEVICE))
    # non-contiguous inputs: a column slice (row stride > W) and a transposed view
    wide, wlens = random_case(7, 40, 12)
    assert_matches_reference(name, wide[:, 5:30], wlens.clamp(max=25))
    assert_matches_reference(name, wide.t().contiguous().t(), wlens)


@pytest.mark.slow
def test_fused_multi_program_and_chunked():
    """Force the fused kernel into many tiny programs (a long look-back chain) and column
    chunks narrower than W, on shapes cheap enough for the interpreter; the look-back
    workspace must be all zeros again after every launch."""
    n, w = 23, 40
    try:
        tp._FUSED[(n, w)] = (triton_cdiv(n, 2), 2, 16, 16, False, 4)
        for seed in (1, 2):
            idx, lens = random_case(n, w, seed)
            assert_matches_reference("fused", idx, lens, num_rows=40)
            assert not tp._workspace(idx).any()
        tp._FUSED[(n, w)] = (triton_cdiv(n, 4), 4, 64, 8, True, 4)
        idx, lens = random_case(n, w, 3)
        assert_matches_reference("fused", idx, lens)
        assert not tp._workspace(idx).any()
    finally:
        tp._FUSED.pop((n, w), None)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_allocating_wrapper_and_out_api():
    idx, lens = random_case(9, 32, 5)
    flat, indptr = build_ragged_indices_from_dense(idx, lens, 40)
    want_flat, want = reference_ragged(idx, lens, 40)
    assert torch.equal(indptr.cpu(), want.cpu())
    assert torch.equal(flat[: int(want[-1])].cpu(), want_flat.cpu())
    out = torch.full((9 * 32,), POISON, dtype=torch.int32, device=DEVICE)
    ptr = torch.full((10,), POISON, dtype=torch.int32, device=DEVICE)
    build_ragged_indices_from_dense_out(idx, lens, out, ptr, 40)
    assert torch.equal(ptr.cpu(), want.cpu()) and torch.equal(out[: int(want[-1])].cpu(), want_flat.cpu())


def test_registry_and_errors():
    assert list(PATHS) == list(PATH_NAMES) and len(PATHS) == 4
    with pytest.raises(KeyError):
        PATHS["nope"]
    idx, lens = random_case(4, 8, 1)
    out = torch.empty(32, dtype=torch.int32, device=DEVICE)
    for name in TRITON_PATHS:
        with pytest.raises(ValueError):
            PATHS[name](idx, lens[:3], out, torch.empty(5, dtype=torch.int32, device=DEVICE))
        with pytest.raises(ValueError):
            PATHS[name](idx, lens, out, torch.empty(4, dtype=torch.int32, device=DEVICE))
        with pytest.raises(TypeError):
            PATHS[name](idx, lens, out.long(), torch.empty(5, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError):
        PATHS["main"](idx, lens, out[:31], torch.empty(5, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError):
        refresh_decode_swa_ragged(idx, lens, out, torch.empty(5, dtype=torch.int32, device=DEVICE), path="x")


def test_torch_reference_path_on_cpu_tensors():
    idx = torch.tensor([[3, -1, 4], [1, 5, 9]], dtype=torch.int32)
    out = torch.full((6,), POISON, dtype=torch.int32)
    indptr = torch.full((3,), POISON, dtype=torch.int32)
    PATHS["torch"](idx, torch.tensor([3, 2]), out, indptr, None)
    assert indptr.tolist() == [0, 2, 4] and out.tolist() == [3, 4, 1, 5, POISON, POISON]


# --------------------------------------------------------------------------- draft refresh


@pytest.mark.parametrize("path", ["inplace", "fused"])
def test_refresh_rebuilds_buffers(path):
    """Fails if the refresh is a no-op: buffers hold step A's packing, step B's differs."""
    n, w = 12, 48
    idx_a, lens_a = random_case(n, w, 21)
    out = torch.full((n * w,), POISON, dtype=torch.int32, device=DEVICE)
    indptr = torch.full((n + 1,), POISON, dtype=torch.int32, device=DEVICE)
    build_ragged_indices_from_dense_out(idx_a, lens_a, out, indptr, 50)
    idx_b, lens_b = random_case(n, w, 22)
    flat_b, want_b = reference_ragged(idx_b, lens_b, 50)
    _flat_a, want_a = reference_ragged(idx_a, lens_a, 50)
    assert not torch.equal(want_a, want_b)
    refresh_decode_swa_ragged(idx_b, lens_b, out, indptr, 50, path=path)
    assert torch.equal(indptr.cpu(), want_b.cpu())
    assert torch.equal(out[: int(want_b[-1])].cpu(), flat_b.cpu())


# --------------------------------------------------------------------------- CUDA graphs


def _graph_case(n, w, seed):
    g = _gen(seed)
    idx = torch.randint(0, 4096, (n, w), generator=g, dtype=torch.int32)
    idx[torch.rand((n, w), generator=g) < 0.05] = -1
    lens = torch.randint(-2, w + 3, (n,), generator=g, dtype=torch.int32)
    return idx.cuda(), lens.cuda()


def _capture(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


@gpu
@needs_cuda
@pytest.mark.parametrize("name", TRITON_PATHS + ("refresh",))
@pytest.mark.parametrize("n", [1, 7, 64, 384])
def test_graph_replay_follows_new_inputs(name, n):
    """Record one call in a CUDA graph, then refill the static inputs and replay: each
    replay must give the reference's answer for the new inputs."""
    w, num_rows = 128, 4000
    s_idx, s_lens = _graph_case(n, w, 0)
    out = torch.full((n * w + 16,), POISON, dtype=torch.int32, device="cuda")
    indptr = torch.full((n + 1 + 16,), POISON, dtype=torch.int32, device="cuda")
    if name == "refresh":
        def call():
            refresh_decode_swa_ragged(s_idx, s_lens, out, indptr, num_rows)
    else:
        fn = PATHS[name]

        def call():
            fn(s_idx, s_lens, out, indptr, num_rows)
    graph = _capture(call)
    for seed in (1, 2, 3):
        new_idx, new_lens = _graph_case(n, w, seed)
        s_idx.copy_(new_idx)
        s_lens.copy_(new_lens)
        out.fill_(POISON)
        graph.replay()
        torch.cuda.synchronize()
        flat, want = reference_ragged(new_idx, new_lens, num_rows)
        kept = int(want[-1])
        assert torch.equal(indptr[: n + 1], want)
        assert torch.equal(out[:kept], flat)
        assert (indptr[n + 1:] == POISON).all()
        if name != "main":
            assert (out[kept:] == POISON).all()


@gpu
@needs_cuda
def test_inplace_and_fused_allocate_nothing():
    """The in-place and fused paths allocate no device memory per call (checked through the
    caching allocator's counters)."""
    idx, lens = _graph_case(256, 128, 4)
    out = torch.empty(256 * 128, dtype=torch.int32, device="cuda")
    indptr = torch.empty(257, dtype=torch.int32, device="cuda")
    for name in ("inplace", "fused"):
        PATHS[name](idx, lens, out, indptr, 4000)
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        for _ in range(5):
            PATHS[name](idx, lens, out, indptr, 4000)
        torch.cuda.synchronize()
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == before, name
