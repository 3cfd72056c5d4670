"""The dashboard's pages (``e2e.render.site_files``) byte for byte on a hand-made store, two
nights of one load cell (regressed on the second, with its change point) and one GSM8K cell,
an outputs finding, a host name with markup characters, and on an empty store, against
``tests/golden/dashboard/``. The golden bytes were written by the hand-built pages before
they became Jinja2 templates (``E2E_UPDATE_GOLDEN=1`` rewrites them). plotly's own script of
each plot (the figure as JSON, which changes with plotly's version) is left out of the
comparison; tests/test_dashboard.py draws the plots in a browser."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from e2e.render import SiteData, site_files
from e2e.results import (GSM8K_METRIC, GSM8KAgreement, HistoryCell, StoredChangePoint,
                         StoredNight, StoredVerdict)

GOLDEN = Path(__file__).parent / "golden" / "dashboard"
EXPERIMENT = "nightly"
CONFIG = "c0ffee" * 10 + "abcd"
HOST = "runner<1>&b"
DATES = ("2026-02-01", "2026-02-02")
# the script each plot of plotly.io.to_html carries (it starts with plotly's environment)
PLOTLY_SCRIPT = re.compile(r"(<script>)\s*window\.PLOTLYENV.*?(</script>)", re.S)


def _row(date: str, kind: str, conc: int, metric: str, median: float, verdict: str,
         pct: float, baseline: str | None, status: str) -> HistoryCell:
    return HistoryCell.from_row({"date": date, "experiment": EXPERIMENT, "config_hash": CONFIG,
            "night_status": status, "kind": kind, "arm": "main", "concurrency": conc,
            "spec_mode": "base", "metric": metric, "n": 5, "median": median,
            "low": median * 0.99, "high": median * 1.01, "verdict": verdict, "pct": pct,
            "baseline_date": baseline, "engine": "vllm", "engine_version": "0.32.0",
            "engine_git_sha": date.replace("-", "") * 5, "host": HOST,
            "build_git_commit": None})


def two_nights() -> SiteData:
    history = [
        _row(DATES[0], "load", 1, "server_tpot_ms_mean", 10.0, "no baseline", math.nan, None,
             "pass"),
        _row(DATES[0], "gsm8k", 0, "gsm8k_strict_match", 0.70, "no baseline", math.nan, None,
             "pass"),
        _row(DATES[1], "load", 1, "server_tpot_ms_mean", 10.8, "regressed", 8.0, DATES[0],
             "regression"),
        _row(DATES[1], "gsm8k", 0, "gsm8k_strict_match", 0.68, "noise", -2.0, DATES[0],
             "regression")]
    nights = [StoredNight.from_row(dict(
                  date=d, experiment=EXPERIMENT, config_hash=CONFIG, status=status, host=HOST,
                  baseline_date=baseline, outputs=outputs,
                  report_path=f"nightly/{d}/nightly/report/report.md"))
              for d, status, baseline, outputs in [
                  (DATES[0], "pass", None, None),
                  (DATES[1], "regression", DATES[0],
                   '[{"line": "main: 2 of 50 prompts diverge (<beyond the A/A> & more)", '
                   '"finding": true}, {"line": "aa: as the A/A", "finding": false}]')]]
    change = StoredChangePoint.from_row(dict(
        date=DATES[1], experiment=EXPERIMENT, config_hash=CONFIG, kind="load", arm="main",
        concurrency=1, spec_mode="base", metric="server_tpot_ms_mean", start=DATES[1],
        before=10.0, after=10.8, pct=8.0, p_value=0.0123, worse=True, regression=True))
    verdicts = [StoredVerdict.from_row(dict(
                    date=d, experiment=EXPERIMENT, config_hash=CONFIG, kind="gsm8k", arm="main",
                    concurrency=0, spec_mode="base", metric=GSM8K_METRIC, verdict=v, p_value=p))
                for d, v, p in [(DATES[0], "no baseline", None), (DATES[1], "noise", 1.0)]]
    gsm8k = [GSM8KAgreement(night=nights[0].night, arm="main",
                            run_dir=f"nightly/{DATES[0]}/nightly/gsm8k/base-n50/main",
                            documents=50, right=35, first=True),
             GSM8KAgreement(night=nights[1].night, arm="main",
                            run_dir=f"nightly/{DATES[1]}/nightly/gsm8k/base-n50/main",
                            documents=50, right=34, first=True, lost=1, gained=0, shared=50)]
    return SiteData(history=history, nights=nights, changes=[change], verdicts=verdicts,
                    gsm8k=gsm8k, link_base="https://ci.example.org/results")


CASES = {"two-nights": two_nights, "empty": lambda: SiteData(history=[], nights=[])}


def pages(data: SiteData) -> dict[str, str]:
    return {name: body.decode("utf-8") for name, body in site_files(data).items()
            if name.endswith(".html")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pages_are_the_golden_bytes(case):
    made = {name: PLOTLY_SCRIPT.sub(r"\1\2", text).encode("utf-8")
            for name, text in pages(CASES[case]()).items()}
    folder = GOLDEN / case
    if os.environ.get("E2E_UPDATE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name, body in made.items():
            (folder / name).write_bytes(body)
    assert sorted(made) == sorted(p.name for p in folder.glob("*.html"))
    for name, body in made.items():
        assert body == (folder / name).read_bytes(), name


def test_the_store_text_is_escaped_in_pages_and_plots():
    """The host name's markup characters are text on the pages (autoescape) and in the
    plots' hover texts (escaped for plotly), and the golden pages hold them so."""
    site = pages(two_nights())
    cell = site["cell-nightly-c0ffeec0-main-load-c1-base-server_tpot_ms_mean.html"]
    assert "host: runner&lt;1&gt;&amp;b" in cell            # a hover text of the plot
    assert "<td>runner&lt;1&gt;&amp;b</td>" in site["index.html"]
    assert HOST not in cell and HOST not in site["index.html"]
