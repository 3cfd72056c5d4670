"""One headline rule (``e2e.analysis.sweep.headline_metric``): the report, ``--until-settled``, the
nightly and ``e2e bisect`` given the same cell judge the same metric; the nightly's and bisect's
"from the server's TPOT" is an explicit choice on top of it, naming the same figure's twin."""

from __future__ import annotations

import pytest

from e2e.analysis.nightly.judge import Rules
from e2e.analysis.nightly.metrics import NIGHTLY_METRICS, judged_metrics
from e2e.analysis.sweep.headline import headline_metric, server_twin
from e2e.analysis.sweep.summary import metric
from e2e.commands._bisect import _defaults
from e2e.nightly.settings import NightlySettings, load_nightly
from e2e.results import CellKey
from e2e.pipeline import headline_pairs
from e2e.render.markdown import render_markdown, _metric_name
from test_render import golden_records

CELLS = [(1, "base"), (4, "base"), (1, "dspark")]


@pytest.fixture(scope="module")
def summary():
    from e2e.analysis.sweep.aggregate import summarize

    return summarize(golden_records())


def test_the_rule():
    assert [headline_metric(c, m) for c, m in CELLS] == [
        "tpot_ms_mean", "tpot_ms_median", "ms_per_verify_step"]
    assert [server_twin(headline_metric(c, m)) for c, m in CELLS] == [
        "server_tpot_ms_mean", "server_tpot_ms_mean", "server_ms_per_verify_step"]


@pytest.mark.parametrize("concurrency,mode", CELLS)
def test_report_until_settled_nightly_and_bisect_agree(summary, default_experiment,
                                                         concurrency, mode):
    expected = headline_metric(concurrency, mode)
    # the report: the Headline table's row for this cell names the metric
    text = render_markdown(summary)
    head = text.split("## Headline", 1)[1].split("\n\n", 2)[1]
    rows = [r.split(" | ")[:2] for r in head.splitlines()[2:]]
    assert [f"| {concurrency}", _metric_name(metric(expected), mode)] in rows
    # --until-settled: the pairs it decides on are this metric's cells, one per comparison
    # (the primary comparisons: every arm but the A/A checks; runs keyed by (round, host))
    wanted = [c for c in summary.comparisons if c.role == "primary"
              and (c.concurrency, c.spec_mode, c.metric) == (concurrency, mode, expected)]
    assert wanted and all(c.role == "primary" for c in wanted)
    got = [pair for pair in headline_pairs(summary)]
    for comp in wanted:
        arm = summary.cell(comp.arm, concurrency, mode, expected)
        base = summary.cell(comp.baseline, concurrency, mode, expected)
        assert (dict(zip(arm.blocks(), arm.values)), dict(zip(base.blocks(), base.values))) in got
    # the nightly with its default thresholds judges exactly this metric in this cell
    settings = NightlySettings()
    assert judged_metrics(settings.thresholds, mode, concurrency) == [expected]
    rules = Rules.from_settings(settings)
    judged = [m.key for m in NIGHTLY_METRICS
              if rules.threshold(CellKey("load", "pr", concurrency, mode, m.key)) is not None]
    assert judged == [expected]
    # bisect without a nightly config, and with the embedded one (which builds the headline
    # from the server's TPOT: the explicit choice on top of the rule)
    assert _defaults(None, concurrency, mode, None, None, None, default_experiment)[0] == expected
    nightly = load_nightly(None)
    assert nightly.settings.verify_step_from == "server"
    chosen, _, threshold = _defaults(nightly, concurrency, mode, None, None, None, None)
    assert chosen == server_twin(expected)
    assert threshold == nightly.settings.thresholds.get(mode, {}).get("headline", 2.0)
