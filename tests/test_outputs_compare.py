"""Outputs compared prompt by prompt within a cell (e2e.analysis: summarize_outputs), on
hand-made records with known outputs: identical arms, an arm that diverges more than the
A/A, one that diverges no more than chance allows, no A/A, outputs not recorded, the
speculator's mode against base, and the cells' prefix-cache hit rates."""

from __future__ import annotations

import pytest
from scipy.stats import fisher_exact

from e2e.results.records import RequestRecord, WorkloadInfo
from e2e.results.store import load_outputs, read_outputs, write_requests
from e2e.analysis.outputs.compare import (
    CellCache, cache_contrast, cell_caches, compare_outputs, first_divergence, outputs_of,
    summarize_outputs
)
from e2e.results import AA_DIVERGES, AS_AA, IDENTICAL, MORE_THAN_AA, NOT_RECORDED, NO_AA
from test_aggregate import ARMS_CONFIG, make_record

N = 24  # prompts per run
LEN = 16  # tokens per output


def answer(i: int) -> tuple[int, ...]:
    return tuple((i * 31 + k * 7) % 997 for k in range(LEN))


def diverged(i: int, at: int) -> tuple[int, ...]:
    a = answer(i)
    return a[:at] + tuple((t + 1) % 997 for t in a[at:])


def runs(arm, conc=1, repeats=(1, 2, 3), *, dspark=False, hit=None, arms=None, **kw):
    out = []
    for r in repeats:
        record = make_record(arm, conc, r, dspark=dspark, arms=arms, **kw)
        updates = {}
        if hit is not None:
            rate = hit[r - 1] if isinstance(hit, (list, tuple)) else hit
            updates["metrics"] = record.metrics.model_copy(update={"prefix_cache_hit_rate": rate})
        out.append(record.model_copy(update=updates))
    return out


def outs(records, change=None):
    """Every run's outputs; ``change(run, i)`` gives a prompt's output instead (or None)."""
    result = {}
    for r in records:
        result[r.run_id] = {i: (change(r, i) if change else None) or answer(i) for i in range(N)}
    return result


def test_first_divergence():
    assert first_divergence((1, 2, 3), (1, 2, 3)) is None
    assert first_divergence((1, 2, 3), (1, 5, 3)) == 1
    assert first_divergence((9, 2), (1, 2)) == 0
    assert first_divergence((1, 2), (1, 2, 3)) == 2  # a prefix diverges at its end


def test_same_outputs_everywhere_read_identical_with_the_aa_beside():
    records = runs("main") + runs("main-repeat") + runs("pr")
    s = summarize_outputs(records, outs(records))
    pr = s.find("pr", 1, "base")
    assert pr.verdict == IDENTICAL and pr.kind == "arm"
    assert pr.agreement.compared == N and pr.agreement.identical == N
    assert pr.agreement.repeats == (1, 2, 3) and pr.agreement.identical_share == 1.0
    assert pr.yardsticks[0].arm == "main-repeat" and pr.yardsticks[0].identical == N
    assert s.find("main-repeat", 1, "base").verdict == IDENTICAL
    assert s.find("main-repeat", 1, "base").kind == "aa"
    assert s.aa_arms == ("main-repeat",) and s.n_tests == 0
    assert pr.p_value is None and pr.agreement.position_median is None


def test_an_arm_that_diverges_on_many_prompts_diverges_more_than_aa_with_positions():
    records = runs("main") + runs("main-repeat") + runs("pr")
    bad = {2: 5, 3: 0, 7: 9, 11: 3, 13: 12, 17: 4}  # prompt -> first divergent token

    def change(run, i):
        return diverged(i, bad[i]) if run.spec.arm == "pr" and i in bad else None

    s = summarize_outputs(records, outs(records, change))
    pr = s.find("pr", 1, "base")
    a = pr.agreement
    assert pr.verdict == MORE_THAN_AA
    assert [d.index for d in a.diverged] == sorted(bad)
    assert a.positions == tuple(bad[i] for i in sorted(bad))
    assert (a.position_min, a.position_median, a.position_max) == (0, 4.5, 12)
    assert all(d.repeats == (1, 2, 3) for d in a.diverged)  # once per prompt, not per run
    assert a.identical == N - len(bad)
    expected = fisher_exact([[6, N - 6], [0, N]], alternative="greater").pvalue
    assert pr.p_value == pytest.approx(expected) and pr.p_holm == pytest.approx(expected)
    assert s.n_tests == 1


def test_one_divergent_prompt_against_an_identical_aa_is_no_more_than_chance():
    records = runs("main") + runs("main-repeat") + runs("pr")

    def change(run, i):
        return diverged(i, 3) if run.spec.arm == "pr" and i == 5 and run.spec.repeat == 2 else None

    pr = summarize_outputs(records, outs(records, change)).find("pr", 1, "base")
    assert pr.verdict == AS_AA and pr.p_value == pytest.approx(0.5)
    assert [(d.index, d.position, d.repeats) for d in pr.agreement.diverged] == [(5, 3, (2,))]


def test_an_aa_that_diverges_as_much_as_the_arm_keeps_the_arm_at_as_much_as_aa():
    records = runs("main", 64) + runs("main-repeat", 64) + runs("pr", 64)
    bad = set(range(0, N, 3))

    def change(run, i):  # batch-variant numerics: both diverge on a third of the prompts
        return diverged(i, 10) if run.spec.arm != "main" and i in bad else None

    s = summarize_outputs(records, outs(records, change))
    assert s.find("main-repeat", 64, "base").verdict == AA_DIVERGES
    assert s.find("pr", 64, "base").verdict == AS_AA


