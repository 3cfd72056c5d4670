"""Same answers as the reference: tonight's greedy outputs against the reference arm's, prompt
by prompt (``check_outputs``). Pure functions, no I/O; the records (``OutputsCheck``, the
verdicts) are ``e2e.results``'.

Every run of a night answers the same seeded prompts greedily, so each built arm's outputs can
be set against the reference arm's, measured the same night. The comparison is
``e2e.analysis.outputs.summarize_outputs`` with the reference as its baseline (run by run on the
repeat number, prompt by prompt; an A/A arm of the night, a repeat of the reference, as the
yardstick, Fisher's exact test and Holm's adjustment). Its verdict decides, where it can:

* *identical* or *outputs not recorded*: no finding;
* *diverges more than A/A*: a **finding**; *diverges as much as A/A*: none.

A night without an A/A arm (the embedded nightly measures two arms) has no yardstick of its
own; the earlier nights of the same config are then the yardstick (``OutputsHistory``): a
divergence is a finding when every earlier night that recorded outputs was identical to the
reference (or there is none: a build that matched its reference answers the same greedily, so
a first divergence is not called noise without evidence that it is); where earlier nights
diverged too, tonight's counts are set against theirs (pooled) with the same one-sided exact
test (``divergence_test``) at 1 − confidence, Holm-adjusted over the night's tests.

A finding is reported in the night's summary and ``judgement.json`` and kept in the store
(``nights.outputs``); ``[nightly] outputs_fail`` (default true) makes it a regression (exit 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from e2e.results import (AS_HISTORY, FIRST_DIVERGENCE, MORE_THAN_HISTORY, NEW_DIVERGENCE,
                         OutputsCheck, OutputsHistory)
from e2e.results.records import RunRecord
from e2e.analysis.estimators.multiplicity import holm
from e2e.analysis.outputs.compare import (Divergence, OutputAgreement, divergence_test,
                                          summarize_outputs)
from e2e.results import AA_DIVERGES, AS_AA, MORE_THAN_AA, NO_AA

__all__ = ["check_outputs"]


def _pooled(counts: Sequence[tuple[str, int, int]], like: OutputAgreement) -> OutputAgreement:
    """The earlier nights' counts as one agreement (only its counts are read by the test)."""
    compared = sum(c for _, c, _ in counts)
    diverged = sum(d for _, _, d in counts)
    return OutputAgreement(like.reference, like.reference_mode, like.arm, like.spec_mode,
                           like.concurrency, (), compared,
                           tuple(Divergence(-1, 0, ()) for _ in range(diverged)))


def check_outputs(records: Iterable[RunRecord], outputs, *, reference: str,
                  history: OutputsHistory | None = None,
                  confidence: float = 0.95) -> tuple[OutputsCheck, ...]:
    """Each arm's outputs against ``reference``'s tonight (module docstring): ``records`` the
    night's runs, ``outputs`` their outputs by run id (``e2e.results.store.load_outputs``),
    ``history`` the earlier nights' counts of the same config."""
    summary = summarize_outputs(list(records), outputs, baseline=reference,
                                confidence=confidence)
    history = history or {}
    alpha = 1.0 - confidence
    rows = [c for c in summary.comparisons if c.kind in ("arm", "aa")]
    # a divergence the night cannot judge by itself: judged against the earlier nights
    pending: list[tuple[int, float]] = []
    verdicts: list[tuple[str, str, float | None]] = []
    for k, c in enumerate(rows):
        a = c.agreement
        if c.verdict in (NO_AA, AA_DIVERGES):
            before = [h for h in history.get((c.arm, c.concurrency, c.spec_mode), ()) if h[1] > 0]
            if not before:
                verdicts.append((FIRST_DIVERGENCE, "", None))
            elif not any(d for _, _, d in before):
                verdicts.append((NEW_DIVERGENCE, f"the {len(before)} earlier night(s) were "
                                 "identical", None))
            else:
                p = divergence_test(a, _pooled(before, a))
                pending.append((k, p))
                verdicts.append(("", f"against {len(before)} earlier night(s), "
                                 f"{sum(d for _, _, d in before)} of "
                                 f"{sum(n for _, n, _ in before)} prompts diverged", p))
        elif c.verdict in (MORE_THAN_AA, AS_AA):
            aa = ", ".join(y.arm for y in c.yardsticks)
            verdicts.append((c.verdict, f"the night's A/A arm {aa}", c.p_holm))
        else:
            verdicts.append((c.verdict, "", None))
    adjusted = dict(zip([k for k, _ in pending], holm([p for _, p in pending])))
    out = []
    for k, (c, (verdict, yardstick, p)) in enumerate(zip(rows, verdicts)):
        if k in adjusted:
            p = adjusted[k]
            verdict = MORE_THAN_HISTORY if p <= alpha else AS_HISTORY
        a = c.agreement
        finding = verdict in (MORE_THAN_AA, MORE_THAN_HISTORY, NEW_DIVERGENCE, FIRST_DIVERGENCE)
        out.append(OutputsCheck(arm=c.arm, reference=reference, concurrency=c.concurrency,
                                spec_mode=c.spec_mode, verdict=verdict, compared=a.compared,
                                diverged=len(a.diverged), finding=finding,
                                position_min=a.position_min, position_median=a.position_median,
                                position_max=a.position_max, p_value=p, yardstick=yardstick))
    return tuple(out)

