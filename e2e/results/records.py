"""Typed, immutable records that e2e persists: a request, a run's metrics, a run.

``run.json`` carries ``schema_version``; bump it when a persisted field changes meaning.
  1: first version (request records, run metrics, validity, provenance).
  2: ``plugin`` (how the arm's settings reached the server), ``server.kind`` (fresh or
     external), provenance's ``dirty``/``diff_sha256``/``source_sha256`` (its ``e2e`` block). Version 1 files
     read as before (the new fields are optional).
  3: ``placement`` (CPU sets asked for and applied; the server's cores), ``host_noise`` (what
     else used the host during the measured load), ``bursts`` (burst-delivered streams),
     ``metrics.burst_share``, goodput fields, ``client`` (the load generator's own cost and
     whether it saturated), ``offered_rate``/``achieved_rate`` (open loop), the spec's
     ``request_rate``, ``burstiness``, ``max_concurrency``. Optional: older files read as
     before.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from e2e.plan import RunSpec
from e2e.redact import scrub

__all__ = ["SCHEMA_VERSION", "RequestRecord", "RunMetrics", "SpecCounters", "ServerInfo",
           "PluginInfo", "WorkloadInfo", "SegmentMetrics", "PlacementInfo", "RunRecord",
           "Placement", "ProcessPlacement", "ProcessCPU", "GPUDevice", "GPUProcess", "GPUState", "HostNoise", "BurstSummary", "ClientStats",
           "INTERFERENCE_SHARE", "WARN_SHARE"]

SCHEMA_VERSION = 7
"""4: a run's spec has ``duet`` and ``slot``, a run.json its ``duet`` block (an e2e of 3 would
refuse those keys: it now names the newer schema instead). 5: the spec's ``workload``, a
run.json's ``workload`` block (what was sent, its hash, the cache state, the prefix cache's
counters, per-segment metrics) and ``metrics.prefix_cache_hit_rate``; the spec-decode counters
per draft position (``SpecCounters.accepted_per_pos``) and the run's per-position acceptance
rates (``RunMetrics.acceptance_rates_per_pos``). Records of 1-4 read unchanged. 6: a request
record's ``output_token_ids`` (requests.parquet's column of that name, list<int32>: the
completion's token ids, null where not recorded); files of 1-5 have no such column and read
as "outputs not recorded". 7: a run.json's ``outputs_sha256`` (the digest of its
requests.parquet's outputs, checked where the metrics are: ``e2e.results._check``); a record
of 7 with a requests.parquet and no digest is not trusted; records of 1-6 read unchecked."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- affinity: written by e2e.host ---

class Placement(BaseModel):
    """What was asked and what was applied, for run.json. ``applied`` is None when nothing
    was pinned (no set asked, or the OS refused it: ``refused`` says why); ``allowed`` is the
    mask read back afterwards."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = Field(description="What was placed: 'load generator' or 'server'.")
    requested: str | None = Field(None, description="The CPU set as configured, e.g. '0-1'.")
    applied: list[int] | None = Field(None, description="Cores pinned to; None: unpinned.")
    refused: str | None = Field(None, description="Why the OS refused the set (ran unpinned).")
    allowed: list[int] = Field(default_factory=list,
                               description="Cores the target may run on, read back.")


class ProcessPlacement(BaseModel):
    """One process of a group and the cores its threads may use (union over threads)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    name: str
    threads: int
    cores: list[int]


# --- noise: written by e2e.host ---

class ProcessCPU(_Record):
    """One process: CPU seconds used (in a snapshot: since it started; in HostNoise: during
    the run) and that as a share of one core over the run."""

    pid: int
    name: str
    cpu_s: float
    share: float | None = None
    ppid: int | None = None
    pgid: int | None = None
    start_ticks: int | None = None


class GPUDevice(_Record):
    index: int
    name: str | None = None
    uuid: str | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    utilization_pct: float | None = None


class GPUProcess(_Record):
    pid: int
    name: str
    gpu: str | None = None
    used_mib: float | None = None


class GPUState(_Record):
    """What the GPU tool said. ``tool`` None: neither nvidia-smi nor rocm-smi is installed
    (``detail`` says so); ``error`` set: the tool ran and failed (recorded, not raised)."""

    tool: str | None = None
    detail: str | None = None
    error: str | None = None
    devices: list[GPUDevice] = Field(default_factory=list)
    processes: list[GPUProcess] = Field(default_factory=list)


INTERFERENCE_SHARE = 0.25
"""Other processes' cores' worth during a run's load (``HostNoise.other_cpu_share``) at
which the run warns of interference (``e2e.load``); the default of ``[nightly]
interference_max``, from which the nightly leaves a change measured beside other work uncalled."""


