"""The plan's units: what one fresh server does (a load run, a GSM8K evaluation), or a duet of
load runs at once, one server per slot. Each names its folder under the experiment's results
(``unit_id``) and the cell its runs are averaged in (``cell``); ``comparable_settings`` says
what of a run's config snapshot must be equal for two runs to measure the same thing, and
``pinned_of`` the acceptance length that snapshot pinned.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from e2e.config import (MAX_CONCURRENCY, MAX_PROMPTS, MAX_RATE, MAX_REPEATS, MAX_WINDOWS,
                        Experiment, MultiTurn, OutputTokens, PositiveInt, Seed, SharedPrefix,
                        Table, Tokens, TraceReplay, WorkloadConfig)
from e2e.console import validated
from e2e.names import number_tag, safe_name
from e2e.arms import PIN_KEY, default_profile

__all__ = ["RunSpec", "EvalSpec", "DuetSpec", "Unit", "GSM8K_CONCURRENCY", "comparable_settings",
           "pinned_of"]


class RunSpec(Table):  # a unit is its config resolved: the config's number rule
    """A load unit: an arm, the reference load at one concurrency, one spec mode, one repeat
    (its round in a sweep). Its folder is ``<experiment>/<run_id>`` and its record run.json."""

    kind: ClassVar[str] = "load"

    arm: str
    concurrency: Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]
    dspark: bool
    prompts: Annotated[int, Field(gt=0, le=MAX_PROMPTS)]
    input_len: Tokens
    output_len: OutputTokens
    seed: Seed
    warmup_requests: Annotated[int, Field(ge=0, le=MAX_PROMPTS)]
    repeat: Annotated[int, Field(gt=0, le=MAX_REPEATS)] = 1
    windows: Annotated[int, Field(gt=0, le=MAX_WINDOWS)] = 1  # load windows in one server
    request_rate: Annotated[float, Field(gt=0, le=MAX_RATE)] | None = None  # open loop
    burstiness: Annotated[float, Field(gt=0)] = 1.0
    max_concurrency: Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)] | None = None
    duet: Annotated[int, Field(gt=0, le=MAX_REPEATS)] | None = None  # its duet in the round
    slot: Annotated[int, Field(ge=0, le=64)] | None = None  # its slot in that duet
    workload: WorkloadConfig | None = None  # None: the reference load

    @field_validator("arm")
    @classmethod
    def _arm(cls, value: str) -> str:
        return safe_name(value, "arm name")

    @model_validator(mode="after")
    def _workload_fits(self) -> RunSpec:
        shape = self.workload
        if isinstance(shape, SharedPrefix) and shape.prefix_len >= self.input_len:
            raise ValueError(f"shared-prefix workload: prefix_len {shape.prefix_len} must be "
                             f"shorter than input_len {self.input_len} (each request needs a "
                             "suffix of its own)")
        if isinstance(shape, MultiTurn) and self.request_rate is not None:
            raise ValueError("a multi-turn workload is a closed loop of conversations: leave "
                             "request_rate out")
        return self

    @property
    def spec_mode(self) -> str:
        return "dspark" if self.dspark else "base"

    @property
    def cell(self) -> str:
        loop = "" if self.request_rate is None else f"-rate{number_tag(self.request_rate)}"
        shape = "" if self.workload is None else f"-{self.workload.tag}"
        return f"{self.arm}-c{self.concurrency}{loop}{shape}-{self.spec_mode}"

    @property
    def run_id(self) -> str:
        return f"{self.cell}-r{self.repeat}" + (f"-d{self.duet}" if self.duet else "")

    @property
    def unit_id(self) -> str:
        return self.run_id

    @property
    def sides(self) -> tuple[RunSpec, ...]:
        """The load runs this unit makes: itself (a duet's are its sides)."""
        return (self,)

    def describe(self) -> str:
        loop = (f"concurrency {self.concurrency}" if self.request_rate is None else
                f"open loop {self.request_rate:g} req/s (burstiness {self.burstiness:g}"
                + (f", at most {self.max_concurrency} in flight)" if self.max_concurrency else ")"))
        windows = f" x {self.windows} windows" if self.windows > 1 else ""
        if isinstance(self.workload, TraceReplay):
            cap = (f", at most {self.max_concurrency} in flight" if self.max_concurrency
                   else "")
            return (f"{self.prompts} requests{windows} of {self.workload.describe()}{cap}, "
                    f"seed {self.seed}, {self.warmup_requests} warmup")
        shape = "" if self.workload is None else f" ({self.workload.describe()})"
        return (f"{self.prompts} prompts{windows} x {self.input_len} in / {self.output_len} out"
                f"{shape}, {loop}, seed {self.seed}, {self.warmup_requests} warmup")

    @classmethod
    def resolve(
        cls,
        experiment: Experiment,
        *,
        arm: str,
        concurrency: int,
        dspark: bool,
        prompts: int | None = None,
        input_len: int | None = None,
        output_len: int | None = None,
        seed: int | None = None,
        repeat: int = 1,
    ) -> RunSpec:
        """Merge a command's flags over the experiment's defaults, validated once."""
        experiment.arm(arm)
        if dspark:
            experiment.speculator()
        load = experiment.load
        workload = load.workload
        if isinstance(workload, SharedPrefix):
            prompts = workload.groups * workload.per_group
        elif isinstance(workload, MultiTurn):
            prompts = workload.sessions * workload.turns
        elif isinstance(workload, TraceReplay) and prompts is None:
            from e2e.traces import read_trace  # reads and checks the trace (bounded)

            prompts = len(read_trace(workload.path, block_size=workload.block_size,
                                     max_requests=workload.max_requests).requests)
        return validated(cls, dict(
            arm=arm,
            concurrency=concurrency,
            dspark=dspark,
            prompts=prompts if prompts is not None else load.prompts_per_concurrency * concurrency,
            input_len=input_len if input_len is not None else load.input_len,
            output_len=output_len if output_len is not None else load.output_len,
            seed=seed if seed is not None else load.seed,
            warmup_requests=load.warmup_requests,
            repeat=repeat,
            windows=load.windows,
            request_rate=load.request_rate,
            burstiness=load.burstiness,
            max_concurrency=load.max_concurrency,
            workload=workload,
        ), "command-line flags")


GSM8K_CONCURRENCY = 32  # requests lm-eval keeps in flight, by default


class EvalSpec(Table):
    """A GSM8K unit: an arm's ``repeat``-th fresh server running one lm-eval GSM8K evaluation
    (5-shot, strict-match, greedy) of the first ``limit`` test documents (None: all) with
    ``concurrency`` requests in flight, on ``data`` (a folder of train/test JSONL; None: the
    hub dataset). Its folder is ``<experiment>/gsm8k/<spec mode>-<n|all>/<label>``."""

    kind: ClassVar[str] = "gsm8k"

    arm: str
    dspark: bool
    limit: PositiveInt | None
    concurrency: Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]
    data: str | None = None
    repeat: Annotated[int, Field(gt=0, le=MAX_REPEATS)] = 1

    @field_validator("arm")
    @classmethod
    def _arm(cls, value: str) -> str:
        return safe_name(value, "arm name")

    @property
    def spec_mode(self) -> str:
        return "dspark" if self.dspark else "base"

    @property
    def label(self) -> str:
        """``main`` for an arm's first server, ``main.r2`` for its second, ..."""
        return self.arm if self.repeat == 1 else f"{self.arm}.r{self.repeat}"

    @property
    def eval_name(self) -> str:
        return f"{self.spec_mode}-{'all' if self.limit is None else f'n{self.limit}'}"

    @property
    def cell(self) -> str:
        return f"gsm8k-{self.eval_name}-{self.arm}"

    @property
    def unit_id(self) -> str:
        return f"gsm8k-{self.eval_name}-{self.label}"

    @property
    def sides(self) -> tuple[EvalSpec, ...]:
        return (self,)

    def describe(self) -> str:
        docs = "all" if self.limit is None else str(self.limit)
        return (f"GSM8K 5-shot, {docs} docs, concurrency {self.concurrency}, "
                f"data {self.data or 'hub'}")


