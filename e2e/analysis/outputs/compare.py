"""Same answers, prompt by prompt: each arm's greedy outputs against the baseline's, within a
cell, judged against the A/A arm's; and the prefix cache's state per cell. Pure functions over
records already read (``RunRecord`` and each run's outputs by request index, e.g. from
``e2e.results.store.load_outputs``); no I/O.

Method. Every measured request is greedy (temperature 0) on prompts fixed by the seed, so the
runs of one (concurrency, spec mode) answered the same prompts, request index by request index.
Two sides (an arm and the baseline; or one arm's speculator mode and its base mode) are paired
run by run on the repeat number (round *r* of one against round *r* of the other: the runs made
back to back), over the valid runs of both (warmup runs included: an output has no warmup).
A prompt is *compared* when both runs of at least one pair recorded its output; it is
*identical* when the two outputs are equal token for token in every such pair, and *diverged*
otherwise, at its first divergent position (0 = the first completion token; a shorter output
that is a prefix of the other diverges at its end), the earliest over its pairs. The prompt is
the unit, not the (prompt, repeat) pair: a deterministic divergence repeats in every round and
would otherwise count four times.

Verdict. Divergence alone is no finding: batched numerics differ from run to run, so two
servers of the same build may answer a prompt differently at higher concurrency. The A/A arm
(a repeat of the baseline: ``sweep.frame.aa_arms``) against the baseline is the yardstick, as it
is for speed and GSM8K. A comparison with no divergent prompt is *identical*. Otherwise the
arm's counts (diverged, identical) are set against the A/A's in a 2x2 table, and Fisher's
exact test, one-sided (the arm diverges on a larger share of prompts than the A/A;
``scipy.stats.fisher_exact``, alternative ``greater``) gives a p-value; Holm's step-down
adjusts it over every test of the summary (``e2e.analysis.estimators.multiplicity.holm``). Adjusted p
<= 1 - confidence: *diverges more than A/A*; else *diverges as much as A/A*. Without an A/A
arm in the cell: *diverges (no A/A to judge against)*. The arm and the A/A are compared with
the same baseline runs on the same prompts, so their counts are positively correlated; the
test treats them as independent samples, which makes it conservative (it calls a difference
less often than its alpha says), never liberal.

A speculator's mode against its arm's base mode is judged against the A/A of both modes (the
base mode's and the speculator's, each against the baseline in its mode): *diverges more than
A/A* only when it diverges more than each of them (an intersection-union test: the larger of
the two p-values, valid at alpha without a further correction), since either mode's own
batching may diverge by itself.

Cache state. A cell's prefix-cache hit rate is the median (and range) over its valid runs of
``RunMetrics.prefix_cache_hit_rate`` (hits / queries in tokens over the measured load). Two
cells' rates are *flagged* when their medians differ by more than either cell's own
run-to-run range and by more than ``HIT_RATE_TOLERANCE``: a speed difference between them may
then be the cache's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scipy.stats import fisher_exact

from e2e.results import AA_DIVERGES, AS_AA, IDENTICAL, MORE_THAN_AA, NO_AA, NOT_RECORDED
from e2e.results.records import RequestRecord, RunRecord
from e2e.analysis.sweep.frame import arm_order, aa_arms
from e2e.analysis.estimators.multiplicity import holm
from e2e.analysis.sweep.summary import DEFAULT_CONFIDENCE, SPEC_MODES

__all__ = ["Outputs", "RunOutputs", "Divergence", "OutputAgreement", "OutputComparison",
           "CellCache", "CacheContrast", "OutputsSummary", "HIT_RATE_TOLERANCE", "outputs_of",
           "first_divergence", "compare_outputs", "divergence_test", "summarize_outputs",
           "cell_caches", "cache_contrast"]

Outputs = Mapping[int, "tuple[int, ...] | None"]
"""One run's outputs: request index -> the completion's token ids (None: not recorded)."""
RunOutputs = Mapping[str, Outputs]
"""Every run's outputs, by run id."""


HIT_RATE_TOLERANCE = 0.01
"""Hit rates closer than this (1 percentage point) are never flagged as different."""


