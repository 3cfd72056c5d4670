"""Write a night assessed, all in one place, at its end: the full report (``e2e report``),
the night in the results store (one transaction), the trend plots over the store's history,
the summaries and ``judgement.json``.

    <results>/nightly/<date>/<experiment>/
        report/            the full report of the night
        trends/*.png       each metric over the history of this config
        summary.md         the Markdown summary (chat)
        summary-github.md  the same as a pull-request comment / step summary
        judgement.json     every cell's verdict, the baseline, the status
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from e2e.console import Say
from e2e.errors import ResultsError
from e2e.nightly.assess import Assessment
from e2e.nightly.measure import Measured
from e2e.nightly.night import Night
from e2e.paths import atomic_write_bytes, atomic_write_json
from e2e.render import SummaryContext, render_summary, render_summary_github, render_trends
from e2e.results import Judgement

__all__ = ["NightOutcome", "write_night", "night_report"]


@dataclass(frozen=True)
class NightOutcome:
    judgement: Judgement
    summary: str
    folder: Path              # <results>/nightly/<date>/<experiment>
    summary_path: Path
    store: str                # the store's URL, password masked
    trend_paths: tuple[Path, ...]
    report_dir: Path | None


def write_night(night: Night, measured: Measured, assessed: Assessment,
                store, *, link_base: str | None = None,
                say: Say = lambda message: None) -> NightOutcome:
    """Write tonight (the module docstring) into its folder and ``store`` (an
    ``e2e.results.nightly_store.Store``); ``link_base`` prefixes the summary's links to run folders."""
    folder, results, judgement = night.folder, night.results, assessed.judgement
    report_dir = night_report(folder, night.baseline_arm, say)
    report_path = (report_dir / "report.md").relative_to(results).as_posix() if report_dir else None
    store.write_night(assessed.rows, judgement=judgement, samples=assessed.samples,
                      paths={"night_dir": night.prefix, "report_path": report_path,
                             "summary_path": f"{night.prefix}/summary.md"})
    files: dict[Path, bytes] = {
        folder / "trends" / name: data for name, data in render_trends(
            store.history(experiment=night.experiment.name), experiment=night.experiment.name,
            config_hash=night.config_hash).items()}
    trend_paths = tuple(files)
    ctx = SummaryContext(
        experiment=night.experiment.name, config_hash=night.config_hash, night_dir=night.prefix,
        builds=measured.builds, arm_overrides=night.arm_overrides, report_path=report_path,
        trends_dir=(folder / "trends").relative_to(results).as_posix() if trend_paths else None,
        link_base=link_base, confidence=night.settings.confidence,
        notes=measured.notes, design=assessed.design, bisect=assessed.bisect)
    text = render_summary(judgement, ctx)
    files[folder / "summary.md"] = text.encode("utf-8")
    files[folder / "summary-github.md"] = render_summary_github(judgement, ctx).encode("utf-8")
    judged = _judgement_json(judgement, night.config_hash)
    for path, data in files.items():
        atomic_write_bytes(path, data)
    atomic_write_json(folder / "judgement.json", judged)
    return NightOutcome(judgement=judgement, summary=text, folder=folder,
                        summary_path=folder / "summary.md", store=store.masked,
                        trend_paths=trend_paths, report_dir=report_dir)


def night_report(folder: Path, baseline: str, say: Say) -> Path | None:
    """Write the night's full report (``e2e report``) against the baseline arm
    (``[nightly] baseline``, default main), whatever the order of the arms; None if there is
    no run to report."""
    from e2e.render import build_report

    try:
        return build_report(folder, baseline=baseline).report_dir
    except ResultsError as exc:
        say(f"no full report: {exc}")
        return None


def _judgement_json(judgement: Judgement, config_hash: str) -> dict[str, Any]:
    return {
        "date": judgement.date, "status": judgement.status, "exit_code": judgement.exit_code,
        "config_hash": config_hash,
        "baseline": None if judgement.baseline is None else {
            "date": judgement.baseline.date, "reason": judgement.baseline.reason,
            "status": judgement.baseline.status},
        "problems": list(judgement.problems),
        "outputs_fail": judgement.outputs_fail,
        "outputs": [c.to_json() for c in judgement.outputs],
        "changes": [{**asdict(c.key), "start": c.start, "break_date": c.break_date,
                     "before": c.before, "after": c.after, "pct": c.pct, "p_value": c.p_value,
                     "worse": c.worse, "latest": c.latest, "caught": c.caught,
                     "regression": c.regression, "reason": c.reason}
                    for c in judgement.changes],
        "verdicts": [{**asdict(v.key), "verdict": v.verdict, "pct": v.pct,
                      "interval": v.interval, "threshold": v.threshold, "floor_pp": v.floor_pp,
                      "p_value": v.p_value, "source": v.source, "reason": v.reason,
                      "tonight": list(v.tonight.values) if v.tonight else None,
                      "baseline": list(v.baseline.values) if v.baseline else None,
                      "history": list(v.history)}
                     for v in judgement.verdicts],
    }
