"""Markdown renderer: a ``Summary`` -> the report text (no I/O).

Layout: a headline table in the reference layout (``concurrency | metric | <arms> | <arm> vs
<baseline>``; mean TPOT at concurrency 1, median TPOT above it, ms per verify step with the
speculator, plus acceptance length rows), a table of every metric per spec mode, the warnings
(numbered; each number appears next to the figures it affects as ``⚠N``), and how every figure
is defined.
"""

from __future__ import annotations

import statistics

from e2e.render.markup import md_text
from e2e.render.forest import comparison_plot_names
from e2e.analysis.estimators import RESOLUTION_SD
from e2e.metrics import position_of
from e2e.render._outputs import CALL_ICONS, format_agreement, format_hit_rate, outputs_section, yardstick
from e2e.render.plots import per_position_plot_name, positions_in
from e2e.render._table import md_row
from e2e.analysis.outputs import NOT_SAFE, NOT_SHOWN, SAFE, MergeCall, merge_calls
from e2e.analysis.sweep import (
    MAX_ACCEPTANCE_MOVE, MAX_SPREAD, MIN_RUNS, Attribution, Cell, Comparison, Metric, Summary,
    WarningLine, headline_metric, metric, warning_lines
)

__all__ = ["render_markdown", "report_markdown", "format_value", "format_cell", "format_pct",
           "format_comparison", "format_headline_comparison", "format_attribution",
           "attribution_lines", "pinned_sentence", "merge_line", "merge_section"]

MINUS = "\u2212"
DASH = "\u2013"
MISSING = "\u2014"
WARN = "\u26a0"
HOLM_MARK = "\u2020"
_MODE_TITLE = {"base": "without speculator", "dspark": "with the DSpark speculator"}


def format_value(x: float) -> str:
    """Digits by magnitude: 1523, 152.3, 6.73, 0.512."""
    a = abs(x)
    if a >= 1000:
        s = f"{x:.0f}"
    elif a >= 100:
        s = f"{x:.1f}"
    elif a >= 1:
        s = f"{x:.2f}"
    else:
        s = f"{x:.3f}"
    return s.replace("-", MINUS)


def format_cell(cell: Cell | None) -> str:
    """``6.73 (6.65–6.74)``: median (minimum–maximum) of the reported runs."""
    if cell is None:
        return MISSING
    if cell.n == 1:
        return f"{format_value(cell.median)} (1 run)"
    return f"{format_value(cell.median)} ({format_value(cell.low)}{DASH}{format_value(cell.high)})"


def format_pct(x: float) -> str:
    """Signed, one decimal, with a true minus sign: ``−3.1``, ``+0.4``, ``0.0``."""
    s = f"{x:+.1f}"
    if s in ("+0.0", "-0.0"):
        return "0.0"
    return s.replace("-", MINUS)


def _verdict_text(comp: Comparison) -> str:
    if comp.verdict == "equivalent":
        text = f"equivalent ±{comp.equivalence_pct:g} %"
    elif (comp.verdict == "inconclusive" and comp.interval is not None
          and (comp.interval[0] > 0 or comp.interval[1] < 0)):
        text = f"inconclusive (not 0, under the {comp.min_effect_pct:g} % minimum effect)"
    elif comp.verdict == "inconclusive" and comp.mde_pct is not None:
        text = f"inconclusive (MDE {comp.mde_pct:.1f} %)"
    else:
        text = comp.verdict
    if comp.survives is False:
        text += f" {HOLM_MARK}"
    return text


def format_comparison(comp: Comparison | None) -> str:
    """``−3.1 % [−4.0, −2.2] faster``: the geometric-mean change, its interval and the verdict
    (``inconclusive (MDE 2.9 %)``, ``equivalent ±1 %``); ``†`` when the verdict does not
    survive Holm's correction."""
    if comp is None:
        return MISSING
    if comp.interval is None:
        return f"{format_pct(comp.pct)} % ({comp.verdict})"
    lo, hi = comp.interval
    return f"{format_pct(comp.pct)} % [{format_pct(lo)}, {format_pct(hi)}] {_verdict_text(comp)}"


