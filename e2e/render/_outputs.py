"""The outputs compared prompt by prompt, as Markdown lines for the report and the
pull-request comment (no I/O); the figures come from ``Summary.outputs``
(``e2e.analysis.outputs.compare.summarize_outputs``). The one line per arm that says whether it is safe to
merge is ``e2e.render.markdown.merge_section``, which uses these formatters.
"""

from __future__ import annotations

from e2e.render.markup import md_text
from e2e.analysis.outputs import (
    AA, NOT_SAFE, NOT_SHOWN, SAFE, CellCache, OutputAgreement, OutputComparison
)
from e2e.analysis.sweep import Summary
from e2e.render._table import md_row

__all__ = ["CALL_ICONS", "outputs_section", "format_agreement", "format_hit_rate", "yardstick"]

CALL_ICONS = {SAFE: "✅", NOT_SAFE: "🔴", NOT_SHOWN: "⚪", AA: "🔁"}
DASH = "\u2013"
MISSING = "\u2014"


def _row(cells) -> str:
    return md_row(c.replace("|", "\\|").replace("\n", " ") for c in cells)


def format_agreement(a: OutputAgreement) -> str:
    """``24 of 24 identical`` or ``9 of 24 diverged, first divergent token 31 (2–107)``
    (median (min–max), 0 = the first completion token)."""
    if not a.recorded:
        return "outputs not recorded"
    if not a.diverged:
        return f"{a.identical} of {a.compared} identical"
    spread = (f"{a.position_median:g} ({a.position_min}{DASH}{a.position_max})"
              if a.position_min != a.position_max else str(a.position_min))
    return f"{len(a.diverged)} of {a.compared} diverged, first divergent token {spread}"


def format_hit_rate(cache: CellCache | None) -> str:
    """A cell's prefix-cache hit rate: ``12.3 % (11.0–13.1)``, or ``not measured``."""
    if cache is None or cache.median is None:
        return "not measured"
    if cache.spread == 0:
        return f"{cache.median * 100:.1f} %"
    return f"{cache.median * 100:.1f} % ({cache.low * 100:.1f}{DASH}{cache.high * 100:.1f})"


def yardstick(c: OutputComparison) -> str:
    if c.kind == "aa":
        return "(this is the A/A)"
    if not c.yardsticks:
        return "no A/A"
    return "; ".join(f"A/A{' ' + y.spec_mode if len(c.yardsticks) > 1 else ''}: "
                     f"{format_agreement(y)}" for y in c.yardsticks)


def outputs_section(summary: Summary) -> list[str]:
    """Per cell: each comparison of outputs (arm vs baseline, the A/A, speculator vs base),
    its verdict, counts, first divergent token, p-values and the two sides' hit rates."""
    s = summary.outputs
    if s is None:
        return []
    lines = ["## Same answers, prompt by prompt", ""]
    if not s.comparisons:
        lines += ["No comparison of outputs: " + ("; ".join(s.notes) if s.notes else
                  "every arm needs a valid run beside the baseline's") + ".", ""]
        return lines
    cells = sorted({(c.concurrency, c.spec_mode) for c in s.comparisons},
                   key=lambda p: (p[1] != "base", p[0]))
    for conc, mode in cells:
        lines += [f"### {summary.load_label(conc, mode)}, {mode}", "",
                  _row(["comparison", "verdict", "prompts", "A/A beside it", "p (Holm)",
                        "prefix-cache hit rate (reference · arm)"]),
                  "|---|---|---|---|---:|---|"]
        for c in s.comparisons:
            if (c.concurrency, c.spec_mode) != (conc, mode):
                continue
            a = c.agreement
            agreement, beside = format_agreement(a), yardstick(c)
            p = MISSING if c.p_value is None else f"{c.p_value:.3g} ({c.p_holm:.3g})"
            hit = MISSING if c.cache is None else (
                f"{format_hit_rate(c.cache.reference)} · {format_hit_rate(c.cache.other)}"
                + (" ⚠ differ" if c.cache.flagged else ""))
            name = (f"{a.arm} {a.spec_mode} vs {a.reference_mode}" if c.kind == "speculator"
                    else f"{a.arm} vs {a.reference}" + (" (A/A)" if c.kind == "aa" else ""))
            lines.append(_row([md_text(name), c.verdict, agreement, beside, p, hit]))
        lines.append("")
    lines += [f"Greedy outputs of the same prompts, paired run by run; a prompt diverged when "
              "any paired round answered it differently, at its first divergent token (0 = the "
              "first completion token; median (min–max) over the diverged prompts). Verdicts "
              "against the A/A: Fisher's exact test, one-sided, Holm-adjusted over "
              f"{s.n_tests} test{'s' if s.n_tests != 1 else ''}, at "
              f"{s.confidence * 100:g} %. Hit rates: prefix-cache hits / queries over the "
              "measured load, median (min–max) over the cell's runs; “differ” when the two "
              "differ by more than their own run-to-run range (docs/explanation/outputs.md).", ""]
    lines += [f"- {md_text(note)}" for note in s.notes]
    return lines + ([""] if s.notes else [])
