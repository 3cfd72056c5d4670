"""The values a report is made of: metrics, cells, comparisons, noise rows, warnings and the
``Summary`` that holds them (immutable; built by ``e2e.analysis.sweep.aggregate.summarize``)."""

from __future__ import annotations

from dataclasses import dataclass

from e2e.analysis.estimators.estimates import (
    DEFAULT_EQUIVALENCE_PCT, DEFAULT_POWER, METHOD_TEXT, relative_range
)
from e2e.analysis.estimators.median_ratio import INTERVAL_METHOD
from e2e.analysis.estimators.verdicts import Call
from e2e.analysis.estimators.components import Components
from e2e.metrics import position_key

__all__ = ["Metric", "METRICS", "metric", "Cell", "Comparison", "NoiseRow", "ReportWarning",
           "RunCounts", "Summary", "WorkloadRow", "SegmentRow", "MIN_RUNS", "MAX_SPREAD", "MAX_ACCEPTANCE_MOVE",
           "DEFAULT_CONFIDENCE", "DEFAULT_MIN_EFFECT_PCT", "DEFAULT_REPORT_FROM_RUN",
           "SPEC_MODES", "REPORTED_POSITIONS", "RunKey"]

RunKey = tuple[str, int, str, int, "str | None"]
"""A run in its cell: arm, concurrency, spec mode, repeat, host (a duet's runs add the duet)."""

REPORTED_POSITIONS = 8
"""Draft positions the report has a metric for (run.json keeps every position)."""
MIN_RUNS = 3
MAX_SPREAD = 0.05
MAX_ACCEPTANCE_MOVE = 0.10
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN_EFFECT_PCT = 1.0
DEFAULT_REPORT_FROM_RUN = 2
SPEC_MODES = ("base", "dspark")


@dataclass(frozen=True)
class Metric:
    """A per-run figure from ``RunMetrics`` (``key`` is its field name there)."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    definition: str


METRICS: tuple[Metric, ...] = (
    Metric("tpot_ms_mean", "mean TPOT", "ms", False,
           "mean over a run's requests of (end-to-end latency − TTFT) / (completion tokens − 1), "
           "completion tokens from the server's usage"),
    Metric("tpot_ms_median", "median TPOT", "ms", False,
           "median over a run's requests of the same per-request TPOT"),
    Metric("server_tpot_ms_mean", "server mean TPOT", "ms", False,
           "the server's own mean per-request TPOT: Δsum / Δcount of "
           "vllm:request_time_per_output_token_seconds around the measured load (immune to "
           "how the stream's chunks reach the client)"),
    Metric("ttft_ms_mean", "mean TTFT", "ms", False,
           "mean over a run's requests of the time from sending to the first token"),
    Metric("server_ttft_ms_mean", "server mean TTFT", "ms", False,
           "the server's own mean TTFT: Δsum / Δcount of vllm:time_to_first_token_seconds "
           "around the measured load"),
    Metric("e2el_ms_mean", "mean E2E latency", "ms", False,
           "mean over a run's requests of the time from sending to the last token"),
    Metric("server_e2el_ms_mean", "server mean E2E latency", "ms", False,
           "the server's own mean end-to-end latency: Δsum / Δcount of "
           "vllm:e2e_request_latency_seconds around the measured load"),
    Metric("output_throughput_tok_s", "output throughput", "tok/s", True,
           "completion tokens of a run divided by the duration of its measured load"),
    Metric("acceptance_length", "acceptance length", "tokens/step", True,
           "1 + Δaccepted / Δdrafts of the server's spec-decode counters around the measured load"),
    Metric("ms_per_verify_step", "ms per verify step", "ms", False,
           "mean TPOT × acceptance length of the same run"),
    Metric("server_ms_per_verify_step", "ms per verify step (server TPOT)", "ms", False,
           "server mean TPOT × acceptance length of the same run (sees a per-step cost even "
           "when the client's stream arrives in bursts)"),
    Metric("goodput_req_s", "goodput", "req/s", True,
           "requests per second that met every SLO of load.slo (--slo), over the measured "
           "load's duration (vLLM's definition); only where an SLO was given"),
) + tuple(
    Metric(position_key(i), f"acceptance rate, draft position {i}", "share", True,
           f"Δ accepted at draft position {i} / Δ drafts of the server's "
           "vllm:spec_decode_num_accepted_tokens_per_pos around the measured load: the share "
           f"of verify steps whose first {i} draft token{'s were' if i > 1 else ' was'} accepted")
    for i in range(1, REPORTED_POSITIONS + 1))
_BY_KEY = {m.key: m for m in METRICS}


def label_of(key: str) -> str:
    """A metric's label where it is one of ``METRICS``, else its key (the nightly also judges
    figures that are not report metrics, e.g. ``burst_share``)."""
    found = _BY_KEY.get(key)
    return found.label if found is not None else key


def metric(key: str) -> Metric:
    try:
        return _BY_KEY[key]
    except KeyError:
        from e2e.names import did_you_mean

        raise KeyError(f"unknown metric {key!r}{did_you_mean(key, _BY_KEY)}; known: "
                       f"{', '.join(_BY_KEY)}") from None


@dataclass(frozen=True)
class Cell:
    """One metric of one (arm, concurrency, spec mode): its reported runs and median (range)."""

    arm: str
    concurrency: int
    spec_mode: str
    metric: str
    repeats: tuple[int, ...]
    values: tuple[float, ...]
    median: float
    low: float
    high: float
    hosts: tuple[str | None, ...] = ()
    """Each run's host (``provenance.host.hostname``), aligned with ``values``; () when unknown."""
    windows: tuple[tuple[float | None, ...], ...] = ()
    """Each run's value per load window (``[load] windows``), aligned with ``values``; a run of
    one window has (); () for the whole cell when no run had windows."""
    duets: tuple[int | None, ...] = ()
    """Each run's duet in its round (``[duet]``: arms measured together), aligned with
    ``values``; () when no run was in a duet."""
    interference: tuple[float | None, ...] = ()
    """Each run's recorded interference (other processes' cores' worth during its load),
    aligned with ``values``; () when no run recorded it."""

    @property
    def n(self) -> int:
        return len(self.values)

    def blocks(self) -> list[tuple]:
        """Each run's block: (round, host), or (round, host, duet) for runs measured in duets
        (the runs measured together), aligned with ``values``."""
        hosts = self.hosts or (None,) * len(self.values)
        if self.duets:
            return list(zip(self.repeats, hosts, self.duets))
        return list(zip(self.repeats, hosts))

    @property
    def in_duets(self) -> bool:
        return bool(self.duets) and all(d is not None for d in self.duets)

    @property
    def spread(self) -> float:
        """(max − min) / median of the reported runs."""
        return relative_range(self.values)


