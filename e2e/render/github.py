"""GitHub renderer: a ``Summary`` -> a pull-request comment (GitHub-flavoured Markdown, no I/O).

The comment carries a hidden marker (``COMMENT_MARKER``) so a workflow finds and updates its own
comment instead of adding one per push: first one line per arm that says whether it is safe
to merge (speed, outputs, prefix cache: ``e2e.render._outputs``), then the verdicts (the
headline table with a verdict icon per comparison), the outputs compared prompt by prompt
(folded), the warnings folded under one line with their count (one line per cause), every
metric (folded), and the full report linked. It always fits GitHub's limits: a
comment body is at most 65,536 characters, a step summary at most 1 MiB; ``fit`` keeps whole
sections (then whole table rows) while they fit in ``limit`` bytes of UTF-8 (bytes, never
fewer than characters) and says what it left out, with the link.

Icons: 🟢 better (in the metric's own direction), 🔴 worse, ✅ equivalent within the band,
⚪ inconclusive, ⚠️ too few runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e.analysis.sweep import Comparison, Summary, headline_metric, metric, warning_lines
from e2e.render.markup import md_link, md_text
from e2e.render.markdown import (format_attribution, format_cell, format_comparison, load_cell,
                                   load_column, merge_section, pinned_sentence)
from e2e.render._outputs import outputs_section
from e2e.render._table import md_row

__all__ = ["COMMENT_MARKER", "COMMENT_LIMIT", "STEP_SUMMARY_LIMIT", "render_github",
           "verdict_icon", "fit_comment"]

COMMENT_MARKER = "<!-- e2e-report -->"
COMMENT_LIMIT = 65_536           # GitHub: the most characters an issue/PR comment body holds
STEP_SUMMARY_LIMIT = 1_048_576   # GitHub: the most bytes of $GITHUB_STEP_SUMMARY per step
_ICONS = {"better": "🟢", "worse": "🔴", "equivalent": "✅", "inconclusive": "⚪",
          "too few runs": "⚠️"}


def verdict_icon(comp: Comparison | None) -> str:
    """The icon of a comparison's verdict (empty for none)."""
    if comp is None:
        return ""
    v = comp.verdict
    if v in ("faster", "slower", "higher", "lower"):
        up = comp.pct > 0
        better = (v == "faster") if v in ("faster", "slower") else (
            up == metric(comp.metric).higher_is_better)
        return _ICONS["better" if better else "worse"]
    return _ICONS.get(v, "")


def _row(cells: Sequence[str]) -> str:
    return md_row(c.replace("|", "\\|").replace("\n", " ") for c in cells)


def fit_comment(head: Sequence[str], sections: Sequence[Sequence[str]], *, limit: int,
        link: str | None, tail: Sequence[str] = ()) -> str:
    """``head``, then ``sections`` (each a list of lines) in order while they fit in ``limit``
    UTF-8 bytes together with ``tail``; the first that does not fit is cut to whole rows or
    list items (its heading, table header and closing lines kept), the rest are left out,
    and a note says what was left out, with the link."""
    def size(lines: Sequence[str]) -> int:
        return len(("\n".join(lines) + "\n").encode("utf-8"))

    where = md_link("the full report", link) or "the full report (report/report.md)"
    out = list(head)
    dropped_rows = dropped_sections = 0
    reserve = size(list(tail)) + 400  # the note
    for i, section in enumerate(sections):
        if size(out + list(section)) + reserve <= limit:
            out += list(section)
            continue
        # cut the section line by line: keep its heading (and a table's header rows) and
        # its closing lines (a </details>), then as many rows or items as fit
        body_start = next((k + 2 for k, line in enumerate(section)
                           if line.startswith("|") and k + 1 < len(section)
                           and section[k + 1].startswith("|-")), None)
        if body_start is None:
            body_start = next((k for k, line in enumerate(section) if line.startswith("- ")),
                              len(section))
        items = [k for k, line in enumerate(section) if line.startswith(("|", "- "))]
        last = max(items) if items else len(section) - 1
        after = list(section[last + 1:])
        kept = list(section[:body_start])
        used = size(out + kept + after) + reserve
        for line in section[body_start:last + 1]:
            cost = len(line.encode("utf-8")) + 1
            if used + cost <= limit:
                kept.append(line)
                used += cost
            else:
                dropped_rows += 1
        if len(kept) > body_start:
            out += kept + after
        else:
            dropped_sections += 1
        dropped_sections += len(sections) - i - 1
        break
    if dropped_rows or dropped_sections:
        parts = []
        if dropped_rows:
            parts.append(f"{dropped_rows} row{'s' if dropped_rows != 1 else ''}")
        if dropped_sections:
            parts.append(f"{dropped_sections} section{'s' if dropped_sections != 1 else ''}")
        out += [f"> **Truncated** to fit GitHub's {limit:,}-byte limit: "
                f"{' and '.join(parts)} left out; see {where}.", ""]
    text = "\n".join(out + list(tail)).rstrip("\n") + "\n"
    if len(text.encode("utf-8")) <= limit:
        return text
    # the head or a section's heading and header rows alone are over the limit (a table of
    # 1,100 arms has a header row of tens of kilobytes): keep the head's lines that fit,
    # say so, and never go over the limit, whatever was asked
    note = (f"> **Truncated** to fit GitHub's {limit:,}-byte limit: the tables are too wide "
            f"for one comment; see {where}.")
    kept: list[str] = list(head[:1])  # the marker, first, always
    for line in head[1:]:
        if size(kept + [line, "", note, *tail]) <= limit:
            kept.append(line)
        else:
            break
    return _cut("\n".join(kept + ["", note, *tail]).rstrip("\n") + "\n", limit)


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, cut at a line end (or a character)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    cut = data[:max(0, limit - 1)].decode("utf-8", errors="ignore")
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return cut + "\n"