def outputs_of(requests: Iterable[RequestRecord]) -> dict[int, tuple[int, ...] | None]:
    """A run's outputs by request index, from its request records."""
    return {r.index: r.output_token_ids for r in requests}


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two outputs differ (a prefix diverges at its end), or None
    when they are equal."""
    if len(a) == len(b) and tuple(a) == tuple(b):
        return None
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


@dataclass(frozen=True)
class Divergence:
    """A prompt whose outputs differ: its request index, the first divergent token (the
    earliest over the paired runs) and the repeats in which it diverged."""

    index: int
    position: int
    repeats: tuple[int, ...]


@dataclass(frozen=True)
class OutputAgreement:
    """One side (``arm`` in ``spec_mode``) against a reference side, prompt by prompt, at one
    concurrency. ``repeats``: the paired repeats where both runs recorded outputs; ``compared``
    prompts answered by both in at least one of them; ``diverged`` those that differed, in
    index order."""

    reference: str
    reference_mode: str
    arm: str
    spec_mode: str
    concurrency: int
    repeats: tuple[int, ...]
    compared: int
    diverged: tuple[Divergence, ...]

    @property
    def recorded(self) -> bool:
        """Whether any prompt could be compared (False: outputs not recorded)."""
        return self.compared > 0

    @property
    def identical(self) -> int:
        return self.compared - len(self.diverged)

    @property
    def identical_share(self) -> float | None:
        return self.identical / self.compared if self.compared else None

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(d.position for d in self.diverged)

    @property
    def position_median(self) -> float | None:
        return float(statistics.median(self.positions)) if self.diverged else None

    @property
    def position_min(self) -> int | None:
        return min(self.positions) if self.diverged else None

    @property
    def position_max(self) -> int | None:
        return max(self.positions) if self.diverged else None


def _by_repeat(records: Iterable[RunRecord]) -> dict[int, RunRecord]:
    """Valid runs by repeat (a repeat recorded twice: the first by run id)."""
    out: dict[int, RunRecord] = {}
    for r in sorted(records, key=lambda r: r.run_id):
        if r.valid and r.metrics is not None:
            out.setdefault(int(r.spec.repeat), r)
    return out


def compare_outputs(reference: Iterable[RunRecord], other: Iterable[RunRecord],
                    outputs: RunOutputs) -> OutputAgreement:
    """``other``'s runs against ``reference``'s (each all runs of one side at one
    concurrency), paired on the repeat number, prompt by prompt (module docstring)."""
    ref, oth = _by_repeat(reference), _by_repeat(other)
    if not ref or not oth:
        raise ValueError("compare_outputs needs a valid run on each side")
    some, mine = next(iter(ref.values())), next(iter(oth.values()))
    repeats: list[int] = []
    first: dict[int, int] = {}
    where: dict[int, list[int]] = {}
    compared: set[int] = set()
    for repeat in sorted(ref.keys() & oth.keys()):
        a, b = ref[repeat], oth[repeat]
        if (a.workload is not None and b.workload is not None
                and a.workload.sha256 != b.workload.sha256):
            continue  # they did not send the same prompts: nothing to join
        out_a, out_b = outputs.get(a.run_id) or {}, outputs.get(b.run_id) or {}
        both = [i for i, ids in out_a.items() if ids is not None and out_b.get(i) is not None]
        if not both:
            continue
        repeats.append(repeat)
        for i in both:
            compared.add(i)
            at = first_divergence(out_a[i], out_b[i])
            if at is not None:
                first[i] = min(at, first.get(i, at))
                where.setdefault(i, []).append(repeat)
    return OutputAgreement(
        reference=some.spec.arm, reference_mode=some.spec.spec_mode, arm=mine.spec.arm,
        spec_mode=mine.spec.spec_mode, concurrency=int(some.spec.concurrency),
        repeats=tuple(repeats), compared=len(compared),
        diverged=tuple(Divergence(i, first[i], tuple(where[i])) for i in sorted(first)))


def divergence_test(arm: OutputAgreement, aa: OutputAgreement) -> float:
    """One-sided Fisher's exact test that ``arm`` diverges on a larger share of its prompts
    than ``aa`` (the A/A against the same reference): the p-value (1 when nothing diverged)."""
    if not arm.recorded or not aa.recorded or not arm.diverged:
        return 1.0
    table = [[len(arm.diverged), arm.identical], [len(aa.diverged), aa.identical]]
    return float(fisher_exact(table, alternative="greater").pvalue)


@dataclass(frozen=True)
class CellCache:
    """A cell's prefix-cache hit rates over its valid runs (None where a run had no
    counters); ``median``/``low``/``high`` over the known ones."""

    arm: str
    concurrency: int
    spec_mode: str
    rates: tuple[float | None, ...]

    @property
    def known(self) -> tuple[float, ...]:
        return tuple(r for r in self.rates if r is not None)

    @property
    def median(self) -> float | None:
        return float(statistics.median(self.known)) if self.known else None

    @property
    def low(self) -> float | None:
        return min(self.known) if self.known else None

    @property
    def high(self) -> float | None:
        return max(self.known) if self.known else None

    @property
    def spread(self) -> float:
        """The run-to-run range (0 for fewer than two known rates)."""
        return (self.high - self.low) if len(self.known) > 1 else 0.0


@dataclass(frozen=True)
class CacheContrast:
    """Two cells' hit rates side by side; ``flagged`` when they differ by more than either
    cell's own run-to-run range (and than ``HIT_RATE_TOLERANCE``)."""

    reference: CellCache
    other: CellCache
    flagged: bool

    @property
    def difference(self) -> float | None:
        a, b = self.reference.median, self.other.median
        return None if a is None or b is None else b - a


