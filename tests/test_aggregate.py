"""RunRecords -> cells, comparisons and warnings (e2e.analysis.sweep.aggregate), on hand-made records."""

from __future__ import annotations

import math
from typing import Any

import pytest

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.frame import runs_frame
from e2e.analysis.sweep.summary import METRICS, Summary
from e2e.plan import RunSpec
from e2e.results.records import RunMetrics, RunRecord, ServerInfo

ARMS_CONFIG = {
    "main": {"description": "the engine as it is", "plugin": {"packing": "main"}},
    "main-repeat": {"description": "main again", "plugin": {"packing": "main"}},  # A/A
    "flag-off": {"plugin": {"packing": "inplace", "draft_update": False}},
    "pr": {"plugin": {"packing": "inplace", "draft_update": True}},
}


def make_record(
    arm: str,
    concurrency: int,
    repeat: int,
    *,
    dspark: bool = False,
    tpot: float = 10.0,
    tpot_median: float | None = None,
    ttft: float = 50.0,
    throughput: float = 100.0,
    acceptance: float | None = None,
    valid: bool = True,
    reasons: tuple[str, ...] = (),
    report_from_run: int | None = 2,
    experiment: str = "exp",
    arms: dict[str, Any] | None = None,
    metrics: bool = True,
    host: str | None = None,
) -> RunRecord:
    """A RunRecord as the runner would write it; ms per verify step = tpot × acceptance."""
    spec = RunSpec(arm=arm, concurrency=concurrency, dspark=dspark, prompts=32 * concurrency,
                   input_len=1031, output_len=509, seed=0, warmup_requests=2, repeat=repeat)
    config: dict[str, Any] = {"name": experiment, "arms": arms if arms is not None else ARMS_CONFIG}
    if report_from_run is not None:
        config["report_from_run"] = report_from_run
    run_metrics = RunMetrics(
        requests=32 * concurrency, ok_requests=32 * concurrency, duration_s=10.0,
        input_tokens=1031 * 32 * concurrency, output_tokens=509 * 32 * concurrency,
        ttft_ms_mean=ttft, tpot_ms_mean=tpot,
        tpot_ms_median=tpot if tpot_median is None else tpot_median,
        output_throughput_tok_s=throughput,
        acceptance_length=acceptance,
        ms_per_verify_step=None if acceptance is None else tpot * acceptance,
    )
    return RunRecord(
        experiment=experiment, run_id=spec.run_id, spec=spec, arm_settings={}, config=config,
        server=ServerInfo(argv=["vllm"], env={}, base_url="http://127.0.0.1:8000", model="m"),
        provenance={"host": {"hostname": host}} if host else {}, started_at="2026-11-29T00:00:00Z", finished_at="2026-11-29T00:01:00Z",
        metrics=run_metrics if metrics else None, valid=valid, invalid_reasons=list(reasons),
    )


def cell_runs(arm: str, conc: int, tpots: list[float], **kw: Any) -> list[RunRecord]:
    """Runs 1..N of one cell with the given mean TPOTs (run 1 is the warmup)."""
    return [make_record(arm, conc, i, tpot=t, **kw) for i, t in enumerate(tpots, start=1)]


def test_frame_has_one_row_per_run_and_every_metric() -> None:
    frame = runs_frame(cell_runs("main", 1, [9.0, 10.0, 11.0]))
    assert list(frame["repeat"]) == [1, 2, 3]
    assert {m.key for m in METRICS} <= set(frame.columns)
    assert math.isnan(frame.loc[0, "acceptance_length"])


def test_cell_is_median_and_range_of_runs_from_report_from_run() -> None:
    s = summarize(cell_runs("main", 1, [99.0, 6.65, 6.74, 6.73]))
    cell = s.cell("main", 1, "base", "tpot_ms_mean")
    assert cell is not None
    assert cell.repeats == (2, 3, 4)
    assert (cell.median, cell.low, cell.high) == (6.73, 6.65, 6.74)
    assert s.counts.total == 4 and s.counts.reported == 3 and s.counts.warmup == 1
    assert s.report_from_run == 2


