"""The GSM8K report as Markdown and CSV bytes (``gsm8k_markdown``, ``gsm8k_csv``), and
``write_gsm8k_report``, which writes both beside the evaluations
(``results/<experiment>/gsm8k/gsm8k.md`` and ``gsm8k.csv``).

The table follows the reference layout: one row per spec mode (strict-match accuracy), one
more per spec mode with a speculator (its acceptance length), one column per arm with main
first and its repeat beside it. Under it, the agreement lines: each arm against main, with
the repeat of main as the noise floor.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from e2e.analysis.outputs import GSM8KArm, GSM8KReport, GSM8KSection
from e2e.paths import atomic_write_bytes
from e2e.render._table import md_row, md_rule
from e2e.results.gsm8k import gsm8k_dir

__all__ = ["gsm8k_markdown", "gsm8k_csv", "write_gsm8k_report"]

_FLIPPED_SHOWN = 20


def _columns(report: GSM8KReport) -> list[str]:
    names: list[str] = []
    for section in report.sections:
        for arm in section.arms:
            if arm.name not in names:
                names.append(arm.name)
    return names


def _accuracy(arm: GSM8KArm) -> str:
    return f"{arm.accuracy_strict:.4f} ({arm.correct}/{arm.n})"


def _p(value: float) -> str:
    return f"{value:.3g}" if value >= 1e-3 else f"{value:.1e}"


def _agreement_line(section: GSM8KSection, arm: GSM8KArm) -> str | None:
    """"pr matches main's verdict on 1265 of 1319; repeat 1259 (...)" for one arm."""
    a = arm.agreement
    if a is None:
        return None
    floor = [f.agreement for f in section.noise_floor if f.agreement is not None and f.label != arm.label]
    floor_text = ""
    if floor:
        floor_text = "; " + ", ".join(
            f"{'repeat' if len(floor) == 1 else f.arm} {f.same}" for f in floor)
    return (f"{arm.name} matches main's verdict on {a.same} of {a.n}{floor_text} "
            f"(main only correct {len(a.reference_only_correct)}, {arm.name} only correct "
            f"{len(a.arm_only_correct)}, exact McNemar p = {_p(a.p_value)})")


def _flipped(arm: GSM8KArm) -> str:
    ids = arm.agreement.flipped if arm.agreement else ()
    shown = ", ".join(str(d) for d in ids[:_FLIPPED_SHOWN])
    more = f" and {len(ids) - _FLIPPED_SHOWN} more (see the CSV)" if len(ids) > _FLIPPED_SHOWN else ""
    return (shown + more) if ids else "none"


def gsm8k_markdown(report: GSM8KReport) -> bytes:
    columns = _columns(report)
    out = ["## GSM8K (5-shot, strict-match, greedy)", ""]
    out.append(md_row(["spec mode", *columns]))
    out.append(md_rule(["---"] + ["---:"] * len(columns)))
    for section in report.sections:
        by_name = {a.name: a for a in section.arms}
        cells = [_accuracy(by_name[c]) if c in by_name else "" for c in columns]
        out.append(md_row([section.title, *cells]))
        if section.spec_mode != "base":
            cells = [f"{by_name[c].acceptance_length:.3f}"
                     if c in by_name and by_name[c].acceptance_length is not None else
                     ("n/a" if c in by_name else "") for c in columns]
            out.append(md_row([f"{section.title} acceptance length", *cells]))
    for section in report.sections:
        out += ["", f"**{section.title}** (data: {section.data_kind})", ""]
        lines = [_agreement_line(section, arm) for arm in section.arms]
        out += [f"- {line}" for line in lines if line]
        if not any(lines):
            out.append("- no agreement to show (needs main and another arm)")
        flips = [(arm.name, _flipped(arm)) for arm in section.arms if arm.agreement]
        if flips:
            out += ["", "Flipped documents (doc_id): " + "; ".join(f"{n}: {f}" for n, f in flips)]
        if section.warnings:
            out += [""] + [f"> warning: {w}" for w in section.warnings]
    return ("\n".join(out) + "\n").encode("utf-8")


_CSV_FIELDS = ["experiment", "spec_mode", "limit", "data", "label", "arm", "occurrence", "n",
               "correct", "accuracy_strict", "accuracy_flexible", "acceptance_length",
               "reference", "same_verdict", "main_only_correct", "arm_only_correct",
               "mcnemar_p", "flipped_doc_ids"]


def gsm8k_csv(report: GSM8KReport) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_CSV_FIELDS)
    for section in report.sections:
        for arm in section.arms:
            a = arm.agreement
            writer.writerow([
                section.experiment, section.spec_mode,
                "" if section.limit is None else section.limit, section.data_kind,
                arm.label, arm.arm, arm.occurrence, arm.n, arm.correct,
                f"{arm.accuracy_strict:.6f}",
                "" if arm.accuracy_flexible is None else f"{arm.accuracy_flexible:.6f}",
                "" if arm.acceptance_length is None else f"{arm.acceptance_length:.6f}",
                a.reference if a else "", a.same if a else "",
                len(a.reference_only_correct) if a else "", len(a.arm_only_correct) if a else "",
                f"{a.p_value:.6g}" if a else "",
                " ".join(str(d) for d in a.flipped) if a else "",
            ])
    return buffer.getvalue().encode("utf-8")


def write_gsm8k_report(results: Path, experiment: str, report: GSM8KReport) -> list[Path]:
    """Write ``gsm8k.md`` and ``gsm8k.csv`` under ``results/<experiment>/gsm8k/``
    atomically; return their paths."""
    root = gsm8k_dir(results, experiment)
    paths = [root / "gsm8k.md", root / "gsm8k.csv"]
    atomic_write_bytes(paths[0], gsm8k_markdown(report))
    atomic_write_bytes(paths[1], gsm8k_csv(report))
    return paths
