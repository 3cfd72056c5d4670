"""GSM8K's statistics: per-document agreement between arms and the report's sections. Pure
functions over records already read (``e2e.results``: ``SampleVerdict``, ``ArmResult``,
``EvalInfo``); no I/O.

Two arms are compared document by document, joined on ``doc_id``. The prompts must be the
same (``prompt_hash``): otherwise the arms answered different questions and a comparison
would be meaningless, so it is an error, not a warning.

A section is one (spec mode, limit) evaluation folder: per arm its accuracy, N and
acceptance length; per arm its agreement with main; the repeats of main as the noise floor;
and warnings about the data next to the numbers they affect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scipy.stats import binomtest

from e2e.errors import ResultsError
from e2e.metrics import acceptance
from e2e.results.gsm8k import GSM8K_REFERENCE_ARM, ArmResult, EvalInfo, Evaluation, SampleVerdict
from e2e.results.records import SpecCounters

__all__ = ["verdict_accuracy", "mcnemar_exact", "Agreement", "compare_verdicts",
           "acceptance_length", "GSM8KArm", "GSM8KSection", "GSM8KReport", "summarize_gsm8k",
           "gsm8k_report"]

FULL_TEST_SET = 1319


def verdict_accuracy(verdicts: Sequence[SampleVerdict], *, flexible: bool = False) -> float | None:
    """Share of documents answered right (strict-match, or flexible-extract); None if empty
    or, for flexible-extract, if any document lacks that verdict."""
    if not verdicts:
        return None
    values = [v.flexible if flexible else v.strict for v in verdicts]
    if any(x is None for x in values):
        return None
    return sum(bool(x) for x in values) / len(values)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact McNemar test, two-sided: the discordant pairs (``b`` right only on one arm,
    ``c`` right only on the other) against Binomial(b + c, 1/2), via scipy's ``binomtest``.
    With no discordant pair there is no evidence of a difference: p = 1."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return float(min(1.0, binomtest(b, b + c, 0.5, alternative="two-sided").pvalue))


@dataclass(frozen=True)
class Agreement:
    """One arm against the reference, document by document (strict-match verdicts)."""

    reference: str
    arm: str
    n: int
    same: int
    reference_only_correct: tuple[int, ...]
    arm_only_correct: tuple[int, ...]
    p_value: float

    @property
    def flipped(self) -> tuple[int, ...]:
        """Documents whose verdict differs, sorted."""
        return tuple(sorted(self.reference_only_correct + self.arm_only_correct))

    @property
    def share(self) -> float | None:
        return self.same / self.n if self.n else None


def compare_verdicts(reference: Sequence[SampleVerdict], other: Sequence[SampleVerdict], *,
                     reference_name: str = "main", arm_name: str = "arm") -> Agreement:
    """Join two arms' verdicts on ``doc_id``. The two must hold the same documents with the
    same prompts; then count same verdicts, each side's only-correct documents, and the
    exact McNemar p-value of the difference."""
    ref = {v.doc_id: v for v in reference}
    arm = {v.doc_id: v for v in other}
    if len(ref) != len(reference) or len(arm) != len(other):
        raise ResultsError(f"{reference_name} or {arm_name}: a doc_id appears twice")
    if ref.keys() != arm.keys():
        missing = sorted(ref.keys() - arm.keys())[:5]
        extra = sorted(arm.keys() - ref.keys())[:5]
        raise ResultsError(
            f"{arm_name} and {reference_name} did not evaluate the same documents "
            f"({len(arm)} vs {len(ref)}; only in {reference_name}: {missing}, only in "
            f"{arm_name}: {extra}); rerun them with the same --limit and --data")
    differing = [d for d in sorted(ref) if ref[d].prompt_hash != arm[d].prompt_hash]
    if differing:
        raise ResultsError(
            f"{arm_name} and {reference_name} saw different prompts for {len(differing)} "
            f"document(s) (first: {differing[:5]}): their verdicts cannot be compared; "
            "were they run with different data or lm-eval versions?")
    ref_only = tuple(d for d in sorted(ref) if ref[d].strict and not arm[d].strict)
    arm_only = tuple(d for d in sorted(ref) if arm[d].strict and not ref[d].strict)
    n = len(ref)
    return Agreement(reference=reference_name, arm=arm_name, n=n,
                     same=n - len(ref_only) - len(arm_only),
                     reference_only_correct=ref_only, arm_only_correct=arm_only,
                     p_value=mcnemar_exact(len(ref_only), len(arm_only)))


def acceptance_length(before: SpecCounters | None, after: SpecCounters | None) -> float | None:
    """Mean tokens per verify step over the eval: 1 + Δaccepted / Δdrafts
    (``e2e.metrics.acceptance``); None without both scrapes or when no draft was counted."""
    if before is None or after is None:
        return None
    return acceptance(before, after)[0]


def display_name(label: str, arm: str, occurrence: int) -> str:
    """``main (repeat)`` for main's second server, ``pr (repeat 3)`` for a third, else the arm."""
    if occurrence == 1:
        return arm
    return f"{arm} (repeat)" if occurrence == 2 else f"{arm} (repeat {occurrence - 1})"