def format_headline_comparison(comp: Comparison | None) -> str:
    """``format_comparison`` plus the method and the MDE: ``… faster · blocked, MDE 2.0 %``."""
    text = format_comparison(comp)
    if comp is None or comp.interval is None:
        return text
    method = comp.method_name
    if comp.role == "check":
        method = f"A/A check, {method}"
    elif comp.role == "secondary":
        method = f"secondary, {method}"
    if (comp.verdict == "inconclusive" and "MDE" in text) or comp.mde_pct is None:
        return f"{text} · {method}"
    return f"{text} · {method}, MDE {comp.mde_pct:.1f} %"


def _change(comp: Comparison) -> str:
    """``−7.9 % [−9.0, −6.8]``: the change and its interval, no verdict."""
    if comp.interval is None:
        return f"{format_pct(comp.pct)} % (no interval)"
    lo, hi = comp.interval
    return f"{format_pct(comp.pct)} % [{format_pct(lo)}, {format_pct(hi)}]"


def format_attribution(a: Attribution) -> str:
    """``mean TPOT +9.1 % [..] = verify step +9.0 % [..], acceptance length −0.1 % [..]: the
    change is the verify step's (the kernel's)``."""
    tpot = "mean TPOT" if a.source == "client" else "server mean TPOT"
    text = (f"{tpot} {_change(a.tpot)}: verify step {_change(a.verify)}, acceptance length "
            f"{_change(a.acceptance)}: {a.sentence}")
    if not a.consistent:
        text += (f" (the three figures are not of the same runs: Δ ln TPOT − (Δ ln verify − "
                 f"Δ ln acceptance) = {a.residual:+.2g})")
    return text


def attribution_lines(summary: Summary, *, bold: bool = True) -> list[str]:
    """One bullet per attribution of the summary (none without a speculator cell)."""
    out = []
    for a in summary.attributions:
        arm = f"**{a.arm}**" if bold else a.arm
        out.append(f"- {arm} vs {a.baseline}, concurrency {a.concurrency}, {a.spec_mode} "
                   f"({a.source} TPOT): {format_attribution(a)}.")
    return out


def pinned_sentence(summary: Summary) -> str:
    """What a pinned report must say first: acceptance was not the draft's."""
    at = " and ".join(f"{p:g}" for p in summary.pinned)
    return (f"**Acceptance was pinned** at acceptance length {at} for every arm with the "
            "speculator (vLLM's synthetic rejection sampling: draft tokens accepted by a fixed "
            "schedule whatever the target model says), so the arms differ only in verify-step "
            "time; acceptance figures here are the schedule's, not the draft's, and the "
            "outputs are not the model's.")


def _attribution_section(summary: Summary) -> list[str]:
    if not summary.attributions:
        return []
    return (["## Attribution: verify step or acceptance", "",
             "With the speculator, ms per verify step = mean TPOT × acceptance length, so "
             "Δ ln TPOT = Δ ln(ms per verify step) − Δ ln(acceptance length); each term is the "
             "arm's contrast in the same cell model over the same runs, with its own "
             f"{summary.confidence * 100:g} % interval. A term whose interval excludes 0 moved; "
             "the verify step is the target model's (the kernel's), acceptance the draft's.", ""]
            + attribution_lines(summary) + [""])


def _metric_name(m: Metric, spec_mode: str | None = None, speculator: str = "DSpark") -> str:
    name = m.label if m.unit in ("tokens/step",) or m.key == "ms_per_verify_step" else f"{m.label} ({m.unit})"
    if spec_mode == "dspark":
        name += f", {md_text(speculator)}"  # a run.json's profile names: a file's text
    return name


def _row(cells: list[str]) -> str:
    return md_row(c.replace("|", "\\|") for c in cells)


