"""``e2e report``: read an experiment's results folder once, summarize it, render the whole
report, then write it once.

    read_report_input   every input, read once (``ReportInput``): ``<results_dir>/*/run.json``
                        (folders without one are skipped: a run in progress or one that failed
                        before writing), each run's recorded outputs (``requests.parquet``),
                        the GSM8K evaluations beside the runs, the last sequential look's
                        confidence (``looks.json``) and a capacity search (``capacity.json``)
    summary_of          what was read, summarized (no I/O): the records aggregated
                        (``e2e.analysis.sweep.aggregate.summarize``), the outputs compared
                        (``e2e.analysis.outputs.compare.summarize_outputs``), GSM8K's report
    render_report       the summary -> every file of the report as bytes (no I/O)
    write_report        the one writer: atomic writes into ``<results_dir>/report/``
                        (``e2e.paths.write_files``)

    report/report.md          the Markdown report
    report/index.html         the same report as a page, with every plot (e2e.render.html_report)
    report/cells.csv          every cell (arm, concurrency, spec mode, metric)
    report/comparisons.csv    every comparison with the baseline
    report/plots/*.png        each metric against concurrency, one line per arm

An unreadable or invalid ``run.json`` does not stop the report: it is skipped and named in the
report's warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from e2e.analysis.outputs import gsm8k_report, summarize_outputs
from e2e.analysis.sweep import ReportWarning, Summary, equivalence_of, select, summarize
from e2e.errors import NoSuchResults, ResultsError
from e2e.names import known_name
from e2e.paths import no_links
from e2e.results.records import RunRecord
from e2e.results.store import load_outputs, load_records
from e2e.results.gsm8k import read_evaluations
from e2e.results.looks import last_look_confidence
from e2e.render.csv_report import render_csv
from e2e.render.plots import render_plots
from e2e.render.html_report import render_html
from e2e.paths import write_files
from e2e.render.markdown import report_markdown

__all__ = ["ReportOutput", "FolderSummary", "ReportInput", "RenderedReport", "build_report",
           "read_report_input", "summary_of", "read_summary", "render_report", "write_report",
           "REPORT_DIR"]

REPORT_DIR = "report"
PLOTS = "plots"  # the plots' folder inside report/


@dataclass(frozen=True)
class ReportOutput:
    """What ``build_report`` wrote: the summary, the Markdown text and every file's path."""

    summary: Summary
    markdown: str
    report_dir: Path
    markdown_path: Path
    csv_paths: tuple[Path, ...]
    plot_paths: tuple[Path, ...]
    html_path: Path | None = None   # report/index.html (e2e.render.html_report)

    @property
    def paths(self) -> tuple[Path, ...]:
        html = (self.html_path,) if self.html_path else ()
        return (self.markdown_path, *html, *self.csv_paths, *self.plot_paths)


@dataclass(frozen=True)
class FolderSummary:
    """A results folder as ``e2e report`` and ``e2e plan`` read it (``read_summary``)."""

    summary: Summary
    records: tuple[RunRecord, ...]   # the runs summarized (after ``only``)
    skipped: tuple[str, ...]         # each run.json not read, and why (also in the warnings)


@dataclass(frozen=True)
class ReportInput:
    """A results folder as its report reads it, once (``read_report_input``): the runs kept
    (after ``only``), each run.json not read and why, the confidence to report at (asked, or
    the last sequential look's: ``looked``); for the whole report also each run's recorded
    outputs (``requests.parquet``) and a message for each that could not be read, the GSM8K
    evaluations beside the load runs (results/<experiment>/gsm8k) and a capacity search
    (results/<experiment>/capacity.json), if there is one."""

    folder: Path
    records: tuple[RunRecord, ...]
    skipped: tuple[str, ...]
    confidence: float | None = None
    looked: bool = False
    whole: bool = False
    outputs: dict = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    evaluations: tuple = ()
    capacity: str | None = None


def read_report_input(
    results_dir: Path, *, baseline: str | None = None, only: dict[str, str] | None = None,
    confidence: float | None = None, whole: bool = True,
) -> ReportInput:
    """Read everything a results folder's report is made of, once (``ReportInput``); with
    ``whole`` false only the runs and the confidence (what ``e2e plan`` plans from). A run.json
    that cannot be read or trusted is skipped and named in ``skipped``.

    ``baseline`` and ``only``'s ``arm`` must name an arm of the folder (a ConfigError naming
    its arms otherwise); ``only`` keeps the runs whose spec matches (e.g. ``{"output_len":
    "128"}``); ``confidence`` None is the last sequential look's (a folder ``--until-settled``
    made), else the default. Raises ``NoSuchResults`` when the folder holds no readable run."""
    results_dir = Path(results_dir)
    records, skipped = load_records(results_dir)
    for what, name in (("baseline arm", baseline), ("arm", (only or {}).get("arm"))):
        if name is not None and records:  # (--baseline, --only arm=)
            known_name(name, sorted({r.spec.arm for r in records}), what,
                       f"the arms in {results_dir}")
    if only:
        try:
            records = tuple(select(records, only))
        except ValueError as exc:
            raise ResultsError(str(exc)) from exc
    if not records:  # bad input (exit 2): a folder of no runs, or --only that keeps none
        detail = f"; {len(skipped)} unreadable run.json skipped" if skipped else ""
        raise NoSuchResults(
            f"{results_dir}: no run.json found in its run folders{detail}; run `e2e sweep` first "
            "or point at results/<experiment>")
    looked = None
    if confidence is None:  # a folder --until-settled made: the last sequential look's confidence
        looked = last_look_confidence(results_dir)
    read = ReportInput(folder=results_dir, records=tuple(records), skipped=tuple(skipped),
                       confidence=confidence if looked is None else looked,
                       looked=looked is not None)
    if not whole:
        return read
    outputs, unreadable = load_outputs(results_dir, records)
    capacity = results_dir / "capacity.json"
    return replace(read, whole=True, outputs=outputs, unreadable=unreadable,
                   evaluations=read_evaluations(results_dir.parent, results_dir.name),
                   capacity=str(capacity) if capacity.is_file() else None)


