"""What a load run may cost, checked before any server starts: how long its arrival schedule
lasts, how many prompt tokens the load generator must hold, and whether its longest request
fits the model's context.

    check_units(experiment, units)      raises ConfigError (exit 2) naming what it would take
    schedule_s(spec)                    -> Schedule   the seconds its arrivals span, and why
    schedule_limit_s(spec, load)        -> (seconds, how the limit was derived)
    prompt_tokens(spec)                 -> int        every prompt token of its windows and warmup
    longest_request(spec)               -> (prompt, completion) tokens of its longest request
    model_context(experiment, arm)      -> (tokens, where it was read) | None

**Schedule.** An open loop at ``rate`` sends its ``n`` requests over ``n / rate`` seconds (the
schedule puts the last arrival there), a trace over its last timestamp minus its first,
divided by ``speedup``, a multi-turn load waits ``think_s`` between the turns of each of the
sessions a stream runs one after another; a run of ``windows`` windows does it that many
times. The limit (``load.max_schedule_s``, ``--max-schedule``) defaults to
``prompts x load.request_timeout_s`` (finite: both are bounded, and the limit is at most
``e2e.config.MAX_SCHEDULE_S``): a schedule longer than that leaves the server idle
longer, on average between arrivals, than one request may take, and is not a load (a
capacity search down to ``--min-rate 1e-6`` would wait 11 days for its second request).

**Tokens.** The prompts are drawn before the load starts and held as token-id lists, about 40
bytes of the client's memory per token (docs/measurements/bounds.md);
``load.max_prompt_tokens`` bounds them (a multi-turn load of 2,000 sessions x 1,000 turns
asks for about 6e11).

**Context.** A request whose prompt and completion together exceed the model's context is
refused by the server (vLLM: HTTP 400), so every such run would be invalid: refused here. The
context is the last ``--max-model-len`` of the server's and the arm's args, else the model
folder's ``config.json`` ``max_position_embeddings``; unknown (a hub name, an external server)
is not checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e.config import MAX_SCHEDULE_S, Experiment, LoadConfig, MultiTurn, SharedPrefix, TraceReplay
from e2e.plan import RunSpec, Unit
from e2e.errors import ConfigError

__all__ = ["Schedule", "check_units", "schedule_s", "schedule_limit_s", "prompt_tokens",
           "longest_request", "model_context", "BYTES_PER_TOKEN"]

BYTES_PER_TOKEN = 40  # a prompt token's share of the client's memory as a list of Python ints


@dataclass(frozen=True)
class Schedule:
    """How long a run's arrivals span (``seconds``, all windows), in words (``what``), and what
    change would bring it within ``limit_s`` (``fix(limit_s)``)."""

    seconds: float
    what: str
    knob: str = ""         # the setting that shortens it
    per_unit: float = 0.0  # seconds = per_unit / knob (a rate, a speedup), or per_unit x think_s

    def fix(self, limit_s: float) -> str:
        if not self.knob or limit_s <= 0:
            return ""
        if self.knob == "think_s":  # waits x think_s <= limit
            return f"a think_s of at most {_down(limit_s / self.per_unit):g} s"
        least = _up(self.per_unit / limit_s)  # per_unit / x <= limit
        return f"a rate of at least {least:g} req/s" if self.knob == "rate" else \
            f"a {self.knob} of at least {least:g}"


def _up(x: float) -> float:
    """``x`` to 3 significant digits, rounded up (a bound that meets the limit)."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / scale - 1e-9) * scale


def _down(x: float) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 2)
    return math.floor(x / scale + 1e-9) * scale


def _trace(spec: RunSpec):
    from e2e.traces import read_trace

    shape = spec.workload
    return read_trace(shape.path, block_size=shape.block_size, max_requests=spec.prompts)


