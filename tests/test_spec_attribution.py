"""Per-position acceptance (scraped, recorded, reported, imported and exported) and the
attribution of a speculator cell's TPOT change to its verify step or its acceptance."""

from __future__ import annotations

import json
import math

import pytest

from e2e import metrics as m
from e2e.analysis.sweep.aggregate import summarize
from e2e.metrics import position_key
from e2e.plan import RunSpec
from e2e.interop.importing import ImportOptions
from e2e.interop.vllm_bench import check_result, to_run
from e2e.interop.vllm_bench_writer import to_result
from e2e.render import render_github, report_json
from e2e.render.markdown import render_markdown
from e2e.render.plots import render_plots
from e2e.results.records import SpecCounters, RunMetrics, RunRecord, ServerInfo

# As vLLM 0.32 exposes them (prometheus_client: a Counter named ..._per_pos gets _total)
EXPOSITION = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 100.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 210.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 150.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 20.0
"""


def test_per_position_counters_are_summed_over_engines_by_position():
    c = m.spec_counters(EXPOSITION)
    assert c.accepted_per_pos == [170.0, 120.0, 70.0]
    rates = m.per_position_rates(SpecCounters(), c)
    assert rates == pytest.approx([0.85, 0.60, 0.35])
    length, _ = m.acceptance(SpecCounters(), c)
    assert sum(rates) == pytest.approx(length - 1.0)  # the rates sum to acceptance length − 1


def test_hostile_position_labels_and_values_are_left_out():
    text = (EXPOSITION
            + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="x"} 5\n'
            + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="999999"} 5\n'
            + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="-1"} 5\n'
            + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="4"} NaN\n'
            + 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="5"} -3\n')
    assert m.per_position(text, m.VLLM.accepted_per_pos_metric) == [170.0, 120.0, 70.0]
    assert m.per_position("not prometheus {{{", m.VLLM.accepted_per_pos_metric) == []
    assert m.per_position(EXPOSITION, "") == []


def test_rates_are_deltas_over_the_measured_load_and_none_without_drafts():
    before = SpecCounters(drafts=10, accepted=20, accepted_per_pos=[9.0, 7.0, 4.0])
    after = SpecCounters(drafts=30, accepted=50, accepted_per_pos=[27.0, 17.0, 6.0])
    assert m.per_position_rates(before, after) == pytest.approx([0.9, 0.5, 0.1])
    assert m.per_position_rates(before, before) is None
    assert m.per_position_rates(SpecCounters(), SpecCounters(drafts=5)) is None  # no counter
    run = m.summarize_run([], counters_before=before, counters_after=after)
    assert run.acceptance_rates_per_pos == pytest.approx([0.9, 0.5, 0.1])
    assert m.metric_value(run, position_key(2)) == pytest.approx(0.5)
    assert m.metric_value(run, position_key(4)) is None


def _record(arm: str, repeat: int, *, tpot: float, length: float, rates: list[float],
            server_tpot: float | None = None) -> RunRecord:
    spec = RunSpec(arm=arm, concurrency=1, dspark=True, prompts=8, input_len=1031,
                   output_len=128, seed=0, warmup_requests=2, repeat=repeat)
    mx = RunMetrics(requests=8, ok_requests=8, duration_s=4.0, input_tokens=8 * 1031,
                    output_tokens=8 * 128, tpot_ms_mean=tpot, tpot_ms_median=tpot,
                    server_tpot_ms_mean=server_tpot, acceptance_length=length,
                    acceptance_rates_per_pos=rates, ms_per_verify_step=tpot * length)
    return RunRecord(experiment="exp", run_id=spec.run_id, spec=spec, arm_settings={},
                     config={"name": "exp", "report_from_run": 1,
                             "arms": {"main": {}, "main-repeat": {}, "delay": {"x": 1}}},
                     server=ServerInfo(argv=["vllm"], env={}, base_url="http://h", model="m"),
                     provenance={}, started_at=f"2026-12-02T00:0{repeat}:00+00:00",
                     finished_at=f"2026-12-02T00:0{repeat}:30+00:00", metrics=mx, valid=True)


# Three rounds; the host's level drifts between rounds (the same factor for every arm).
_DRIFT = (1.00, 1.06, 0.97)
_ACCEPT = (3.40, 3.55, 3.47)  # acceptance moves from round to round (random prompts)
_JITTER = {"main": (0.000, 0.004, -0.003), "main-repeat": (0.003, -0.002, 0.001),
           "delay": (-0.002, 0.001, 0.003)}


def _sweep(verify_factor: float, accept_factor: float) -> list[RunRecord]:
    """main, main-repeat and delay; delay's verify step × ``verify_factor``, its acceptance
    length × ``accept_factor``; TPOT = verify step / acceptance length, as in a real run."""
    out = []
    for r, (drift, length) in enumerate(zip(_DRIFT, _ACCEPT), start=1):
        for arm in ("main", "main-repeat", "delay"):
            j = _JITTER[arm][r - 1]
            verify = 8.0 * drift * (1 + j) * (verify_factor if arm == "delay" else 1.0)
            al = length * (1 + j / 4) * (accept_factor if arm == "delay" else 1.0)
            rates = [min(1.0, (al - 1) * w) for w in (0.45, 0.33, 0.22)]
            out.append(_record(arm, r, tpot=verify / al, length=al, rates=rates,
                               server_tpot=1.01 * verify / al))
    return out


def test_a_verify_step_delay_is_put_on_the_verify_step_not_on_acceptance():
    summary = summarize(_sweep(verify_factor=1.10, accept_factor=1.0))
    by = {(a.arm, a.source): a for a in summary.attributions}
    assert set(by) == {(arm, src) for arm in ("main-repeat", "delay") for src in ("client", "server")}
    a = by[("delay", "client")]
    assert a.verify.metric == "ms_per_verify_step" and a.tpot.metric == "tpot_ms_mean"
    assert a.verify.interval[0] > 5.0 and a.verify.pct == pytest.approx(10.0, abs=1.0)
    lo, hi = a.acceptance.interval
    assert lo < 0.0 < hi
    assert a.reading == "verify step" and "the kernel's" in a.sentence
    # the identity holds on the model's contrasts of the same runs
    assert a.consistent and abs(a.residual) < 1e-9
    assert math.log(a.tpot.ratio) == pytest.approx(
        math.log(a.verify.ratio) - math.log(a.acceptance.ratio), abs=1e-12)
    assert by[("delay", "server")].verify.metric == "server_ms_per_verify_step"
    assert by[("main-repeat", "client")].reading == "neither"


def test_a_change_of_acceptance_alone_is_put_on_acceptance():
    summary = summarize(_sweep(verify_factor=1.0, accept_factor=0.85))
    a = next(a for a in summary.attributions if a.arm == "delay" and a.source == "client")
    assert a.reading == "acceptance"
    assert a.tpot.pct > 10.0  # TPOT rose because fewer tokens came per step
    lo, hi = a.verify.interval
    assert lo < 0.0 < hi


def test_no_attribution_without_the_speculator_or_acceptance():
    recs = _sweep(1.1, 1.0)
    plain = [r.model_copy(update={"metrics": r.metrics.model_copy(update={
        "acceptance_length": None, "ms_per_verify_step": None})}) for r in recs]
    assert summarize(plain).attributions == ()


def test_report_json_and_pr_comment_carry_the_attribution_and_the_per_position_rates():
    summary = summarize(_sweep(verify_factor=1.10, accept_factor=1.0))
    md = render_markdown(summary)
    assert "## Attribution: verify step or acceptance" in md
    line = next(x for x in md.splitlines() if x.startswith("- **delay** vs main") and "client" in x)
    assert "verify step +" in line and "acceptance length " in line and "the kernel's" in line
    assert "acceptance rate, draft position 3" in md
    assert "acceptance-per-position-c1-dspark.png" in md
    doc = json.loads(json.dumps(report_json(summary)))
    att = next(a for a in doc["attributions"] if a["arm"] == "delay" and a["tpot_from"] == "client")
    assert att["reading"] == "verify step"
    assert att["verify_step"]["interval_pct"]["low"] > 5.0
    assert att["acceptance_length"]["interval_pct"]["low"] < 0 < att["acceptance_length"]["interval_pct"]["high"]
    assert {c["metric"] for c in doc["comparisons"]} >= {position_key(i) for i in (1, 2, 3)}
    comment = render_github(summary)
    assert "#### Verify step or acceptance" in comment
    assert "**delay** c1 dspark: mean TPOT +" in comment and "the kernel's" in comment


@pytest.mark.slow  # matplotlib: every plot of the report (~9 s here)
def test_the_per_position_plot_replaces_one_plot_per_position():
    plots = render_plots(summarize(_sweep(verify_factor=1.10, accept_factor=1.0)))
    assert plots["acceptance-per-position-c1-dspark.png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert not any(name.startswith("acceptance_rate_pos") for name in plots)


def test_per_position_rates_survive_vllm_bench_export_and_import():
    rec = _record("main", 1, tpot=2.0, length=3.2, rates=[0.9, 0.8, 0.5])
    doc = to_result(rec, None)
    assert doc["spec_decode_per_position_acceptance_rates"] == [0.9, 0.8, 0.5]
    doc["spec_decode_acceptance_rate"] = 73.3
    doc.update(date="20261202-000130", completed=8, failed=0, duration=4.0)
    back = to_run(check_result(doc, "x.json"), ImportOptions(experiment="imp", dspark=True),
                  source="x.json")
    assert back.record.metrics.acceptance_rates_per_pos == [0.9, 0.8, 0.5]


@pytest.mark.parametrize("bad", [[1.5], [-0.1], ["a"], [0.5] * (m.MAX_POSITIONS + 1)])
def test_a_bad_per_position_list_in_a_vllm_bench_file_is_refused(bad):
    from e2e.errors import ConfigError

    doc = {"completed": 1, "duration": 1.0, "num_prompts": 1,
           "spec_decode_per_position_acceptance_rates": bad}
    with pytest.raises(ConfigError, match="spec_decode_per_position_acceptance_rates"):
        check_result(doc, "x.json")