class _Markers:
    """Numbers the summary's warning lines (one per cause) 1..N, in order, for ``⚠N``
    markers: a figure's marker names the line of each cause that touches it."""

    def __init__(self, lines: tuple[WarningLine, ...]) -> None:
        self.number = {id(w): i for i, line in enumerate(lines, start=1) for w in line.warnings}

    def suffix(self, summary: Summary, arm: str, conc: int, mode: str, key: str) -> str:
        hits = sorted({self.number[id(w)] for w in summary.warnings_for(arm, conc, mode, key)})
        return f" {WARN}{','.join(map(str, hits))}" if hits else ""


def load_column(summary: Summary) -> str:
    """The first column's title: "concurrency", or "load" when a cell is an open loop."""
    return "load" if summary.open_loop else "concurrency"


def load_cell(summary: Summary, conc: int, mode: str) -> str:
    """The first column of a (concurrency, spec mode) row: its concurrency for a closed loop,
    else its arrival process (``poisson 3 req/s``, ``trace 2×``), never "concurrency 1"."""
    label = summary.load_label(conc, mode)
    return str(conc) if label == f"concurrency {conc}" else label


def _header(summary: Summary, first: list[str]) -> list[str]:
    first = [load_column(summary) if h == "concurrency" else h for h in first]
    compared = summary.compared_arms
    head = first + list(summary.arms) + [f"{a} vs {summary.baseline}" for a in compared]
    align = ["---:" if h in ("concurrency", "load") else "---" for h in first]
    align += ["---:"] * (len(summary.arms) + len(compared))
    return [_row(head), "|" + "|".join(align) + "|"]


def _figures(summary: Summary, markers: _Markers, conc: int, mode: str, key: str,
             *, headline: bool = False) -> list[str]:
    out = []
    for arm in summary.arms:
        cell = summary.cell(arm, conc, mode, key)
        text = format_cell(cell)
        if cell is not None or summary.warnings_for(arm, conc, mode, key):
            text += markers.suffix(summary, arm, conc, mode, key)
        out.append(text)
    fmt = format_headline_comparison if headline else format_comparison
    out += [fmt(summary.comparison(a, conc, mode, key)) for a in summary.compared_arms]
    return out


def _has_row(summary: Summary, conc: int, mode: str, key: str) -> bool:
    return any(summary.cell(a, conc, mode, key) is not None for a in summary.arms)


def _has_group(summary: Summary, conc: int, mode: str) -> bool:
    return any(c.concurrency == conc and c.spec_mode == mode for c in summary.cells) or any(
        w.concurrency == conc and w.spec_mode == mode for w in summary.warnings)


def _runs_sentence(summary: Summary) -> str:
    k = summary.report_from_run
    c = summary.counts
    if k == 1:
        which = "every run of each cell is reported (no warmup)"
    elif k == 2:
        which = "run 1 of each cell is a warmup, runs 2 and later are reported"
    else:
        which = f"runs 1{DASH}{k - 1} of each cell are warmups, runs {k} and later are reported"
    ns = sorted({cell.n for cell in summary.cells})
    per = (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}{DASH}{ns[-1]}") if ns else "0"
    return (
        f"Runs: {c.total} recorded; {c.reported} reported, {c.warmup} warmup, {c.invalid} invalid "
        f"(invalid runs are never used). {which[0].upper() + which[1:]}; "
        f"{per} reported run{'s' if per != '1' else ''} per cell."
    )


