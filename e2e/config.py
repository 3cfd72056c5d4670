"""The experiment config: the schema of its TOML, validated once into immutable pydantic models.

Nothing below the CLI sees argv or raw TOML: ``load_experiment`` turns a file into an
``Experiment`` (``e2e.console.validated`` says what is wrong, key by key), ``override``
narrows it with a command's flags, and ``e2e.plan`` makes its units. The checks of its
strings are ``e2e.names``; a speculator profile's rules, ``e2e.arms``.
"""

from __future__ import annotations

import datetime
import itertools
import math
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter,
                      ValidationError, ValidationInfo, field_validator, model_validator)

from e2e.console import validated
from e2e.errors import ConfigError, E2EError
from e2e.names import ArgList, CpuList, EnvTable, check_wheel, plugin_settings
from e2e.names import known_name, number_tag, parse_cpus, safe_name
from e2e.paths import read_toml
from e2e.redact import DEFAULT_SECRET_PATTERN, Redactor, remember
from e2e.arms import PIN_KEY, check_pin, default_profile

__all__ = ["Table", "finite", "equivalence_band", "Tokens", "OutputTokens", "Seed", "Date",
           "parse_date", "MAX_WAIT_S", "MAX_SCHEDULE_S", "Experiment", "GitSource", "BuildSpec",
           "ServerConfig", "LoadConfig", "SharedPrefix", "TraceReplay", "MultiTurn",
           "WorkloadConfig", "ArmConfig", "MutantConfig", "UnitConfig", "ExecutorConfig",
           "DuetSlot", "DuetConfig", "PositiveInt", "DEFAULT_CONFIG", "load_experiment",
           "parse_experiment", "MAX_REPEATS", "MAX_CONCURRENCY", "MAX_PROMPTS", "MAX_WINDOWS",
           "MAX_RATE", "SHAPE_KEYS", "defaulted_load_keys"]

DEFAULT_CONFIG = "default.toml"


# Bounds on counts a config or a flag gives: far above any real use, far below what would
# exhaust memory when a plan is listed.
MAX_REPEATS = 10_000
MAX_CONCURRENCY = 1_000_000
MAX_PROMPTS = 100_000_000
MAX_WINDOWS = 64
MAX_RATE = 1e9  # requests/s: far above any server; a rate's digits name a run's folder
MAX_TOKENS = 100_000_000  # a prompt's or a reply's length
MAX_SPEC_TOKENS = 1024  # a speculator profile's num_speculative_tokens


# --- the number rule ------------------------------------------------------------------------
# Every number a config table or a flag gives is finite (TOML writes inf and nan, and a
# flag's float() reads them), and each key's range holds it to what its consumer accepts:
# checked here, when the config loads, for every table (``Table``) and every value nested in
# one (a speculator profile, plugin settings); the commands' float flags call ``finite`` too.

MAX_WAIT_S = 7 * 86_400.0
"""A week: the longest timeout or wait a config may give (far above any real one, far below
what overflows a timer), so every limit derived from one is finite."""
MAX_SCHEDULE_S = 1e10
"""About 300 years: the longest arrival schedule a run may be allowed (``load.max_schedule_s``,
``--max-schedule``), and the cap of the limit derived from ``load.request_timeout_s``."""


def finite(value: Any, where: str = "") -> Any:
    """``value`` if every number in it (nested in tables and lists too) is a finite one;
    ValueError naming the first that is not (``where``: the key path it hangs off)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where + ' = ' if where else ''}{value!r} is not a finite number; "
                         "give a number such as 1.5")
    if isinstance(value, dict):
        for key, item in value.items():
            finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            finite(item, f"{where}[{i}]")
    return value


class Table(BaseModel):
    """A config table: unknown keys refused, immutable, and every number in it finite (the
    number rule above: ``allow_inf_nan`` for typed floats, ``finite`` for what a table holds
    untyped). Every table of a config (the nightly's and the capacity search's too) is one."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _finite(cls, value: Any, info: ValidationInfo) -> Any:
        return value if isinstance(value, BaseModel) else finite(value, info.field_name or "")


PositiveInt = Annotated[int, Field(gt=0)]
Seconds = Annotated[float, Field(gt=0, le=MAX_WAIT_S)]
"""A timeout or a duration, in seconds: above 0, at most ``MAX_WAIT_S``."""
Wait = Annotated[float, Field(ge=0, le=MAX_WAIT_S)]
"""A wait in seconds (0: none), at most ``MAX_WAIT_S``."""
Tokens = Annotated[int, Field(gt=0, le=MAX_TOKENS)]
"""A prompt's length in tokens (``e2e.plan.RunSpec`` takes the same)."""
OutputTokens = Annotated[int, Field(gt=1, le=MAX_TOKENS)]
"""A reply's length in tokens: at least 2 (a TPOT needs two)."""
Seed = Annotated[int, Field(ge=-(2**63), lt=2**63)]
"""A seed: a 64-bit integer."""