class HostNoise(_Record):
    """What else used the host during a run; goes into run.json."""

    wall_s: float
    cpus_online: int
    loadavg_before: tuple[float, float, float]
    loadavg_after: tuple[float, float, float]
    host_busy_cpu_s: float = Field(description="All CPU time used on the host (/proc/stat).")
    own_cpu_s: float = Field(description="CPU time of the run's own processes.")
    other_cpu_s: float = Field(description="host busy - own: everything else, in CPU seconds.")
    other_cpu_share: float = Field(description="other_cpu_s / wall_s: cores' worth of others.")
    unattributed_cpu_s: float = Field(description="other CPU no visible process accounts for.")
    steal_s: float = Field(description="CPU seconds the hypervisor gave to someone else.")
    steal_share: float
    top_other: list[ProcessCPU] = Field(description="Busiest other processes, by CPU used.")
    governors: dict[str, str] | None = None
    freq_mhz_before: dict[str, float] | None = None
    freq_mhz_after: dict[str, float] | None = None
    gpu_before: GPUState = Field(default_factory=GPUState)
    gpu_after: GPUState = Field(default_factory=GPUState)
    gpu_other_processes: list[GPUProcess] = Field(
        default_factory=list, description="Processes not the run's own that held a GPU.")


# --- bursts: written by e2e.load ---

WARN_SHARE = 0.05
"""The share of a run's requests above which its ``BurstSummary`` warns (``affected``: client
TPOT burst-affected; ``itl_affected``): the method is ``e2e.load``'s; the nightly's
``burst_share_max`` defaults to it."""


class BurstSummary(BaseModel):
    """A run's burst-delivered requests, for run.json and the run summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = Field(description="The rule, in words.")
    reference: str = Field(description="'server TPOT' or 'E2E latency': what spread is "
                                       "measured against.")
    threshold: float
    warn_share: float
    held_limit: float = Field(description="share below which a burst is TPOT-affected.")
    judged: int = Field(description="Requests judged (ok, at least 3 content chunks).")
    flagged: int = Field(description="Burst-delivered requests (spread < threshold).")
    share: float | None = Field(None, description="flagged / judged; None when none judged.")
    flagged_indices: list[int] = Field(default_factory=list)
    tpot_affected: int = Field(0, description="Burst-delivered with their decode time in TTFT.")
    tpot_affected_share: float | None = None
    tpot_affected_indices: list[int] = Field(default_factory=list)
    spread_median: float | None = None
    spread_min: float | None = None
    affected: bool = Field(False, description="tpot_affected_share > warn_share: the run's "
                                              "client TPOT is burst-affected.")
    itl_affected: bool = Field(False, description="share > warn_share: inter-chunk latency "
                                                  "is burst-affected.")
    warnings: list[str] = Field(default_factory=list)


# --- clientstats: written by e2e.load ---

class ClientStats(BaseModel):
    """The load generator's own cost over one load (all client processes together)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: int
    wall_s: float
    cpu_s: float
    chunks: int
    cpu_us_per_chunk: float | None
    core_share: float
    loop_lag_ms_max: float
    loop_lag_ms_p99: float
    wait_share: float | None = None
    """The most any client process waited for a core, over the wall time (None: unknown)."""
    saturated: bool
    saturated_because: str | None = None
    event_loop: str | None = None
    """'uvloop' or 'asyncio' (None: a record from before e2e chose the loop)."""


# --- the run ---

class RequestRecord(_Record):
    """One measured request. Times are seconds since the run's load started (monotonic)."""

    index: int
    send_s: float
    first_token_s: float | None = None
    end_s: float | None = None
    chunk_times_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    retried: bool = Field(False, description=(
        "Sent a second time on a fresh connection: the reused keep-alive one closed before "
        "any byte of the response. Its times are the second send's."))
    output_token_ids: tuple[StrictInt, ...] | None = Field(
        None, description=(
            "The completion's token ids (int32), as the server streamed them (vLLM's "
            "return_token_ids; the load generator's decoder takes only ids from 0 to "
            "2**31 - 1); None: not recorded (a failed request, a server that sent none, an "
            "imported run, or a file written before outputs were recorded)."))

    @field_validator("error")
    @classmethod
    def _scrubbed(cls, value: str | None) -> str | None:  # a server's body may echo a secret
        return scrub(value) if value else value

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None and self.first_token_s is not None


class SpecCounters(_Record):
    """Speculative-decoding counters scraped from /metrics (sums over engines)."""

    accepted: float = 0.0
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted_per_pos: list[float] = Field(
        default_factory=list, description="vllm:spec_decode_num_accepted_tokens_per_pos by "
        "draft position (0 first), summed over engines; [] when the server exports none.")


