"""Agreement, McNemar and the report on hand-made sample logs with known answers
(tests/data/gsm8k_samples/README.md lists them)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from e2e.analysis.outputs.gsm8k import (
    GSM8KReport, acceptance_length, compare_verdicts, mcnemar_exact, summarize_gsm8k,
    verdict_accuracy
)
from e2e.errors import ResultsError
from e2e.gsm8k.lmeval import parse_samples
from e2e.render import gsm8k_csv, gsm8k_markdown
from e2e.results.gsm8k import ArmResult, EvalInfo, SampleVerdict
from e2e.results.records import SpecCounters

DATA = Path(__file__).parent / "data" / "gsm8k_samples"


def load(name: str) -> tuple[SampleVerdict, ...]:
    rows = [json.loads(line) for line in (DATA / name).read_text().splitlines()]
    return parse_samples(rows, source=name)


def test_parse_samples_one_verdict_per_doc():
    main = load("main.jsonl")
    assert [v.doc_id for v in main] == list(range(12))
    assert [v.doc_id for v in main if v.strict] == [0, 1, 8, 10]
    assert [v.doc_id for v in main if v.flexible] == [0, 1, 2, 8, 10]
    assert verdict_accuracy(main) == pytest.approx(4 / 12)
    assert verdict_accuracy(main, flexible=True) == pytest.approx(5 / 12)


def test_parse_samples_rejects_duplicates_and_missing_strict():
    row = {"doc_id": 0, "prompt_hash": "a", "filter": "strict-match", "exact_match": 1.0}
    with pytest.raises(ResultsError, match="twice"):
        parse_samples([row, row])
    with pytest.raises(ResultsError, match="no 'strict-match'"):
        parse_samples([dict(row, filter="flexible-extract")])
    with pytest.raises(ResultsError, match="different prompt hashes"):
        parse_samples([row, dict(row, filter="flexible-extract", prompt_hash="b")])
    with pytest.raises(ResultsError, match="missing field"):
        parse_samples([{"doc_id": 0}])
    with pytest.raises(ResultsError, match="exact_match"):
        parse_samples([dict(row, exact_match=0.5)])


@pytest.mark.parametrize(("b", "c", "p"), [
    (0, 0, 1.0),
    (0, 6, 2 / 2**6),             # all six discordant pairs one way
    (6, 0, 2 / 2**6),
    (1, 9, 2 * (1 + 10) / 2**10),  # P(X<=1) doubled, X ~ Bin(10, 1/2)
    (5, 5, 1.0),
    (2, 1, 1.0),
    (30, 54, 0.0116344541),       # 2 * sum_{k<=30} C(84,k) / 2^84 (reference-sized counts)
])
def test_mcnemar_exact_known_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-4)


def test_mcnemar_rejects_negative():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_compare_pr_against_main():
    a = compare_verdicts(load("main.jsonl"), load("pr.jsonl"), arm_name="pr")
    assert (a.n, a.same) == (12, 6)
    assert a.reference_only_correct == ()
    assert a.arm_only_correct == (2, 3, 4, 5, 6, 7)
    assert a.flipped == (2, 3, 4, 5, 6, 7)
    assert a.p_value == pytest.approx(0.03125)


def test_compare_repeat_of_main_is_the_noise_floor():
    a = compare_verdicts(load("main.jsonl"), load("main_repeat.jsonl"), arm_name="main (repeat)")
    assert (a.n, a.same) == (12, 10)
    assert a.reference_only_correct == (0,)
    assert a.arm_only_correct == (9,)
    assert a.flipped == (0, 9)
    assert a.p_value == pytest.approx(1.0)


def test_compare_refuses_different_prompts():
    with pytest.raises(ResultsError, match=r"different prompts for 1 document.*\[5\]"):
        compare_verdicts(load("main.jsonl"), load("pr_other_prompt.jsonl"), arm_name="pr")


def test_compare_refuses_different_documents():
    with pytest.raises(ResultsError, match="same documents"):
        compare_verdicts(load("main.jsonl"), load("pr.jsonl")[:10], arm_name="pr")


def test_acceptance_length_from_counter_deltas():
    before = SpecCounters(accepted=100, drafts=50, draft_tokens=150)
    after = SpecCounters(accepted=190, drafts=110, draft_tokens=330)
    assert acceptance_length(before, after) == pytest.approx(1 + 90 / 60)
    assert acceptance_length(before, before) is None
    assert acceptance_length(None, after) is None


def _result(label: str, arm: str, occurrence: int, verdicts, acceptance=None, spec="base") -> ArmResult:
    return ArmResult(
        experiment="exp", label=label, arm=arm, occurrence=occurrence, spec_mode=spec, limit=None,
        concurrency=4, data={"kind": "local"}, lm_eval_version="0.4.13", lm_eval_argv=["x"],
        base_url="http://h", model="m", n=len(verdicts),
        accuracy_strict=verdict_accuracy(verdicts),
        accuracy_flexible=verdict_accuracy(verdicts, flexible=True), acceptance_length=acceptance,
        started_at="t", finished_at="t", wall_s=1.0)


def _report():
    main, repeat, pr = load("main.jsonl"), load("main_repeat.jsonl"), load("pr.jsonl")
    sections = []
    for spec, acc in (("base", None), ("dspark", 1.8)):
        info = EvalInfo(experiment="exp", spec_mode=spec, limit=None, data={"kind": "local"},
                        lm_eval_version="0.4.13", arms=("main", "pr", "main.r2"))
        arms = [(_result("pr", "pr", 1, pr, acc and 1.75, spec), pr),
                (_result("main.r2", "main", 2, repeat, acc, spec), repeat),
                (_result("main", "main", 1, main, acc, spec), main)]
        sections.append(summarize_gsm8k(info, arms))
    return GSM8KReport(sections=tuple(sections))


def test_summary_orders_main_then_repeat_then_arms():
    section = _report().sections[0]
    assert [a.name for a in section.arms] == ["main", "main (repeat)", "pr"]
    assert section.arms[0].agreement is None
    assert [a.label for a in section.noise_floor] == ["main.r2"]
    assert section.arms[2].agreement.same == 6
    assert not any("noise floor" in w for w in section.warnings)


def test_summary_warns_without_repeat_of_main():
    main = load("main.jsonl")
    info = EvalInfo(experiment="exp", spec_mode="base", limit=12, data={}, lm_eval_version="0.4.13")
    section = summarize_gsm8k(info, [(_result("main", "main", 1, main), main)])
    assert any("no repeat of main" in w for w in section.warnings)
    assert any("--limit 12" in w for w in section.warnings)


def test_markdown_has_reference_layout_and_agreement_lines():
    text = gsm8k_markdown(_report()).decode()
    lines = text.splitlines()
    assert "| spec mode | main | main (repeat) | pr |" in lines
    assert "| base | 0.3333 (4/12) | 0.3333 (4/12) | 0.8333 (10/12) |" in lines
    assert "| dspark acceptance length | 1.800 | 1.800 | 1.750 |" in lines
    assert not any(line.startswith("| base acceptance length") for line in lines)
    assert ("- pr matches main's verdict on 6 of 12; repeat 10 (main only correct 0, pr only "
            "correct 6, exact McNemar p = 0.0312)") in lines
    assert ("- main (repeat) matches main's verdict on 10 of 12 (main only correct 1, "
            "main (repeat) only correct 1, exact McNemar p = 1)") in lines
    assert "Flipped documents (doc_id): main (repeat): 0, 9; pr: 2, 3, 4, 5, 6, 7" in lines


def test_csv_rows():
    rows = list(csv.DictReader(io.StringIO(gsm8k_csv(_report()).decode())))
    assert [(r["spec_mode"], r["label"]) for r in rows] == [
        ("base", "main"), ("base", "main.r2"), ("base", "pr"),
        ("dspark", "main"), ("dspark", "main.r2"), ("dspark", "pr")]
    pr = rows[2]
    assert (pr["n"], pr["correct"], pr["same_verdict"]) == ("12", "10", "6")
    assert (pr["main_only_correct"], pr["arm_only_correct"]) == ("0", "6")
    assert float(pr["mcnemar_p"]) == pytest.approx(0.03125)
    assert pr["flipped_doc_ids"] == "2 3 4 5 6 7"
    assert rows[0]["accuracy_flexible"] == f"{5 / 12:.6f}"
    assert rows[0]["same_verdict"] == "" and rows[0]["acceptance_length"] == ""
    assert rows[5]["acceptance_length"] == "1.750000"