class DuetSpec(Table):
    """A duet: the load units of ``sides`` (one per slot, in slot order) run at the same
    time, each on its own fresh server (``e2e.session.run_duet``). Every side is a RunSpec with
    its ``duet`` (this duet's index in its round) and ``slot`` set; each writes its own folder
    and run.json. Done when every side is; a retry reruns every side (they must be measured
    together). A sweep's sides share their round; a capacity search's (``e2e.capacity``) are
    open-loop runs, each at its own arm's next rate and repeat."""

    kind: ClassVar[str] = "duet"

    sides: tuple[RunSpec, ...] = Field(min_length=2)

    @model_validator(mode="after")
    def _one_duet(self) -> DuetSpec:
        first = self.sides[0]
        for i, side in enumerate(self.sides):
            if (side.duet, side.slot, side.concurrency, side.dspark) != \
                    (first.duet, i, first.concurrency, first.dspark) or side.duet is None:
                raise ValueError("a duet's sides share their duet, concurrency and spec mode, "
                                 "and side i sits in slot i")
        if self.mixed and any(s.request_rate is None for s in self.sides):
            raise ValueError("a duet's sides share their round unless every side is an "
                             "open-loop run at its own rate (a capacity search's)")
        return self

    @property
    def mixed(self) -> bool:
        """The sides differ in round or rate (a capacity search's duet)."""
        return len({(s.repeat, s.request_rate) for s in self.sides}) > 1

    @property
    def arm(self) -> str:
        return "+".join(s.arm for s in self.sides)

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(s.arm for s in self.sides)

    @property
    def repeat(self) -> int:
        return self.sides[0].repeat

    @property
    def concurrency(self) -> int:
        return self.sides[0].concurrency

    @property
    def dspark(self) -> bool:
        return self.sides[0].dspark

    @property
    def spec_mode(self) -> str:
        return self.sides[0].spec_mode

    @property
    def index(self) -> int:
        return int(self.sides[0].duet or 0)

    @property
    def unit_id(self) -> str:
        s = self.sides[0]
        if self.mixed:  # each side its own rate and round: named by its sides' run ids
            digest = hashlib.sha256(" ".join(x.run_id for x in self.sides).encode()).hexdigest()
            return f"duet-c{s.concurrency}-mixed-{s.spec_mode}-{digest[:12]}-d{self.index}"
        loop = "" if s.request_rate is None else f"-rate{number_tag(s.request_rate)}"
        return f"duet-c{s.concurrency}{loop}-{s.spec_mode}-r{s.repeat}-d{self.index}"

    @property
    def cell(self) -> str:
        return self.unit_id

    def describe(self) -> str:
        if self.mixed:
            return "together: " + "; ".join(f"{s.arm}@slot{s.slot} r{s.repeat} {s.describe()}"
                                            for s in self.sides)
        return (f"{' + '.join(f'{s.arm}@slot{s.slot}' for s in self.sides)} together: "
                + self.sides[0].describe())


