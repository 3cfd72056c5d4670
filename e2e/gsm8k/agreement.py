"""Per-sample agreement between arms: pure functions over GSM8K verdicts, no I/O.

Two arms are compared document by document, joined on ``doc_id``. The prompts must be the
same (``prompt_hash``): otherwise the arms answered different questions and a comparison
would be meaningless, so it is an error, not a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import binomtest

from e2e.errors import ResultsError
from e2e.results import SampleVerdict, SpecCounters

__all__ = ["STRICT", "FLEXIBLE", "parse_samples", "accuracy", "mcnemar_exact", "Agreement",
           "compare", "acceptance_length"]

STRICT = "strict-match"
FLEXIBLE = "flexible-extract"


def _verdict(value: Any, where: str) -> bool:
    if isinstance(value, bool) or value in (0, 1, 0.0, 1.0):
        return bool(value)
    raise ResultsError(f"{where}: exact_match is {value!r}, expected 0 or 1")


def parse_samples(rows: Iterable[Mapping[str, Any]], *, source: str = "sample log") -> tuple[SampleVerdict, ...]:
    """Turn lm-eval's ``--log_samples`` rows (one per document per filter) into one verdict
    per document, sorted by ``doc_id``. Every document needs a strict-match row; a document
    whose filters carry different prompt hashes, or a repeated (doc, filter) row, is an error."""
    by_doc: dict[int, dict[str, tuple[str, bool]]] = {}
    for line_no, row in enumerate(rows, 1):
        where = f"{source}, row {line_no}"
        try:
            doc_id, prompt_hash, filter_name = row["doc_id"], row["prompt_hash"], row["filter"]
            value = row["exact_match"]
        except (KeyError, TypeError) as exc:
            raise ResultsError(f"{where}: missing field {exc}; is this an lm-eval "
                               "--log_samples file of a GSM8K task?") from None
        if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
            raise ResultsError(f"{where}: doc_id {doc_id!r} is not a document index")
        filters = by_doc.setdefault(doc_id, {})
        if filter_name in filters:
            raise ResultsError(f"{where}: doc {doc_id} appears twice for filter {filter_name!r}")
        filters[filter_name] = (str(prompt_hash), _verdict(value, where))
    verdicts = []
    for doc_id in sorted(by_doc):
        filters = by_doc[doc_id]
        if STRICT not in filters:
            raise ResultsError(f"{source}: doc {doc_id} has no {STRICT!r} row "
                               f"(filters: {', '.join(sorted(filters))})")
        hashes = {h for h, _ in filters.values()}
        if len(hashes) != 1:
            raise ResultsError(f"{source}: doc {doc_id} has different prompt hashes per filter")
        flexible = filters.get(FLEXIBLE)
        verdicts.append(SampleVerdict(doc_id=doc_id, prompt_hash=filters[STRICT][0],
                                      strict=filters[STRICT][1],
                                      flexible=flexible[1] if flexible else None))
    return tuple(verdicts)


def accuracy(verdicts: Sequence[SampleVerdict], *, flexible: bool = False) -> float | None:
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


def compare(reference: Sequence[SampleVerdict], other: Sequence[SampleVerdict], *,
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
    """Mean tokens per verify step over the eval: 1 + Δaccepted / Δdrafts (None when no
    draft was counted)."""
    if before is None or after is None:
        return None
    drafts = after.drafts - before.drafts
    if drafts <= 0:
        return None
    return 1.0 + (after.accepted - before.accepted) / drafts
