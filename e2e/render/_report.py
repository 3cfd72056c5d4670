"""``e2e report``: read every run of an experiment's results folder, aggregate, write the report.

The only stage here that touches files: it reads ``<results_dir>/*/run.json`` (folders without
one are skipped: a run in progress or one that failed before writing), hands the records to
``e2e.analysis.sweep.aggregate.summarize`` (and each run's recorded outputs, ``requests.parquet``, to
``e2e.analysis.outputs.compare.summarize_outputs``: the summary's ``outputs``) and the summary to each renderer
(``render_report``: the whole report as bytes), then writes it once into ``<results_dir>/report/``
with atomic writes (``e2e.paths.write_files``):

    report/report.md          the Markdown report
    report/index.html         the same report as a page, with every plot (e2e.render.html_report)
    report/cells.csv          every cell (arm, concurrency, spec mode, metric)
    report/comparisons.csv    every comparison with the baseline
    report/plots/*.png        each metric against concurrency, one line per arm

An unreadable or invalid ``run.json`` does not stop the report: it is skipped and named in the
report's warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from e2e.analysis.outputs import gsm8k_report, summarize_outputs
from e2e.analysis.sweep import ReportWarning, Summary, equivalence_of, select, summarize
from e2e.errors import NoSuchResults, ResultsError
from e2e.names import known_name
from e2e.paths import no_links
from e2e.results.records import RunRecord
from e2e.results.store import load_outputs, load_records
from e2e.results.gsm8k import read_evaluations
from e2e.render.csv_report import render_csv
from e2e.render.plots import render_plots
from e2e.render.html_report import render_html
from e2e.paths import write_files
from e2e.render.markdown import report_markdown

__all__ = ["ReportOutput", "FolderSummary", "RenderedReport", "build_report", "read_summary",
           "render_report", "REPORT_DIR"]

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


def read_summary(
    results_dir: Path, *, report_from_run: int | None = None, baseline: str | None = None,
    only: dict[str, str] | None = None, confidence: float | None = None,
) -> FolderSummary:
    """Read ``results_dir/*/run.json`` and aggregate it: the one reading of a results folder
    (``build_report`` renders it, ``e2e plan`` plans from it). A run.json that cannot be read
    or trusted is skipped and named in ``skipped`` and in the summary's warnings.

    ``report_from_run`` None uses the experiment config's value; ``baseline`` names an arm of
    the folder (a ConfigError naming its arms otherwise), None: main where there is one;
    ``only`` keeps the runs whose spec matches (e.g. ``{"output_len": "128"}``); ``confidence``
    None is the last sequential look's (a folder ``--until-settled`` made) or the default.
    Raises ``ResultsError`` when the folder holds no readable run or its runs are not
    comparable (naming the field that differs)."""
    results_dir = Path(results_dir)
    records, skipped = load_records(results_dir)
    for what, name in (("baseline arm", baseline), ("arm", (only or {}).get("arm"))):
        if name is not None and records:  # (--baseline, --only arm=)
            known_name(name, sorted({r.spec.arm for r in records}), what,
                       f"the arms in {results_dir}")
    baseline = baseline or "main"
    problems = tuple(ReportWarning(message) for message in skipped)
    if only:
        try:
            records = tuple(select(records, only))
        except ValueError as exc:
            raise ResultsError(str(exc)) from exc
    if not records:  # bad input (exit 2): a folder of no runs, or --only that keeps none
        detail = f"; {len(problems)} unreadable run.json skipped" if problems else ""
        raise NoSuchResults(
            f"{results_dir}: no run.json found in its run folders{detail}; run `e2e sweep` first "
            "or point at results/<experiment>")
    if confidence is None:  # a folder --until-settled made: the last sequential look's confidence
        from e2e.results.looks import last_look_confidence

        confidence = last_look_confidence(results_dir)
        if confidence is not None:
            problems = (*problems, ReportWarning(
                f"intervals at {confidence * 100:.3g} %, the confidence of the last sequential "
                "look of --until-settled (looks.json, its group-sequential boundary): a repeated "
                "confidence interval: whenever the sweep stopped, each covers its true change "
                "with at least 1 − α/m (m the comparisons the looks tested, α the plan's) and the "
                "stopping set's together with at least 1 − α, where a fixed-n interval at the "
                "nominal level would ignore the looks; it is not conditional on when it stopped: "
                "among sweeps that stopped early (a large reading) it covers less often, and the "
                "change it shows tends to be larger than the true one"))
    try:
        summary = summarize(records, baseline=baseline, report_from_run=report_from_run,
                            equivalence_pct=equivalence_of(records),
                            **({"confidence": confidence} if confidence is not None else {}),
                            extra_warnings=problems)
    except ValueError as exc:
        raise ResultsError(f"{results_dir}: {exc}") from exc
    return FolderSummary(summary=summary, records=tuple(records), skipped=skipped)


def build_report(
    results_dir: Path, *, report_from_run: int | None = None, baseline: str | None = None,
    only: dict[str, str] | None = None, confidence: float | None = None,
) -> ReportOutput:
    """Aggregate ``results_dir/*/run.json`` (``read_summary``, its arguments), render the
    whole report, then write it into ``results_dir/report/``. Raises ``ResultsError`` as
    ``read_summary`` does, or when a file cannot be written."""
    results_dir = Path(results_dir)
    summary = _report_summary(results_dir, read_summary(
        results_dir, report_from_run=report_from_run, baseline=baseline, only=only,
        confidence=confidence))
    report = render_report(summary)  # the whole report, before any of it is written
    out_dir = results_dir / REPORT_DIR
    no_links(results_dir, out_dir / PLOTS, "the report")  # report/ and plots/ real folders
    written = write_files(out_dir, report.files, prune=f"{PLOTS}/*.png")
    return ReportOutput(summary=summary, markdown=report.markdown, report_dir=out_dir,
                        markdown_path=out_dir / "report.md",
                        csv_paths=tuple(p for p in written if p.suffix == ".csv"),
                        plot_paths=tuple(p for p in written if p.parent == out_dir / PLOTS),
                        html_path=out_dir / "index.html")


def _report_summary(results_dir: Path, read: FolderSummary) -> Summary:
    """The folder's summary with what else the experiment measured: each run's recorded
    outputs compared (``requests.parquet``), and for the merge line GSM8K beside the load runs
    (results/<experiment>/gsm8k) and a capacity search (results/<experiment>/capacity.json)."""
    summary, records = read.summary, read.records
    outputs, unreadable = load_outputs(results_dir, records)
    capacity = results_dir / "capacity.json"
    return replace(
        summary, outputs=summarize_outputs(records, outputs, baseline=summary.baseline,
                                           confidence=summary.confidence),
        warnings=(*summary.warnings, *(ReportWarning(m) for m in unreadable)),
        gsm8k=gsm8k_report(read_evaluations(results_dir.parent, results_dir.name)),
        capacity=str(capacity) if capacity.is_file() else None)


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
