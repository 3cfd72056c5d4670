"""The nightly dashboard (e2e.render.site_files) in a real browser: ten synthetic nights, one
cell stepping up 8 % from night 6, go through the nightly's own judgement and the SQLite
store; the site written by ``e2e dashboard`` is loaded from disk (file://) in headless
Chromium, which must draw every cell's plot, list the regression, mark the change point at
night 6 on the cell's page, and log no console error."""

from __future__ import annotations

import re
import shutil
import tomllib

import numpy as np
import pytest
from typer.testing import CliRunner

import chromium
from conftest import ROOT, alone_nightly_raw
from e2e.nightly.assess import assess_night, read_samples
from e2e.nightly.night import night_of
from e2e.nightly.settings import parse_nightly
from e2e.results import GSM8K_METRIC
from e2e.results import night_rows, open_store
from e2e.results.gsm8k import VERDICTS_FILE, SampleVerdict, write_verdicts
from e2e.results import CellKey, NightCell

pytestmark = pytest.mark.slow  # the whole module is the slow tier

STEP = CellKey("load", "main", 1, "base", "server_tpot_ms_mean")   # judged at 2 %
FLAT = CellKey("load", "main", 4, "base", "server_tpot_ms_mean")
EXTRA = CellKey("load", "main", 1, "base", "ttft_ms_mean")           # recorded, not judged


GSM = CellKey("gsm8k", "main", 0, "base", GSM8K_METRIC)


def config():
    raw = alone_nightly_raw()
    raw["nightly"].update(concurrencies=[1, 4], spec_modes=["base"],
                          thresholds={"base": {"server_tpot_ms_mean": 2.0}})
    raw["nightly"]["gsm8k"] = {"enabled": True, "limit": 50, "repeats": 2}
    return parse_nightly(raw)


def gsm8k_night(results, date: str, lost: set[int]) -> NightCell:
    """Two fresh servers' verdicts.jsonl of 50 documents (35 right, less ``lost``), written
    where a night writes them."""
    dirs = []
    for label in ("main", "main.r2"):
        rel = f"nightly/{date}/nightly/gsm8k/base-n50/{label}"
        write_verdicts(results / rel / VERDICTS_FILE,
                       [SampleVerdict(doc_id=d, prompt_hash=f"h{d}", strict=d < 35 and d not in lost)
                        for d in range(50)])
        dirs.append(rel)
    acc = (35 - len(lost)) / 50
    return NightCell(GSM, (acc, acc), (1, 2), tuple(dirs))


def dates(n: int) -> list[str]:
    return [f"2026-01-{d:02d}" for d in range(1, n + 1)]


def runs(level: float, seed: int) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    return tuple(float(level * (1 + rng.normal(0, 0.002))) for _ in range(5))