@dataclass(frozen=True)
class GSM8KArm:
    """One arm's server in a section: its accuracy and its agreement with main."""

    label: str
    arm: str
    occurrence: int
    name: str
    n: int
    correct: int
    accuracy_strict: float
    accuracy_flexible: float | None
    acceptance_length: float | None
    agreement: Agreement | None  # against main's first server; None for that one itself


@dataclass(frozen=True)
class GSM8KSection:
    """One evaluation folder (spec mode, limit) summarized."""

    experiment: str
    spec_mode: str
    limit: int | None
    data_kind: str
    arms: tuple[GSM8KArm, ...]
    warnings: tuple[str, ...]

    @property
    def title(self) -> str:
        return self.spec_mode if self.limit is None else f"{self.spec_mode} (limit {self.limit})"

    @property
    def reference(self) -> GSM8KArm | None:
        return next((a for a in self.arms if a.label == GSM8K_REFERENCE_ARM), None)

    @property
    def noise_floor(self) -> tuple[GSM8KArm, ...]:
        return tuple(a for a in self.arms
                     if a.arm == GSM8K_REFERENCE_ARM and a.occurrence > 1)


@dataclass(frozen=True)
class GSM8KReport:
    sections: tuple[GSM8KSection, ...]


def _order(info: EvalInfo, labels: Sequence[str]) -> list[str]:
    """main first, then main's repeats, then the other arms in the order first asked for."""
    known = [label for label in info.arms if label in labels]
    known += sorted(set(labels) - set(known))
    main = GSM8K_REFERENCE_ARM
    mains = [l for l in known if l == main or l.startswith(main + ".r")]
    return mains + [l for l in known if l not in mains]


def summarize_gsm8k(info: EvalInfo,
                    arms: Sequence[tuple[ArmResult, Sequence[SampleVerdict]]]) -> GSM8KSection:
    """Summarize one evaluation folder's finished arms (pure)."""
    main = GSM8K_REFERENCE_ARM
    by_label = {result.label: (result, verdicts) for result, verdicts in arms}
    warnings: list[str] = []
    ref = by_label.get(main)
    if ref is None:
        warnings.append("no run of main: no arm can be compared with it (add main to --arms)")
    summaries = []
    for label in _order(info, list(by_label)):
        result, verdicts = by_label[label]
        agreement = None
        if ref is not None and label != main:
            agreement = compare_verdicts(
                ref[1], verdicts, reference_name=main,
                arm_name=display_name(label, result.arm, result.occurrence))
        correct = sum(v.strict for v in verdicts)
        summaries.append(GSM8KArm(
            label=label, arm=result.arm, occurrence=result.occurrence,
            name=display_name(label, result.arm, result.occurrence), n=len(verdicts),
            correct=correct, accuracy_strict=correct / len(verdicts) if verdicts else 0.0,
            accuracy_flexible=result.accuracy_flexible,
            acceptance_length=result.acceptance_length, agreement=agreement))
        warnings += [f"{summaries[-1].name}: {w}" for w in result.warnings]
    if ref is not None and not any(s.arm == main and s.occurrence > 1 for s in summaries):
        warnings.append("no repeat of main: there is no noise floor to judge agreement against "
                        "(run --arms main,main,...)")
    if info.limit is not None:
        warnings.append(f"--limit {info.limit}: the first {info.limit} of {FULL_TEST_SET} test "
                        "documents only; not comparable with published GSM8K scores")
    if summaries and all(s.correct == 0 for s in summaries):
        warnings.append("every arm answered every document wrong: the model cannot do GSM8K "
                        "(a random-weight model?), so agreement is trivially total")
    return GSM8KSection(experiment=info.experiment, spec_mode=info.spec_mode, limit=info.limit,
                        data_kind=str(info.data.get("kind", "?")), arms=tuple(summaries),
                        warnings=tuple(warnings))


def gsm8k_report(evaluations: Iterable[Evaluation]) -> GSM8KReport | None:
    """Every evaluation summarized (``summarize_gsm8k``), base before dspark, full runs before
    limited ones and larger limits first; None without an evaluation."""
    sections = [summarize_gsm8k(e.info, e.arms) for e in evaluations]
    sections.sort(key=lambda s: (s.spec_mode != "base", s.spec_mode, s.limit is not None,
                                 -(s.limit or 0)))
    return GSM8KReport(sections=tuple(sections)) if sections else None