def test_without_an_aa_arm_a_divergence_cannot_be_judged():
    records = runs("main") + runs("pr")
    s = summarize_outputs(records, outs(records, lambda run, i: diverged(i, 1)
                                        if run.spec.arm == "pr" else None))
    pr = s.find("pr", 1, "base")
    assert pr.verdict == NO_AA and pr.yardsticks == () and pr.p_value is None
    identical = summarize_outputs(records, outs(records)).find("pr", 1, "base")
    assert identical.verdict == IDENTICAL


def test_runs_without_outputs_say_not_recorded():
    records = runs("main") + runs("main-repeat") + runs("pr")
    outputs = outs(records)
    for r in records:
        if r.spec.arm == "pr":
            outputs[r.run_id] = dict.fromkeys(range(N))  # written before outputs, or imported
    s = summarize_outputs(records, outputs)
    assert s.find("pr", 1, "base").verdict == NOT_RECORDED
    assert s.find("pr", 1, "base").agreement.recorded is False
    assert summarize_outputs(records, {}).find("main-repeat", 1, "base").verdict == NOT_RECORDED


def test_only_prompts_both_answered_and_runs_that_sent_the_same_prompts_are_joined():
    records = runs("main") + runs("pr")
    outputs = outs(records)
    first_pr = next(r for r in records if r.spec.arm == "pr" and r.spec.repeat == 1)
    outputs[first_pr.run_id][0] = None  # this prompt failed in one pr run
    a = compare_outputs([r for r in records if r.spec.arm == "main"],
                        [r for r in records if r.spec.arm == "pr"], outputs)
    assert a.compared == N  # prompt 0 still compared in rounds 2 and 3
    w = WorkloadInfo(kind="reference", sha256="x", requests=N, input_tokens=1, output_tokens=1,
                     warmup="w", cache="c")
    other = [r.model_copy(update={"workload": w.model_copy(update={"sha256": r.spec.arm})})
             for r in records]
    a = compare_outputs([r for r in other if r.spec.arm == "main"],
                        [r for r in other if r.spec.arm == "pr"], outs(other))
    assert a.repeats == () and not a.recorded  # other prompts: nothing to join


def test_the_speculator_against_base_is_judged_against_both_modes_aa():
    records = (runs("main") + runs("main-repeat") + runs("main", dspark=True)
               + runs("main-repeat", dspark=True))
    bad = set(range(0, N, 2))

    def change(run, i):  # verification changes numerics: main dspark diverges from main base
        return diverged(i, 20 % LEN) if run.spec.dspark and i in bad else None

    s = summarize_outputs(records, outs(records, change))
    spec = s.find("main", 1, "dspark", kind="speculator")
    assert spec.agreement.reference_mode == "base" and spec.agreement.spec_mode == "dspark"
    assert [y.spec_mode for y in spec.yardsticks] == ["base", "dspark"]
    # the dspark A/A (main-repeat dspark vs main dspark) is identical: both diverge alike
    assert spec.verdict == MORE_THAN_AA
    assert s.find("main-repeat", 1, "dspark", kind="speculator").verdict == MORE_THAN_AA
    assert s.find("main-repeat", 1, "dspark", kind="aa").verdict == IDENTICAL
    assert s.n_tests == 2 and spec.p_holm == pytest.approx(min(1.0, 2 * spec.p_value))


def test_hit_rates_per_cell_and_the_flag_beside_a_comparison():
    records = runs("main", hit=[0.56, 0.5625, 0.56]) + runs("no-cache", hit=0.0)
    records += runs("main-repeat", hit=[0.55, 0.56, 0.5625])
    caches = {(c.arm): c for c in cell_caches(records)}
    assert caches["main"].median == 0.56 and caches["main"].spread == pytest.approx(0.0025)
    s = summarize_outputs(records, outs(records))
    flagged = s.find("no-cache", 1, "base").cache
    assert flagged.flagged and flagged.reference.median == 0.56 and flagged.other.median == 0.0
    assert flagged.difference == pytest.approx(-0.56)
    assert not s.find("main-repeat", 1, "base").cache.flagged


def test_a_hit_rate_gap_within_the_cells_own_spread_is_not_flagged():
    a = CellCache("main", 1, "base", (0.30, 0.50, 0.40))
    b = CellCache("pr", 1, "base", (0.45, 0.55, 0.50))
    assert not cache_contrast(a, b).flagged  # 0.10 apart, each cell moves 0.20
    assert cache_contrast(a, CellCache("pr", 1, "base", (0.71, 0.72))).flagged
    assert not cache_contrast(a, CellCache("pr", 1, "base", (None,))).flagged


def test_outputs_are_read_back_by_run_and_a_damaged_file_is_named(tmp_path):
    records = runs("main", repeats=(1, 2))
    for k, r in enumerate(records):
        folder = tmp_path / r.run_id
        folder.mkdir()
        reqs = [RequestRecord(index=i, send_s=0.0, output_token_ids=answer(i) if k == 0 else None)
                for i in range(3)]
        write_requests(folder / "requests.parquet", reqs)
        assert read_outputs(folder / "requests.parquet") == outputs_of(reqs)
    (tmp_path / records[1].run_id / "requests.parquet").write_bytes(b"not parquet")
    imported = records[0].model_copy(update={"run_id": "imported-r1",
                                             "provenance": {"imported": {"tool": "x"}}})
    outputs, problems = load_outputs(tmp_path, records + [imported])
    assert outputs == {records[0].run_id: {i: answer(i) for i in range(3)}}
    assert len(problems) == 1 and records[1].run_id in problems[0]