def render_github(summary: Summary, *, link: str | None = None,
                  limit: int = COMMENT_LIMIT, title: str | None = None) -> str:
    """The report as one pull-request comment (``COMMENT_MARKER`` first), at most ``limit`` bytes."""
    compared = summary.compared_arms
    head = [COMMENT_MARKER, f"### {title or f'e2e report: {summary.experiment}'}", ""]
    head += merge_section(summary, heading="#### Safe to merge?")
    c = summary.counts
    head.append(f"{c.reported} reported runs of {', '.join(summary.arms)} "
                f"(baseline **{summary.baseline}**; {c.invalid} invalid, never used). "
                f"Cells: median (min–max); “vs {summary.baseline}”: change of the geometric "
                f"mean with its {summary.confidence * 100:g} % interval. "
                "🟢 better · 🔴 worse · ✅ equivalent · ⚪ inconclusive · ⚠️ too few runs")
    head.append("")
    if summary.pinned:
        head += [pinned_sentence(summary), ""]
    tally: dict[str, int] = {}
    for comp in summary.comparisons:
        icon = verdict_icon(comp)
        if icon in (_ICONS["better"], _ICONS["worse"]):
            tally[icon] = tally.get(icon, 0) + 1
    if tally:
        head += [" ".join(f"{icon} {n}" for icon, n in tally.items())
                 + f" of {len(summary.comparisons)} comparisons", ""]

    header = [load_column(summary), "metric"] + list(summary.arms) + [f"{a} vs {summary.baseline}"
                                                               for a in compared]
    align = "|---:|---|" + "---:|" * (len(summary.arms) + len(compared))

    def rows(keys) -> list[str]:
        lines = []
        for mode, conc, key in keys:
            if not any(summary.cell(a, conc, mode, key) for a in summary.arms):
                continue
            m = metric(key)
            name = f"{m.label} ({m.unit})" + (f", {md_text(summary.speculator_label)}"
                                              if mode == "dspark" else "")
            figures = [format_cell(summary.cell(a, conc, mode, key)) for a in summary.arms]
            comps = []
            for a in compared:
                comp = summary.comparison(a, conc, mode, key)
                comps.append(f"{verdict_icon(comp)} {format_comparison(comp)}".strip())
            lines.append(_row([load_cell(summary, conc, mode), name] + figures + comps))
        return lines

    headline = [(mode, conc, headline_metric(conc, mode)) for mode in summary.spec_modes
                for conc in summary.concurrencies]
    headline += [(mode, conc, "acceptance_length") for mode in summary.spec_modes
                 if mode == "dspark" for conc in summary.concurrencies]
    sections: list[list[str]] = [["#### Headline", "", _row(header), align, *rows(headline), ""]]
    answers = outputs_section(summary)
    if answers:
        sections.append(["<details><summary>Same answers, prompt by prompt</summary>", "",
                         *(("#" + line) if line.startswith("##") else line for line in answers[2:]),
                         "</details>", ""])
    split = [a for a in summary.attributions if a.source == "client"]
    if split:
        sections.append(["#### Verify step or acceptance", ""]
                        + [f"- **{md_text(a.arm)}** c{a.concurrency} {a.spec_mode}: "
                           f"{format_attribution(a)}" for a in split] + [""])
    lines = warning_lines(summary)
    if lines:  # after the verdicts, folded: one line per cause
        sections.append([f"<details><summary>⚠️ {len(lines)} warning"
                         f"{'s' if len(lines) != 1 else ''}</summary>", ""]
                        + [f"- {md_text(line.text)}" for line in lines] + ["", "</details>", ""])
    for mode in summary.spec_modes:
        keys = [(mode, conc, m.key) for conc in summary.concurrencies
                for m in summary.metrics_in(mode)]
        body = rows(keys)
        if body:
            sections.append([f"<details><summary>All metrics, {mode}</summary>", "",
                             _row(header), align, *body, "", "</details>", ""])
    linked = md_link(link, link)
    tail = [f"Full report: {linked}" if linked else
            "Full report: `report/report.md` beside this comment's source."]
    return fit_comment(head, sections, limit=limit, link=link, tail=tail)