def test_report_from_run_override_and_config_value() -> None:
    recs = cell_runs("main", 1, [1.0, 2.0, 3.0, 4.0], report_from_run=3)
    assert summarize(recs).cell("main", 1, "base", "tpot_ms_mean").values == (3.0, 4.0)
    assert summarize(recs, report_from_run=1).cell("main", 1, "base", "tpot_ms_mean").values == (
        1.0, 2.0, 3.0, 4.0)
    missing = cell_runs("main", 1, [1.0, 2.0, 3.0], report_from_run=None)
    assert summarize(missing).report_from_run == 2


def test_invalid_runs_are_never_averaged_and_are_warned_next_to_the_cell() -> None:
    recs = cell_runs("main", 4, [10.0, 10.0, 10.1, 10.2])
    recs.append(make_record("main", 4, 5, tpot=1000.0, valid=False, reasons=("3 requests failed",)))
    s = summarize(recs)
    cell = s.cell("main", 4, "base", "tpot_ms_mean")
    assert cell.values == (10.0, 10.1, 10.2)
    assert s.counts.invalid == 1
    msgs = [w.message for w in s.warnings_for("main", 4, "base", "tpot_ms_mean")]
    assert any("1 invalid run excluded" in m and "3 requests failed" in m for m in msgs)
    # the warning applies to every metric of the cell
    assert s.warnings_for("main", 4, "base", "ttft_ms_mean")


def test_few_runs_and_spread_warnings() -> None:
    s = summarize(cell_runs("main", 1, [5.0, 10.0, 10.6]))  # 2 reported, spread 5.8 %
    msgs = [w.message for w in s.warnings_for("main", 1, "base", "tpot_ms_mean")]
    assert any("only 2 reported runs" in m for m in msgs)
    assert any("spread 5.8 %" in m for m in msgs)
    # throughput is identical across runs: no spread warning on it
    assert not any("spread" in w.message for w in s.warnings_for("main", 1, "base", "output_throughput_tok_s"))
    calm = summarize(cell_runs("main", 1, [5.0, 10.0, 10.2, 10.4]))  # spread 3.9 %, 3 runs
    assert not calm.warnings


def test_acceptance_moving_more_than_10_percent_is_warned_on_acceptance_only() -> None:
    # TPOT follows acceptance so that ms per verify step stays put, as on a real server
    recs = [make_record("main", 1, i, dspark=True, tpot=9.0 / a, acceptance=a)
            for i, a in enumerate([1.7, 1.64, 1.94, 1.8], start=1)]
    s = summarize(recs)
    acc = [w.message for w in s.warnings_for("main", 1, "dspark", "acceptance_length")]
    assert any("acceptance length moved 16.7 %" in m for m in acc)
    assert not s.warnings_for("main", 1, "dspark", "ms_per_verify_step")
    small = [make_record("main", 1, i, dspark=True, tpot=9.0 / a, acceptance=a)
             for i, a in enumerate([1.0, 1.80, 1.85, 1.90], start=1)]  # 5.4 %: under 10 %
    quiet = summarize(small)
    assert not quiet.warnings_for("main", 1, "dspark", "acceptance_length")
    assert not quiet.warnings_for("main", 1, "dspark", "ms_per_verify_step")


def test_ms_per_verify_step_falls_back_to_tpot_times_acceptance() -> None:
    rec = make_record("main", 1, 2, dspark=True, tpot=4.0, acceptance=1.5)
    rec = rec.model_copy(update={"metrics": rec.metrics.model_copy(update={"ms_per_verify_step": None})})
    s = summarize([rec])
    assert s.cell("main", 1, "dspark", "ms_per_verify_step").median == pytest.approx(6.0)


