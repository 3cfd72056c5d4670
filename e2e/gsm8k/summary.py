"""One GSM8K evaluation summarized for the report: pure, from records already read.

A section is one (spec mode, limit) evaluation folder: per arm its accuracy, N and
acceptance length; per arm its agreement with main; the repeats of main as the noise floor;
and warnings about the data next to the numbers they affect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from e2e.gsm8k.agreement import Agreement, compare
from e2e.results import GSM8K_REFERENCE_ARM, ArmResult, EvalInfo, SampleVerdict

__all__ = ["FULL_TEST_SET", "ArmSummary", "Section", "GSM8KReport", "summarize", "display_name"]

FULL_TEST_SET = 1319


def display_name(label: str, arm: str, occurrence: int) -> str:
    """``main (repeat)`` for main's second server, ``pr (repeat 3)`` for a third, else the arm."""
    if occurrence == 1:
        return arm
    return f"{arm} (repeat)" if occurrence == 2 else f"{arm} (repeat {occurrence - 1})"


@dataclass(frozen=True)
class ArmSummary:
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
class Section:
    experiment: str
    spec_mode: str
    limit: int | None
    data_kind: str
    arms: tuple[ArmSummary, ...]
    warnings: tuple[str, ...]

    @property
    def title(self) -> str:
        return self.spec_mode if self.limit is None else f"{self.spec_mode} (limit {self.limit})"

    @property
    def reference(self) -> ArmSummary | None:
        return next((a for a in self.arms if a.label == GSM8K_REFERENCE_ARM), None)

    @property
    def noise_floor(self) -> tuple[ArmSummary, ...]:
        return tuple(a for a in self.arms if a.arm == GSM8K_REFERENCE_ARM and a.occurrence > 1)


@dataclass(frozen=True)
class GSM8KReport:
    sections: tuple[Section, ...]


def _order(info: EvalInfo, labels: Sequence[str]) -> list[str]:
    """main first, then main's repeats, then the other arms in the order first asked for."""
    known = [label for label in info.arms if label in labels]
    known += sorted(set(labels) - set(known))
    main = GSM8K_REFERENCE_ARM
    mains = [l for l in known if l == main or l.startswith(main + ".r")]
    return mains + [l for l in known if l not in mains]


def summarize(info: EvalInfo, arms: Sequence[tuple[ArmResult, Sequence[SampleVerdict]]]) -> Section:
    """Summarize one evaluation folder's finished arms (pure)."""
    by_label = {result.label: (result, verdicts) for result, verdicts in arms}
    warnings: list[str] = []
    ref = by_label.get(GSM8K_REFERENCE_ARM)
    if ref is None:
        warnings.append("no run of main: no arm can be compared with it (add main to --arms)")
    summaries = []
    for label in _order(info, list(by_label)):
        result, verdicts = by_label[label]
        agreement = None
        if ref is not None and label != GSM8K_REFERENCE_ARM:
            agreement = compare(ref[1], verdicts, reference_name=GSM8K_REFERENCE_ARM,
                                arm_name=display_name(label, result.arm, result.occurrence))
        correct = sum(v.strict for v in verdicts)
        summaries.append(ArmSummary(
            label=label, arm=result.arm, occurrence=result.occurrence,
            name=display_name(label, result.arm, result.occurrence), n=len(verdicts),
            correct=correct, accuracy_strict=correct / len(verdicts) if verdicts else 0.0,
            accuracy_flexible=result.accuracy_flexible,
            acceptance_length=result.acceptance_length, agreement=agreement))
        warnings += [f"{summaries[-1].name}: {w}" for w in result.warnings]
    if ref is not None and not any(s.arm == GSM8K_REFERENCE_ARM and s.occurrence > 1 for s in summaries):
        warnings.append("no repeat of main: there is no noise floor to judge agreement against "
                        "(run --arms main,main,...)")
    if info.limit is not None:
        warnings.append(f"--limit {info.limit}: the first {info.limit} of {FULL_TEST_SET} test "
                        "documents only; not comparable with published GSM8K scores")
    if summaries and all(s.correct == 0 for s in summaries):
        warnings.append("every arm answered every document wrong: the model cannot do GSM8K "
                        "(a random-weight model?), so agreement is trivially total")
    return Section(experiment=info.experiment, spec_mode=info.spec_mode, limit=info.limit,
                   data_kind=str(info.data.get("kind", "?")), arms=tuple(summaries),
                   warnings=tuple(warnings))