@dataclass(frozen=True)
class Comparison:
    """``arm`` against ``baseline`` for one metric of one (concurrency, spec mode).

    ``ratio`` is the geometric-mean ratio arm / baseline that ``interval`` (low %, high %, at
    ``confidence``) bounds, estimated by ``method``: "blocked" (paired per round and host) or
    "welch" (unpaired); ``pct`` = (ratio − 1) × 100; ``median_ratio`` is the ratio of the two
    cells' medians (shown for reference). ``interval`` is None with too few runs. ``verdict``
    is one of ``Call``; ``mde_pct`` the minimal detectable effect at these runs (80 %
    power); ``noise_pct`` the run-to-run noise (sd of one pair's log ratio, in %), floored when
    ``noise_floored``. ``p_value`` tests no change, ``tost_p`` equivalence within
    ±``equivalence_pct`` %; ``p_holm`` is the family-wise adjusted p of the test behind the verdict
    (``paired_holm`` over both hypotheses of the report's ``Summary.n_comparisons``; the
    smaller of the two when inconclusive), and ``survives`` says whether a difference or
    equivalence verdict still holds after it (None for other verdicts). ``unpaired_interval`` and
    ``unpaired_mde_pct`` are the Welch figures on the same runs, for comparison."""

    arm: str
    baseline: str
    concurrency: int
    spec_mode: str
    metric: str
    ratio: float
    pct: float
    interval: tuple[float, float] | None
    confidence: float
    verdict: Call
    method: str
    n_arm: int
    n_baseline: int
    n_blocks: int = 0
    dropped: int = 0
    median_ratio: float | None = None
    mde_pct: float | None = None
    noise_pct: float | None = None
    noise_floored: bool = False
    p_value: float | None = None
    tost_p: float | None = None
    p_holm: float | None = None
    survives: bool | None = None
    equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT
    min_effect_pct: float = 0.0
    unpaired_interval: tuple[float, float] | None = None
    unpaired_mde_pct: float | None = None
    design: str = "sequential"
    """"duet" when every run of both cells was measured in a duet (the model's block is the
    duet and its slot term the duet's slot), else "sequential"."""
    role: str = "secondary"
    """"primary" (the cell's headline metric, in the Holm family), "check" (an A/A arm: its
    comparisons measure the noise and are not in the family) or "secondary" (every other metric:
    unadjusted, ``p_holm`` None)."""
    df: float | None = None
    prior_df: float = 0.0
    se: float | None = None
    """Standard error of ln(ratio) (after moderation and the floor); None without an interval."""
    time_model: str | None = None
    """For method "model": "ols", or "ar1-gls" (the cell's residuals AR(1) over the runs'
    times, ``rho`` per run apart; ``cell_model``); None for the other methods."""
    rho: float | None = None

    @property
    def method_text(self) -> str:
        return METHOD_TEXT.get(self.method, self.method)

    @property
    def method_name(self) -> str:
        """The method in a word or two, as every table and picture names it: "model",
        "paired" or "unpaired", "duet model"/"duet paired" when the runs were in duets."""
        name = {"model": "model", "blocked": "paired"}.get(self.method, "unpaired")
        if self.design == "duet" and self.method in ("model", "blocked"):
            name = f"duet {name}"
        return name