EquivalencePct = Annotated[float, Field(gt=0, lt=100)]
"""The equivalence band, ±this many %: the comparisons test it on the log scale, against
ln(1 - pct/100) and ln(1 + pct/100), so it is above 0 and below 100."""
_EQUIVALENCE = TypeAdapter(EquivalencePct, config=ConfigDict(allow_inf_nan=False))


def equivalence_band(pct: float) -> float:
    """``pct`` if it is an ``EquivalencePct``, else ValueError: the config's key and the
    analysis' two one-sided tests take a band by this one rule."""
    try:
        return _EQUIVALENCE.validate_python(pct, strict=True)
    except ValidationError:
        raise ValueError(f"equivalence_pct must be above 0 and below 100, got {pct!r}") from None


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_date(value: Any) -> str:
    """``value`` if it is a calendar date written YYYY-MM-DD in ASCII digits with nothing
    before or after (a night's date names its folder); ValueError otherwise. The one date
    rule: every date e2e takes from outside (a flag, a config, an imported history)."""
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise ValueError(f"{shown} is not a date: give one as YYYY-MM-DD, e.g. 2026-01-31")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{shown} is not a date: there is no such day (YYYY-MM-DD)") from None
    return value


Date = Annotated[str, AfterValidator(parse_date)]
"""A calendar date, YYYY-MM-DD (``parse_date``)."""


class GitSource(Table):
    """A git repository and ref that e2e checks out (a worktree) and installs editable."""

    repo: str = Field(description="A URL or a local path of a git repository.")
    ref: str = Field(description="A branch, tag or commit; resolved to a commit at build time.")