def _multiplicity(summary: Summary) -> list[str]:
    n = summary.n_comparisons
    out: list[str] = []
    if n:
        lost = [c for c in summary.comparisons if c.survives is False]
        kept = [c for c in summary.comparisons if c.survives]
        text = (f"Multiplicity: {n} primary comparison{'s' if n != 1 else ''} (the headline "
                f"metric of every cell, every arm but the A/A checks) form one family at "
                f"{(1 - summary.confidence) * 100:g} %: both hypotheses of each (no change; a "
                f"change beyond ±{summary.equivalence_pct:g} %), {2 * n} in all, by Holm's step-down "
                "with Shaffer's restriction (at most one of a comparison's two is true), so a false "
                "difference or a false equivalence anywhere in it has at most that chance; "
                f"{len(kept)} verdict{'s' if len(kept) != 1 else ''} survive{'s' if len(kept) == 1 else ''}")
        if lost:
            text += (f", {len(lost)} do{'es' if len(lost) == 1 else ''} not and "
                     f"{'is' if len(lost) == 1 else 'are'} marked {HOLM_MARK}")
        out += [text + ". Every other metric is secondary: its interval and verdict are "
                "unadjusted.", ""]
    if summary.aa_arms:
        out += [f"A/A checks ({', '.join(summary.aa_arms)}: the baseline's settings again) measure "
                "the noise and are outside the family; a difference there is a warning about the "
                "machine, not a finding.", ""]
    if summary.pooled:
        out += ["Shared noise: " + "; ".join(summary.pooled) + " (empirical Bayes, Smyth 2004).", ""]
    return out