def ten_nights(results, cfg, *, step_at: int = 6, step: float = 1.08):
    """Judge and store ten nights as run_nightly does; night ``step_at`` (1-based) and later
    are ``step`` times slower in STEP. Returns the judgements."""
    out = []
    with open_store(None, results) as store:
        for i, date in enumerate(dates(10), start=1):
            level = 10.0 * (step if i >= step_at else 1.0)
            cells = [NightCell(STEP, runs(level, i), tuple(range(2, 7)),
                               tuple(f"nightly/{date}/nightly/main-c1-base-r{k}" for k in range(2, 7))),
                     NightCell(FLAT, runs(20.0, 100 + i), tuple(range(2, 7)),
                               tuple(f"nightly/{date}/nightly/main-c4-base-r{k}" for k in range(2, 7))),
                     NightCell(EXTRA, runs(50.0, 200 + i), tuple(range(2, 7)),
                               tuple(f"nightly/{date}/nightly/main-c1-base-r{k}" for k in range(2, 7)))]
            cells.append(gsm8k_night(results, date, {7} if i == 8 else set()))
            j = assess_night(night_of(cfg, date=date, results=results), cells,
                             expected=[STEP, FLAT, GSM], store=store)
            rows = night_rows(j, experiment="nightly", config_hash=cfg.config_hash,
                              recorded_at=f"{date}T03:00:00Z", cells=cells,
                              builds={"main": {"engine_distribution": "vllm",
                                               "engine_version": "0.32.0",
                                               "engine_git_sha": f"{i:02d}" * 20}},
                              arm_overrides={}, e2e_git_sha="e" * 40, host="runner-1")
            store.write_night(rows, judgement=j, paths={
                "night_dir": f"nightly/{date}/nightly",
                "report_path": f"nightly/{date}/nightly/report/report.md"},
                samples=read_samples(results, cells[-1].run_dirs))
            shutil.rmtree(results / "nightly" / date)  # a CI runner wiped before the next night
            out.append(j)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from e2e.cli import app

    root = tmp_path_factory.mktemp("dash")
    results = root / "results"
    judgements = ten_nights(results, config())
    out = root / "site"
    result = CliRunner().invoke(app, ["dashboard", "--results", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {"out": out, "judgements": judgements, "results": results}


def test_gsm8k_is_judged_from_the_store_when_the_files_are_gone(site):
    """Each night's folder is removed before the next night: the baseline night's GSM8K
    verdicts come from the store, so the cell is judged per document, never 'no samples'."""
    verdicts = [next(v for v in j.verdicts if v.key == GSM) for j in site["judgements"]]
    assert verdicts[0].verdict == "no baseline"
    assert [v.verdict for v in verdicts[1:]] == ["noise"] * 9
    assert verdicts[7].pct == pytest.approx(-2.0)     # night 8 lost document 7
    assert verdicts[8].pct == pytest.approx(0.0)      # night 9 has it back: as night 5, its baseline


def test_the_judgement_sees_the_step_from_night_6(site):
    last = site["judgements"][-1]
    (change,) = [c for c in last.changes if c.key == STEP]
    assert change.start == "2026-01-06" and change.worse
    night6 = site["judgements"][5]
    assert next(v for v in night6.verdicts if v.key == STEP).verdict == "regressed"


def test_site_is_self_contained(site):
    out = site["out"]
    names = sorted(p.name for p in out.iterdir())
    assert names.count("plotly.min.js") == 1 and "index.html" in names
    cells = [n for n in names if n.startswith("cell-")]
    assert len(cells) == 4
    for page in out.glob("*.html"):
        text = page.read_text()
        assert "cdn." not in text and "https://" not in text, page.name  # nothing from a network
        if "Plotly.newPlot" in text or "Plotly.react" in text:
            assert '<script src="plotly.min.js"' in text


def test_dashboard_in_headless_chromium(site):
    chromium.browser_or_skip()
    out = site["out"]
    step_page = next(out.glob("cell-*-main-load-c1-base-server_tpot_ms_mean.html"))
    with chromium.Browser() as browser:
        index = browser.page(out.joinpath("index.html").as_uri())
        # every cell's plot was drawn (plotly puts an SVG in each plot's div)
        plots = index.eval("Array.from(document.querySelectorAll('.cell-plot')).map("
                           "d => [d.id, d.querySelectorAll('svg.main-svg').length > 0])")
        assert len(plots) == 4 and all(drawn for _, drawn in plots), plots
        regressions = index.eval("Array.from(document.querySelectorAll('#regressions li'))"
                                 ".map(li => li.textContent)")
        assert any("change point started 2026-01-06" in r for r in regressions), regressions
        assert index.errors == [], index.errors

        cell = browser.page(step_page.as_uri())
        assert cell.eval("document.querySelectorAll('#cell-plot svg.main-svg').length") > 0
        # the change point is drawn on the plot at night 6 and listed below it
        marks = cell.eval("Array.from(document.querySelectorAll('#cell-plot .annotation-text'))"
                          ".map(t => t.textContent)")
        assert any("started 2026-01-06" in m for m in marks), marks
        assert cell.eval("document.querySelector('#changepoints li').dataset.start") == "2026-01-06"
        assert cell.eval("document.querySelectorAll('#cell-plot .shapelayer path').length") >= 1
        verdicts = cell.eval("Array.from(document.querySelectorAll('tr.night')).map("
                             "r => [r.dataset.date, r.dataset.verdict])")
        assert ["2026-01-06", "regressed"] in verdicts and len(verdicts) == 10
        assert cell.errors == [], cell.errors

        gsm8k = browser.page(out.joinpath("gsm8k.html").as_uri())
        assert gsm8k.eval("document.querySelectorAll('#gsm8k-plot svg.main-svg').length") > 0
        rows = gsm8k.eval("Array.from(document.querySelectorAll('#gsm8k tr')).map("
                          "r => r.textContent)")
        assert len(rows) == 1 + 20                       # a row per night and server
        assert any("2026-01-08" in r and "1 / 0 of 50" in r and "34" in r for r in rows), rows
        assert gsm8k.errors == [], gsm8k.errors

        compare = browser.page(out.joinpath("compare.html").as_uri() + "?a=4&b=5")
        text = compare.eval("document.getElementById('table').textContent")
        assert "2026-01-05" in text and "2026-01-06" in text and "+8." in text
        assert compare.eval("document.querySelectorAll('#compare-plot svg.main-svg').length") > 0
        sides = compare.eval("document.getElementById('sides').textContent")
        assert "A: 2026-01-05" in sides and "build 0.32.0 0505" in sides and "runner-1" in sides
        assert compare.errors == [], compare.errors


def test_a_broken_page_is_caught(tmp_path):
    """The browser check can fail: a page with a script error is reported."""
    chromium.browser_or_skip()
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    with chromium.Browser() as browser:
        p = browser.page(page.as_uri(), settle_s=0.5)
        assert any(re.search("undefinedFunction", e) for e in p.errors), p.errors


def test_serve_serves_the_site_on_localhost(site, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "e2e.cli", "dashboard", "--results", str(site["results"]),
         "--out", str(tmp_path / "served"), "--serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for line in proc.stdout:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if found:
                break
        else:
            raise AssertionError("no URL printed")
        page = urllib.request.urlopen(found.group(0) + "index.html", timeout=30).read()
        assert b'id=\'regressions\'' in page
        js = urllib.request.urlopen(found.group(0) + "plotly.min.js", timeout=30).read()
        assert len(js) > 1_000_000
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_the_report_page_in_headless_chromium(tmp_path):
    """report/index.html of a calibration-shaped sweep: its tables, and every plot loaded."""
    chromium.browser_or_skip()
    from e2e.render import build_report
    from test_render import calibration_records, write_results

    exp = write_results(tmp_path, calibration_records())
    out = build_report(exp)
    with chromium.Browser() as browser:
        page = browser.page(out.html_path.as_uri())
        images = page.eval("Array.from(document.images).map(i => [i.alt, i.naturalWidth])")
        assert len(images) == len(out.plot_paths) and all(w > 0 for _, w in images), images
        assert images[0][0].startswith("forest-")
        assert page.eval("document.querySelectorAll('table').length") >= 2
        assert page.eval("document.querySelectorAll('span.slower').length") >= 3
        assert page.errors == [], page.errors
