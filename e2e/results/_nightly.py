"""The nightly's records: a night's cells and their verdicts, the baseline night, a ratio's
history, the change points and the night's judgement, the values the judge
(``e2e.analysis.nightly.judge.judge_night``), the change points (``e2e.analysis.nightly.changepoints.night_changes``), the history
and the renderers pass between them (no logic beyond a label, medians and lookups)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

import numpy as np

__all__ = ["CellKey", "NightCell", "CellVerdict", "VerdictName", "Looks", "worse_end",
           "Baseline", "RatioHistory", "ChangePoint", "Judgement", "NightStatus", "EXIT_CODES",
           "GSM8K_METRIC", "NightRef", "NightInfo", "StoredNight", "StoredChangePoint",
           "StoredVerdict", "GSM8KAgreement", "HistoryCell", "BisectOutcome", "BlockedChange",
           "OutputsCheck", "OutputsHistory", "MORE_THAN_HISTORY", "AS_HISTORY",
           "NEW_DIVERGENCE", "FIRST_DIVERGENCE", "IDENTICAL", "AS_AA", "MORE_THAN_AA", "NO_AA",
           "NOT_RECORDED", "AA_DIVERGES", "relative_arm", "is_relative", "built_arm"]

VerdictName = Literal["regressed", "improved", "noise", "undecided", "too few runs",
                      "no baseline", "new cell", "missing", "not judged", "no samples"]
NightStatus = Literal["pass", "regression", "incomplete", "undecided", "blind"]
EXIT_CODES: dict[str, int] = {"pass": 0, "regression": 1, "incomplete": 2, "undecided": 3,
                              "blind": 4}
"""A night's exit status by its status (``e2e.analysis.nightly.judge.night_status``): 0 every judged cell
resolved, 1 a regression, 2 the night could not run or be judged, 3 a judged cell not resolved
tonight, 4 one not resolved at its last look ``BLIND_NIGHTS`` nights in a row."""
GSM8K_METRIC = "gsm8k_strict_match"
"""The metric of a night's GSM8K cell (``CellKey.metric``): the strict-match accuracy."""
HISTORY_SCHEMA_VERSION = 4
"""The history frame's format version (``e2e.results._nightly_history.HISTORY_COLUMNS``)."""


@dataclass(frozen=True, order=True)
class CellKey:
    kind: str          # "load" or "gsm8k"
    arm: str
    concurrency: int   # 0 for GSM8K
    spec_mode: str
    metric: str

    def label(self) -> str:
        if self.kind == "gsm8k":
            return f"{self.arm} GSM8K {self.spec_mode}"
        return f"{self.arm} c{self.concurrency} {self.spec_mode}"


@dataclass(frozen=True)
class NightCell:
    """One metric of one cell of one night: its reported runs' values and run folders."""

    key: CellKey
    values: tuple[float, ...]
    repeats: tuple[int, ...] = ()
    run_dirs: tuple[str, ...] = ()
    interference: tuple[float | None, ...] = ()
    """Each value's recorded interference (other processes' cores' worth during its load; for
    a relative value the larger of its two runs'), aligned with ``values``; () when unknown
    (nights stored before the store kept it, schema version 2)."""

    @property
    def busy_share(self) -> float | None:
        """The median run's recorded interference (cores), None where no run recorded any."""
        busy = [x for x in self.interference if x is not None]
        return float(np.median(busy)) if busy else None

    @property
    def median(self) -> float:
        values = np.asarray(self.values, dtype=float)
        if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
            raise ValueError(f"a night cell's median needs finite values, got {self.values!r}")
        return float(np.median(values))

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class CellVerdict:
    """Tonight's cell against the baseline's. ``pct`` is the change in % (load metrics) or
    in percentage points (GSM8K); ``interval`` the change's interval in the same unit;
    ``p_value`` the GSM8K McNemar p; ``baseline`` the baseline night's cell, or for a cell
    judged against its history the history nights' runs pooled; ``floor_pp`` the documents tonight's own servers
    disagree on, in pp (the repeat-of-main floor, for information); ``source`` why this
    metric is the headline (ms per verify step from the server's TPOT)."""

    key: CellKey
    verdict: VerdictName
    tonight: NightCell | None
    baseline: NightCell | None
    threshold: float | None = None
    pct: float | None = None
    interval: tuple[float, float] | None = None
    floor_pp: float | None = None
    reason: str = ""
    p_value: float | None = None
    source: str = ""
    history: tuple[str, ...] = ()
    """The nights a relative cell was judged against (its ratio's history); () when it was
    judged against the baseline night."""
    higher_is_better: bool = False
    """The metric's direction (for ``worse_end``)."""
    more: bool = False
    """Not resolved yet and the night may measure more rounds: look again after them
    (the judge's looks, ``e2e.analysis.nightly.judge.night_look``); the verdict stands only at the night's
    last look."""
    regressed_since: str | None = None
    """A relative cell whose regression was called on that night and has not been seen to
    return since (reported every night until it returns or a baseline night is pinned)."""
    withheld: str = ""
    """The call ("regressed" or "improved") a busy night did not make: the verdict is then
    undecided."""
    undecided_nights: int = 0
    """The nights in a row, tonight the last, this cell ended undecided at its last look
    (nights measured beside other work skipped); 0 unless tonight did."""