@pytest.mark.slow
def test_arm_order_is_baseline_then_config_order() -> None:
    recs = []
    for arm in ["pr", "flag-off", "main-repeat", "main"]:
        recs += cell_runs(arm, 1, [10.0, 10.0, 10.0, 10.0],
                          arms={"pr": {}, "main": {}, "flag-off": {}, "main-repeat": {}})
    s = summarize(recs)
    assert s.arms == ("main", "pr", "flag-off", "main-repeat")
    assert s.compared_arms == ("pr", "flag-off", "main-repeat")


@pytest.mark.parametrize(
    ("key", "pr_factor", "expected"),
    [
        ("tpot_ms_mean", 0.9, "faster"),   # times read faster / slower
        ("tpot_ms_mean", 1.1, "slower"),
        ("output_throughput_tok_s", 1.1, "higher"),  # other metrics read higher / lower
        ("output_throughput_tok_s", 0.9, "lower"),
        ("acceptance_length", 1.1, "higher"),
        ("ms_per_verify_step", 1.1, "slower"),
    ],
)
def test_verdict_direction_per_metric(key: str, pr_factor: float, expected: str) -> None:
    noise = [1.0, 0.99, 1.0, 1.01]
    recs = []
    for arm, f in (("main", 1.0), ("pr", pr_factor)):
        for i, e in enumerate(noise, start=1):
            kw: dict[str, Any] = dict(tpot=10.0 * e, throughput=100.0 * e, acceptance=1.8 * e, dspark=True)
            if key == "tpot_ms_mean":
                kw["tpot"] *= f
            elif key == "output_throughput_tok_s":
                kw["throughput"] *= f
            elif key == "acceptance_length":
                kw["acceptance"] *= f
            else:
                kw["tpot"] *= f  # ms/verify = tpot × acceptance
            recs.append(make_record(arm, 1, i, **kw))
    comp = summarize(recs).comparison("pr", 1, "dspark", key)
    assert comp is not None
    assert comp.verdict == expected
    assert comp.pct == pytest.approx((pr_factor - 1) * 100)
    assert comp.interval[0] < comp.pct < comp.interval[1]


def test_a_a_with_identical_distributions_is_not_called_different() -> None:
    recs = cell_runs("main", 1, [7.0, 6.70, 6.75, 6.80]) + cell_runs("main-repeat", 1, [7.0, 6.78, 6.72, 6.74])
    s = summarize(recs)
    comp = s.comparison("main-repeat", 1, "base", "tpot_ms_mean")
    assert comp.verdict == "inconclusive"  # ±1.2 % noise at 3 rounds cannot show ±1 % equivalence
    assert comp.interval[0] < 0 < comp.interval[1]
    assert comp.method == "model" and comp.n_blocks == 3 and comp.df == 2  # 2 arms: the paired t
    assert comp.mde_pct is not None and comp.mde_pct > 1.0
    assert s.aa_arms == ("main-repeat",) and comp.role == "check" and comp.p_holm is None
    row = s.noise_row(1, "base", "tpot_ms_mean")
    assert row is not None and row.source == "A/A arm main-repeat: model residuals of 2 arms, 6 runs"
    assert row.df == comp.df and row.mde_pct == pytest.approx(comp.mde_pct)
    assert row.noise_pct == pytest.approx(comp.noise_pct)
    assert row.runs_for_target is not None and row.runs_for_target > 3


def test_one_reported_run_gives_no_interval() -> None:
    recs = cell_runs("main", 1, [7.0, 6.7]) + cell_runs("pr", 1, [7.0, 5.0, 5.1, 5.2])
    comp = summarize(recs).comparison("pr", 1, "base", "tpot_ms_mean")
    assert comp.interval is None and comp.verdict == "too few runs" and comp.method == "none"
    assert comp.mde_pct is None and comp.survives is None