@dataclass(frozen=True)
class NoiseRow:
    """The run-to-run noise of one metric of one (concurrency, spec mode) and what it allows.

    ``noise_pct``: sd of the log ratio of one arm run to one baseline run of the same block, in
    % (the CV of the paired log ratio); ``source``: the A/A arm it came from, or the pooled
    blocked residuals of the cell's comparisons; ``mde_pct``: the minimal detectable effect at
    ``n_blocks`` blocks (runs per arm when the A/A comparison is unpaired; 80 % power, the report's confidence) and ``unpaired_mde_pct`` the
    unpaired method's on the same runs (None without an A/A arm); ``runs_for_target``: reported
    runs per arm whose blocked MDE is ``target_pct`` (None: more than 1000)."""

    concurrency: int
    spec_mode: str
    metric: str
    noise_pct: float
    source: str
    n_blocks: int
    mde_pct: float | None
    unpaired_mde_pct: float | None
    target_pct: float
    runs_for_target: int | None
    floored: bool
    df: float | None = None
    prior_df: float = 0.0
    arms_in_model: int = 2
    method: str = "blocked"
    slot: bool = False
    components: Components | None = None
    """Between- and within-server parts of the per-run noise (runs with load windows only)."""
    time_model: str | None = None
    """As ``Comparison.time_model``, for the cell's model (None when it has none)."""
    rho: float | None = None
    slots: int = 0
    """The runs were measured in duets of this many sides (the model's blocks); 0: one server
    at a time. ``runs_for_target`` then counts rounds of duets."""
    se: float | None = None
    """The standard error (ln scale) of the comparison the row describes, as its test uses
    it (the model's design, its honest errors for time, moderation and the floor) at the
    ``n_blocks`` rounds made: what ``e2e plan`` extrapolates."""


@dataclass(frozen=True)
class ReportWarning:
    """A data-quality problem, attached to the numbers it affects.

    ``arm``/``concurrency``/``spec_mode`` name the cell (None: the whole report);
    ``metric`` None means every metric of that cell. ``cause`` is the sentence the warnings of
    one cause share, whatever their cell and metric, and ``detail`` this one's own figure
    (``warning_lines`` gives one line per cause); None: ``message`` is its own cause."""

    message: str
    arm: str | None = None
    concurrency: int | None = None
    spec_mode: str | None = None
    metric: str | None = None
    cause: str | None = None
    detail: str | None = None

    def applies_to(self, arm: str, concurrency: int, spec_mode: str, metric_key: str) -> bool:
        return (
            self.arm == arm
            and self.concurrency == concurrency
            and self.spec_mode == spec_mode
            and self.metric in (None, metric_key)
        )


@dataclass(frozen=True)
class SegmentRow:
    """One segment of a cell's workload (a trace's time segment, a shared-prefix group's first
    request or the later ones, a conversation's turn): medians over the cell's reported runs
    of each run's segment figure, ms."""

    name: str
    runs: int
    ttft_ms_mean: float | None
    tpot_ms_mean: float | None


@dataclass(frozen=True)
class WorkloadRow:
    """What one cell (arm, concurrency, spec mode) sent and the figures only its workload has,
    over its reported runs: the workload (``e2e.analysis.sweep.frame.workload_key``), its arrival
    process, the warmup (None: not recorded), the prefix cache's hit rate per run, how late a
    scheduled load's sends were per run (p50, p99, max: ms) and its segments."""

    arm: str
    concurrency: int
    spec_mode: str
    workload: str
    arrival: str
    warmup: int | None
    runs: int
    hit_rate: tuple[float, ...] = ()
    lateness_ms: tuple[tuple[float, float, float], ...] = ()
    segments: tuple[SegmentRow, ...] = ()

    @property
    def own_figures(self) -> bool:
        """Whether the row says more than the reference load's closed loop would."""
        return (self.workload != "reference" or self.arrival != "closed loop"
                or bool(self.lateness_ms or self.segments))


@dataclass(frozen=True)
class RunCounts:
    total: int
    reported: int
    warmup: int
    invalid: int