def worse_end(v: CellVerdict) -> float | None:
    """The interval's reach on the worse side, in % (the upper end where lower is better):
    a night without a call says "no change beyond" it."""
    if v.interval is None:
        return None
    return v.interval[0] if v.higher_is_better else v.interval[1]


@dataclass(frozen=True)
class Looks:
    """When a night looks at its ratio cells: after ``first`` reported rounds (duets), then
    after every ``step`` more while a cell is unresolved, up to ``last``."""

    first: int
    step: int
    last: int

    def schedule(self) -> tuple[int, ...]:
        out = [max(self.first, 1)]
        while self.step > 0 and out[-1] + self.step <= self.last:
            out.append(out[-1] + self.step)
        return tuple(out)


@dataclass(frozen=True)
class Baseline:
    """The night judged against, and why it was chosen."""

    date: str
    cells: tuple[NightCell, ...]
    reason: str  # "last passing night with the same config hash" or "pinned"
    status: str = "pass"


@dataclass(frozen=True)
class RatioHistory:
    """A relative cell's earlier nights to judge tonight against (``e2e.analysis.
    ratio_history``): ``nights`` ((date, cell), oldest first), the first ``history_nights``
    nights since ``since`` (why: ``why``); ``full`` when no later night joins them;
    ``regressed_since`` the night a regression was called that has not returned since."""

    nights: tuple[tuple[str, NightCell], ...] = ()
    since: str | None = None
    why: str = ""
    full: bool = False
    regressed_since: str | None = None
    returning: bool = False
    """The last night, still regressed, showed no change beyond half the threshold: a second
    such night in a row returns the regression."""
    suspect: str | None = None
    """The last night (its date) was not called but looked changed
    (``e2e.analysis.nightly.judge.SUSPECT_LEVEL``): if tonight looks changed too, the two are a regression."""


@dataclass(frozen=True)
class ChangePoint:
    """A confirmed change point of a judged cell's history."""

    key: CellKey
    start: str               # the night the change started
    break_date: str          # the first night of the segment after the break
    before: float
    after: float
    pct: float
    p_value: float
    worse: bool
    latest: bool             # tonight belongs to its level
    caught: bool             # a night-against-night verdict flagged the cell since it started
    regression: bool         # worse, latest and not accepted: the night fails (exit 1)
    reason: str = ""


