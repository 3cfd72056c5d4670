"""The one-launch build against vLLM's own ops, on adversarial decode batches.

``batches(seed, device)`` yields decode batches shaped as the model runner fills them, with
the edges that break index arithmetic: sequences of 1 token, at the window, one past it, at
and across block boundaries, thousands long; padding tokens (slot −1) and zero-length
padding requests at the end of a padded graph batch; invalid tokens inside the batch; a
block table that is a row slice of a wider persistent table; bounded-replay starts; the
DSpark draft block (non-causal, width 192) and verify batches of 4 tokens per request; a
negative block number inside a window (its slot ids are dropped by the packing);
1..32 rows. ``compare(ops, batch)`` runs vLLM's sequence (``e2e.kernels.vllm_ops``:
validity, token map, window kernel, ``build_ragged_indices_from_dense``,
``_copy_ragged_to_graph_buffers``) and ``swa_decode_meta`` on poisoned buffers and returns
the outputs that differ (empty: identical).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from e2e.kernels import swa_meta, vllm_ops

__all__ = ["Batch", "batches", "compare", "graph_replay_check"]

WINDOW = 128
DSPARK_WIDTH = 192  # vLLM: align(window + 3 speculative tokens, 64)


@dataclass
class Batch:
    name: str
    slot_mapping: torch.Tensor
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    replay_start: torch.Tensor
    num_tokens: int
    num_mapped: int
    block_size: int
    noncausal: bool

    @property
    def width(self) -> int:
        return DSPARK_WIDTH if self.noncausal else WINDOW


def _batch(name, g, device, *, seq_lens, query_len, block_size, noncausal, pad_tokens=0,
           pad_reqs=0, invalid=(), replay=False, wide_table=False,
           negative_block=False) -> Batch:
    num_reqs = len(seq_lens)
    max_blocks = max(-(-s // block_size) for s in seq_lens) + 1
    stride_blocks = max_blocks + (7 if wide_table else 0)
    full = torch.randperm(max(4096, (num_reqs + pad_reqs) * stride_blocks * 2),
                          generator=g)[: (num_reqs + pad_reqs) * stride_blocks]
    full = full.reshape(num_reqs + pad_reqs, stride_blocks).to(torch.int32)
    table = full[:, :max_blocks] if wide_table else full
    slots = []
    for r, s in enumerate(seq_lens):
        for p in range(s - query_len, s):
            slots.append(int(table[r, p // block_size]) * block_size + p % block_size)
    if negative_block:  # a −1 block inside request 0's window: its slot ids go negative
        table[0, max(0, (seq_lens[0] - 40) // block_size)] = -1
    slots += [-1] * pad_tokens
    for t in invalid:
        if t < len(slots):
            slots[t] = -1
    qsl = [query_len * i for i in range(num_reqs + 1)] + [query_len * num_reqs] * pad_reqs
    seq = list(seq_lens) + [0] * pad_reqs
    replay_start = torch.zeros(num_reqs + pad_reqs + 1, dtype=torch.int32)
    if replay:
        for r, s in enumerate(seq_lens):
            replay_start[r] = int(torch.randint(0, max(1, s - query_len + 1), (1,), generator=g))
    dev = torch.device(device)
    return Batch(name=name, slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev),
                 query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=dev),
                 seq_lens=torch.tensor(seq, dtype=torch.int32, device=dev),
                 block_table=table.to(dev), replay_start=replay_start.to(dev),
                 num_tokens=len(slots), num_mapped=qsl[-1], block_size=block_size,
                 noncausal=noncausal)


def batches(seed: int = 0, device: str = "cpu", *, random_cases: int = 12) -> Iterator[Batch]:
    """The fixed edge cases, then ``random_cases`` random ones (seeded)."""
    g = torch.Generator().manual_seed(seed)
    w = WINDOW
    yield _batch("1 token, 1 long", g, device, seq_lens=[1], query_len=1, block_size=64,
                 noncausal=False)
    yield _batch("at/around the window", g, device, seq_lens=[w - 1, w, w + 1, 2 * w + 1],
                 query_len=1, block_size=16, noncausal=False)
    yield _batch("block boundaries", g, device, seq_lens=[63, 64, 65, 127, 128, 129, 192],
                 query_len=1, block_size=64, noncausal=False)
    yield _batch("32 rows, long", g, device, seq_lens=torch.randint(1, 5000, (32,),
                                                                      generator=g).tolist(),
                 query_len=1, block_size=64, noncausal=False)
    yield _batch("padded graph batch", g, device, seq_lens=[5, 300, 129], query_len=1,
                 block_size=64, noncausal=False, pad_tokens=5, pad_reqs=5)
    yield _batch("invalid inside, wide table", g, device, seq_lens=[40, 900, 128, 3, 77],
                 query_len=1, block_size=16, noncausal=False, invalid=(0, 3), wide_table=True)
    yield _batch("negative block number", g, device, seq_lens=[300, 90, 700], query_len=1,
                 block_size=16, noncausal=False, negative_block=True)
    yield _batch("negative block number, dspark", g, device, seq_lens=[300, 90], query_len=4,
                 block_size=16, noncausal=True, negative_block=True)
    yield _batch("bounded replay", g, device, seq_lens=[200, 1000, 130, 9], query_len=1,
                 block_size=64, noncausal=False, replay=True)
    yield _batch("verify 4 x 8", g, device, seq_lens=torch.randint(4, 3000, (8,),
                                                                     generator=g).tolist(),
                 query_len=4, block_size=64, noncausal=False)
    yield _batch("dspark block, short", g, device, seq_lens=[4, 5, 131, 132], query_len=4,
                 block_size=16, noncausal=True)
    yield _batch("dspark block x 8, padded", g, device, seq_lens=torch.randint(
        4, 3000, (7,), generator=g).tolist(), query_len=4, block_size=64, noncausal=True,
        pad_tokens=4, pad_reqs=1, invalid=(6,))
    for k in range(random_cases):
        noncausal = bool(k % 3 == 2)
        query_len = 4 if noncausal or k % 3 == 1 else 1
        reqs = int(torch.randint(1, 32 // query_len + 1, (1,), generator=g))
        seq = torch.randint(query_len, 4000, (reqs,), generator=g).tolist()
        room = 32 - reqs * query_len
        yield _batch(f"random {k}", g, device, seq_lens=seq, query_len=query_len,
                     block_size=(16, 64)[k % 2], noncausal=noncausal,
                     pad_tokens=int(torch.randint(0, room + 1, (1,), generator=g)),
                     pad_reqs=k % 2, invalid=(int(torch.randint(0, 8, (1,), generator=g)),),
                     replay=(k % 4 == 0 and not noncausal), wide_table=bool(k % 2))


def buffers(b: Batch, max_tokens: int = 64) -> dict:
    """Persistent builder buffers, poisoned so that a slot nobody writes shows."""
    dev = b.slot_mapping.device
    i32 = dict(dtype=torch.int32, device=dev)
    return dict(
        is_valid_token=torch.ones(max_tokens, dtype=torch.bool, device=dev),
        token_to_req=torch.full((max_tokens,), 77, **i32),
        indices_out=torch.full((max_tokens, 1, b.width), -5, **i32),
        lens_out=torch.full((max_tokens,), 99, **i32),
        ragged_buffer=torch.full((max_tokens * max(WINDOW, DSPARK_WIDTH),), -9, **i32),
        indptr_buffer=torch.full((max_tokens + 1,), -9, **i32))


def run_vllm(ops, b: Batch, buf: dict):
    """vLLM's decode build on ``buf``; returns its ragged views."""
    return vllm_ops.decode_build_main(
        ops, ragged_buffer=buf["ragged_buffer"], indptr_buffer=buf["indptr_buffer"],
        slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"][: b.num_tokens],
        query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
        replay_start=b.replay_start, token_to_req=buf["token_to_req"],
        indices_out=buf["indices_out"], lens_out=buf["lens_out"], num_tokens=b.num_tokens,
        num_mapped=b.num_mapped, window=WINDOW, block_size=b.block_size, noncausal=b.noncausal)