def _noise_section(summary: Summary) -> list[str]:
    rows = [r for r in summary.noise]
    if not rows:
        return []
    target = rows[0].target_pct
    out = ["## Noise and what it can detect", "",
           _row([load_column(summary), "metric", "noise (CV of one pair's log ratio)", "from", "rounds",
                 "df", "MDE", "MDE, unpaired", f"runs for a {target:g} % MDE"]),
           "|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for mode in summary.spec_modes:
        for conc in summary.concurrencies:
            for m in summary.metrics:
                r = summary.noise_row(conc, mode, m.key)
                if r is None:
                    continue
                df = MISSING if r.df is None else (f"{r.df:.0f}" if not r.prior_df else
                                                  f"{r.df - r.prior_df:.0f} + {r.prior_df:.1f}")
                out.append(_row([
                    load_cell(summary, conc, mode), _metric_name(m, mode, summary.speculator_label), f"{r.noise_pct:.2f} %" + (" (floored)" if r.floored else ""),
                    r.source, str(r.n_blocks), df,
                    MISSING if r.mde_pct is None else f"{r.mde_pct:.1f} %",
                    MISSING if r.unpaired_mde_pct is None else f"{r.unpaired_mde_pct:.1f} %",
                    "more than 1000" if r.runs_for_target is None else str(r.runs_for_target)]))
    out += ["", (f"The MDE is the smallest true change the comparison at these runs finds with "
                 f"{summary.power * 100:g} % power at the report's {summary.confidence * 100:g} % "
                 "confidence, from the noise and the degrees of freedom the test itself uses (the "
                 "cell's model, plus any borrowed by shared noise); a smaller effect can be real "
                 "and still read “inconclusive”. Per-server variance (each run is a fresh server) "
                 "does not cancel in blocks: only drift between rounds does."), ""]
    return out + _components_section(summary)


def _components_section(summary: Summary) -> list[str]:
    """Between- and within-server noise, where the runs measured several load windows."""
    rows = [r for r in summary.noise if r.components is not None]
    if not rows:
        return []
    out = ["Where the noise lives (each fresh server measured its load in windows):", "",
           _row([load_column(summary), "metric", "windows", "between servers", "within a server (per window)",
                 "share between", "first window vs the rest"]),
           "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = r.components
        first = (MISSING if c.first_window is None else f"{c.first_window * 100:+.2f} %"
                 + ("" if c.first_window_se is None else f" ± {c.first_window_se * 100:.2f}"))
        out.append(_row([load_cell(summary, r.concurrency, r.spec_mode),
                         _metric_name(metric(r.metric), r.spec_mode, summary.speculator_label),
                         f"{c.windows} × {c.runs} runs", f"{c.between_sd * 100:.2f} %",
                         f"{c.within_sd * 100:.2f} % ({c.within_df} df)",
                         f"{c.between_share:.0%}", first]))
    out += ["", "sd on the log scale, in %: a run's variance is between² + within² / windows; more "
            "windows shrink only the second part (`e2e plan --target-effect` weighs servers "
            "against windows).", ""]
    return out


def _fmt_range(values: tuple[float, ...], digits: int = 3) -> str:
    if not values:
        return MISSING
    low, high, mid = min(values), max(values), statistics.median(values)
    if len(values) == 1 or low == high:
        return f"{mid:.{digits}f}"
    return f"{mid:.{digits}f} ({low:.{digits}f}{DASH}{high:.{digits}f})"


def workload_section(summary: Summary) -> list[str]:
    """What each cell sent and the figures only its workload has (the prefix cache's hit rate,
    how late a scheduled load's sends were, its segments); none for a report of the reference
    load in a closed loop without them."""
    rows = [w for w in summary.workloads if w.own_figures or w.hit_rate]
    if not rows:
        return []
    # the run.json's own text (a workload's and a segment's names), escaped once
    text = {name: md_text(name) for w in rows for name in (w.workload, *(s.name for s in w.segments))}
    out = ["## Workload", "",
           _row([load_column(summary), "spec mode", "arm", "workload", "warmup requests",
                 "prefix-cache hit rate", "sends late p50 / p99 / max (ms)", "runs"]),
           "|---|---|---|---|---:|---:|---:|---:|"]
    for w in rows:
        late = MISSING if not w.lateness_ms else " / ".join(
            _fmt_range(tuple(x[i] for x in w.lateness_ms), 2) for i in range(3))
        out.append(_row([load_cell(summary, w.concurrency, w.spec_mode), w.spec_mode, w.arm,
                         text[w.workload], "unknown" if w.warmup is None else str(w.warmup),
                         _fmt_range(w.hit_rate), late, str(w.runs)]))
    out += ["", "Hit rate: prefix-cache hits / queries (tokens) over each run's measured load; "
            "late: each run's sends after their scheduled time (open loop, trace); median "
            f"(min{DASH}max) over the reported runs. Runs of another workload, arrival process "
            "or warmup are never in one cell.", ""]
    segmented = [w for w in rows if w.segments]
    if segmented:
        out += [_row([load_column(summary), "spec mode", "arm", "segment", "runs",
                      "mean TTFT (ms)", "mean TPOT (ms)"]), "|---|---|---|---|---:|---:|---:|"]
        for w in segmented:
            for s in w.segments:
                out.append(_row([load_cell(summary, w.concurrency, w.spec_mode), w.spec_mode,
                                 w.arm, text[s.name], str(s.runs),
                                 MISSING if s.ttft_ms_mean is None else format_value(s.ttft_ms_mean),
                                 MISSING if s.tpot_ms_mean is None else format_value(s.tpot_ms_mean)]))
        out += ["", "Per segment (a trace's equal-time parts, a shared-prefix group's first "
                "request and the later ones, a conversation's turns): the median over the "
                "reported runs of each run's segment mean.", ""]
    return out


def _forest_pictures(summary: Summary, plot_names: tuple[str, ...] | None) -> list[str]:
    """The forest plots shown where the headline is: every arm against the baseline (point,
    interval by the method the table names, equivalence band, MDE shaded)."""
    forest = [n for n in plot_names or () if n.startswith("forest-")]
    if not forest:
        return []
    return [f"Every arm against {summary.baseline}: the change with its interval (by the method "
            "the table names), the equivalence band, the MDE shaded.", ""] + [
        f"![{n[:-4]}](plots/{n})" for n in forest] + [""]


def _pictures(summary: Summary, plot_names: tuple[str, ...] | None) -> list[str]:
    if not plot_names:
        return []
    strip = [n for n in plot_names if n.startswith("strip-")]
    positions = [n for n in plot_names if n.startswith("acceptance-per-position-")]
    if not (strip or positions):
        return []
    out = ["## Pictures", ""]
    if positions:
        out.append("Acceptance rate per draft position, each arm's and its change against "
                   + summary.baseline + " with its interval: "
                   + ", ".join(f"[{n[:-4]}](plots/{n})" for n in positions) + ".")
    if strip:
        out.append("Every run of a cell, rounds connected across arms (the pairing the blocked "
                   "comparison uses): " + ", ".join(f"[{n[:-4]}](plots/{n})" for n in strip) + ".")
    return out + [""]


def merge_line(call: MergeCall, summary: Summary) -> str:
    """One arm's line: its call, then speed, outputs and cache per cell (Markdown)."""
    speed, outputs, cache = [], [], []
    for cell in call.cells:
        where = f"c{cell.concurrency} {cell.spec_mode}"
        speed.append(f"{where} {format_comparison(cell.speed)}" if cell.speed is not None
                     else f"{where} not measured")
        out = cell.outputs
        if out is None:
            outputs.append(f"{where} outputs not recorded")
        else:
            stick = "" if out.kind == "aa" else f"; {yardstick(out)}"
            detail = format_agreement(out.agreement)
            outputs.append(f"{where} {out.verdict}" if detail == out.verdict and not stick
                           else f"{where} {out.verdict} ({detail}{stick})")
        contrast = out.cache if out is not None else None
        if contrast is None or (contrast.reference.median is None
                                and contrast.other.median is None):
            cache.append(f"{where} not measured")
        else:
            mark = ", differ by more than their spread" if contrast.flagged else ""
            cache.append(f"{where} {summary.baseline} {format_hit_rate(contrast.reference)}, "
                         f"{call.arm} {format_hit_rate(contrast.other)}{mark}")
    if not call.cells:
        speed = outputs = cache = ["not measured"]
    capacity = ("in " + summary.capacity.rsplit("/", 1)[-1] + " (e2e capacity's report)"
                if summary.capacity else "not measured")
    return (f"- {CALL_ICONS[call.call]} **{md_text(call.arm)}**: {call.call} · "
            f"speed: {'; '.join(speed)} · outputs: {md_text('; '.join(outputs))} · "
            f"prefix cache: {md_text('; '.join(cache))} · "
            f"GSM8K: {md_text(gsm8k_agreement(summary, call.arm))} · capacity: {capacity}")


def gsm8k_agreement(summary: Summary, arm: str) -> str:
    """An arm's GSM8K agreement with the baseline, per evaluation: the documents whose strict
    verdict is the same, the exact McNemar p on the rest, and an A/A's (the baseline's second
    server) beside it; ``not measured`` where no evaluation has the arm."""
    report = summary.gsm8k
    parts = []
    for section in getattr(report, "sections", ()):
        mine = [a for a in section.arms if a.arm == arm and a.agreement is not None]
        if not mine:
            continue
        aa = [a for a in section.arms if a.arm == summary.baseline and a.agreement is not None]
        text = "; ".join(f"{a.agreement.same} of {a.agreement.n} documents judged alike, "
                         f"McNemar p {a.agreement.p_value:.3g}" for a in mine)
        if aa and arm != summary.baseline:
            text += "; A/A " + ", ".join(f"{a.agreement.same} of {a.agreement.n}" for a in aa)
        parts.append(f"{section.title} {text}")
    return "; ".join(parts) or "not measured"


def merge_section(summary: Summary, heading: str = "## Safe to merge?") -> list[str]:
    """A line per arm compared with the baseline (none when the summary has no outputs
    summary, i.e. nobody compared outputs)."""
    if summary.outputs is None or not summary.compared_arms:
        return []
    lines = [heading, ""]
    lines += [merge_line(call, summary) for call in merge_calls(summary)]
    lines += ["", f"{CALL_ICONS[SAFE]} {SAFE}: every cell's headline is faster or equivalent and "
              "its answers identical (or as different as an A/A that differs itself), with the "
              "prefix cache alike; "
              f"{CALL_ICONS[NOT_SAFE]} {NOT_SAFE}: a cell slower, or answers that diverge more "
              f"than the A/A's; {CALL_ICONS[NOT_SHOWN]} {NOT_SHOWN}: evidence missing or "
              "unclear (never read as safe). GSM8K (per-document agreement with the baseline, exact "
              "McNemar) and capacity are shown beside the call, not part of it.", ""]
    return lines


def render_markdown(summary: Summary, *, plot_names: tuple[str, ...] | None = None) -> str:
    """The whole report as Markdown text (ends with a newline). ``plot_names``: the PNG file
    names linked from the report (in ``plots/``); None links the forest and strip plots that
    ``render_plots`` makes (``comparison_plot_names``)."""
    if plot_names is None:
        plot_names = comparison_plot_names(summary) + tuple(
            per_position_plot_name(conc, mode) for mode in summary.spec_modes
            for conc in summary.concurrencies if positions_in(summary, conc, mode))
    return report_markdown(summary, plot_names)


def report_markdown(summary: Summary, plot_names: tuple[str, ...]) -> str:
    """``render_markdown`` with the plots' names given (``build_report`` renders the plots
    first: the names of those it made)."""
    warned = warning_lines(summary)
    markers = _Markers(warned)
    lines: list[str] = [f"# e2e report: {summary.experiment}", ""]
    lines.append(_runs_sentence(summary))
    lines.append(
        f"Arms: {', '.join(summary.arms)}; baseline: {summary.baseline}. "
        "Cells are median (min–max) of the reported runs; "
        f"“X vs {summary.baseline}” is the change of the geometric mean with its "
        f"{summary.confidence * 100:g} % interval and verdict (see “How to read this”).")
    lines.append("")
    if summary.pinned:
        lines += [pinned_sentence(summary), ""]
    lines += merge_section(summary)
    lines += ["## Headline", ""]
    lines += _header(summary, ["concurrency", "metric"])
    body = 0
    for mode in summary.spec_modes:
        keys_by_conc = [(conc, headline_metric(conc, mode)) for conc in summary.concurrencies]
        if mode == "dspark":
            keys_by_conc += [(conc, "acceptance_length") for conc in summary.concurrencies]
        for conc, key in keys_by_conc:
            if not _has_group(summary, conc, mode):
                continue
            if key == "acceptance_length" and not _has_row(summary, conc, mode, key):
                continue
            lines.append(_row([load_cell(summary, conc, mode), _metric_name(metric(key), mode, summary.speculator_label)]
                              + _figures(summary, markers, conc, mode, key, headline=True)))
            body += 1
    if body == 0:
        lines.append(_row(["", "no data"] + [""] * (len(summary.arms) + len(summary.compared_arms))))
    lines.append("")
    lines += _forest_pictures(summary, plot_names)
    lines += _attribution_section(summary)
    lines += _multiplicity(summary)
    lines += _noise_section(summary)
    lines += _pictures(summary, plot_names)
    lines += workload_section(summary)
    lines += outputs_section(summary)

    lines += ["## All metrics", ""]
    for mode in summary.spec_modes:
        title = (f"with the {md_text(summary.speculator_label)} speculator" if mode == "dspark"
                 else _MODE_TITLE.get(mode, mode))
        lines += [f"### {mode} ({title})", ""]
        lines += _header(summary, ["concurrency", "metric"])
        for conc in summary.concurrencies:
            for m in summary.metrics_in(mode):
                if _has_row(summary, conc, mode, m.key):
                    lines.append(_row([load_cell(summary, conc, mode), _metric_name(m)]
                                      + _figures(summary, markers, conc, mode, m.key)))
        lines.append("")

    lines += ["## Warnings", ""]
    if warned:  # one line per cause, each cell it touched named once
        for i, line in enumerate(warned, start=1):
            lines.append(f"- {WARN}{i} {md_text(line.text)}")  # may quote a server
    else:
        lines.append("None.")
    lines.append("")

    lines += ["## How to read this", ""]
    lines.append(f"- **Cell**: all runs of one (arm, concurrency, spec mode); each run is a fresh "
                 f"server. A figure is the median (minimum{DASH}maximum) over the cell's reported runs "
                 f"(valid runs numbered {summary.report_from_run} or later).")
    lines.append(
        f"- **X vs {summary.baseline}**: the change of the geometric mean of X's runs against "
        f"{summary.baseline}'s, in %, with its {summary.confidence * 100:g} % interval; both "
        "estimate the same ratio (the median (min–max) cells are shown beside it). "
        "**Model** (the default): each round of the sweep runs every arm of a cell back to back in "
        "a balanced (Williams) order, so a round (and a host) is a block; one least-squares fit "
        "per cell of ln y on block + position in the block + arm over every arm, so drift between "
        "and within rounds cancels and the noise is pooled over all arms; each arm vs "
        f"{summary.baseline} is a contrast of that fit. **Paired**: where the model cannot be "
        "fitted, the t-interval of the per-round log ratios. **Unpaired**: runs that do not "
        "pair up (fewer than 2 shared rounds) get the Welch t-interval on log values. With few "
        "runs every interval widens by itself (t with few degrees of freedom).")
    lines.append(
        f"- **Verdict**: “faster”/“slower” (times) or “higher”/“lower” (other metrics) when the "
        f"interval excludes 0 % and the change is at least {summary.min_effect_pct:g} % (a "
        f"minimum practical effect); “equivalent ±{summary.equivalence_pct:g} %” when both "
        f"one-sided tests against ±{summary.equivalence_pct:g} % pass (TOST: the "
        f"{(1 - 2 * (1 - summary.confidence)) * 100:g} % interval lies inside the band); otherwise "
        "“inconclusive” with the MDE, the smallest change these runs could have detected (or, "
        "when the interval excludes 0 but the change is under the minimum effect, saying so); “too "
        "few runs” when an arm has fewer than 2 reported runs. Zero spread never gives certainty: "
        f"a run-to-run noise below {RESOLUTION_SD * 100:g} % per run (the measurement's "
        "resolution) is floored at that (warned). "
        f"{HOLM_MARK}: the verdict does not survive Holm's correction across the report's "
        "primary comparisons (the headline metric of every cell; A/A checks and secondary "
        "metrics are not adjusted).")
    lines.append("- **Headline metric**: mean TPOT at concurrency 1, median TPOT at higher "
                 "concurrency, ms per verify step with the speculator (raw TPOT follows the "
                 "acceptance length, which moves from run to run on random prompts).")
    for m in summary.metrics:
        position = position_of(m.key)
        if position is not None and position > 1:
            continue  # one line says it for every position
        if position == 1:
            lines.append("- **acceptance rate, draft position i** (share, higher is better): "
                         "Δ accepted at draft position i / Δ drafts of the server's "
                         "vllm:spec_decode_num_accepted_tokens_per_pos around the measured load "
                         "(vLLM's per-position rate, as vllm bench serve reports it): the share "
                         "of verify steps whose first i draft tokens were all accepted; the "
                         "rates sum to acceptance length − 1.")
            continue
        lines.append(f"- **{m.label}** ({m.unit}, {'higher' if m.higher_is_better else 'lower'} is "
                     f"better): {m.definition}.")
    lines.append(f"- **Warnings**: fewer than {MIN_RUNS} reported runs; spread (max − min) / median "
                 f"above {MAX_SPREAD * 100:g} % (acceptance length: above "
                 f"{MAX_ACCEPTANCE_MOVE * 100:g} %); invalid runs (excluded, counted).")
    return "\n".join(lines) + "\n"