@dataclass(frozen=True)
class Judgement:
    """A night judged (``e2e.analysis.nightly.judge.judge_night``), its change points and outputs checks
    added by ``e2e.analysis.nightly.judge.judgement_with_changes`` and ``judgement_with_outputs``."""

    date: str
    baseline: Baseline | None
    verdicts: tuple[CellVerdict, ...]
    problems: tuple[str, ...] = field(default=())
    status: NightStatus = "pass"
    changes: tuple[ChangePoint, ...] = field(default=())
    outputs: tuple = field(default=())
    """Tonight's outputs against the reference's (``OutputsCheck``)."""
    outputs_fail: bool = False
    """Whether an outputs finding makes the night a regression (``[nightly] outputs_fail``)."""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def output_findings(self) -> tuple:
        return tuple(c for c in self.outputs if c.finding)

    def by_verdict(self, *names: str) -> tuple[CellVerdict, ...]:
        return tuple(v for v in self.verdicts if v.verdict in names)


# --- e2e bisect: a commit against the good build (``e2e.analysis.nightly.bisect.blocked_change``) ------

BisectOutcome = Literal["good", "bad"]


@dataclass(frozen=True)
class BlockedChange:
    """The commit against the good build, round by round: change in % (geometric mean of the
    per-round ratios) and its t-interval; None with fewer than 2 rounds."""

    pct: float
    low: float | None
    high: float | None
    rounds: int


# --- the cells of an arm relative to the reference (``main-vs-reference``) ---------------

_VS = "-vs-"


def relative_arm(arm: str, reference: str) -> str:
    """The name of the cells that hold ``arm`` ÷ ``reference`` measured the same night."""
    return f"{arm}{_VS}{reference}"


def is_relative(arm: str) -> bool:
    return _VS in arm


def built_arm(arm: str) -> str:
    """The arm whose build a cell measures: ``main`` for ``main-vs-reference``."""
    return arm.split(_VS, 1)[0]


# --- tonight's outputs against the reference's (``e2e.analysis.nightly.outputs.check_outputs``) -------------

# a run's outputs against the baseline's (``e2e.analysis.outputs.compare.summarize_outputs``): its verdicts
IDENTICAL = "identical"
AS_AA = "diverges as much as A/A"
MORE_THAN_AA = "diverges more than A/A"
NO_AA = "diverges (no A/A to judge against)"
NOT_RECORDED = "outputs not recorded"
AA_DIVERGES = "diverges (this is the A/A: the yardstick)"
# a night's divergence judged against the earlier nights (``e2e.analysis.nightly.outputs.check_outputs``)
MORE_THAN_HISTORY = "diverges more than earlier nights"
AS_HISTORY = "diverges as much as earlier nights"
NEW_DIVERGENCE = "diverges (earlier nights identical)"
FIRST_DIVERGENCE = "diverges (no earlier night to judge against)"

OutputsHistory = Mapping[tuple[str, int, str], Sequence[tuple[str, int, int]]]
"""Per (arm, concurrency, spec mode): the earlier nights' (date, compared, diverged) counts."""


@dataclass(frozen=True)
class OutputsCheck:
    """One arm's outputs against the reference at one (concurrency, spec mode) tonight."""

    arm: str
    reference: str
    concurrency: int
    spec_mode: str
    verdict: str
    compared: int
    diverged: int
    finding: bool
    position_min: int | None = None
    position_median: float | None = None
    position_max: int | None = None
    p_value: float | None = None
    yardstick: str = ""
    """What the verdict was judged against: the night's A/A arm, the earlier nights, or none."""

    @property
    def cell(self) -> str:
        return f"{relative_arm(self.arm, self.reference)} c={self.concurrency} {self.spec_mode}"

    def line(self) -> str:
        """The check in one line, for the summary."""
        if self.verdict == NOT_RECORDED:
            return f"{self.cell}: outputs not recorded"
        if self.diverged == 0:
            return (f"{self.cell}: outputs identical to the reference ({self.compared} of "
                    f"{self.compared} prompts)")
        where = (f"first divergent token at {self.position_min}"
                 if self.position_min == self.position_max else
                 f"first divergent token median {self.position_median:g}, range "
                 f"{self.position_min}–{self.position_max}")
        p = f", p = {self.p_value:.3g}" if self.p_value is not None else ""
        verdict = "diverges" if self.verdict == NEW_DIVERGENCE else self.verdict
        return (f"{self.cell}: outputs differ from the reference on {self.diverged} of "
                f"{self.compared} prompts ({where}): {verdict}"
                + (f" ({self.yardstick}{p})" if self.yardstick else ""))

    def to_json(self) -> dict:
        return {**asdict(self), "line": self.line()}