Unit = RunSpec | EvalSpec | DuetSpec
"""A unit of work: what one fresh server does (a load run or a GSM8K evaluation), or a duet:
several load runs at once, one server per slot."""

# Keys of a config snapshot that change how a run is operated, not what it measures.
_OPERATIONAL = {"server": ("startup_timeout_s", "stop_grace_s", "lock_wait_s", "port",
                           "require_quiet", "quiet_sample_s", "quiet_wait_s", "secret_pattern"),
                "load": ("request_timeout_s", "stall_timeout_s", "max_schedule_s",
                         "max_prompt_tokens")}


def comparable_settings(config: dict[str, Any], arm: str | None = None) -> dict[str, Any]:
    """What of an experiment config (``Experiment.model_dump(mode="json")``) must be equal for
    two runs to measure the same thing: the server settings and speculators without the
    operational keys (timeouts, lock wait, port), and with ``arm`` that arm's settings
    without its description. Runs whose comparable settings differ are never averaged."""
    server = dict(config.get("server") or {})
    for key in _OPERATIONAL["server"]:
        server.pop(key, None)
    out: dict[str, Any] = {"server": server, "speculators": config.get("speculators") or {}}
    if arm is not None:
        settings = dict((config.get("arms") or {}).get(arm) or {})
        settings.pop("description", None)
        out["arm"] = settings
    return out


def pinned_of(config: dict | None, name: str | None = None) -> float | None:
    """The pinned acceptance length of a record's config snapshot (``[speculators.<name>]
    pinned``; ``name`` None: the snapshot's default profile), or None."""
    speculators = ((config or {}).get("speculators") or {}) if isinstance(config, dict) else {}
    if not isinstance(speculators, dict):
        return None
    profile = speculators.get(name or default_profile(speculators) or "")
    pin = profile.get(PIN_KEY) if isinstance(profile, dict) else None
    return float(pin) if isinstance(pin, (int, float)) and not isinstance(pin, bool) else None