def _drifting(arm: str, effect: float, noise: list[float]) -> list[RunRecord]:
    """Runs 1..5 whose level drifts up 4 % a round, as on a host warming up."""
    return [make_record(arm, 1, i, tpot=6.0 * effect * 1.04 ** i * (1 + e))
            for i, e in enumerate(noise, start=1)]


def test_blocked_comparison_cancels_drift_between_rounds() -> None:
    recs = (_drifting("main", 1.0, [0, 0.002, -0.001, 0.001, -0.002])
            + _drifting("pr", 0.97, [0, -0.001, 0.002, 0.0, 0.001]))
    comp = summarize(recs).comparison("pr", 1, "base", "tpot_ms_mean")
    assert comp.method == "model" and comp.n_blocks == 4
    assert comp.verdict == "faster"
    assert comp.pct == pytest.approx(-3.0, abs=0.3)
    assert -4.0 < comp.interval[0] < comp.interval[1] < -2.0
    # the same runs, unpaired, see the drift as noise
    lo, hi = comp.unpaired_interval
    assert lo < 0 < hi or (hi - lo) > 4 * (comp.interval[1] - comp.interval[0])
    assert comp.unpaired_mde_pct > 2 * comp.mde_pct


def test_round_without_a_partner_is_dropped_and_said() -> None:
    recs = (_drifting("main", 1.0, [0, 0.002, -0.001, 0.001, -0.002])
            + _drifting("pr", 0.97, [0, -0.001, 0.002, 0.0, 0.001]))
    recs = [r for r in recs if not (r.spec.arm == "pr" and r.spec.repeat == 5)]
    s = summarize(recs)
    comp = s.comparison("pr", 1, "base", "tpot_ms_mean")
    assert comp.method == "model" and comp.n_blocks == 3 and comp.dropped == 1
    assert comp.n_arm == 3 and comp.n_baseline == 4
    assert any("1 run without a partner" in w.message
               for w in s.warnings_for("pr", 1, "base", "tpot_ms_mean"))


def test_runs_on_different_hosts_are_different_blocks() -> None:
    main = [make_record("main", 1, i, tpot=t, host="a") for i, t in enumerate([7, 6.0, 6.1, 6.2], 1)]
    pr = [make_record("pr", 1, i, tpot=t, host="b") for i, t in enumerate([7, 5.8, 5.9, 6.0], 1)]
    comp = summarize(main + pr).comparison("pr", 1, "base", "tpot_ms_mean")
    assert comp.method == "welch" and comp.n_blocks == 0  # no round shares a host: nothing pairs
    same = [make_record("pr", 1, i, tpot=t, host="a") for i, t in enumerate([7, 5.8, 5.9, 6.0], 1)]
    assert summarize(main + same).comparison("pr", 1, "base", "tpot_ms_mean").method == "model"


def test_zero_spread_is_floored_and_warned() -> None:
    recs = cell_runs("main", 1, [7.0, 6.0, 6.0, 6.0]) + cell_runs("pr", 1, [7.0, 6.003, 6.003, 6.003])
    s = summarize(recs, min_effect_pct=0.0)
    comp = s.comparison("pr", 1, "base", "tpot_ms_mean")
    assert comp.noise_floored and comp.noise_pct == pytest.approx(0.1 * 2 ** 0.5)
    lo, hi = comp.interval
    assert lo < 0 < hi and hi - lo > 0.6  # 0.1 % per run floor, t with 2 df: never zero width
    assert comp.verdict == "equivalent"  # +0.05 % is not called real, however steady the runs
    assert any("no spread between the runs: noise floored at 0.1 % per run" in w.message
               for w in s.warnings_for("pr", 1, "base", "tpot_ms_mean"))