# --- what the results store reads back (``e2e.results.nightly_store.Store``) ------------------------------
# Field names are the store's column names, so a template or a caller reads ``row.date`` as it
# read ``row["date"]``; None where the store holds NULL. A record of one cell of one night is
# composed, not copied: its night (``NightRef``) and its cell's key or the live record itself
# (``ChangePoint``, ``CellVerdict``); ``from_row`` maps a row of the store's columns onto it.

@dataclass(frozen=True, order=True)
class NightRef:
    """Which night a stored record belongs to: the store's key of a night."""

    date: str
    experiment: str
    config_hash: str


def _part(part: str, name: str) -> property:
    """A field of a record's composed ``part``, read as the record's own (``row.date`` for
    ``row.night.date``): templates and callers read a stored record as its flat row."""
    return property(lambda self: getattr(getattr(self, part), name))


class _OfNight:
    """A stored record of one night: its identity is ``night`` (a ``NightRef``), read here by
    its parts."""

    night: NightRef
    date = _part("night", "date")
    experiment = _part("night", "experiment")
    config_hash = _part("night", "config_hash")

    def row(self) -> dict:
        """The record as one flat row: its night's columns, then the rest in field order."""
        return {**asdict(self.night),
                **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "night"}}

    @classmethod
    def from_row(cls, row: Mapping):
        """The record of one flat row (the store's columns); a column the row lacks takes its
        default."""
        rest = {f.name: row[f.name] for f in fields(cls) if f.name != "night" and f.name in row}
        return cls(night=_night_of_row(row), **rest)


class _OfNightCell(_OfNight):
    """A stored record of one cell of one night: its identity composed of ``night`` (a
    ``NightRef``) and ``key`` (the cell's ``CellKey``), read here by its parts."""

    key: CellKey
    kind = _part("key", "kind")
    arm = _part("key", "arm")
    concurrency = _part("key", "concurrency")
    spec_mode = _part("key", "spec_mode")
    metric = _part("key", "metric")


def _night_of_row(row: Mapping) -> NightRef:
    return NightRef(row["date"], row["experiment"], row["config_hash"])


def _key_of_row(row: Mapping) -> CellKey:
    return CellKey(row["kind"], row["arm"], row["concurrency"], row["spec_mode"], row["metric"])


@dataclass(frozen=True)
class StoredNight(_OfNight):
    """One night's row of the store (``Store.night_details``): its night, its status,
    baseline, host, links and problems, and its outputs checks as stored (JSON; None where not
    compared)."""

    night: NightRef
    status: str
    id: int | None = None
    exit_code: int | None = None
    recorded_at: str | None = None
    baseline_date: str | None = None
    baseline_reason: str | None = None
    host: str | None = None
    e2e_git_sha: str | None = None
    arm_overrides: object = None
    problems: object = None
    night_dir: str | None = None
    report_path: str | None = None
    summary_path: str | None = None
    outputs: object = None


@dataclass(frozen=True)
class StoredChangePoint(_OfNightCell):
    """A change point as a night stored it (``Store.change_points``): the night that found it
    and the change point itself (``start`` is the night the change started); numbers the
    store holds as NULL are None."""

    night: NightRef
    change: ChangePoint
    id: int | None = None
    night_id: int | None = None

    key = _part("change", "key")

    @classmethod
    def from_row(cls, row: Mapping) -> StoredChangePoint:
        """The record of a row holding the night's and the change point's columns."""
        fields = {f: row.get(f) for f in _CHANGE_FIELDS}
        return cls(night=_night_of_row(row),
                   change=ChangePoint(key=_key_of_row(row), start=row["start"], **fields),
                   id=row.get("id"), night_id=row.get("night_id"))


_CHANGE_FIELDS = ("break_date", "before", "after", "pct", "p_value", "worse", "latest",
                  "caught", "regression", "reason")


