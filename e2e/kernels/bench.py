"""Timing and counting one packing call on a device: the impure half of ``e2e micro``.

- ``time_eager``: wall clock over ``calls`` back-to-back calls, synchronised before and
  after (eager packing is host-launch bound, so the host clock is the honest one).
- ``time_graph``: ``graph_calls`` calls captured in one CUDA graph, replayed ``replays``
  times between two CUDA events (device time per call inside a graph).
- ``count_ops``: kernel launches, device copies, memsets and allocations per call, read
  from ``torch.profiler`` (CUPTI activity + allocator events), never written by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["OpCounts", "synchronize", "time_eager", "capture_graph", "time_graph", "count_ops"]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_eager(fn: Callable[[], None], calls: int, device: torch.device) -> float:
    """µs per call: ``calls`` calls between two synchronisations, by ``perf_counter``."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / calls * 1e6


def capture_graph(fn: Callable[[], None], graph_calls: int) -> torch.cuda.CUDAGraph:
    """Warm ``fn`` up on a side stream (as CUDA-graph capture requires), then record
    ``graph_calls`` calls of it into one graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(graph_calls):
            fn()
    torch.cuda.synchronize()
    return graph


def time_graph(graph: torch.cuda.CUDAGraph, graph_calls: int, replays: int) -> float:
    """µs per call: ``replays`` replays of a graph of ``graph_calls`` calls, by CUDA events."""
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (replays * graph_calls)


@dataclass(frozen=True)
class OpCounts:
    """Per-call device work seen by the profiler (averaged over the profiled calls)."""

    kernels: float
    copies: float
    memsets: float
    allocations: float
    kernel_names: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"kernels": self.kernels, "copies": self.copies, "memsets": self.memsets,
                "allocations": self.allocations, "kernel_names": list(self.kernel_names)}


def count_ops(fn: Callable[[], None], device: torch.device, calls: int = 10) -> OpCounts:
    """Profile ``calls`` calls with CUPTI and allocator tracking and classify the device
    events: ``Memcpy*`` are copies, ``Memset*`` memsets, ``[memory]`` with positive bytes
    allocations, every other device event a kernel."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True) as prof:
        for _ in range(calls):
            fn()
        synchronize(device)
    kernels = copies = memsets = allocs = 0
    names: set[str] = set()
    for event in prof.profiler.kineto_results.events():
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = event.name()
        if name == "[memory]":
            allocs += event.nbytes() > 0
        elif name.startswith("Memcpy"):
            copies += 1
        elif name.startswith("Memset"):
            memsets += 1
        else:
            kernels += 1
            names.add(name)
    return OpCounts(kernels / calls, copies / calls, memsets / calls, allocs / calls, tuple(sorted(names)))