def test_noise_is_not_borrowed_across_concurrencies() -> None:
    """A steady cell beside a noisy one keeps its own noise: no floor at half the other cell's
    noise, no moderation toward it (both made intervals wrong where noise differs by cell)."""
    noisy = [7.0, 6.0, 6.3, 5.8]
    calm_runs = cell_runs("main", 1, [7.0, 6.0, 6.0, 6.0]) + cell_runs("pr", 1, [7.0, 5.4, 5.4, 5.4])
    recs = calm_runs + cell_runs("main", 4, noisy) + cell_runs("pr", 4, [7.0, 6.2, 6.0, 6.1])
    s = summarize(recs)
    calm = s.comparison("pr", 1, "base", "tpot_ms_mean")
    assert calm.noise_floored and calm.noise_pct == pytest.approx(0.1 * 2 ** 0.5)
    alone = summarize(calm_runs).comparison("pr", 1, "base", "tpot_ms_mean")
    assert calm.interval == pytest.approx(alone.interval) and calm.prior_df == 0.0
    assert s.pooled == ()


def test_equivalent_needs_the_interval_inside_the_band() -> None:
    base = [10.0, 10.00, 10.10, 9.95, 10.05, 10.02]
    same = [10.0, 10.01, 10.09, 9.96, 10.04, 10.03]
    recs = cell_runs("main", 1, base) + cell_runs("main-repeat", 1, same)
    comp = summarize(recs).comparison("main-repeat", 1, "base", "tpot_ms_mean")
    assert comp.verdict == "equivalent" and comp.tost_p < 0.05
    assert comp.role == "check" and comp.survives is None  # an A/A arm is not in the Holm family
    narrow = summarize(recs, equivalence_pct=0.05).comparison("main-repeat", 1, "base", "tpot_ms_mean")
    assert narrow.verdict == "inconclusive"


def test_holm_counts_the_primary_comparisons_and_marks_survivors() -> None:
    recs = (cell_runs("main", 1, [7.0, 6.00, 6.10, 6.05])
            + cell_runs("pr", 1, [7.0, 5.85, 5.90, 5.93])      # about −2.7 %, modest p
            + cell_runs("flag-off", 1, [7.0, 3.0, 3.05, 3.02]))  # −50 %: survives anything
    s = summarize(recs)
    # the family: the headline metric (mean TPOT at concurrency 1) of both arms, not the
    # other 3 metrics (secondary, unadjusted)
    assert s.n_comparisons == 2
    assert {c.arm for c in s.comparisons if c.p_holm is not None} == {"pr", "flag-off"}
    assert all(c.role == "secondary" and c.p_holm is None and c.survives is None
               for c in s.comparisons if c.metric != "tpot_ms_mean")
    big = s.comparison("flag-off", 1, "base", "tpot_ms_mean")
    assert big.verdict == "faster" and big.survives and big.p_holm >= big.p_value
    for c in s.comparisons:
        assert c.p_holm is None or c.p_holm >= c.p_value or c.verdict == "equivalent"


def test_missing_baseline_is_a_report_warning_without_comparisons() -> None:
    s = summarize(cell_runs("pr", 1, [1.0, 1.0, 1.0, 1.0]))
    assert s.comparisons == ()
    assert any("baseline arm 'main'" in w.message and w.arm is None for w in s.warnings)


def test_all_warmups_leaves_no_cell_but_a_warning() -> None:
    s = summarize([make_record("main", 1, 1)])
    assert s.cells == ()
    assert any("no reported runs (1 warmup, 0 invalid" in w.message for w in s.warnings)
    bad = summarize([make_record("main", 1, i, valid=False) for i in (1, 2)])
    assert any("no reported runs (0 warmup, 2 invalid" in w.message for w in bad.warnings)
    assert (bad.counts.warmup, bad.counts.invalid, bad.counts.reported) == (0, 2, 0)


def test_summary_is_immutable() -> None:
    s: Summary = summarize(cell_runs("main", 1, [1.0, 1.0, 1.0, 1.0]))
    with pytest.raises(AttributeError):
        s.baseline = "pr"  # type: ignore[misc]