@dataclass(frozen=True)
class StoredVerdict(_OfNightCell):
    """A night cell's verdict as stored (``Store.verdict_details``): its night and the verdict
    (the cell's runs are the night cell's, not kept with it; numbers the store holds as NULL
    are None)."""

    night: NightRef
    judged: CellVerdict
    id: int | None = None
    night_id: int | None = None

    key = _part("judged", "key")

    @classmethod
    def from_row(cls, row: Mapping) -> StoredVerdict:
        """The record of a row holding the night's and the verdict's columns."""
        low, high = row.get("pct_low"), row.get("pct_high")
        return cls(night=_night_of_row(row), judged=CellVerdict(
            key=_key_of_row(row), verdict=row["verdict"], tonight=None, baseline=None,
            threshold=row.get("threshold"), pct=row.get("pct"),
            interval=None if low is None or high is None else (low, high),
            floor_pp=row.get("floor_pp"), reason=row.get("reason"), p_value=row.get("p_value"),
            source=row.get("source")), id=row.get("id"), night_id=row.get("night_id"))


@dataclass(frozen=True)
class NightInfo(_OfNight):
    """One night as ``e2e history`` lists it: its night, status, cells and those regressed."""

    night: NightRef
    status: str
    cells: int
    regressed: int
    host: str | None
    recorded_at: str | None
    baseline_date: str | None


@dataclass(frozen=True)
class GSM8KAgreement(_OfNight):
    """One GSM8K arm folder of a night (``Store.gsm8k_agreement``): its night, its documents
    and how many were strictly right; for the arm's first folder of the night (``first``), how
    many documents changed against the same arm's first folder of the night before (``lost``,
    ``gained`` of ``shared``; None when there is no night before)."""

    night: NightRef
    arm: str
    run_dir: str
    documents: int
    right: int
    first: bool
    lost: int | None = None
    gained: int | None = None
    shared: int | None = None


@dataclass(frozen=True)
class HistoryCell(_OfNightCell):
    """One night cell of the history as the store reads it back (``Store.cells``; a row of
    ``Store.history``'s frame, ``e2e.results._nightly_history.HISTORY_COLUMNS``: ``row`` and ``from_row``):
    its night and cell, its runs, its verdict and the provenance of its arm's build. Numbers
    the store holds as NULL are NaN (as the frame holds them); ``verdict`` is "not judged"
    for a cell recorded without one; ``arm_overrides`` is the night's ``--arm-setting``
    overrides as sorted JSON."""

    night: NightRef
    key: CellKey
    night_status: str
    n: int = 0
    median: float = math.nan
    low: float = math.nan
    high: float = math.nan
    values: list = field(default_factory=list)
    repeats: list = field(default_factory=list)
    run_dirs: list = field(default_factory=list)
    verdict: str = "not judged"
    pct: float = math.nan
    pct_low: float = math.nan
    pct_high: float = math.nan
    threshold: float = math.nan
    floor_pp: float = math.nan
    baseline_date: str | None = None
    baseline_reason: str | None = None
    recorded_at: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    engine_git_sha: str | None = None
    packages_sha256: str | None = None
    build_python: str | None = None
    arm_overrides: str = "{}"
    e2e_git_sha: str | None = None
    host: str | None = None
    build_git_commit: str | None = None
    interference: list | None = None
    schema_version: int = HISTORY_SCHEMA_VERSION
    """The history file's format version (``e2e.results._nightly.HISTORY_SCHEMA_VERSION``)."""

    def row(self) -> dict:
        """The cell as one flat row of the history frame (its night's and its cell's columns,
        then the rest in field order)."""
        rest = {f.name: getattr(self, f.name) for f in fields(self)[3:]}
        return {**asdict(self.night), "night_status": self.night_status, **asdict(self.key),
                **rest}

    @classmethod
    def from_row(cls, row: Mapping) -> HistoryCell:
        """The record of one flat row (the store's columns, or the history frame's); a column
        the row lacks takes its default."""
        rest = {f.name: row[f.name] for f in fields(cls)[2:] if f.name in row}
        return cls(night=_night_of_row(row), key=_key_of_row(row), **rest)