def schedule_s(spec: RunSpec, trace=None) -> Schedule:
    """The seconds ``spec``'s arrivals span over all its windows (0: a closed loop that sends
    each request when the last one ends)."""
    shape, w = spec.workload, spec.windows
    windows = f" x {w} windows" if w > 1 else ""
    if isinstance(shape, TraceReplay):
        trace = trace or _trace(spec)
        span_ms = trace.requests[-1].timestamp - trace.requests[0].timestamp
        return Schedule(w * span_ms / 1000.0 / shape.speedup,
                        f"its trace's {len(trace.requests):,} arrivals over {span_ms:,.0f} ms at "
                        f"speedup {shape.speedup:g}{windows}", "speedup",
                        w * span_ms / 1000.0)
    if spec.request_rate is not None:
        return Schedule(w * spec.prompts / spec.request_rate,
                        f"{spec.prompts:,} requests at {spec.request_rate:g} req/s{windows}",
                        "rate", w * spec.prompts)
    if isinstance(shape, MultiTurn) and shape.think_s > 0:
        rounds = math.ceil(shape.sessions / min(spec.concurrency, shape.sessions))
        waits = w * rounds * (shape.turns - 1)
        return Schedule(waits * shape.think_s,
                        f"{waits:,} think times of {shape.think_s:g} s one after another on each "
                        f"stream", "think_s", waits)
    return Schedule(0.0, "a closed loop")


def schedule_limit_s(spec: RunSpec, load: LoadConfig) -> tuple[float, str]:
    """The longest schedule ``spec`` may have, and how that limit was set."""
    if load.max_schedule_s is not None:
        return load.max_schedule_s, "load.max_schedule_s"
    n = spec.prompts * spec.windows
    how = f"{n:,} requests x the {load.request_timeout_s:g} s load.request_timeout_s"
    if n * load.request_timeout_s > MAX_SCHEDULE_S:  # finite whatever the timeout
        return MAX_SCHEDULE_S, f"{how}, at most the longest load.max_schedule_s"
    return n * load.request_timeout_s, how


def prompt_tokens(spec: RunSpec, trace=None) -> int:
    """Every prompt token the load generator draws for ``spec``: its measured windows (each
    its own prompts) and its warmup requests."""
    shape = spec.workload
    if isinstance(shape, TraceReplay):
        trace = trace or _trace(spec)
        measured = sum(r.input_length for r in trace.requests)
    elif isinstance(shape, MultiTurn):
        t, grow = shape.turns, spec.output_len + shape.user_len
        measured = shape.sessions * (t * spec.input_len + grow * t * (t - 1) // 2)
    else:  # the reference load and a shared prefix: prompts x input_len
        measured = spec.prompts * spec.input_len
    return spec.windows * measured + spec.warmup_requests * spec.input_len


def longest_request(spec: RunSpec, trace=None) -> tuple[int, int]:
    """(prompt, completion) tokens of ``spec``'s longest request (warmup included)."""
    shape = spec.workload
    longest = (spec.input_len, spec.output_len)
    if isinstance(shape, TraceReplay):
        trace = trace or _trace(spec)
        r = max(trace.requests, key=lambda r: r.input_length + r.output_length)
        if spec.warmup_requests == 0 or r.input_length + r.output_length > sum(longest):
            longest = (r.input_length, r.output_length)
    elif isinstance(shape, MultiTurn):
        longest = (spec.input_len + (shape.turns - 1) * (spec.output_len + shape.user_len),
                   spec.output_len)
    return longest


_MAX_MODEL_LEN = re.compile(r"^--max[-_]model[-_]len(?:=(.*))?$")


def _tokens(text: str) -> int | None:
    """vLLM's ``--max-model-len`` value: a whole number, or with a suffix (k = 1000,
    K = 1024, m/M, g/G likewise); None for -1 or 'auto' (the model's own maximum)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", str(text))
    if not match:
        return None
    number, suffix = float(match.group(1)), match.group(2)
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9,
             "K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    value = int(number * scale)
    return value if value > 0 else None


def model_context(experiment: Experiment, arm: str) -> tuple[int, str] | None:
    """The model's context in tokens and where it was read, or None where e2e cannot tell."""
    if experiment.server.external:
        return None
    args = [*experiment.server.args, *experiment.arm(arm).args]
    found: tuple[int, str] | None = None
    for i, arg in enumerate(args):
        match = _MAX_MODEL_LEN.match(arg)
        if match:
            text = match.group(1) if match.group(1) is not None else (
                args[i + 1] if i + 1 < len(args) else "")
            value = _tokens(text)
            found = (value, f"--max-model-len {text}") if value else None
    if found is not None:
        return found
    return _config_context(experiment.server.model)


def _config_context(model: str) -> tuple[int, str] | None:
    from e2e.paths import read_bounded
    from e2e.session.tinymodel import TINY_LLAMA, TinyLlamaSpec, model_path

    if model == TINY_LLAMA:
        return TinyLlamaSpec.max_positions, f"{TINY_LLAMA}'s max_position_embeddings"
    config = Path(model_path(model)) / "config.json"
    if not config.is_file():
        return None
    try:
        doc = json.loads(read_bounded(config, 1 << 20, expect="a model's config.json",
                                      regular=True))
        value = doc.get("max_position_embeddings") if isinstance(doc, dict) else None
    except (ConfigError, ValueError, RecursionError):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, f"{config}'s max_position_embeddings"
    return None


def _human(seconds: float) -> str:
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("h", 3600.0),
                       ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.3g} {unit}"
    return f"{seconds:,.3g} s"


