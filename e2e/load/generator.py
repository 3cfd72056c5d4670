"""The load generator: seeded random token-id prompts, streamed ``/v1/completions`` requests,
one ``RequestRecord`` per request, and what the client itself cost (``ClientStats``).

Two modes: closed loop (``concurrency`` streams, each sending its next prompt as soon as the
last one ends; the reference's mode and the default) and open loop (``request_rate``: requests
sent at seeded gamma-process times, at most ``max_concurrency`` in flight). ``workers`` > 1
spreads the streams over that many client processes, each on its own core. How it works and
what it costs: docs/explanation/load.md. The private parts live beside it in ``e2e.load``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from e2e.errors import ConfigError
from e2e.load._arrivals import arrival_times
from e2e.load.clientstats import ClientStats, client_stats
from e2e.load.stream import Shard, run_loop, run_shard
from e2e.load.workers import run_workers, split_requests
from e2e.results.records import RequestRecord

__all__ = ["LoadSpec", "LoadOutcome", "ClientStats", "make_prompts", "vocabulary", "drive",
           "run_load", "run_measured_load", "split_load"]


@dataclass(frozen=True)
class LoadSpec:
    """What to send, how hard, from how many client processes (validated on construction)."""

    base_url: str
    model: str
    prompts: Sequence[Sequence[int]]
    output_len: int
    concurrency: int
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 60.0
    headers: dict[str, str] = field(default_factory=dict)
    path: str = "/v1/completions"
    workers: int = 1
    """Client processes; streams (or arrivals) are split over them, one core each."""
    request_rate: float | None = None
    """Open loop: requests/s (gamma arrivals); None = closed loop at ``concurrency``."""
    burstiness: float = 1.0
    """Gamma shape of the inter-arrival gaps: 1 = Poisson, < 1 burstier, > 1 steadier."""
    max_concurrency: int | None = None
    """Open loop: at most this many requests in flight (later sends wait); None = no cap."""
    seed: int = 0
    """Seed of the arrival schedule (the same for every arm)."""
    output_lens: Sequence[int] | None = None
    """Per prompt ``max_tokens`` (a workload's, e.g. a trace's); None: ``output_len`` for all."""
    at_s: Sequence[float] | None = None
    """Open loop on a given schedule (a trace's arrival times, seconds from the load's start,
    ascending, one per prompt) instead of ``request_rate``'s gamma process."""
    sessions: Sequence[Sequence[int]] | None = None
    """Closed loop of conversations: each a list of prompt indices sent one after another
    (the next ``think_s`` after the last ended), ``concurrency`` sessions at once."""
    think_s: float = 0.0
    record_outputs: bool = True
    """Ask the server for each request's token ids (vLLM's ``return_token_ids``) and keep the
    completion's in its record; a server that sends none records none."""

    def __post_init__(self) -> None:
        bad = []
        if self.concurrency < 1:
            bad.append(f"concurrency must be >= 1 (got {self.concurrency})")
        if self.workers < 1:
            bad.append(f"workers must be >= 1 (got {self.workers})")
        if self.request_rate is not None and not self.request_rate > 0:
            bad.append(f"request_rate must be > 0 requests/s (got {self.request_rate})")
        if not self.burstiness > 0:
            bad.append(f"burstiness must be > 0 (got {self.burstiness}); 1 is Poisson")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            bad.append(f"max_concurrency must be >= 1 (got {self.max_concurrency})")
        if self.output_lens is not None and (len(self.output_lens) != len(self.prompts)
                                             or any(n < 1 for n in self.output_lens)):
            bad.append("output_lens must give every prompt a length >= 1")
        if self.at_s is not None:
            times = np.asarray(self.at_s, dtype=float)
            if (len(times) != len(self.prompts) or not np.all(np.isfinite(times))
                    or (times.size and (times[0] < 0 or np.any(np.diff(times) < 0)))):
                bad.append("at_s must give every prompt a finite send time >= 0, ascending")
        if self.sessions is not None:
            flat = sorted(i for s in self.sessions for i in s)
            if flat != list(range(len(self.prompts))):
                bad.append("sessions must name every prompt index exactly once")
            if self.open_loop:
                bad.append("sessions are a closed loop: give no request_rate or at_s with them")
            if self.workers > 1:
                bad.append("a multi-turn load runs in one client process (workers = 1)")
        if not (self.think_s >= 0):
            bad.append(f"think_s must be >= 0 (got {self.think_s})")
        if bad:
            raise ConfigError("load: " + "; ".join(bad))

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None or self.at_s is not None


def _tokenizer_file(model: str) -> Path | None:
    """tokenizer.json of a local model folder, or of a hub model in the Hugging Face cache."""
    local = Path(model).expanduser() / "tokenizer.json"
    if local.exists():
        return local
    if "/" not in model or Path(model).expanduser().exists():
        return None
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    snapshots = hub / ("models--" + model.replace("/", "--")) / "snapshots"
    found = sorted(snapshots.glob("*/tokenizer.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def vocabulary(model: str) -> tuple[int, list[int]]:
    """(vocabulary size, special token ids) from the model's tokenizer.json (a local folder,
    or the Hugging Face cache for a hub name)."""
    tokenizer = _tokenizer_file(model)
    if tokenizer is None:
        raise ConfigError(
            f"cannot find tokenizer.json for model {model!r}: e2e draws prompt token ids from "
            "the model's tokenizer; point server.model at a local model folder, or download "
            "the model into the Hugging Face cache first"
        )
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    specials = sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)
    return tok.get_vocab_size(with_added_tokens=True), specials


def make_prompts(n: int, length: int, *, vocab_size: int, exclude: Sequence[int] = (),
                 seed: int = 0, stream: int = 0) -> list[list[int]]:
    """``n`` prompts of exactly ``length`` token ids, uniform over the vocabulary without the
    special tokens; the same for every arm at the same seed. ``stream`` separates warmup
    prompts from measured ones (so warmups never warm the prefix cache for them)."""
    allowed = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.asarray(exclude, dtype=np.int64))
    if allowed.size == 0:
        raise ConfigError("the model's vocabulary has no non-special tokens to draw from")
    rng = np.random.Generator(np.random.PCG64([seed, stream]))
    return rng.choice(allowed, size=(n, length), replace=True).tolist()


