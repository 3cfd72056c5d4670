"""Workloads: what the measured requests of a run look like, drawn before anything is sent.

    traffic(spec, vocab_size=..., exclude=..., stream=0) -> Traffic

A ``Traffic`` is every request of one load, fixed in advance: its prompt (token ids, so its
length is exact), its ``max_tokens``, its send time (None: the closed loop at the spec's
concurrency, or ``request_rate``'s gamma schedule) and the segment it belongs to (the part of
the run it is reported with). It is a pure function of the spec (and for a trace, the trace
file's bytes), so every arm gets the same one; ``Traffic.sha256`` hashes all of it and lands in
run.json. Kinds (``spec.workload``; docs/explanation/load.md, "Workloads"):

- **reference** (``workload`` None): ``spec.prompts`` uniform random prompts of exactly
  ``input_len`` tokens (``make_prompts``), ``output_len`` each.
- **shared-prefix** (``SharedPrefix``): ``groups`` x ``per_group`` requests; a group's requests
  share their first ``prefix_len`` tokens and have their own random rest, sent in a seeded
  shuffled order. Segments: ``first`` (the first request of its group to be sent) and
  ``later`` (the rest: those the prefix cache can serve).
- **trace** (``TraceReplay``): a Mooncake-format trace (``e2e.traces``): each hash id is one
  block of ``block_size`` random tokens drawn once per id, so requests that share hash ids
  share exact token prefixes; a prompt is its blocks cut to ``input_length``; send times are
  the trace's (from its first arrival, divided by ``speedup``). Segments: equal-time parts.
- **multi-turn** (``MultiTurn``): ``sessions`` conversations of ``turns`` turns; turn k's
  prompt is turn k-1's, its reply (``output_len`` random tokens fixed in advance: the server's
  own reply would differ between arms) and a new user message of ``user_len`` tokens. Each of
  ``concurrency`` streams runs whole sessions, a turn sent ``think_s`` after the last ended.
  Segments: ``turn 1``, ``turn 2``, ... (TTFT of the first turn against later ones).

Warmup requests never share a prefix with measured ones: they are the reference's prompts of
their own seeded stream (``make_prompts(..., stream=1)``), so a warmup cannot warm the prefix
cache for the measured load (recorded in run.json's ``workload.warmup``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from e2e.config import MultiTurn, SharedPrefix, TraceReplay
from e2e.plan import RunSpec
from e2e.errors import ConfigError
from e2e.load.generator import make_prompts
from e2e.traces import read_trace

__all__ = ["Traffic", "traffic", "WARMUP_NOTE"]

WARMUP_NOTE = ("warmup requests are random prompts of their own seeded stream: they share no "
               "prefix with the measured requests, so they do not warm the prefix cache for them")

_SHARED = 0x5B  # stream tags: one generator per purpose, never the reference's own streams
_BLOCK = 0xB1
_TAIL = 0x7A
_TURNS = 0x3C


@dataclass(frozen=True)
class Traffic:
    """Every request of one load, fixed before it starts (see the module docstring)."""

    kind: str
    prompts: list[list[int]]
    output_lens: list[int]
    at_s: list[float] | None
    segments: list[str]
    source_sha256: str | None = None  # a trace file's bytes
    sessions: list[list[int]] | None = None  # multi-turn: each conversation's requests in order
    think_s: float = 0.0

    @property
    def input_lens(self) -> list[int]:
        return [len(p) for p in self.prompts]

    def sha256(self) -> str:
        """SHA-256 of the prompts, lengths, send times (to the microsecond) and segments:
        equal for two runs exactly when they sent the same requests on the same schedule."""
        h = hashlib.sha256(self.kind.encode())
        for i, prompt in enumerate(self.prompts):
            h.update(np.asarray(prompt, dtype=np.int64).tobytes())
            at = "" if self.at_s is None else f"{round(self.at_s[i] * 1e6)}"
            h.update(f"|{self.output_lens[i]}|{at}|{self.segments[i]}\n".encode())
        if self.sessions is not None:
            h.update(f"sessions {self.sessions} think {self.think_s!r}".encode())
        return h.hexdigest()


def _allowed(vocab_size: int, exclude: Sequence[int]) -> np.ndarray:
    allowed = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.asarray(exclude, dtype=np.int64))
    if allowed.size == 0:
        raise ConfigError("the model's vocabulary has no non-special tokens to draw from")
    return allowed


def _rng(seed: int, *words: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed & (2**64 - 1), *words]))


def _reference(spec: RunSpec, vocab_size: int, exclude: Sequence[int], stream: int) -> Traffic:
    prompts = make_prompts(spec.prompts, spec.input_len, vocab_size=vocab_size,
                           exclude=exclude, seed=spec.seed, stream=stream)
    return Traffic("reference", prompts, [spec.output_len] * len(prompts), None,
                   ["all"] * len(prompts))


def _shared_prefix(spec: RunSpec, shape: SharedPrefix, allowed: np.ndarray,
                   stream: int) -> Traffic:
    if shape.prefix_len >= spec.input_len:
        raise ConfigError(f"shared-prefix workload: prefix_len {shape.prefix_len} must be "
                          f"shorter than input_len {spec.input_len} (each request needs a "
                          "suffix of its own)")
    rng = _rng(spec.seed, _SHARED, stream)
    prefixes = rng.choice(allowed, size=(shape.groups, shape.prefix_len))
    n = shape.groups * shape.per_group
    if n != spec.prompts:
        raise ConfigError(f"shared-prefix workload: {shape.groups} groups x {shape.per_group} "
                          f"requests is {n}, the run asks for {spec.prompts}")
    suffixes = rng.choice(allowed, size=(n, spec.input_len - shape.prefix_len))
    group = np.repeat(np.arange(shape.groups), shape.per_group)
    order = rng.permutation(n)
    prompts, segments, seen = [], [], set()
    for j, i in enumerate(order):
        g = int(group[i])
        prompts.append(np.concatenate([prefixes[g], suffixes[i]]).tolist())
        segments.append("later" if g in seen else "first")
        seen.add(g)
    return Traffic("shared-prefix", prompts, [spec.output_len] * n, None, segments)


def _trace(spec: RunSpec, shape: TraceReplay, allowed: np.ndarray, stream: int) -> Traffic:
    trace = read_trace(shape.path, block_size=shape.block_size, max_requests=spec.prompts)
    if len(trace.requests) != spec.prompts:
        raise ConfigError(f"trace {shape.path} holds {len(trace.requests)} requests, the run "
                          f"asks for {spec.prompts}: has the file changed since the plan?")
    blocks: dict[int, np.ndarray] = {}

    def block(hash_id: int) -> np.ndarray:
        if hash_id not in blocks:  # one block per id, the same wherever the id appears
            blocks[hash_id] = _rng(spec.seed, _BLOCK, stream, hash_id).choice(
                allowed, size=shape.block_size)
        return blocks[hash_id]

    prompts = []
    for i, request in enumerate(trace.requests):
        parts = [block(h) for h in request.hash_ids]
        have = len(parts) * shape.block_size
        if have < request.input_length:  # no hash ids: a prompt of its own
            parts.append(_rng(spec.seed, _TAIL, stream, i).choice(
                allowed, size=request.input_length - have))
        prompts.append(np.concatenate(parts)[:request.input_length].tolist())
    first = trace.requests[0].timestamp
    at = [(r.timestamp - first) / 1000.0 / shape.speedup for r in trace.requests]
    span = at[-1]
    k = shape.segments
    segments = [f"segment {min(int(t / span * k), k - 1) + 1 if span > 0 else 1}/{k}"
                for t in at]
    return Traffic("trace", prompts, [r.output_length for r in trace.requests], at, segments,
                   source_sha256=trace.sha256)


def _multi_turn(spec: RunSpec, shape: MultiTurn, allowed: np.ndarray, stream: int) -> Traffic:
    rng = _rng(spec.seed, _TURNS, stream)
    prompts, sessions, segments = [], [], []
    for s in range(shape.sessions):
        history = rng.choice(allowed, size=spec.input_len)
        turns = []
        for k in range(shape.turns):
            if k:  # the last turn, its reply (fixed in advance) and a new user message
                history = np.concatenate([history, rng.choice(allowed, size=spec.output_len),
                                          rng.choice(allowed, size=shape.user_len)])
            turns.append(len(prompts))
            prompts.append(history.tolist())
            segments.append(f"turn {k + 1}")
        sessions.append(turns)
    return Traffic("multi-turn", prompts, [spec.output_len] * len(prompts), None, segments,
                   sessions=sessions, think_s=shape.think_s)


def traffic(spec: RunSpec, *, vocab_size: int, exclude: Sequence[int] = (),
            stream: int = 0) -> Traffic:
    """The requests ``spec``'s workload sends (``stream`` separates a run's load windows)."""
    shape = spec.workload
    if shape is None:
        return _reference(spec, vocab_size, exclude, stream)
    allowed = _allowed(vocab_size, exclude)
    if isinstance(shape, SharedPrefix):
        return _shared_prefix(spec, shape, allowed, stream)
    if isinstance(shape, TraceReplay):
        return _trace(spec, shape, allowed, stream)
    if isinstance(shape, MultiTurn):
        return _multi_turn(spec, shape, allowed, stream)
    raise TypeError(f"no traffic for workload {shape!r}")  # pragma: no cover - a new kind