def test_the_holm_family_is_the_primary_comparisons_of_every_cell_without_the_a_a_arm() -> None:
    recs = []
    for conc in (1, 4):
        recs += (cell_runs("main", conc, [7.0, 6.00, 6.10, 6.05])
                 + cell_runs("main-repeat", conc, [7.0, 6.01, 6.08, 6.06])
                 + cell_runs("pr", conc, [7.0, 5.70, 5.80, 5.76]))
    s = summarize(recs)
    family = [c for c in s.comparisons if c.p_holm is not None]
    # primary: mean TPOT at concurrency 1, median TPOT at 4; pr only (main-repeat is a check)
    assert sorted((c.concurrency, c.metric) for c in family) == [(1, "tpot_ms_mean"), (4, "tpot_ms_median")]
    assert {c.arm for c in family} == {"pr"} and s.n_comparisons == 2
    assert all(c.role == "check" and c.p_holm is None
               for c in s.comparisons if c.arm == "main-repeat")
    p = sorted(c.p_value for c in family)
    adjusted = sorted(c.p_holm for c in family)
    assert adjusted == pytest.approx([min(1, 2 * p[0]), max(min(1, 2 * p[0]), p[1])])
    # the other metrics: unadjusted and labelled secondary
    assert all(c.role == "secondary" for c in s.comparisons
               if c.arm == "pr" and (c.concurrency, c.metric) not in
               {(1, "tpot_ms_mean"), (4, "tpot_ms_median")})


def test_headline_pairs_key_runs_by_round_and_host_as_the_report_does() -> None:
    from e2e.pipeline import headline_pairs

    recs = [make_record("main", 1, i, tpot=t, host="a") for i, t in enumerate([7, 6.0, 6.1, 6.2], 1)]
    recs += [make_record("pr", 1, i, tpot=t, host="a") for i, t in enumerate([7, 5.8, 5.9, 6.0], 1)]
    recs += [make_record("pr", 1, 2, tpot=5.6, host="b")]  # round 2 again, on another host
    s = summarize(recs)
    ((arm, base),) = headline_pairs(s, recs)
    assert arm == {(2, "a"): pytest.approx(5.8), (3, "a"): pytest.approx(5.9),
                   (4, "a"): pytest.approx(6.0), (2, "b"): pytest.approx(5.6)}
    assert set(base) == {(2, "a"), (3, "a"), (4, "a")}
    # a repeat recorded twice on one host: the geometric mean, as the report's model sees both
    twice = recs[:-1] + [make_record("pr", 1, 2, tpot=5.6, host="a")]
    ((arm, _),) = headline_pairs(summarize(twice), twice)
    assert arm[(2, "a")] == pytest.approx(math.sqrt(5.8 * 5.6))


@pytest.mark.slow
def test_an_infinite_metric_is_left_out_with_a_warning_naming_the_run(tmp_path):
    """A run.json with an infinite metric (made by hand or by another tool) is reported: the
    value is left out of its cell, the warning names the run, the run's other metrics count."""
    from e2e.render import build_report
    from test_render import write_results

    records = [make_record(arm, 1, k, tpot=5.0 + 0.01 * k) for arm in ("main", "pr")
               for k in (1, 2, 3, 4)]
    bad = records[2]
    records[2] = bad.model_copy(update={"metrics": bad.metrics.model_copy(
        update={"tpot_ms_mean": float("inf")})})
    folder = write_results(tmp_path, records)
    output = build_report(folder)
    messages = [w.message for w in output.summary.warnings]
    assert any(records[2].run_id in m and "not a finite number" in m for m in messages)
    cell = output.summary.cell(records[2].spec.arm, 1, "base", "tpot_ms_mean")
    assert all(math.isfinite(v) for v in cell.values) and len(cell.values) == 2
    assert output.summary.cell(records[2].spec.arm, 1, "base", "ttft_ms_mean").values
