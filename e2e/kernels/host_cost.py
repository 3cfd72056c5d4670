"""What one eager call of the one-launch build costs the host, and where it goes.

vLLM builds the decode SWA metadata eagerly on the host every step (outside a CUDA graph the
GPU waits on the launch, not the kernel), so the build's host cost is what it adds to a step.
``measure`` times, in one process and interleaved (``runs`` runs of ``calls`` calls each,
median of the runs), on decode batches of ``e2e.kernels.meta_check``:

    empty          an empty Triton kernel through Triton's JIT dispatch (the floor)
    empty-direct   the same kernel through a cached compiled-kernel runner
    meta           swa_decode_meta as vLLM's builder calls it (the cached runner)
    meta-jit       the same through Triton's JIT dispatch on every call (the old launch)
    main           vLLM 0.32's decode build, launch for launch (when vLLM's ops load)

and the pieces of one ``meta`` call (``parts``): the wrapper's Python alone (the launch
replaced by nothing), the launch with its key and pointers (``_launch`` on prepared
arguments), the runner alone with integer pointers (the driver launch), the runner given
tensors (the launcher then calls ``data_ptr()`` and asks the driver about each of the 11),
and Triton's JIT dispatch on prepared arguments (binding and specialisation, then the
launch). Differences of these give the breakdown in ``e2e.render.kernels.host_cost_markdown``.

``TARGET``: ``meta`` eager at most 2.0× ``empty`` (both measured here, side by side).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

__all__ = ["TARGET", "ITEMS", "PARTS", "measure"]

TARGET = 2.0
ITEMS = ("empty", "empty-direct", "meta", "meta-jit", "main")
PARTS = ("wrapper", "launch", "runner (int pointers)", "runner (tensors)", "jit dispatch")


def _shapes(device, rows_list=(1, 8, 32), dspark: bool = True):
    import torch

    from e2e.kernels import meta_check

    g = torch.Generator().manual_seed(11)
    out = []
    for rows in rows_list:
        seq = torch.randint(1, 4000, (rows,), generator=g).tolist()
        out.append(meta_check._batch(f"{rows} rows", g, device, seq_lens=seq, query_len=1,
                                     block_size=64, noncausal=False))
    if dspark:
        seq = torch.randint(4, 4000, (8,), generator=g).tolist()
        out.append(meta_check._batch("DSpark block 8 x 4", g, device, seq_lens=seq,
                                     query_len=4, block_size=64, noncausal=True))
    return out


def _calls(b, ops) -> dict[str, Callable[[], None]]:
    """name -> a zero-argument call on batch ``b`` (items and parts)."""
    from e2e.kernels import load_triton_paths, meta_check, swa_meta

    tpaths = load_triton_paths()
    buf = meta_check.buffers(b)
    x = buf["lens_out"]
    args = _arguments(b, buf)  # as the builder hands them over (its own slicing left out)
    calls: dict[str, Callable[[], None]] = {
        "empty": lambda: tpaths.empty_launch(x),
        "empty-direct": lambda: tpaths.empty_launch_direct(x),
        "meta": lambda: swa_meta.swa_decode_meta(**args),
        "meta-jit": lambda: swa_meta.swa_decode_meta(**args, direct=False),
    }
    if ops is not None:
        mbuf = meta_check.buffers(b)
        calls["main"] = lambda: meta_check.run_vllm(ops, b, mbuf)
    calls["meta"]()  # compile, and fill the runner cache
    calls["meta-jit"]()
    captured: list[tuple] = []
    real = swa_meta._launch
    swa_meta._launch = lambda *a: captured.append(a)
    try:
        calls["meta"]()
    finally:
        swa_meta._launch = real
    shape, grid, warps, tensors, ints, consts, direct = captured[0]
    ptrs = tuple(t.data_ptr() for t in tensors)
    kernel = swa_meta._kernel()
    runner = next(iter(shape.runners.values()), None)  # the one this batch's launches use

    def wrapper_only():
        saved = swa_meta._launch
        swa_meta._launch = _nothing
        try:
            swa_meta.swa_decode_meta(**args)
        finally:
            swa_meta._launch = saved

    calls["wrapper"] = wrapper_only
    calls["launch"] = lambda: real(shape, grid, warps, tensors, ints, consts, direct)
    if runner is not None:
        calls["runner (int pointers)"] = lambda: runner(*ptrs, *ints, *consts)
        calls["runner (tensors)"] = lambda: runner(*tensors, *ints, *consts)
    calls["jit dispatch"] = lambda: kernel[(grid,)](*tensors, *ints, *consts, num_warps=warps)
    return calls


def _nothing(*args) -> None:
    return None


def _arguments(b, buf) -> dict:
    from e2e.kernels import meta_check

    return dict(
        slot_mapping=b.slot_mapping, is_valid_token=buf["is_valid_token"][: b.num_tokens],
        query_start_loc=b.query_start_loc, seq_lens=b.seq_lens, block_table=b.block_table,
        replay_start=None if b.noncausal else b.replay_start, token_to_req=buf["token_to_req"],
        indices_out=buf["indices_out"], lens_out=buf["lens_out"],
        ragged_out=buf["ragged_buffer"], indptr_out=buf["indptr_buffer"],
        num_tokens=b.num_tokens, window=meta_check.WINDOW, block_size=b.block_size,
        noncausal=b.noncausal)


def measure(device, *, ops=None, runs: int = 5, calls: int = 1000, dry_run: bool = False,
            log=print) -> dict:
    """Host µs per call of every item and part, per shape: ``runs`` interleaved runs of
    ``calls`` calls, each between two synchronisations (``bench.time_eager``); the median
    of the runs. The ratio ``meta / empty`` per shape and its worst against ``TARGET``.
    ``dry_run`` (the CPU under ``TRITON_INTERPRET=1``): one 1-row shape, a functional check."""
    from e2e.kernels import bench

    shapes = []
    for b in _shapes(device, (1,), False) if dry_run else _shapes(device):
        fns = _calls(b, ops)
        for fn in fns.values():
            for _ in range(1 if dry_run else 3):
                fn()
        shapes.append((b, fns, {name: [] for name in fns}))
    for run in range(runs):
        for _, fns, times in shapes:
            for name, fn in fns.items():
                times[name].append(bench.time_eager(fn, calls, device))
        log(f"host cost: run {run + 1}/{runs} done")
    out = []
    for b, _, times in shapes:
        med = {name: statistics.median(v) for name, v in times.items()}
        out.append({"name": b.name, "rows": b.num_tokens, "median_us": med, "runs_us": times,
                    "meta_over_empty": med["meta"] / med["empty"]})
    worst = max(out, key=lambda s: s["meta_over_empty"])
    return {"runs": runs, "calls": calls, "shapes": out,
            "target": {"what": f"one launch eager <= {TARGET:g} x an empty Triton launch",
                       "bound": TARGET, "worst_ratio": round(worst["meta_over_empty"], 3),
                       "worst_shape": worst["name"],
                       "met": worst["meta_over_empty"] <= TARGET}}