def cache_contrast(reference: CellCache, other: CellCache) -> CacheContrast:
    """``reference`` and ``other`` side by side, flagged as the module docstring says."""
    a, b = reference.median, other.median
    flagged = (a is not None and b is not None
               and abs(b - a) > max(reference.spread, other.spread, HIT_RATE_TOLERANCE))
    return CacheContrast(reference, other, flagged)


def cell_caches(records: Iterable[RunRecord]) -> tuple[CellCache, ...]:
    """Every cell's prefix-cache hit rates over its valid runs, in (spec mode, concurrency,
    arm) order."""
    cells: dict[tuple[str, int, str], list[tuple[int, str, float | None]]] = {}
    for r in records:
        if not (r.valid and r.metrics is not None):
            continue
        key = (r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode)
        cells.setdefault(key, []).append((int(r.spec.repeat), r.run_id,
                                          r.metrics.prefix_cache_hit_rate))
    mode_rank = {m: k for k, m in enumerate(SPEC_MODES)}
    out = [CellCache(arm, conc, mode, tuple(rate for _, _, rate in sorted(runs)))
           for (arm, conc, mode), runs in cells.items()]
    return tuple(sorted(out, key=lambda c: (mode_rank.get(c.spec_mode, 9), c.concurrency,
                                            c.arm)))


@dataclass(frozen=True)
class OutputComparison:
    """One comparison of outputs and its verdict. ``kind``: ``arm`` (an arm against the
    baseline), ``aa`` (an A/A arm against the baseline: the yardstick itself) or ``speculator``
    (an arm's speculator mode against its own base mode; ``spec_mode`` is then the
    speculator's). ``yardsticks``: the A/A agreements it is judged against, to show beside
    it. ``cache``: the two sides' prefix-cache hit rates."""

    kind: str
    arm: str
    concurrency: int
    spec_mode: str
    agreement: OutputAgreement
    yardsticks: tuple[OutputAgreement, ...]
    verdict: str
    p_value: float | None = None
    p_holm: float | None = None
    cache: CacheContrast | None = None


@dataclass(frozen=True)
class OutputsSummary:
    """Every output comparison of a set of runs (``summarize_outputs``): arms against the
    baseline per cell, A/A rows, the speculator against base per arm and concurrency; the
    cells' hit rates; how many tests the Holm adjustment spans; and notes on the data."""

    baseline: str
    confidence: float
    aa_arms: tuple[str, ...]
    comparisons: tuple[OutputComparison, ...]
    caches: tuple[CellCache, ...]
    n_tests: int
    notes: tuple[str, ...] = ()

    def find(self, arm: str, concurrency: int, spec_mode: str,
             kind: str | None = None) -> OutputComparison | None:
        """The comparison of ``arm`` at a cell (of ``kind`` when given), or None."""
        for c in self.comparisons:
            if (c.arm, c.concurrency, c.spec_mode) == (arm, concurrency, spec_mode) and (
                    kind is None or c.kind == kind):
                return c
        return None


def _verdict(agreement: OutputAgreement, p: float | None, alpha: float) -> str:
    if not agreement.recorded:
        return NOT_RECORDED
    if not agreement.diverged:
        return IDENTICAL
    if p is None:
        return NO_AA
    return MORE_THAN_AA if p <= alpha else AS_AA