class RunMetrics(_Record):
    """Per-run summary. Latencies in ms; None where undefined (no successful request)."""

    requests: int
    ok_requests: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    ttft_ms_mean: float | None = None
    ttft_ms_median: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_mean: float | None = None
    tpot_ms_median: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_mean: float | None = None
    itl_ms_median: float | None = None
    itl_ms_p99: float | None = None
    e2el_ms_mean: float | None = None
    e2el_ms_median: float | None = None
    e2el_ms_p99: float | None = None
    output_throughput_tok_s: float | None = None
    request_throughput_req_s: float | None = None
    server_tpot_ms_mean: float | None = Field(
        None, description="Server's own mean TPOT, from vllm:request_time_per_output_token_seconds."
    )
    server_ttft_ms_mean: float | None = Field(
        None, description="Server's own mean TTFT, from vllm:time_to_first_token_seconds.")
    server_e2el_ms_mean: float | None = Field(
        None, description="Server's own mean E2E latency, from vllm:e2e_request_latency_seconds.")
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    acceptance_rates_per_pos: list[float] | None = Field(
        None, description="Per draft position (first = 1): Δ accepted at that position / "
        "Δ drafts (vLLM's per-position rate: the share of verify steps whose first i draft "
        "tokens were all accepted; they sum to acceptance length − 1). None without counters.")
    ms_per_verify_step: float | None = None
    burst_share: float | None = Field(
        None, description="Share of the run's streams whose decode time reached the client in "
        "one burst (client TPOT understates them; e2e.load.bursts).")
    goodput_slo: str | None = Field(None, description="The SLO goodput was measured against.")
    goodput_share: float | None = Field(None, description="Share of requests meeting every SLO.")
    goodput_req_s: float | None = Field(None, description="Requests per second meeting every SLO.")
    prefix_cache_hit_rate: float | None = Field(
        None, description="Prefix-cache hits / queries (tokens) over the measured load, from "
        "the server's vllm:prefix_cache_hits and vllm:prefix_cache_queries counters; 0 when "
        "the server served prompts and queried nothing (prefix caching off); None without "
        "the counters.")


class ServerInfo(_Record):
    """The server a unit ran on: how it was started (argv and environment, secrets redacted)
    and where it listened. ``kind`` is ``fresh`` (started by e2e for this unit) or
    ``external`` (an already-running server e2e did not start: not a fresh server)."""

    kind: str = "fresh"
    argv: list[str]
    env: dict[str, str] = Field(description="Environment given to the server, secrets redacted.")
    base_url: str
    model: str
    model_hash: str | None = None


class PluginInfo(_Record):
    """How the arm's settings reached the server through e2e's vLLM plugin.

    ``check``: ``passed`` (a worker logged that it applied exactly the arm's settings),
    ``no settings`` (the arm has none), ``skipped`` (``--no-plugin-check``: recorded, for
    engines without the plugin), ``failed`` (the unit was not measured). ``mode`` is the
    plugin's mode from the applied line (``inject`` on the CPU default, ``rocm`` when it
    patched vLLM's ROCm builders), ``where`` the process and class that applied them.

    What the server's plugin is made of, beside the driver's: ``plugin_sha256`` and
    ``source`` are from the server's applied line (the hash of the plugin's and kernels'
    sources the worker imported, and the e2e folder it imported them from),
    ``expected_sha256`` the driver's hash of its own, ``copied_from`` the driver's e2e package
    that e2e copied onto the server's ``PYTHONPATH`` (``e2e.session.plugin_copy``)."""

    check: str
    settings: dict[str, Any] = Field(default_factory=dict)
    mode: str | None = None
    where: str | None = None
    detail: str | None = None
    plugin_sha256: str | None = None
    source: str | None = None
    expected_sha256: str | None = None
    copied_from: str | None = None


class PlacementInfo(_Record):
    """Which cores the server and the load generator were given, and which cores the
    server's processes could run on once started (its whole process group)."""

    server: Placement | None = None
    client: Placement | None = None
    server_cores: list[int] | None = None
    server_memory: ServerMemory | None = None


class ServerMemory(_Record):
    """The server's memory after the measured load (its whole process group), to see whether
    one fresh server is slower than the next because of where its memory landed."""

    rss_mib: float
    anon_huge_mib: float = Field(description="Transparent huge pages (AnonHugePages).")
    numa_mib: dict[str, float] = Field(default_factory=dict, description="MiB per NUMA node.")
    thp: str | None = Field(None, description="The host's THP mode (always/madvise/never).")


