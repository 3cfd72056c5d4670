"""Inject mode: on builds without the DeepSeek-V4/V4.1 ROCm SWA builders (the CPU default),
the model runner does, after every decode step, the SWA packing work those builders would:
it builds dense window indices from the real batch (block table, sequence lengths, window
128) and packs them ``packs_per_step`` times (DeepSeek-V4.1 builds its SWA metadata 7 times
per step) with the arm's path into persistent buffers. ``step_delay_us`` adds a busy wait
per decode step, a known effect to check the statistics against: in the worker process, right
after the model's forward (vLLM 0.32's ``execute_model``; sampling follows in
``sample_tokens``), once per decode step, that many µs of the worker's own CPU time.

On CPU tensors the Triton paths would need ``TRITON_INTERPRET`` (far too slow per step), so
each path maps to a torch implementation with the same allocation/copy structure:

    main     -> cpu-main:    3 scratch allocations, count/scan/compact, 2 copies into the buffers
    inplace  -> cpu-inplace: count/scan/compact written straight into the buffers
    fused    -> cpu-inplace  (one launch has no CPU analogue)
    torch    -> the torch reference (its own allocation + copy)
    meta     -> cpu-window-and-pack: each of the ``packs_per_step`` builds computes the window
                rows and packs them in one pass (``e2e.kernels.swa_meta.cpu_window_and_pack``)

On GPU tensors the arm's real path from ``e2e.kernels.PATHS`` runs (``meta``: one
``swa_decode_meta``-shaped pass is CPU-only here; on a GPU it packs with the fused path).
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from e2e.kernels.reference import keep_mask, pack_reference
from e2e.kernels.swa_meta import cpu_window_and_pack
from e2e.arm_settings import PluginSettings

__all__ = ["cpu_pack_main", "cpu_pack_inplace", "CPU_PATHS", "cpu_path_name",
           "swa_window_indices", "Injector", "busy_wait_us"]


def cpu_pack_main(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """vLLM 0.33's structure: pack into fresh scratch, then copy both into the buffers."""
    n, w = indices.shape
    flat = torch.empty(n * w, dtype=torch.int32)           # scratch 1
    indptr = torch.zeros(n + 1, dtype=torch.int32)         # scratch 2
    keep = keep_mask(indices, lengths, num_rows)           # scratch 3
    torch.cumsum(keep.sum(dim=1), dim=0, dtype=torch.int32, out=indptr[1:])
    kept = int(indptr[n])
    torch.masked_select(indices, keep, out=flat[:kept])
    indptr_out[: n + 1].copy_(indptr)                      # copy 1
    indices_out[: n * w].copy_(flat)                       # copy 2


def cpu_pack_inplace(indices, lengths, indices_out, indptr_out, num_rows=None) -> None:
    """The change's structure: counts, scan and compaction written into the buffers."""
    n = indices.shape[0]
    keep = keep_mask(indices, lengths, num_rows)
    indptr_out[0] = 0
    torch.cumsum(keep.sum(dim=1), dim=0, dtype=torch.int32, out=indptr_out[1: n + 1])
    kept = int(indptr_out[n])
    torch.masked_select(indices, keep, out=indices_out[:kept])


CPU_PATHS = {"main": cpu_pack_main, "inplace": cpu_pack_inplace,
             "fused": cpu_pack_inplace, "torch": pack_reference, "meta": cpu_pack_inplace}
_CPU_WORDS = {
    "main": "cpu-main (scratch + 2 copies into persistent buffers)",
    "inplace": "cpu-inplace (written straight into persistent buffers)",
    "fused": "cpu-inplace (written straight into persistent buffers; no one-launch CPU analogue)",
    "torch": "torch reference (allocates, then copies into persistent buffers)",
    "meta": "cpu-window-and-pack (window rows and ragged packing in one pass per build, "
            "straight into persistent buffers)",
}


def cpu_path_name(packing: str) -> str:
    return _CPU_WORDS[packing]