@dataclass(frozen=True)
class LoadOutcome:
    """One load: its records (index order), what the client cost, and the request rates.

    ``offered_rate``: the open loop's requests/s (None for a closed loop). ``achieved_rate``:
    open loop, requests sent per second (n / time of the last send; the schedule puts the
    last arrival at exactly n / rate, so it equals ``offered_rate`` when no send was late);
    closed loop, requests completed per second over the load. ``scheduled_s``: an open loop's
    send times (seconds from the load's start, by request index; None for a closed loop)."""

    records: list[RequestRecord]
    client: ClientStats
    offered_rate: float | None
    achieved_rate: float | None
    scheduled_s: tuple[float, ...] | None = None


def _schedule(spec: LoadSpec) -> np.ndarray | None:
    """An open loop's send times (a workload's own, or ``request_rate``'s gamma schedule)."""
    if not spec.open_loop:
        return None
    return (np.asarray(spec.at_s, dtype=float) if spec.at_s is not None else
            arrival_times(len(spec.prompts), spec.request_rate, burstiness=spec.burstiness,
                          seed=spec.seed))


def split_load(spec: LoadSpec, at: np.ndarray | None) -> list[Shard]:
    """The load split over its client processes; ``at``: its schedule (``_schedule``)."""
    n = len(spec.prompts)
    if at is None:
        workers = min(spec.workers, spec.concurrency)
    else:
        workers = min(spec.workers, spec.max_concurrency or spec.workers)
    workers = max(1, min(workers, n))
    parts = split_requests(n, workers, streams=spec.concurrency if at is None else None,
                           at_s=None if at is None else at.tolist(), cap=spec.max_concurrency)
    lens = spec.output_lens
    return [Shard(indices=tuple(ix), prompts=tuple(spec.prompts[i] for i in ix),
                  at_s=None if times is None else tuple(times), cap=cap,
                  max_tokens=None if lens is None else tuple(int(lens[i]) for i in ix),
                  sessions=None if spec.sessions is None else tuple(tuple(s) for s in spec.sessions),
                  think_s=spec.think_s)
            for ix, times, cap in parts]


async def drive(spec: LoadSpec,
                on_done: Callable[[RequestRecord], None] | None = None) -> list[RequestRecord]:
    """Send every prompt from this process (``spec.workers`` is not used here: see
    ``run_measured_load``); records in prompt order. Records finished before an interruption
    are passed to ``on_done`` as they finish."""
    (shard,) = split_load(replace(spec, workers=1), _schedule(spec))
    records, _ = await run_shard(spec, shard, time.perf_counter, on_done)
    return records


@contextmanager
def _progress(show: bool, label: str, total: int) -> Iterator[Callable[[], None]]:
    if not show:
        yield lambda: None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def _achieved_rate(spec: LoadSpec, records: Sequence[RequestRecord],
                   wall_s: float) -> float | None:
    if not records:
        return None
    if spec.open_loop:
        last = max(r.send_s for r in records)
        return len(records) / last if last > 0 else None
    ok = sum(1 for r in records if r.ok)
    return ok / wall_s if wall_s > 0 else None


def run_measured_load(spec: LoadSpec, *, progress: bool = True, label: str = "requests",
                      on_done: Callable[[RequestRecord], None] | None = None) -> LoadOutcome:
    """Run the load over ``spec.workers`` client processes (1 = this process) with a progress
    bar (rich) on stderr; the records, the client's own cost and the offered/achieved rates."""
    with _progress(progress, label, len(spec.prompts)) as advance:

        def done(record: RequestRecord) -> None:
            advance()
            if on_done is not None:
                on_done(record)

        at = _schedule(spec)
        shards = split_load(spec, at)
        if len(shards) == 1:
            # the schedule's clock starts when the loop is ready (e2e.load.stream)
            records, usage = run_loop(run_shard(spec, shards[0], time.perf_counter, done))
            usages = [usage]
        else:
            # the shards carry the prompts, their lengths and times
            records, usages = run_workers(replace(spec, prompts=(), output_lens=None, at_s=None),
                                          shards, done)
    client = client_stats(usages)
    offered = spec.request_rate
    if spec.at_s is not None and len(spec.at_s) and spec.at_s[-1] > 0:
        offered = len(spec.at_s) / spec.at_s[-1]  # the schedule's own rate, as a gamma one's
    return LoadOutcome(records=records, client=client, offered_rate=offered,
                       achieved_rate=_achieved_rate(spec, records, client.wall_s),
                       scheduled_s=None if at is None else tuple(at.tolist()))


def run_load(spec: LoadSpec, *, progress: bool = True, label: str = "requests",
             on_done: Callable[[RequestRecord], None] | None = None) -> list[RequestRecord]:
    """``run_measured_load``'s records only."""
    return run_measured_load(spec, progress=progress, label=label, on_done=on_done).records