class DuetInfo(_Record):
    """A run measured in a duet: the arms run at the same time, one per slot."""

    id: str = Field(description="The duet's unit id (duet-c<conc>-<mode>-r<round>-d<index>).")
    slot: int
    slot_name: str
    partners: list[str] = Field(description="The other sides' run ids, in slot order.")
    overlap_share: float | None = Field(
        None, description="Share of this run's measured window during which every side's "
        "server was under load (measured or, after its own measurement, unmeasured).")
    measured_overlap_share: float | None = Field(
        None, description="Share of this run's measured window during which every side was "
        "measuring.")
    start_spread_s: float | None = Field(
        None, description="Latest minus earliest start of the sides' measured loads.")
    measured_s: float | None = Field(None, description="This side's measured window.")
    held_s: float | None = Field(
        None, description="How long this side kept its server loaded (unmeasured) after its "
        "measured load, for partners still measuring.")
    window_slots: list[int] | None = Field(
        None, description="With [duet] swap: the slot whose CPUs each load window ran on, in "
        "window order (None: every window on this side's own slot).")
    window_server_cores: list[list[int]] | None = Field(
        None, description="With [duet] swap: the cores the server's threads could use in each "
        "load window, read back after each move.")


class SegmentMetrics(_Record):
    """One segment of a run's requests (a trace's time segment, a shared-prefix group's first
    request vs the later ones): its client-side figures, ms."""

    name: str
    requests: int
    ok_requests: int
    ttft_ms_mean: float | None = None
    ttft_ms_median: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_mean: float | None = None
    e2el_ms_mean: float | None = None
    goodput_share: float | None = Field(None, description="Share meeting the run's SLO.")


class WorkloadInfo(_Record):
    """What a run sent (``e2e.load.draw``) and the cache state it met."""

    kind: str = Field(description="reference, shared-prefix or trace.")
    sha256: str = Field(description="SHA-256 of every prompt (token ids), max_tokens, send time "
                        "and segment: equal across arms exactly when they sent the same load.")
    requests: int
    input_tokens: int
    output_tokens: int
    source_sha256: str | None = Field(None, description="A trace file's SHA-256.")
    warmup: str = Field(description="Why the warmup did not warm the measured prompts.")
    cache: str = Field(description="The prefix cache's state when the measured load began.")
    cache_reset: bool | None = Field(
        None, description="An external server's /reset_prefix_cache before the measured load: "
        "True (reset), False (refused or absent), None (a fresh server: cold already).")
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_hit_rate: float | None = None
    schedule_lateness_ms_p50: float | None = Field(
        None, description="A scheduled load's sends after their time (trace, open loop), ms.")
    schedule_lateness_ms_p99: float | None = None
    schedule_lateness_ms_max: float | None = None
    segments: list[SegmentMetrics] = Field(default_factory=list)


class RunRecord(_Record):
    """Everything ``run.json`` holds about one run."""

    schema_version: int = SCHEMA_VERSION
    experiment: str
    run_id: str
    spec: RunSpec
    arm_settings: dict[str, Any]
    config: dict[str, Any] = Field(description="Snapshot of the whole experiment config.")
    server: ServerInfo
    provenance: dict[str, Any]
    plugin: PluginInfo | None = None
    placement: PlacementInfo | None = None
    host_noise: HostNoise | None = None
    bursts: BurstSummary | None = None
    client: ClientStats | None = None
    duet: DuetInfo | None = None
    workload: WorkloadInfo | None = None
    offered_rate: float | None = Field(None, description="Open loop: requests/s offered.")
    achieved_rate: float | None = Field(
        None, description="Requests/s sent (open loop) or completed (closed loop).")
    started_at: str
    finished_at: str
    counters_before: SpecCounters | None = None
    counters_after: SpecCounters | None = None
    metrics: RunMetrics | None = None
    outputs_sha256: str | None = Field(
        None, description="SHA-256 of requests.parquet's recorded outputs as written (its index "
        "and output_token_ids columns: e2e.results._check.outputs_sha256); a report or a resume "
        "refuses the run when the file's differ. None: no requests.parquet (or an imported "
        "run), or a record of schema 6 or older (its outputs unchecked).")
    windows: list[RunMetrics] = Field(
        default_factory=list, description="With load.windows > 1: each load window's client-side "
        "metrics (its own requests), in order; ``metrics`` is over all of them.")
    valid: bool
    invalid_reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @field_validator("invalid_reasons", "warnings")
    @classmethod
    def _scrubbed(cls, value: list[str]) -> list[str]:  # no secret in a reason (e2e.redact)
        return [scrub(v) for v in value]

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value > SCHEMA_VERSION:
            raise ValueError(f"schema_version {value} is newer than this e2e's "
                             f"{SCHEMA_VERSION}: written by a newer e2e; upgrade e2e to read it")
        return value
