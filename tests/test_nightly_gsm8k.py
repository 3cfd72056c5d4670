"""The nightly GSM8K subset with a scripted server and lm-eval (the Fake of
test_gsm8k_run.py): one value per fresh server of an arm, a failed arm reported, and the
noise-floor judgement of two nights. No server."""

from __future__ import annotations

import tomllib

import pytest

from conftest import ROOT
from e2e.nightly.judge import Baseline, Rules, judge_night
from e2e.nightly.run import expected_cells, gsm8k_cells
from e2e.nightly.settings import GSM8K_METRIC, parse_nightly
from test_gsm8k_run import Fake


@pytest.fixture
def cfg(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (data / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    raw = tomllib.loads((ROOT / "configs" / "nightly.toml").read_text())
    raw["nightly"]["gsm8k"].update(enabled=True, limit=12, data=str(data))
    return parse_nightly(raw)


def test_gsm8k_subset_gives_one_value_per_server(cfg, tmp_path):
    results = tmp_path / "results"
    root = results / "nightly" / "2026-01-01"
    fake = Fake(["main.jsonl", "main_repeat.jsonl"])
    cells, problems = gsm8k_cells(cfg, cfg.experiment, root, results, print, fake.runner())
    assert problems == []
    assert fake.served == [("main", False), ("main", False)]
    (cell,) = cells
    assert (cell.key.kind, cell.key.arm, cell.key.metric) == ("gsm8k", "main", GSM8K_METRIC)
    assert cell.values == (4 / 12, 4 / 12) and cell.repeats == (1, 2)
    assert cell.run_dirs == ("nightly/2026-01-01/nightly/gsm8k/base-n12/main",
                             "nightly/2026-01-01/nightly/gsm8k/base-n12/main.r2")
    assert cell.key in expected_cells(cfg)
    # resumed: nothing is evaluated again
    again = Fake([])
    assert gsm8k_cells(cfg, cfg.experiment, root, results, print, again.runner())[0] == cells
    assert again.served == []


def test_failed_gsm8k_arm_is_reported_and_blocks_a_pass(cfg, tmp_path):
    results = tmp_path / "results"
    fake = Fake(["main.jsonl", "main_repeat.jsonl"], fail_at=1)
    cells, problems = gsm8k_cells(cfg, cfg.experiment, results / "nightly" / "d", results,
                                  print, fake.runner())
    assert len(problems) == 1 and "GSM8K subset failed" in problems[0]
    assert cells[0].values == (4 / 12,)
    j = judge_night("2026-01-02", cells, Baseline("2026-01-01", (), "x"),
                    Rules(thresholds={}), expected=expected_cells(cfg), problems=problems)
    assert j.status == "incomplete" and j.exit_code == 2


def test_two_nights_of_gsm8k_judged_per_document(cfg, tmp_path):
    """Night 1 answers 10 of 12, night 2 (same documents) 4 of 12: judged document by
    document from the arm folders' verdicts.jsonl that the cells name."""
    from e2e.nightly.assess import read_samples

    results = tmp_path / "results"
    night1, _ = gsm8k_cells(cfg, cfg.experiment, results / "nightly" / "2026-01-01", results,
                            print, Fake(["pr.jsonl", "pr.jsonl"]).runner())       # 10 of 12
    night2, _ = gsm8k_cells(cfg, cfg.experiment, results / "nightly" / "2026-01-02", results,
                            print, Fake(["main.jsonl", "main_repeat.jsonl"]).runner())  # 4 of 12
    samples = read_samples(results, [d for c in night1 + night2 for d in c.run_dirs])
    assert len(samples) == 4
    rules = Rules(thresholds={})
    j = judge_night("2026-01-02", night2, Baseline("2026-01-01", tuple(night1), "x"), rules,
                    samples=samples)
    (v,) = j.verdicts
    assert v.verdict == "regressed" and v.pct == pytest.approx(-50.0) and v.p_value < 0.05
    back = judge_night("2026-01-03", night1, Baseline("2026-01-02", tuple(night2), "x"), rules,
                       samples=samples)
    assert back.verdicts[0].verdict == "improved" and back.status == "pass"
    # without the baseline night's verdict files there is nothing to judge on: exit 2
    lost = judge_night("2026-01-02", night2, Baseline("2026-01-01", tuple(night1), "x"), rules,
                       samples={d: samples[d] for d in night2[0].run_dirs})
    assert lost.verdicts[0].verdict == "no samples" and lost.exit_code == 2
    assert "verdicts.jsonl" in lost.verdicts[0].reason
