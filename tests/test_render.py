"""Renderers (Markdown golden file, CSV, PNG) and e2e.render.report on a hand-made results folder."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.summary import Summary
from e2e.errors import ResultsError
from e2e.results.records import RunRecord
from e2e.render.csv_report import render_csv
from e2e.render.markdown import (render_markdown, format_cell, format_headline_comparison,
                                 format_pct, format_value)
from e2e.render.plots import render_plots
from e2e.render.forest import comparison_plot_names
from e2e.render import build_report
from test_aggregate import make_record

pytestmark = pytest.mark.slow  # the whole module is the slow tier

GOLDEN = Path(__file__).parent / "golden"

# mean TPOT of runs 1-4 per arm and concurrency (median TPOT is 1 % lower), without speculator
BASE = {
    "main":        {1: [7.0, 6.73, 6.65, 6.74], 4: [9.9, 9.80, 9.85, 9.90]},
    "main-repeat": {1: [7.0, 6.70, 6.75, 6.72], 4: [9.9, 9.84, 9.79, 9.88]},
    "flag-off":    {1: [7.0, 6.62, 6.60, 6.66], 4: [9.9, 9.70, 9.75, 9.72]},
    "pr":          {1: [7.0, 6.52, 6.50, 6.55], 4: [9.9, 9.40, 9.45, 9.38]},
}
ACCEPT = {
    "main": [1.8, 1.80, 1.82, 1.79],
    "main-repeat": [1.8, 1.81, 1.78, 1.80],
    "flag-off": [1.8, 1.64, 1.94, 1.80],  # moves 18 % between runs
    "pr": [1.8, 1.80, 1.81, 1.79],
}
VERIFY = {"main": 12.0, "main-repeat": 12.02, "flag-off": 11.9, "pr": 11.5}  # ms per verify step


def golden_records() -> list[RunRecord]:
    recs: list[RunRecord] = []
    for arm, by_conc in BASE.items():
        for conc, tpots in by_conc.items():
            for i, t in enumerate(tpots, start=1):
                recs.append(make_record(arm, conc, i, tpot=t, tpot_median=t * 0.99,
                                        ttft=40.0 + conc + i, throughput=conc * 1000.0 / t))
        for i, acc in enumerate(ACCEPT[arm], start=1):
            jitter = 1.0 + 0.002 * (i - 2)
            recs.append(make_record(arm, 1, i, dspark=True, tpot=VERIFY[arm] * jitter / acc,
                                    acceptance=acc, ttft=45.0, throughput=150.0))
    # an invalid run of pr at c=4 (never averaged) and only 2 reported runs of main-repeat at c=4
    recs.append(make_record("pr", 4, 5, tpot=50.0, tpot_median=50.0, valid=False,
                            reasons=("2 of 128 requests failed",)))
    recs = [r for r in recs if not (r.spec.arm == "main-repeat" and r.spec.concurrency == 4
                                    and not r.spec.dspark and r.spec.repeat == 4)]
    # a noisy cell: flag-off c=1 mean TTFT of run 3 spikes
    recs = [r.model_copy(update={"metrics": r.metrics.model_copy(update={"ttft_ms_mean": 60.0})})
            if (r.spec.arm, r.spec.concurrency, r.spec.dspark, r.spec.repeat) == ("flag-off", 1, False, 3)
            else r for r in recs]
    return recs


@pytest.fixture(scope="module")
def summary() -> Summary:
    return summarize(golden_records())


def test_formatting() -> None:
    assert format_value(6.7312) == "6.73"
    assert format_value(1523.4) == "1523"
    assert format_value(152.34) == "152.3"
    assert format_value(0.5123) == "0.512"
    assert format_pct(-3.14) == "\u22123.1" and format_pct(0.04) == "0.0" and format_pct(2.0) == "+2.0"
    assert format_cell(None) == "\u2014"


def test_markdown_matches_golden(summary: Summary) -> None:
    text = render_markdown(summary)
    path = GOLDEN / "report.md"
    if os.environ.get("E2E_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_markdown_headline_rows(summary: Summary) -> None:
    text = render_markdown(summary)
    lines = text.splitlines()
    head = lines.index("## Headline")
    end = next(i for i in range(head + 2, len(lines)) if not lines[i].startswith("|"))
    table = lines[head + 2: end]
    assert table[0] == ("| concurrency | metric | main | main-repeat | flag-off | pr "
                        "| main-repeat vs main | flag-off vs main | pr vs main |")
    rows = [r.split(" | ")[1] for r in table[2:]]
    assert rows == ["mean TPOT (ms)", "median TPOT (ms)", "ms per verify step, DSpark",
                    "acceptance length, DSpark"]
    row1 = table[2]
    assert "| 6.73 (6.65\u20136.74) |" in row1
    pr = summary.comparison("pr", 1, "base", "tpot_ms_mean")
    assert row1.endswith(format_headline_comparison(pr) + " |")
    # per headline row: interval, verdict, Holm mark, method, MDE
    assert pr.verdict == "faster" and pr.method == "model"
    assert format_headline_comparison(pr) == (
        f"\u22122.7 % [\u22123.6, \u22121.8] faster · model, MDE {pr.mde_pct:.1f} %")
    aa = summary.comparison("main-repeat", 1, "base", "tpot_ms_mean")
    assert aa.verdict == "equivalent" and aa.role == "check"  # one model over 4 arms: 6 df, not 2
    assert f"equivalent ±1 % · A/A check, model, MDE {aa.mde_pct:.1f} %" in row1
    verify = summary.comparison("pr", 1, "dspark", "ms_per_verify_step")
    assert verify.survives and "faster · model" in format_headline_comparison(verify)
    # the multiplicity note counts the primary comparisons: 3 cells x 2 arms (A/A excluded)
    assert summary.n_comparisons == 6
    assert "Multiplicity: 6 primary comparisons" in text


def test_markdown_noise_table_and_picture_links(summary: Summary) -> None:
    text = render_markdown(summary)
    assert "## Noise and what it can detect" in text
    row = next(line for line in text.splitlines() if line.startswith("| 1 | mean TPOT (ms) | 0.65 %"))
    noise = summary.noise_row(1, "base", "tpot_ms_mean")
    assert (f"| A/A arm main-repeat: model residuals of 4 arms, 12 runs | 3 | 6 | "
            f"{noise.mde_pct:.1f} % |") in row
    assert row.endswith(f"| {noise.runs_for_target} |")
    for name in comparison_plot_names(summary):
        assert f"(plots/{name})" in text


def test_warnings_sit_next_to_the_numbers_they_affect(summary: Summary) -> None:
    text = render_markdown(summary)
    accept_row = next(line for line in text.splitlines() if line.startswith("| 1 | acceptance length, DSpark"))
    flag_off_cell = accept_row.split(" | ")[4]
    assert "\u26a0" in flag_off_cell
    n = flag_off_cell.split("\u26a0")[1].split(",")[0]
    # the marker names the line of its cause, which names the cell with its own figures
    assert (f"- \u26a0{n} acceptance length moved more than 10 % between runs; raw TPOT follows "
            "it, compare ms per verify step: flag-off c1 dspark (1.64–1.94, 16.7 %)") in text
    assert "invalid runs excluded: pr c4 base (run 5: 2 of 128 requests failed)" in text
    assert "fewer than 3 reported runs: main-repeat c4 base (2 runs)" in text
    warnings = text.split("## Warnings")[1].split("## How to read this")[0]
    assert warnings.count("- \u26a0") == 5  # one line per cause (18 per metric and cell before)


def test_csv_has_every_cell_and_comparison(summary: Summary) -> None:
    files = render_csv(summary)
    assert set(files) == {"cells.csv", "comparisons.csv", "noise.csv"}
    cells = pd.read_csv(io.BytesIO(files["cells.csv"]))
    comps = pd.read_csv(io.BytesIO(files["comparisons.csv"]))
    assert len(cells) == len(summary.cells)
    assert len(comps) == len(summary.comparisons)
    row = cells[(cells.arm == "main") & (cells.concurrency == 1) & (cells.spec_mode == "base")
                & (cells.metric == "tpot_ms_mean")].iloc[0]
    assert (row["median"], row["low"], row["high"], row["n"]) == (6.73, 6.65, 6.74, 3)
    assert row["repeats"] == "2;3;4"
    c = comps[(comps.arm == "pr") & (comps.concurrency == 1) & (comps.metric == "tpot_ms_mean")
              & (comps.spec_mode == "base")].iloc[0]
    assert c["verdict"] == "faster" and c["pct_low"] < c["pct"] < c["pct_high"] < 0
    assert c["method"] == "model" and c["n_blocks"] == 3 and c["mde_pct"] > 0
    assert c["p_holm"] >= c["p_value"] and c["survives_holm"] in (True, False)
    assert c["role"] == "primary" and c["df"] == 6
    noise = pd.read_csv(io.BytesIO(files["noise.csv"]))
    assert len(noise) == len(summary.noise)


@pytest.fixture(scope="module")
def plots(summary: Summary) -> dict[str, bytes]:
    return render_plots(summary)


def test_plots_are_pngs_one_per_metric_and_mode(plots: dict[str, bytes]) -> None:
    assert "tpot_ms_mean-base.png" in plots and "ms_per_verify_step-dspark.png" in plots
    assert "acceptance_length-base.png" not in plots
    assert all(data.startswith(b"\x89PNG\r\n\x1a\n") for data in plots.values())


def test_forest_and_strip_plots_for_every_headline_metric(summary: Summary, plots: dict[str, bytes]) -> None:
    names = comparison_plot_names(summary)
    assert set(names) <= set(plots)
    assert "forest-tpot_ms_mean-base.png" in names and "forest-ms_per_verify_step-dspark.png" in names
    assert "strip-tpot_ms_mean-c1-base.png" in names and "strip-tpot_ms_median-c4-base.png" in names
    assert "strip-ms_per_verify_step-c1-dspark.png" in names


def write_results(root: Path, records: list[RunRecord]) -> Path:
    exp = root / "exp"
    for r in records:
        folder = exp / r.run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(json.dumps(r.model_dump(mode="json")), encoding="utf-8")
    return exp


def test_build_report_writes_every_output(tmp_path: Path, plots: dict[str, bytes]) -> None:
    exp = write_results(tmp_path, golden_records())
    (exp / "in-progress").mkdir()  # no run.json: skipped
    (exp / "broken").mkdir()
    (exp / "broken" / "run.json").write_text("{", encoding="utf-8")
    (exp / "report" / "plots").mkdir(parents=True)
    (exp / "report" / "plots" / "gone-base.png").write_bytes(b"old")
    out = build_report(exp)
    assert out.markdown_path == exp / "report" / "report.md"
    assert out.markdown_path.read_text(encoding="utf-8") == out.markdown
    assert "skipped broken/run.json: not a valid run record" in out.markdown
    assert {p.name for p in out.csv_paths} == {"cells.csv", "comparisons.csv", "noise.csv"}
    assert all(p.is_file() for p in out.paths)
    assert not (exp / "report" / "plots" / "gone-base.png").exists()
    assert {p.name: p.read_bytes() for p in out.plot_paths} == plots  # deterministic PNGs
    assert out.summary.counts.total == len(golden_records())
    # the same records give the golden report, apart from the skipped-file warning
    assert out.summary.cells == summarize(golden_records()).cells
    # the HTML shows the forest plots where the headline is, inline, not only linked below
    page = (exp / "report" / "index.html").read_text(encoding="utf-8")
    headline, rest = page.split("<h2>Headline</h2>", 1)[1].split("<h2>", 1)
    forests = [n for n in plots if n.startswith("forest-")]
    assert forests and all(f'<img src="plots/{n}"' in headline for n in forests)
    assert not any(f"plots/{n}" in rest for n in forests)  # not again in the gallery
    assert '<img src="plots/strip-' in rest


def test_build_report_override_and_errors(tmp_path: Path) -> None:
    small = [r for r in golden_records() if r.spec.concurrency == 1 and not r.spec.dspark]
    exp = write_results(tmp_path, small)
    out = build_report(exp, report_from_run=1, baseline="pr")
    assert out.summary.report_from_run == 1 and out.summary.arms[0] == "pr"
    assert out.summary.cell("main", 1, "base", "tpot_ms_median").n == 4
    assert out.summary.comparison("main", 1, "base", "tpot_ms_mean").baseline == "pr"
    with pytest.raises(ResultsError, match="no run.json"):
        build_report(tmp_path / "exp" / "report")
    with pytest.raises(ResultsError, match="no such results folder"):
        build_report(tmp_path / "nope")


CALIBRATION_ARMS = {
    "main": {"plugin": {"packing": "main"}},
    "main-repeat": {"description": "A/A", "plugin": {"packing": "main"}},
    "delay-100": {"plugin": {"packing": "main", "step_delay_us": 100}},
    "delay-250": {"plugin": {"packing": "main", "step_delay_us": 250}},
    "delay-500": {"plugin": {"packing": "main", "step_delay_us": 500}},
}


def calibration_records() -> list[RunRecord]:
    """A calibration-shaped sweep: 5 arms, runs 1-4, server TPOT drifting up 5 % a round
    (as main-repeat's 2.75 -> 3.08 ms in docs/explanation/plugin.md) with ±0.3 % run noise."""
    noise = [0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001, 0.003, -0.002, 0.001]
    recs, i = [], 0
    for arm, delay in (("main", 0.0), ("main-repeat", 0.0), ("delay-100", 0.1),
                       ("delay-250", 0.25), ("delay-500", 0.5)):
        for rnd in range(1, 5):
            value = (2.75 + delay) * 1.05 ** rnd * (1 + noise[i % len(noise)])
            i += 1
            rec = make_record(arm, 1, rnd, tpot=value, experiment="calibration", arms=CALIBRATION_ARMS)
            recs.append(rec.model_copy(update={"metrics": rec.metrics.model_copy(
                update={"server_tpot_ms_mean": value})}))
    return recs


def test_calibration_report_renders_forest_and_strip_plots(tmp_path: Path) -> None:
    exp = write_results(tmp_path, calibration_records())
    out = build_report(exp)
    s = out.summary
    assert s.aa_arms == ("main-repeat",)
    aa = s.comparison("main-repeat", 1, "base", "server_tpot_ms_mean")
    assert aa.method == "model" and aa.verdict in ("equivalent", "inconclusive")
    for arm in ("delay-100", "delay-250", "delay-500"):
        c = s.comparison(arm, 1, "base", "server_tpot_ms_mean")
        assert c.method == "model" and c.verdict == "slower", (arm, c)
    # the drift (5 % a round) swamps delay-100 (+3.6 %) without the pairing
    assert s.comparison("delay-100", 1, "base", "server_tpot_ms_mean").unpaired_interval[0] < 0
    names = {p.name for p in out.plot_paths}
    for name in ("forest-tpot_ms_mean-base.png", "forest-server_tpot_ms_mean-base.png",
                 "strip-tpot_ms_mean-c1-base.png", "strip-server_tpot_ms_mean-c1-base.png"):
        assert name in names
        assert f"(plots/{name})" in out.markdown
    row = s.noise_row(1, "base", "server_tpot_ms_mean")
    assert row.source.startswith("A/A arm main-repeat: model residuals of 5 arms")
    assert row.mde_pct < row.unpaired_mde_pct