class BuildSpec(Table):
    """Where a server's Python environment comes from: an existing interpreter, a managed
    environment that e2e creates from pip requirements, one that e2e creates from a git ref
    (worktree, editable install; for vLLM set ``env = {VLLM_USE_PRECOMPILED = "1"}`` so that
    Python-only changes need no compile), or one with a built wheel installed (a path or an
    http(s) URL of a ``.whl``, e.g. a PR's CI artifact). Managed environments are e2e's own."""

    python: str | None = Field(None, description="Interpreter of an existing environment.")
    git: GitSource | None = Field(None, description="Repository and ref to install editable.")
    wheel: Annotated[str, AfterValidator(check_wheel)] | None = Field(
        None, description="Path or http(s) URL of a .whl to install into a managed environment "
        "(after requirements); the environment is keyed by the wheel's sha256, so a rebuilt "
        "wheel of the same name gets a new one.")
    requirements: list[str] = Field(
        default_factory=list,
        description="pip requirements of a managed environment (with git or wheel: installed first).",
    )
    env: EnvTable = Field(
        default_factory=dict, description="Environment for the install steps."
    )
    remove: list[str] = Field(
        default_factory=list, description="Packages to uninstall after installing."
    )
    base_python: str | None = Field(
        None, description="Interpreter that creates the managed environment (default: e2e's)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> BuildSpec:
        sources = [bool(self.python), self.git is not None, self.wheel is not None,
                   bool(self.requirements) and self.git is None and self.wheel is None]
        if sum(sources) != 1 or (self.python and (self.requirements or self.remove)):
            raise ValueError("give exactly one of 'python' (an existing env), 'requirements' "
                             "(a managed env), 'git' (a managed env from a git ref) or 'wheel' "
                             "(a managed env with a built wheel installed)")
        return self

    @property
    def kind(self) -> str:
        return ("python" if self.python else "git" if self.git else
                "wheel" if self.wheel else "requirements")


class ServerConfig(Table):
    kind: Literal["vllm"] = Field(
        "vllm", description="The serving engine every arm's server runs; vLLM is the one kind.")
    model: str = Field(
        "e2e:tiny-llama",
        description="Path or name passed to --model; 'e2e:tiny-llama' is built offline by e2e.",
    )
    host: str = Field("127.0.0.1", description="Address the server binds to (loopback).")
    external: str | None = Field(
        None, description="URL of an already-running OpenAI-compatible server to measure "
        "instead of starting one (--base-url): not a fresh server; its API key comes from "
        "$E2E_API_KEY or $OPENAI_API_KEY.")
    port: Annotated[int, Field(ge=0, le=65535)] = Field(
        0, description="The server's port; 0: a free one.")
    args: ArgList = Field(
        default_factory=list, description="Arguments for every arm's server, after --model "
        "(an arm's own args come after these).")
    env: EnvTable = Field(
        default_factory=dict, description="Environment for every arm's server (an arm's own "
        "env goes over it).")
    build: BuildSpec | None = Field(
        None, description="The build of every arm without its own [arms.<name>.build] "
        "(needed unless every arm has one).")
    api_key: str | None = Field(
        None, description="API key each server is started with (vLLM's --api-key); e2e's "
        "requests send it as a bearer token, and it is redacted from everything e2e writes. "
        "None: no key.")
    startup_timeout_s: Seconds = Field(
        600.0, description="Seconds a fresh server has to answer its health check before its "
        "start fails (the error shows its log's last lines); raise it for a large model or a "
        "first start that compiles.")
    stop_grace_s: Seconds = Field(
        30.0, description="Seconds a server has to exit after SIGTERM before its whole process "
        "group is killed (SIGKILL).")
    lock_wait_s: Wait = Field(
        0.0, description="How long to wait for another e2e's server to finish, or for another "
        "e2e writing runs into the same results folder (0: refuse).")
    cpus: CpuList | None = Field(
        None, description="CPU set for the server's processes, e.g. '0' or '0-3' (--server-cpus); "
        "the OS refusing it runs unpinned, recorded.")
    require_quiet: Annotated[float, Field(gt=0)] | None = Field(
        None, description="Refuse to start a server while another process uses more than this "
        "share of a core (or any GPU), naming it (--require-quiet).")
    quiet_sample_s: Seconds = Field(
        2.0, description="How long the quiet check watches the host.")
    quiet_wait_s: Wait = Field(
        0.0, description="With require_quiet: how long to wait for the host to become quiet "
        "before refusing (0: refuse at once), as lock_wait_s waits for the server lock.")
    secret_pattern: str = Field(
        DEFAULT_SECRET_PATTERN,
        description="Environment variables and arguments whose name matches are redacted "
        "(every value of such a name is also scrubbed from any text e2e writes or prints); "
        "a pattern of one's own adds to the default, it never replaces it.",
    )

    @field_validator("secret_pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value


class SharedPrefix(Table):
    """``[load.workload] kind = "shared-prefix"``: ``groups`` x ``per_group`` requests; the
    requests of a group share their first ``prefix_len`` tokens, the rest of each prompt (to
    ``input_len``) is its own. Sent in a seeded shuffled order; the prefix cache's hit rate
    comes from the server's counters before and after the measured load."""

    kind: Literal["shared-prefix"] = Field(description="Selects this workload.")
    groups: Annotated[int, Field(gt=0, le=100_000)] = Field(
        description="Prefix groups: each has a prefix of its own, shared by its requests.")
    per_group: Annotated[int, Field(gt=1, le=100_000)] = Field(
        description="Requests per group; a run sends groups x per_group requests (in place of "
        "prompts_per_concurrency x concurrency).")
    prefix_len: PositiveInt = Field(
        description="Tokens of a group's shared prefix; below input_len, so each request has "
        "a suffix of its own.")

    @property
    def tag(self) -> str:
        return f"sp{self.groups}x{self.per_group}p{self.prefix_len}"

    def describe(self) -> str:
        return (f"shared prefix: {self.groups} groups x {self.per_group} requests, "
                f"{self.prefix_len}-token prefix")


class TraceReplay(Table):
    """``[load.workload] kind = "trace"``: a Mooncake-format JSONL trace (``timestamp`` ms,
    ``input_length``, ``output_length``, ``hash_ids``) replayed at its arrival times divided
    by ``speedup``; each hash id stands for ``block_size`` tokens drawn once per id, so
    requests that share hash ids share exact token prefixes."""

    kind: Literal["trace"] = Field(description="Selects this workload.")
    path: str = Field(
        min_length=1, max_length=4096, description="The trace file (JSONL, one request a "
        "line); a relative path is read from the folder e2e runs in.")
    block_size: Annotated[int, Field(gt=0, le=1 << 20)] = Field(
        512, description="Tokens each hash id stands for: the block size the trace was "
        "recorded with (Mooncake's traces use 512).")
    speedup: Annotated[float, Field(gt=0)] = Field(
        1.0, description="Arrival times are divided by this: 2 replays the trace in half its "
        "time, at twice its request rate.")
    max_requests: Annotated[int, Field(gt=0, le=MAX_PROMPTS)] | None = Field(
        None, description="Replay only the trace's first this many requests, by arrival time "
        "(a shorter run); None: all of them.")
    segments: Annotated[int, Field(gt=0, le=1000)] = Field(
        4, description="Equal-time segments of the trace with their own metrics.")

    @property
    def tag(self) -> str:
        stem = re.sub(r"[^A-Za-z0-9_-]", "_", Path(self.path).stem)[:24] or "trace"
        speed = "" if self.speedup == 1 else f"x{number_tag(self.speedup)}"
        return f"trace-{stem}{speed}"

    def describe(self) -> str:
        speed = "" if self.speedup == 1 else f" at {self.speedup:g}x speed"
        return f"trace {self.path}{speed} ({self.block_size}-token blocks)"


class MultiTurn(Table):
    """``[load.workload] kind = "multi-turn"``: ``sessions`` conversations of ``turns`` turns.
    Turn 1's prompt is ``input_len`` tokens; turn k's is turn k-1's prompt, its reply
    (``output_len`` tokens fixed in advance, so every arm sends the same prompts) and a new
    user message of ``user_len`` tokens. A session's turns are sent one after another (the next
    ``think_s`` after the last one ended); ``concurrency`` sessions run at once."""

    kind: Literal["multi-turn"] = Field(description="Selects this workload.")
    sessions: Annotated[int, Field(gt=0, le=1_000_000)] = Field(
        description="Conversations a run holds; it sends sessions x turns requests.")
    turns: Annotated[int, Field(gt=1, le=1000)] = Field(
        description="Turns per conversation; each turn's prompt holds every turn before it.")
    user_len: PositiveInt = Field(
        description="Tokens of the new user message each turn after the first adds.")
    think_s: Annotated[float, Field(ge=0, le=3600)] = Field(
        0.0, description="Seconds a session waits after a reply before it sends its next "
        "turn (0: at once); a user's reading time.")

    @property
    def tag(self) -> str:
        think = f"t{number_tag(self.think_s)}" if self.think_s else ""
        return f"mt{self.sessions}x{self.turns}u{self.user_len}{think}"

    def describe(self) -> str:
        think = f", {self.think_s:g} s think time" if self.think_s else ""
        return (f"multi-turn: {self.sessions} sessions x {self.turns} turns, "
                f"{self.user_len}-token user messages{think}")


WorkloadConfig = Annotated[SharedPrefix | TraceReplay | MultiTurn, Field(discriminator="kind")]
"""A workload other than the reference load (``e2e.load.draw``); None is the reference."""


class LoadConfig(Table):
    input_len: Tokens = Field(
        1031, description="Prompt length in tokens: each prompt is exactly this many random "
        "token ids (a trace's requests keep their own lengths). Set it to the prompts the "
        "change matters for.")
    output_len: OutputTokens = Field(
        509, description="Reply length in tokens: each request asks for exactly this many "
        "(greedy, end-of-sequence ignored; a trace's requests keep their own).")
    prompts_per_concurrency: Annotated[int, Field(gt=0, le=MAX_PROMPTS)] = Field(
        32, description="Measured requests per unit of concurrency: a run at concurrency c "
        "sends this x c prompts per load window (--prompts-per-concurrency). More makes each "
        "run longer and its figures steadier.")
    concurrencies: list[Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]] = Field(
        default_factory=lambda: [1, 4, 64], min_length=1,
        description="Concurrencies to measure, each a cell of its own: a closed loop keeps "
        "this many requests in flight (--concurrency).")
    warmup_requests: Annotated[int, Field(ge=0, le=MAX_PROMPTS)] = Field(
        2, description="Requests sent to each fresh server before the measured load, never "
        "measured (prompts of their own, so they warm no prefix cache for the measured ones); "
        "0: none.")
    windows: Annotated[int, Field(gt=0, le=MAX_WINDOWS)] = Field(
        1, description="Load windows per server: the measured load (prompts_per_concurrency x "
        "concurrency prompts) is run this many times back to back in one fresh server, each "
        "window with its own prompts. The run's metrics are over all of them; run.json keeps "
        "each window's, and the report splits the noise into between-server and within-server "
        "parts (docs/explanation/statistics.md).")
    request_timeout_s: Seconds = Field(
        900.0, description="Seconds one request may take, from its send to its last token, "
        "before it fails (a failed request makes its run invalid); raise it for long replies "
        "on a slow server.")
    stall_timeout_s: Seconds = Field(
        120.0, description="Seconds a request may receive nothing (the wait for its first "
        "token included) before it fails and makes its run invalid; raise it where a server "
        "pauses longer, e.g. long prefills at a high concurrency.")
    max_schedule_s: Annotated[float, Field(gt=0, le=MAX_SCHEDULE_S)] | None = Field(
        None, description="The longest arrival schedule a run may have, in seconds (an open "
        "loop's n / rate, a trace's span / speedup, a multi-turn load's think times; "
        "--max-schedule): a longer one is refused before any server starts. None: the run's "
        "prompts x request_timeout_s.")
    max_prompt_tokens: Annotated[int, Field(gt=0)] = Field(
        50_000_000, description="The most prompt tokens one run may draw (every window's and "
        "the warmup's; the load generator holds them all, about 40 bytes a token).")
    seed: Seed = Field(
        0, description="Seed of the random prompts (and of a workload's draws and an open "
        "loop's arrival gaps): every arm at one seed gets the same requests. Change it to "
        "measure other prompts.")
    cpus: CpuList | None = Field(
        None, description="CPU set for the load generator, e.g. '1' (--client-cpus); the OS "
        "refusing it runs unpinned, recorded.")
    workers: PositiveInt = Field(
        1, description="Client processes the streams are split over, one core each "
        "(--client-workers); raise it when run.json's client.saturated says so.")
    request_rate: Annotated[float, Field(gt=0, le=MAX_RATE)] | None = Field(
        None, description="Open loop: requests/s with gamma arrivals (--request-rate); None: "
        "closed loop at each concurrency (the reference).")
    burstiness: Annotated[float, Field(ge=1e-3, le=1e3)] = Field(
        1.0, description="Gamma shape of the open loop's arrival gaps: 1 = Poisson.")
    max_concurrency: Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)] | None = Field(
        None, description="Open loop: at most this many requests in flight.")
    slo: str | None = Field(
        None, description="Service-level objectives for goodput, e.g. 'ttft=200ms,tpot=50ms,"
        "e2e=2s' (--slo): the share of requests meeting every one, and requests/s that did.")
    workload: WorkloadConfig | None = Field(
        None, description="What the measured requests look like: None, the reference load; "
        "a shared-prefix, trace or multi-turn workload (docs/explanation/load.md, "
        "'Workloads').")

    @field_validator("slo")
    @classmethod
    def _slo(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from e2e.slo import parse_slo

        try:
            return str(parse_slo(value))
        except E2EError as exc:
            raise ValueError(str(exc)) from None


class ArmConfig(Table):
    description: str = Field(
        "", description="What the arm is, for people: `e2e arms` shows it; not part of what a "
        "run measures.")
    build: BuildSpec | None = Field(None, description="Overrides server.build for this arm.")
    env: EnvTable = Field(
        default_factory=dict, description="Environment for this arm's server, over "
        "server.env (a key in both takes this value).")
    args: ArgList = Field(
        default_factory=list, description="Server arguments for this arm, after server.args "
        "(e.g. a flag the change adds).")
    plugin: Annotated[dict[str, Any], AfterValidator(plugin_settings)] = Field(
        default_factory=dict, description="Settings for e2e's vLLM plugin in this arm's server."
    )
    opt_in: bool = Field(
        False, description="Measured only where named (--arm / --arms): a sweep without --arms "
        "leaves it out (an experimental arm that should not lengthen every default sweep).")


class MutantConfig(Table):
    """``[[unit.mutants]]``: an arm with one thing broken on purpose, for ``e2e unit``: a
    plugin setting forced (``plugin``, over the arm's) and/or a function made a no-op
    (``noop = "module:function"``). A mutant that no test catches is reported as such."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+ -]{0,63}$",
                      description="The mutant's column in unit.md and unit.json; unlike every "
                      "arm's and other mutant's.")
    arm: str = Field(description="The arm it breaks: its tests run with that arm's plugin "
                     "settings, then this table's over them.")
    description: str = Field(
        "", description="What it breaks and why a test should catch it, for the config's "
        "reader; e2e does not read it.")
    plugin: dict[str, Any] = Field(
        default_factory=dict, description="Plugin settings forced over the arm's (e.g. a "
        "feature's flag turned off).")
    noop: str | None = Field(
        None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="A function replaced by one that does nothing and returns None, as "
        "module:function, before its tests run; None: none.")


class UnitConfig(Table):
    """``[unit]``: the validation matrix ``e2e unit`` runs: these test files once per arm
    (default: the arms a sweep without --arms runs) and once per mutant."""

    tests: list[str] = Field(
        default_factory=list, description="Test files `e2e unit` runs (--tests replaces "
        "them); a relative path is found from the current folder, then e2e's repository, and "
        "must lie inside one of them.")
    arms: list[str] = Field(
        default_factory=list, description="Arms to run them on, one column each (--arms "
        "replaces them); empty: the arms a sweep without --arms runs.")
    mutants: list[MutantConfig] = Field(
        default_factory=list, description="Mutants, one column each after the arms' (the "
        "[[unit.mutants]] tables).")


class ExecutorConfig(Table):
    """``[executor]``: where a plan's units run. ``local`` (this host, one unit at a time) or
    ``ray`` (every host of a Ray cluster that offers ``resource``, one unit per host at a time;
    see docs/how-to/cluster.md). Operational only: never part of a record's config snapshot."""

    kind: Literal["local", "ray"] = Field(
        "local", description="Where units run: 'local', on this host one at a time; 'ray', "
        "on the hosts of a Ray cluster, one unit per host at a time (--executor).")
    address: str | None = Field(
        None, description="Ray cluster address (host:6379 or ray://host:10001); "
        "None: $RAY_ADDRESS, else the cluster started on this machine ('auto').")
    resource: str = Field(
        "e2e_host", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
        description="Custom Ray resource that every participating node advertises once "
        "(ray start --resources='{\"e2e_host\": 1}'); a unit holds one, so one unit per host.")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Ray node labels a host must have (a label_selector, e.g. {gpu = \"H200\"}).")


class DuetSlot(Table):
    """One slot of a duet: where one of the arms measured together runs. ``server_cpus`` and
    ``client_cpus`` replace ``server.cpus`` and ``load.cpus`` for the side in this slot,
    ``env`` is added to its server's environment (e.g. ``CUDA_VISIBLE_DEVICES`` on a GPU host)
    and ``port`` is its server's port (0: a free one)."""

    name: Annotated[str, AfterValidator(lambda v: safe_name(v, "duet slot name"))] | None = Field(
        None, description="The slot's name in the dry run and each run's record (default: "
        "`slot<i>`, its index).")
    server_cpus: CpuList | None = Field(
        None, description="CPU set for this slot's server, e.g. '0' or '0-3', in place of "
        "server.cpus; None: unpinned. Slots' server sets must not overlap.")
    client_cpus: CpuList | None = Field(
        None, description="CPU set for this slot's load generator, e.g. '1', in place of "
        "load.cpus; None: unpinned.")
    env: EnvTable = Field(  # checked as server.env is
        default_factory=dict, description="Environment added to this slot's server, e.g. "
        "CUDA_VISIBLE_DEVICES = \"1\" to give each slot its own GPU.")
    port: Annotated[int, Field(ge=0, le=65535)] = Field(
        0, description="This slot's server port, in place of server.port; 0: a free one.")


def _default_slots() -> list[DuetSlot]:
    """Two slots on a 2-core host: each server on its own core with its load generator on the
    other core (the servers are the heavy part; the slots are swapped in alternate rounds)."""
    return [DuetSlot(server_cpus="0", client_cpus="1"), DuetSlot(server_cpus="1", client_cpus="0")]


class DuetConfig(Table):
    """``[duet]``: arms measured together in time. ``enabled`` (or ``--duet``) makes every load
    unit of a sweep a duet: k arms, one per slot, each on a fresh server, whose measured loads
    start together (after every side's warmup) and overlap (a side that finishes first keeps
    its server under the same load, unmeasured, until every side is done). Drift of the host
    then lands on every arm of a duet alike, and the duet is the block of the cell model.
    Operational: left out of config snapshots (each run records its slot and partners)."""

    enabled: bool = Field(
        False, description="Run every load unit of a sweep as a duet (--duet / --no-duet); "
        "false: one server at a time.")
    slots: list[DuetSlot] = Field(
        default_factory=_default_slots, min_length=2, max_length=64,
        description="Where a duet's sides run, one table each; a duet has as many sides as "
        "slots, or as arms where the arms are fewer. The default fits a 2-core host.")
    min_overlap: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9, description="A side whose measured window had every side under load for less than "
        "this share of it is invalid.")
    barrier_timeout_s: Seconds = Field(
        900.0, description="How long a side that is ready waits for its partners' servers.")
    swap: bool = Field(
        False, description="The sides trade places between load windows: in window w the side "
        "of slot i runs (its server's threads and its load generator) on slot (i + w) mod k's "
        "CPUs, the windows starting together, so each run meets every slot's cores within its "
        "duet and a difference between cores that lasts minutes cancels inside the duet. "
        "Needs load windows a multiple of the sides and slots without env (a GPU does not move).")

    @model_validator(mode="after")
    def _distinct(self) -> DuetConfig:
        if self.swap and any(s.env for s in self.slots):
            raise ValueError("[duet] swap moves CPUs only: a slot with env (e.g. its GPU) cannot "
                             "trade places; drop swap or the slots' env")
        names = self.slot_names()
        if len(set(names)) != len(names):
            raise ValueError(f"duet slot names must differ, got {names}")
        ports = [s.port for s in self.slots if s.port]
        if len(set(ports)) != len(ports):
            raise ValueError(f"two duet slots give the same port: {ports}")
        for (i, a), (j, b) in itertools.combinations(enumerate(self.slots), 2):
            shared = (parse_cpus(a.server_cpus) & parse_cpus(b.server_cpus)
                      if a.server_cpus and b.server_cpus else frozenset())
            if shared:
                raise ValueError(
                    f"duet slots {names[i]} and {names[j]} both run their servers on core(s) "
                    f"{','.join(map(str, sorted(shared)))}: the two arms would take turns on "
                    "one core, each slowed by the other, and a faster arm would be measured "
                    "beside a busier partner; give each slot's server_cpus cores of its own")
        return self

    def slot_names(self) -> list[str]:
        return [s.name or f"slot{i}" for i, s in enumerate(self.slots)]


class Experiment(Table):
    name: Annotated[str, AfterValidator(lambda v: safe_name(v, "experiment name"))] = Field(
        description="The experiment's name: its runs go to `<results>/<name>/` and the "
        "nightly's history is kept under it. Give a new name to what measures something else.")
    server: ServerConfig = Field(
        description="What every arm's server shares: the model, the build, arguments, "
        "environment, timeouts (the [server] table).")
    arms: dict[str, ArmConfig] = Field(
        min_length=1, description="The builds and settings to compare, one `[arms.<name>]` "
        "table each; the name names the arm's runs.")
    speculators: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Named vLLM speculative_config profiles ('dspark')."
    )
    load: LoadConfig = Field(
        default_factory=LoadConfig, description="The requests each run sends (the [load] "
        "table).")
    repeats: Annotated[int, Field(gt=0, le=MAX_REPEATS)] = Field(
        4, description="Rounds a sweep runs (--runs): each round measures every arm once at "
        "every concurrency and spec mode, each run on a fresh server. More rounds narrow the "
        "intervals.")
    report_from_run: Annotated[int, Field(gt=0, le=MAX_REPEATS)] = Field(
        2, description="Runs before this one are warmups.")
    equivalence_pct: EquivalencePct = Field(
        1.0, description="A comparison reads 'equivalent' when its interval lies within "
        "+-this many % (two one-sided tests).")
    # How units are run, not what they measure: left out of dumps (config snapshots, hashes).
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig, exclude=True,
        description="Where the units run: this host or a Ray cluster (the [executor] table).")
    # Arms measured together (``[duet]``, ``--duet``): how units run, left out of dumps too.
    duet: DuetConfig = Field(
        default_factory=DuetConfig, exclude=True,
        description="Arms measured together in time, one server per slot (the [duet] table).")
    # What `e2e unit` runs; not part of what a run measures, so left out of dumps too.
    unit: UnitConfig = Field(
        default_factory=UnitConfig, exclude=True,
        description="The tests `e2e unit` runs on every arm and mutant (the [unit] table).")

    @field_validator("arms", "speculators")
    @classmethod
    def _names(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        what = "arm name" if info.field_name == "arms" else "speculator profile name"
        for name in value:
            safe_name(name, what)
        return value

    @model_validator(mode="after")
    def _reported(self) -> Experiment:
        if self.report_from_run > self.repeats:
            raise ValueError(
                f"report_from_run {self.report_from_run} is past repeats {self.repeats}: no run "
                f"of a cell would be reported; give repeats of at least {self.report_from_run} "
                f"or an earlier report_from_run (runs before it are warmups)")
        return self

    @model_validator(mode="after")
    def _every_arm_built(self) -> Experiment:
        unbuilt = [name for name, arm in self.arms.items() if arm.build is None]
        if self.server.build is None and unbuilt:
            raise ValueError(f"arm(s) {', '.join(unbuilt)} have no build: give [server.build] "
                             "(every arm's) or [arms.<name>.build]")
        return self

    def build_of(self, arm: str) -> BuildSpec:
        """The build arm ``arm`` runs: its own, else ``[server.build]``."""
        build = self.arm(arm).build or self.server.build
        assert build is not None  # _every_arm_built
        return build

    @model_validator(mode="after")
    def _mutant_settings(self) -> Experiment:
        for m in self.unit.mutants:  # a mutant's settings go over its arm's, as `e2e unit` runs it
            if m.arm in self.arms:
                try:
                    plugin_settings({**self.arms[m.arm].plugin, **m.plugin})
                except ValueError as exc:
                    raise ValueError(f"[[unit.mutants]] {m.name!r}: {exc}") from None
        return self

    def redactor(self, *secrets: str | None) -> Redactor:
        """The experiment's redaction rule (``server.secret_pattern``), with every secret the
        config holds (API key, values of secret variables and flags in any env or args table,
        URL passwords) and ``secrets`` remembered, so no text this process writes holds one."""
        redactor = Redactor(self.server.secret_pattern, [self.server.api_key, *secrets])
        tables = [(self.server.env, self.server.args)]
        if self.server.build is not None:
            tables.append((self.server.build.env, []))
        tables += [(slot.env, []) for slot in self.duet.slots]  # e.g. a slot's own token
        for arm in self.arms.values():
            tables.append((arm.env, arm.args))
            if arm.build is not None:
                tables.append((arm.build.env, []))
        found = [s for env, args in tables for s in redactor.secrets_in(env, args)]
        if self.server.external:
            found += redactor.secrets_in({}, [self.server.external])
        remember(self.server.api_key, *secrets, *found)
        return Redactor(self.server.secret_pattern, [self.server.api_key, *secrets, *found])

    def override(self, section: str, **values: Any) -> Experiment:
        """A copy with ``values`` (those not None) set in ``section`` ("load", "server"),
        validated like the file; flags use this to narrow an experiment."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        raw = self.model_dump(mode="json")
        raw[section].update(values)
        return validated(Experiment, raw, "command-line flags").model_copy(
            update={"executor": self.executor, "duet": self.duet, "unit": self.unit})

    def arm(self, name: str) -> ArmConfig:
        return self.arms[known_name(name, self.arms, "arm", "this config's arms")]

    @field_validator("speculators")
    @classmethod
    def _profiles(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, profile in value.items():
            _check_profile(name, profile)
        return value

    @property
    def default_speculator(self) -> str | None:
        """The profile the speculator spec mode runs when no ``--spec`` names one: ``dspark``
        where the config has it, else its first ``[speculators.*]`` table; None without any
        (the config then runs plain sweeps only)."""
        return default_profile(self.speculators)

    def speculator(self, name: str | None = None) -> dict[str, Any]:
        """The profile as the config gives it (e2e's ``pinned`` key included); ``name`` None:
        ``default_speculator``."""
        name = name or self.default_speculator
        if not self.speculators:
            raise ConfigError(
                f"this config has no [speculators{'.' + name if name else ''}] profile; add one "
                "(a vLLM speculative_config) or run without the speculator (leave out "
                f"--spec{' and --dspark' if name == 'dspark' else ''})")
        return self.speculators[known_name(name, self.speculators, "speculator profile",
                                           "this config's [speculators.NAME] profiles")]

    def with_speculator(self, name: str) -> Experiment:
        """The experiment whose speculator spec mode runs profile ``name`` (``--spec NAME``):
        itself when ``name`` is already the default, else a copy that keeps only that profile,
        so every record's config snapshot names the profile its runs used (and runs of two
        profiles are never averaged: their comparable settings differ)."""
        profile = self.speculator(name)
        if name == self.default_speculator:
            return self
        return self.model_copy(update={"speculators": {name: profile}})

    def pinned(self, name: str | None = None) -> float | str | None:
        """The acceptance length the profile pins (``pinned``): a number, "baseline" (not
        yet resolved: ``pinned_to``), or None when acceptance is the draft's own."""
        return self.speculators.get(name or self.default_speculator or "", {}).get(PIN_KEY)

    def refuse_pinned(self, what: str, name: str | None = None) -> None:
        """A ConfigError when the profile pins acceptance: ``what`` (GSM8K) measures answers,
        and with synthetic rejection sampling draft tokens are accepted whatever the target
        model says, so the answers would be synthetic."""
        name = name or self.default_speculator
        pin = self.pinned(name)
        if pin is not None:
            raise ConfigError(
                f"[speculators.{name}] pins acceptance ({PIN_KEY} = {pin!r}): with synthetic "
                "rejection sampling the draft tokens are accepted whatever the model says, so "
                f"{what}'s answers would be synthetic; run {what} with a profile without "
                f"`{PIN_KEY}`, or without the speculator")

    def pinned_to(self, length: float, name: str | None = None, *,
                  rename: bool = True) -> Experiment:
        """A copy whose profile ``name`` pins acceptance at ``length`` (checked as in the
        file); ``rename`` appends ``-pinned`` to the experiment's name, so its runs get their
        own results folder (a run of the same spec without the pin is another measurement)."""
        name = name or self.default_speculator
        profile = {**self.speculator(name), PIN_KEY: length}
        try:
            _check_profile(name, profile)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        name_ = f"{self.name}-pinned" if rename and not self.name.endswith("-pinned") else self.name
        return self.model_copy(update={
            "name": safe_name(name_, "experiment name"),
            "speculators": {**self.speculators, name: profile}})


def _check_profile(name: str, profile: dict[str, Any]) -> None:
    """A ``[speculators.<name>]`` profile's numbers: every one finite (it is passed to vLLM as
    JSON), ``num_speculative_tokens`` a whole number from 1 to ``MAX_SPEC_TOKENS``, and a
    pinned acceptance length as ``e2e.arms.check_pin`` says. ValueError (ConfigError for the
    pin) naming the key."""
    where = f"speculators.{name}"
    finite(profile, where)
    k = profile.get("num_speculative_tokens")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int)
                          or not 1 <= k <= MAX_SPEC_TOKENS):
        raise ValueError(f"{where}.num_speculative_tokens = {k!r}: give a whole number from 1 "
                         f"to {MAX_SPEC_TOKENS}")
    if PIN_KEY in profile:
        check_pin(profile[PIN_KEY], profile, f"{where}.{PIN_KEY}")