def summarize_outputs(records: Iterable[RunRecord], outputs: RunOutputs, *,
                      baseline: str = "main",
                      confidence: float = DEFAULT_CONFIDENCE) -> OutputsSummary:
    """Every output comparison of ``records`` (module docstring): in each (concurrency, spec
    mode), each arm against ``baseline`` and each A/A arm against it; for each arm run in
    both modes at a concurrency, its speculator mode against its base mode. Imported runs, and
    runs whose outputs were not recorded, give "outputs not recorded"."""
    records = list(records)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    alpha = 1.0 - confidence
    cells: dict[tuple[str, int, str], list[RunRecord]] = {}
    for r in records:
        cells.setdefault((r.spec.arm, int(r.spec.concurrency), r.spec.spec_mode), []).append(r)
    arms = arm_order(records, {a for a, _, _ in cells}, baseline)
    aa = aa_arms(records, baseline, arms)
    caches = cell_caches(records)
    cache_of = {(c.arm, c.concurrency, c.spec_mode): c for c in caches}
    notes: list[str] = []
    if baseline not in arms:
        notes.append(f"no runs of the baseline arm {baseline!r}: no output comparisons")
    mode_rank = {m: k for k, m in enumerate(SPEC_MODES)}
    places = sorted({(c, m) for _, c, m in cells}, key=lambda p: (mode_rank.get(p[1], 9), p[0]))

    def valid(key) -> bool:
        return any(r.valid and r.metrics is not None for r in cells.get(key, ()))

    def contrast(a, b) -> CacheContrast | None:
        return cache_contrast(cache_of[a], cache_of[b]) if a in cache_of and b in cache_of else None

    # every side against its reference, then the yardsticks: the first A/A arm with outputs
    pairs: list[tuple[str, str, int, str, tuple, tuple]] = []  # kind, arm, cell, reference
    for conc, mode in places:
        for arm in arms:
            if arm != baseline and valid((arm, conc, mode)) and valid((baseline, conc, mode)):
                pairs.append(("aa" if arm in aa else "arm", arm, conc, mode,
                              (baseline, conc, mode), (arm, conc, mode)))
    for conc, mode in places:
        for arm in arms:
            base_key = (arm, conc, SPEC_MODES[0])
            if mode != SPEC_MODES[0] and valid(base_key) and valid((arm, conc, mode)):
                pairs.append(("speculator", arm, conc, mode, base_key, (arm, conc, mode)))
    agreements = [compare_outputs(cells[ref], cells[key], outputs)
                  for _, _, _, _, ref, key in pairs]
    yardstick: dict[tuple[int, str], OutputAgreement] = {}
    for (kind, _, conc, mode, _, _), agreement in zip(pairs, agreements):
        if kind == "aa" and agreement.recorded:
            yardstick.setdefault((conc, mode), agreement)

    rows = []
    for (kind, arm, conc, mode, ref, key), agreement in zip(pairs, agreements):
        wanted = {"aa": (), "arm": ((conc, mode),),
                  "speculator": ((conc, SPEC_MODES[0]), (conc, mode))}[kind]
        sticks = tuple(yardstick[w] for w in wanted if w in yardstick)
        p = None
        if sticks and agreement.recorded and agreement.diverged:
            p = max(divergence_test(agreement, y) for y in sticks)  # intersection-union
        rows.append((kind, arm, conc, mode, agreement, sticks, contrast(ref, key), p))
    tested = [k for k, row in enumerate(rows) if row[7] is not None]
    adjusted = dict(zip(tested, holm([rows[k][7] for k in tested])))
    comparisons = []
    for k, (kind, arm, conc, mode, agreement, sticks, cache, p) in enumerate(rows):
        if kind == "aa":
            verdict = (NOT_RECORDED if not agreement.recorded else
                       IDENTICAL if not agreement.diverged else AA_DIVERGES)
        else:
            verdict = _verdict(agreement, adjusted.get(k), alpha)
        comparisons.append(OutputComparison(kind, arm, conc, mode, agreement, sticks, verdict,
                                            p_value=p, p_holm=adjusted.get(k), cache=cache))
    return OutputsSummary(baseline=baseline, confidence=confidence, aa_arms=aa,
                          comparisons=tuple(comparisons), caches=caches, n_tests=len(tested),
                          notes=tuple(notes))