@dataclass(frozen=True)
class Summary:
    """Everything a renderer needs; built by ``summarize``."""

    experiment: str
    baseline: str
    arms: tuple[str, ...]
    concurrencies: tuple[int, ...]
    spec_modes: tuple[str, ...]
    report_from_run: int
    counts: RunCounts
    cells: tuple[Cell, ...]
    comparisons: tuple[Comparison, ...]
    warnings: tuple[ReportWarning, ...]
    confidence: float
    min_effect_pct: float
    interval_method: str = INTERVAL_METHOD
    metrics: tuple[Metric, ...] = METRICS
    equivalence_pct: float = DEFAULT_EQUIVALENCE_PCT
    power: float = DEFAULT_POWER
    noise: tuple[NoiseRow, ...] = ()
    aa_arms: tuple[str, ...] = ()
    n_comparisons: int = 0
    multiplicity: str = "Holm"
    pooled: tuple[str, ...] = ()
    """What the noise of the comparisons borrowed, one sentence per (metric, spec mode)."""
    pinned: tuple[float, ...] = ()
    """The acceptance lengths the speculator was pinned at (synthetic rejection sampling), one
    per distinct pin among the runs with the speculator; () when acceptance was the draft's."""
    attributions: tuple = ()  # of e2e.analysis.sweep.attribution.Attribution (which imports this)
    """Per speculator cell and arm: its TPOT change split into verify step and acceptance
    length (``e2e.analysis.sweep.attribution``)."""
    speculators: tuple[str, ...] = ()
    """The speculator profiles (``[speculators.<name>]``) the runs with the speculator used."""
    loads: tuple[tuple[int, str, str], ...] = ()
    """(concurrency, spec mode, label) where the load is not a closed loop at that concurrency:
    an open loop's or a trace's arrival process (``poisson 3 req/s``, ``trace 2×``)."""
    workloads: tuple[WorkloadRow, ...] = ()
    outputs: object | None = None  # an e2e.analysis.outputs.compare.OutputsSummary (which imports this)
    """The outputs compared prompt by prompt and the cells' prefix-cache hit rates
    (``summarize_outputs``); None where nobody compared them (``e2e report`` does)."""
    gsm8k: object | None = None  # an e2e.analysis.outputs.gsm8k.GSM8KReport
    """The experiment's GSM8K evaluations (``gsm8k_report``), each arm's per-document agreement
    with main; None where none was measured or read."""
    capacity: str | None = None
    """Where the experiment's capacity search is (``capacity.json``), None without one."""

    @property
    def speculator_label(self) -> str:
        """How the speculator spec mode is named beside a figure: "DSpark" (the reference's
        profile, and the name the spec mode has), else the profiles' own names."""
        return "DSpark" if self.speculators in ((), ("dspark",)) else "+".join(self.speculators)

    def load_label(self, concurrency: int, spec_mode: str) -> str:
        """``concurrency 4`` for a closed loop, else the runs' arrival process."""
        for conc, mode, label in self.loads:
            if (conc, mode) == (concurrency, spec_mode):
                return label
        return f"concurrency {concurrency}"

    @property
    def open_loop(self) -> bool:
        return bool(self.loads)

    def attributions_for(self, concurrency: int, spec_mode: str) -> tuple:
        return tuple(a for a in self.attributions
                     if (a.concurrency, a.spec_mode) == (concurrency, spec_mode))

    def noise_row(self, concurrency: int, spec_mode: str, metric_key: str) -> NoiseRow | None:
        for r in self.noise:
            if (r.concurrency, r.spec_mode, r.metric) == (concurrency, spec_mode, metric_key):
                return r
        return None

    @property
    def compared_arms(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a != self.baseline and self.baseline in self.arms)

    def cell(self, arm: str, concurrency: int, spec_mode: str, metric_key: str) -> Cell | None:
        for c in self.cells:
            if (c.arm, c.concurrency, c.spec_mode, c.metric) == (arm, concurrency, spec_mode, metric_key):
                return c
        return None

    def comparison(
        self, arm: str, concurrency: int, spec_mode: str, metric_key: str
    ) -> Comparison | None:
        for c in self.comparisons:
            if (c.arm, c.concurrency, c.spec_mode, c.metric) == (arm, concurrency, spec_mode, metric_key):
                return c
        return None

    def warnings_for(
        self, arm: str, concurrency: int, spec_mode: str, metric_key: str
    ) -> tuple[ReportWarning, ...]:
        return tuple(w for w in self.warnings if w.applies_to(arm, concurrency, spec_mode, metric_key))

    def metrics_in(self, spec_mode: str) -> tuple[Metric, ...]:
        """Metrics with at least one cell in ``spec_mode``, in ``METRICS`` order."""
        have = {c.metric for c in self.cells if c.spec_mode == spec_mode}
        return tuple(m for m in self.metrics if m.key in have)