def default_config_path() -> Path:
    return Path(str(resources.files("e2e") / "configs" / DEFAULT_CONFIG))


SHAPE_KEYS = ("input_len", "output_len", "prompts_per_concurrency", "concurrencies",
              "warmup_requests")
"""The ``[load]`` keys that make the load's shape; left out, they take ``LoadConfig``'s
defaults: the reference change's shape (1031 in / 509 out, 32 prompts per unit of
concurrency, concurrency 1, 4 and 64, 2 warmup requests)."""


def defaulted_load_keys(path: Path | str | None = None) -> tuple[str, ...]:
    """The ``SHAPE_KEYS`` a config file leaves out of its ``[load]`` (the embedded default
    sets them all), so a dry run can say they are e2e's defaults, not the user's."""
    raw = read_toml(Path(path) if path is not None else default_config_path())
    given = raw.get("load") if isinstance(raw.get("load"), dict) else {}
    return tuple(k for k in SHAPE_KEYS if k not in given)


def load_experiment(path: Path | str | None = None) -> Experiment:
    """Read and validate a TOML config; ``None`` means the embedded default."""
    path = Path(path) if path is not None else default_config_path()
    return parse_experiment(read_toml(path), source=str(path))


def parse_experiment(raw: dict[str, Any], *, source: str = "<config>") -> Experiment:
    """``raw`` (a config's tables) validated; a ConfigError naming ``source`` otherwise."""
    return validated(Experiment, raw, source)