def busy_wait_us(us: int) -> None:
    """Spend ``us`` µs of this thread's own CPU time (not sleep: a sleep's wake-up jitter is
    larger than the effect).

    CPU time, not wall time: the worker shares the server's core with vLLM's API server and
    engine core, and those wake once per step. A wait timed by the wall clock lets them run
    inside it (the spinning waiter is preempted, its clock keeps going), so their per-token
    work hides in the wait and the step grows by less than ``us`` (by about nothing when
    ``us`` is near that work). Timed by the thread's own CPU clock, the wait is ``us`` of
    work added to the step, as a slower kernel would add it."""
    end = time.thread_time_ns() + us * 1000
    while time.thread_time_ns() < end:
        pass


def swa_window_indices(block_table: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                       block_size: int, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense SWA indices ``[N, window]`` (int32 KV slot ids, −1 past the length) and lengths
    ``[N]`` for decode tokens at ``positions`` of requests ``rows`` of ``block_table``.
    Token at position p attends to positions max(0, p − window + 1) .. p."""
    positions = positions.to(torch.int64)
    lengths = torch.clamp(positions + 1, max=window)
    start = positions + 1 - lengths
    cols = torch.arange(window, dtype=torch.int64)
    pos = start[:, None] + cols[None, :]
    valid = cols[None, :] < lengths[:, None]
    pos = torch.where(valid, pos, 0)
    blocks = block_table[rows.to(torch.int64)[:, None], pos // block_size].to(torch.int64)
    slots = blocks * block_size + pos % block_size
    return torch.where(valid, slots, -1).to(torch.int32), lengths.to(torch.int32)


class Injector:
    """Per-process state of inject mode: the persistent buffers and the per-step work."""

    def __init__(self, settings: PluginSettings, *, max_tokens: int, device: torch.device):
        self.settings = settings
        self.device = device
        width = settings.window
        self.indices_buffer = torch.empty(max(max_tokens, 1) * width, dtype=torch.int32,
                                          device=device)
        self.indptr_buffer = torch.empty(max(max_tokens, 1) + 1, dtype=torch.int32,
                                         device=device)
        self.one_pass = settings.packing == "meta" and device.type == "cpu"
        if self.one_pass:
            self.dense_buffer = torch.empty(max(max_tokens, 1) * width, dtype=torch.int32)
            self.lens_buffer = torch.empty(max(max_tokens, 1), dtype=torch.int32)
        if device.type == "cpu":
            self.pack = CPU_PATHS[settings.packing]
            self.rebuild = cpu_pack_main
        else:
            from e2e.kernels import PATHS

            self.pack = PATHS["fused" if settings.packing == "meta" else settings.packing]
            self.rebuild = PATHS["main"]
        self.decode_steps = 0
        self.on_first_step = lambda tokens: None  # called once, after the first decode step

    def describe(self) -> str:
        s = self.settings
        path = (cpu_path_name(s.packing) if self.device.type == "cpu"
                else f"e2e.kernels.PATHS[{s.packing!r}] on {self.device}")
        draft = ("draft steps refresh the buffers in place with the same path" if s.draft_update
                 else "draft steps rebuild dense indices and pack with the main structure")
        return (f"mode=inject packing={s.packing} -> {path}; packs_per_step={s.packs_per_step} "
                f"window={s.window} draft_update={str(s.draft_update).lower()} ({draft}) "
                f"step_delay_us={s.step_delay_us}"
                + (f" perturb={s.perturb:g} (first layer's MLP output x (1 + {s.perturb:g}))"
                   if s.perturb else ""))

    def on_step(self, runner: Any, scheduler_output: Any) -> int:
        """Do one decode step's packing work; returns the number of decode tokens (0: a
        prefill-only or empty step, nothing done)."""
        batch = runner.input_batch
        scheduled = scheduler_output.num_scheduled_tokens
        rows: list[int] = []
        positions: list[int] = []
        for index, req_id in enumerate(batch.req_ids):
            count = scheduled.get(req_id, 0)
            computed = int(batch.num_computed_tokens_cpu[index])
            if not count or computed < int(batch.num_prompt_tokens[index]):
                continue  # not scheduled, or still in prefill
            rows.extend([index] * count)
            positions.extend(range(computed, computed + count))
        if not rows:
            return 0
        table = batch.block_table.block_tables[0]
        capacity = self.indptr_buffer.numel() - 1
        rows = rows[:capacity]
        positions = positions[:capacity]
        if self.one_pass:
            return self._one_pass_step(table, rows, positions, scheduler_output)
        dense, lengths = swa_window_indices(
            table.block_table.cpu, torch.tensor(rows), torch.tensor(positions),
            table.block_size, self.settings.window)
        if self.device.type != "cpu":
            dense, lengths = dense.to(self.device), lengths.to(self.device)
        for _ in range(self.settings.packs_per_step):
            self.pack(dense, lengths, self.indices_buffer, self.indptr_buffer)
        spec = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        draft_steps = max((len(tokens) for tokens in spec.values()), default=0)
        for _ in range(draft_steps):
            if self.settings.draft_update:
                self.pack(dense, lengths, self.indices_buffer, self.indptr_buffer)
            else:
                fresh = dense.clone()
                self.rebuild(fresh, lengths, self.indices_buffer, self.indptr_buffer)
        return self._finish_step(len(rows))

    def _finish_step(self, tokens: int) -> int:
        if self.settings.step_delay_us:
            busy_wait_us(self.settings.step_delay_us)
        self.decode_steps += 1
        if self.decode_steps == 1:
            self.on_first_step(tokens)
        return tokens

    def _one_pass_step(self, table, rows: list[int], positions: list[int],
                       scheduler_output: Any) -> int:
        """``meta`` on CPU: every build (``packs_per_step`` of them, and one per draft step)
        computes the window rows and packs them in one pass, as the one launch does."""
        block_table = table.block_table.cpu
        rows_t, positions_t = torch.tensor(rows), torch.tensor(positions)
        spec = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        draft_steps = max((len(tokens) for tokens in spec.values()), default=0)
        for _ in range(self.settings.packs_per_step + draft_steps):
            cpu_window_and_pack(block_table, rows_t, positions_t, table.block_size,
                                self.settings.window, self.dense_buffer, self.lens_buffer,
                                self.indices_buffer, self.indptr_buffer)
        return self._finish_step(len(rows))


def patch_model_runner(cls: type, settings: PluginSettings, applied, say) -> None:
    """Wrap ``cls.__init__`` (to create the injector and log the applied line) and
    ``cls.execute_model`` (to run the per-step work after vLLM's own). ``applied(where,
    what)`` logs the applied line, ``say(text)`` any other. Idempotent per class."""
    if cls.__dict__.get("_e2e_inject_patched"):
        return
    original_init = cls.__init__
    original_execute = cls.execute_model

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        device = torch.device(getattr(self, "device", "cpu"))
        max_tokens = int(getattr(self, "max_num_tokens", 0) or 8192)
        self._e2e_injector = Injector(settings, max_tokens=max_tokens, device=device)
        applied(f"{type(self).__name__}", self._e2e_injector.describe())
        self._e2e_injector.on_first_step = lambda tokens: say(
            f"first decode step in worker (pid {os.getpid()}): {tokens} decode token(s), "
            f"window indices packed {settings.packs_per_step} times"
            + (f", {settings.step_delay_us} us busy wait" if settings.step_delay_us else ""))

    def execute_model(self, scheduler_output, *args, **kwargs):
        output = original_execute(self, scheduler_output, *args, **kwargs)
        injector = getattr(self, "_e2e_injector", None)
        if injector is not None:
            injector.on_step(self, scheduler_output)
        return output

    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    execute_model.__wrapped__ = original_execute  # type: ignore[attr-defined]
    cls.__init__ = __init__
    cls.execute_model = execute_model
    cls._e2e_inject_patched = True