_LOOKED = ("intervals at {:.3g} %, the confidence of the last sequential look of "
           "--until-settled (looks.json, its group-sequential boundary): a repeated confidence "
           "interval: whenever the sweep stopped, each covers its true change with at least "
           "1 − α/m (m the comparisons the looks tested, α the plan's) and the stopping set's "
           "together with at least 1 − α, where a fixed-n interval at the nominal level would "
           "ignore the looks; it is not conditional on when it stopped: among sweeps that "
           "stopped early (a large reading) it covers less often, and the change it shows tends "
           "to be larger than the true one")


def summary_of(read: ReportInput, *, report_from_run: int | None = None,
               baseline: str | None = None) -> Summary:
    """The report's summary of what was read (no I/O): the runs aggregated
    (``e2e.analysis.sweep.aggregate.summarize``) at ``read``'s confidence, the runs skipped
    named in its warnings; for a whole read also the runs' outputs compared
    (``summarize_outputs``), GSM8K and the capacity search. ``report_from_run`` None uses the
    experiment config's value; ``baseline`` None: main. Raises ``ResultsError`` when the runs
    are not comparable (naming the field that differs)."""
    problems = tuple(ReportWarning(message) for message in read.skipped)
    if read.looked:
        problems = (*problems, ReportWarning(_LOOKED.format(read.confidence * 100)))
    try:
        summary = summarize(read.records, baseline=baseline or "main",
                            report_from_run=report_from_run,
                            equivalence_pct=equivalence_of(read.records),
                            **({"confidence": read.confidence}
                               if read.confidence is not None else {}),
                            extra_warnings=problems)
    except ValueError as exc:
        raise ResultsError(f"{read.folder}: {exc}") from exc
    if not read.whole:
        return summary
    return replace(
        summary, outputs=summarize_outputs(read.records, read.outputs, baseline=summary.baseline,
                                           confidence=summary.confidence),
        warnings=(*summary.warnings, *(ReportWarning(m) for m in read.unreadable)),
        gsm8k=gsm8k_report(read.evaluations), capacity=read.capacity)


def read_summary(
    results_dir: Path, *, report_from_run: int | None = None, baseline: str | None = None,
    only: dict[str, str] | None = None, confidence: float | None = None,
) -> FolderSummary:
    """Read ``results_dir/*/run.json`` and aggregate it (``read_report_input`` without the
    report's other inputs, ``summary_of``: their arguments): what ``e2e plan`` plans from."""
    read = read_report_input(results_dir, baseline=baseline, only=only, confidence=confidence,
                             whole=False)
    return FolderSummary(summary=summary_of(read, report_from_run=report_from_run,
                                            baseline=baseline),
                         records=read.records, skipped=read.skipped)


def build_report(
    results_dir: Path, *, report_from_run: int | None = None, baseline: str | None = None,
    only: dict[str, str] | None = None, confidence: float | None = None,
) -> ReportOutput:
    """The report of ``results_dir``: everything it needs read once (``read_report_input``,
    its arguments), summarized (``summary_of``), the whole report rendered
    (``render_report``), then written once into ``results_dir/report/`` (``write_report``).
    Raises ``ResultsError`` as those do, or when a file cannot be written."""
    read = read_report_input(results_dir, baseline=baseline, only=only, confidence=confidence)
    summary = summary_of(read, report_from_run=report_from_run, baseline=baseline)
    report = render_report(summary)  # the whole report, before any of it is written
    return write_report(read.folder, report)


def write_report(results_dir: Path, report: RenderedReport) -> ReportOutput:
    """Write a rendered report into ``results_dir/report/`` (atomic writes; plots of an
    earlier report that this one no longer has are removed)."""
    out_dir = Path(results_dir) / REPORT_DIR
    no_links(results_dir, out_dir / PLOTS, "the report")  # report/ and plots/ real folders
    written = write_files(out_dir, report.files, prune=f"{PLOTS}/*.png")
    return ReportOutput(summary=report.summary, markdown=report.markdown, report_dir=out_dir,
                        markdown_path=out_dir / "report.md",
                        csv_paths=tuple(p for p in written if p.suffix == ".csv"),
                        plot_paths=tuple(p for p in written if p.parent == out_dir / PLOTS),
                        html_path=out_dir / "index.html")


@dataclass(frozen=True)
class RenderedReport:
    """The whole report as bytes, before any of it is written: ``files`` maps each path under
    ``report/`` to its bytes, in the order they are written (the Markdown, the CSVs, the
    plots under ``plots/``, the page)."""

    summary: Summary
    markdown: str
    files: dict[str, bytes]


def render_report(summary: Summary) -> RenderedReport:
    """Every file of the report, rendered (no I/O): the plots first, so that the Markdown and
    the page link the ones there are."""
    plots = render_plots(summary)
    markdown = report_markdown(summary, tuple(plots))
    return RenderedReport(summary=summary, markdown=markdown, files={
        "report.md": markdown.encode("utf-8"), **render_csv(summary),
        **{f"{PLOTS}/{name}": data for name, data in plots.items()},
        "index.html": render_html(markdown, plots, title=f"e2e report: {summary.experiment}")})