def run_meta(b: Batch, buf: dict):
    swa_meta.swa_decode_meta(
        slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"][: b.num_tokens],
        query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
        replay_start=None if b.noncausal else b.replay_start, token_to_req=buf["token_to_req"],
        indices_out=buf["indices_out"], lens_out=buf["lens_out"],
        ragged_out=buf["ragged_buffer"], indptr_out=buf["indptr_buffer"],
        num_tokens=b.num_tokens, window=WINDOW, block_size=b.block_size, noncausal=b.noncausal)
    n = b.num_tokens
    return buf["ragged_buffer"][: max(n * b.width, 1)], buf["indptr_buffer"][: n + 1]


def compare(ops, b: Batch) -> list[str]:
    """Names of the outputs where ``swa_decode_meta`` and vLLM's ops differ."""
    want, got = buffers(b), buffers(b)
    want_views = run_vllm(ops, b, want)
    got_views = run_meta(b, got)
    n, s = b.num_tokens, b.slot_mapping.numel()
    bad = []
    pairs = {
        "is_valid_token": (want["is_valid_token"][:s], got["is_valid_token"][:s]),
        "token_to_req": (want["token_to_req"][:n], got["token_to_req"][:n]),
        "dense rows": (want["indices_out"][:n], got["indices_out"][:n]),
        "lens (whole buffer)": (want["lens_out"], got["lens_out"]),
        "indptr": (want_views[1], got_views[1]),
    }
    for name, (x, y) in pairs.items():
        if x.shape != y.shape or not torch.equal(x, y):
            bad.append(name)
    kept = int(want_views[1][-1])
    if int(got_views[1][-1]) != kept or not torch.equal(want_views[0][:kept],
                                                        got_views[0][:kept]):
        bad.append("ragged rows")
    if want_views[0].shape != got_views[0].shape:
        bad.append("ragged view shape")
    if want_views[0].data_ptr() != want["ragged_buffer"].data_ptr() or \
            got_views[0].data_ptr() != got["ragged_buffer"].data_ptr():
        bad.append("view base pointer")
    return bad