def _check(experiment: Experiment, spec: RunSpec, context: tuple[int, str] | None) -> None:
    load = experiment.load
    trace = _trace(spec) if isinstance(spec.workload, TraceReplay) else None
    if context is not None:
        prompt, completion = longest_request(spec, trace)
        if prompt + completion > context[0]:
            raise ConfigError(
                f"{_name(spec)}: its longest request is {prompt + completion:,} tokens (prompt "
                f"{prompt:,} + completion {completion:,}), more than the model's context of "
                f"{context[0]:,} tokens ({context[1]}): the server would refuse it; shorten the "
                f"workload ({_knobs(spec)}) or give the server a longer --max-model-len")
    tokens = prompt_tokens(spec, trace)
    if tokens > load.max_prompt_tokens:
        raise ConfigError(
            f"{_name(spec)}: its prompts hold {tokens:,} tokens ({_shape_words(spec)}), more "
            f"than load.max_prompt_tokens {load.max_prompt_tokens:,} (the load generator holds "
            f"every prompt, about {BYTES_PER_TOKEN} bytes a token: "
            f"{tokens * BYTES_PER_TOKEN / 2**30:,.1f} GiB): make the workload smaller, or raise "
            "load.max_prompt_tokens if the memory is there")
    schedule = schedule_s(spec, trace)
    limit, how = schedule_limit_s(spec, load)
    if schedule.seconds > limit:
        ways = [f"give {schedule.fix(limit)}"] if schedule.fix(limit) else []
        if schedule.seconds <= MAX_SCHEDULE_S:  # beyond it no limit may be raised to it
            ways.append(f"allow it with --max-schedule {math.ceil(schedule.seconds)} "
                        "(load.max_schedule_s)")
        raise ConfigError(
            f"{_name(spec)}: its arrivals span {_human(schedule.seconds)} ({schedule.what}), "
            f"longer than the limit of {_human(limit)} ({how}): " + ", or ".join(ways))


def _name(spec: RunSpec) -> str:
    """The run's id, or for an id no folder could have (a rate of hundreds of digits) its arm
    and concurrency."""
    run_id = spec.run_id
    return run_id if len(run_id) <= 64 else f"{spec.arm}'s run at concurrency {spec.concurrency}"


def _shape_words(spec: RunSpec) -> str:
    shape = spec.workload
    windows = f" x {spec.windows} windows" if spec.windows > 1 else ""
    if isinstance(shape, MultiTurn):
        return (f"{shape.sessions:,} sessions x {shape.turns:,} turns, each turn's prompt "
                f"{spec.output_len + shape.user_len:,} tokens longer than the last{windows}")
    if isinstance(shape, TraceReplay):
        return f"the trace's {spec.prompts:,} prompts{windows}"
    return f"{spec.prompts:,} prompts x {spec.input_len:,} tokens{windows}"


def _knobs(spec: RunSpec) -> str:
    shape = spec.workload
    if isinstance(shape, MultiTurn):
        return "input_len, output_len, user_len or turns"
    if isinstance(shape, TraceReplay):
        return "a trace with shorter requests"
    if isinstance(shape, SharedPrefix):
        return "input_len or output_len"
    return "--input-len or --output-len"


def check_units(experiment: Experiment, units: Iterable[Unit]) -> None:
    """Raise ConfigError for the first load run of ``units`` (a duet's sides included) whose
    schedule, prompt tokens or longest request is out of bounds (module docstring). Runs that
    differ only in arm, round or slot are checked once."""
    seen: set[str] = set()
    contexts: dict[str, tuple[int, str] | None] = {}
    for unit in units:
        for spec in unit.sides:
            if not isinstance(spec, RunSpec):
                continue
            if spec.arm not in contexts:
                contexts[spec.arm] = model_context(experiment, spec.arm)
            key = spec.model_dump_json(exclude={"arm", "repeat", "duet", "slot"}) + \
                repr(contexts[spec.arm])
            if key in seen:
                continue
            seen.add(key)
            _check(experiment, spec, contexts[spec.arm])