def graph_replay_check(ops, device: str = "cuda", rows: tuple[int, ...] = (1, 7, 32)) -> list[str]:
    """Record one ``swa_decode_meta`` launch in a CUDA graph over static batch tensors, move
    every request one token on (seq_lens, slot mapping refilled in place), replay, and compare
    with vLLM's ops run eagerly on the new batch; three replays per shape. Returns the shapes
    and outputs that differ."""
    bad = []
    g = torch.Generator().manual_seed(5)
    for n in rows:
        for noncausal in (False, True):
            q = 4 if noncausal and n % 4 == 0 else 1
            if noncausal and q == 1:
                continue
            seq = torch.randint(q + 3, 3000, (n // q,), generator=g).tolist()
            b = _batch(f"graph {n}", g, device, seq_lens=seq, query_len=q, block_size=64,
                       noncausal=noncausal)
            buf = buffers(b)
            run_meta(b, buf)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run_meta(b, buf)
            table = b.block_table.cpu()
            for step in range(3):
                seq = [s + 1 for s in seq]
                slots = [int(table[r, p // 64]) * 64 + p % 64
                         for r, s in enumerate(seq) for p in range(s - q, s)]
                b.seq_lens.copy_(torch.tensor(seq, dtype=torch.int32))
                b.slot_mapping.copy_(torch.tensor(slots, dtype=torch.int64))
                graph.replay()
                want = buffers(b)
                views = run_vllm(ops, b, want)
                torch.cuda.synchronize()
                kept = int(views[1][-1])
                same = (torch.equal(views[1], buf["indptr_buffer"][: n + 1])
                        and torch.equal(views[0][:kept], buf["ragged_buffer"][:kept])
                        and torch.equal(want["indices_out"][:n], buf["indices_out"][:n])
                        and torch.equal(want["lens_out"][:n], buf["lens_out"][:n]))
                if not same:
                    bad.append(f"{n} rows noncausal={noncausal} replay {step + 1}")
    return bad
