"""The nightly GSM8K subset with a scripted server and lm-eval (the Fake of
test_gsm8k_run.py): one value per fresh server of an arm, a failed arm reported, and the
noise-floor judgement of two nights. No server."""

from __future__ import annotations

import tomllib

import pytest

from conftest import ROOT, alone_nightly_raw
from e2e.analysis.nightly.judge import Rules, judge_night
from e2e.results import Baseline
from e2e.nightly.measure import gsm8k_cells
from e2e.nightly.night import expected_cells, night_of
from e2e.nightly.settings import parse_nightly
from e2e.errors import ConfigError
from e2e.results import GSM8K_METRIC
from test_gsm8k_run import Fake


@pytest.fixture
def cfg(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (data / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    raw = alone_nightly_raw()
    raw["nightly"]["gsm8k"].update(enabled=True, limit=12, data=str(data))
    return parse_nightly(raw)


@pytest.mark.slow
def test_gsm8k_subset_gives_one_value_per_server(cfg, tmp_path):
    results = tmp_path / "results"
    root = results / "nightly" / "2026-01-01"
    fake = Fake(["main.jsonl", "main_repeat.jsonl"])
    night = night_of(cfg, date="2026-01-01", results=results)
    cells, problems = gsm8k_cells(night, print, fake.runner())
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
    assert gsm8k_cells(night, print, again.runner())[0] == cells
    assert again.served == []


def test_failed_gsm8k_arm_is_reported_and_blocks_a_pass(cfg, tmp_path):
    results = tmp_path / "results"
    fake = Fake(["main.jsonl", "main_repeat.jsonl"], fail_at=1, fails=2)  # and its retry
    cells, problems = gsm8k_cells(night_of(cfg, date="d", results=results), print,
                                  fake.runner())
    assert len(problems) == 1 and "GSM8K subset failed" in problems[0]
    assert cells[0].values == (4 / 12,)
    j = judge_night("2026-01-02", cells, Baseline("2026-01-01", (), "x"),
                    Rules(thresholds={}), expected=expected_cells(cfg), problems=problems)
    assert j.status == "incomplete" and j.exit_code == 2


@pytest.mark.slow
def test_two_nights_of_gsm8k_judged_per_document(cfg, tmp_path):
    """Night 1 answers 10 of 12, night 2 (same documents) 4 of 12: judged document by
    document from the arm folders' verdicts.jsonl that the cells name."""
    from e2e.nightly.assess import read_samples

    results = tmp_path / "results"
    night1, _ = gsm8k_cells(night_of(cfg, date="2026-01-01", results=results), print,
                            Fake(["pr.jsonl", "pr.jsonl"]).runner())       # 10 of 12
    night2, _ = gsm8k_cells(night_of(cfg, date="2026-01-02", results=results), print,
                            Fake(["main.jsonl", "main_repeat.jsonl"]).runner())  # 4 of 12
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


# --- per-document judgement on hand-made verdict logs (no lm-eval) ---------------------------

def _write_night(results, date, correct: set[int], *, n=50, servers=2):
    """A night's GSM8K arm folders (verdicts.jsonl of `servers` fresh servers of main, each
    answering the documents in `correct` right) and its cell, as gsm8k_cells returns it."""
    from e2e.results.gsm8k import SampleVerdict
    from e2e.results.gsm8k import write_verdicts
    from e2e.results import CellKey, NightCell

    dirs = []
    for k in range(1, servers + 1):
        rel = f"nightly/{date}/nightly/gsm8k/base-n{n}/" + ("main" if k == 1 else f"main.r{k}")
        write_verdicts(results / rel / "verdicts.jsonl",
                       [SampleVerdict(doc_id=d, prompt_hash=f"h{d}", strict=d in correct)
                        for d in range(n)])
        dirs.append(rel)
    acc = len(correct) / n
    return NightCell(CellKey("gsm8k", "main", 0, "base", GSM8K_METRIC), (acc,) * servers,
                     tuple(range(1, servers + 1)), tuple(dirs))


def _two_nights(cfg, tmp_path, tonight_correct):
    """Night 1 (35 of 50 right) passes and is appended to the history; night 2 is judged
    against it by e2e.nightly.assess.assess_night, as run_nightly does after collecting."""
    from e2e.nightly.assess import assess_night
    from e2e.results import night_rows, open_store

    results = tmp_path / "results"
    gsm8k_only = [k for k in expected_cells(cfg) if k.kind == "gsm8k"]  # no load cells here
    right = set(range(35))
    first = _write_night(results, "2026-01-01", right)
    with open_store(None, results) as store:
        j1 = assess_night(night_of(cfg, date="2026-01-01", results=results), [first],
                          expected=gsm8k_only, store=store)
        assert (j1.status, j1.verdicts[0].verdict) == ("undecided", "no baseline")
        store.write_night(night_rows(
            j1, experiment="nightly", config_hash=cfg.config_hash, recorded_at="t",
            cells=[first], builds={}, arm_overrides={}, e2e_git_sha=None, host="h"))
        second = _write_night(results, "2026-01-02", tonight_correct)
        return assess_night(night_of(cfg, date="2026-01-02", results=results), [second],
                            expected=gsm8k_only, store=store)


def test_one_flipped_document_of_50_is_not_a_regression(cfg, tmp_path):
    j = _two_nights(cfg, tmp_path, set(range(35)) - {7})          # 1 lost, 0 gained: -2 pp
    (v,) = j.verdicts
    assert v.verdict == "noise" and v.pct == pytest.approx(-2.0)
    assert v.p_value == pytest.approx(1.0)                         # McNemar on (1, 0)
    assert v.interval[0] < -2.0 < 0.0 < v.interval[1]
    assert (j.status, j.exit_code) == ("pass", 0)


def test_ten_one_sided_flips_of_50_are_a_regression(cfg, tmp_path):
    j = _two_nights(cfg, tmp_path, set(range(25)))                 # 10 lost, 0 gained: -20 pp
    (v,) = j.verdicts
    assert v.verdict == "regressed" and v.pct == pytest.approx(-20.0)
    assert v.p_value == pytest.approx(2 * 0.5**10)                 # exact McNemar, two-sided
    assert v.interval[1] < 0.0                                     # the drop is certain
    assert "10 of 50 documents lost, 0 gained" in v.reason
    assert (j.status, j.exit_code) == ("regression", 1)


def test_a_significant_drop_below_the_minimum_is_not_a_regression(cfg, tmp_path):
    import dataclasses

    small = dataclasses.replace(cfg, settings=cfg.settings.model_copy(update={
        "gsm8k": cfg.settings.gsm8k.model_copy(update={"min_drop_pp": 25.0})}))
    j = _two_nights(small, tmp_path, set(range(25)))
    assert j.verdicts[0].verdict == "noise" and j.exit_code == 0


def test_paired_change_interval_covers_the_true_change():
    """Newcombe's paired interval at 95 %: coverage measured on 2000 simulated 50-document
    pairs of nights (true accuracy 70 % -> 66 %, 4 + 8 % of documents discordant) is close to
    95 %, and it is never certain when nothing flipped."""
    import numpy as np

    from e2e.analysis.nightly.judge import paired_change_interval

    rng = np.random.default_rng(0)
    probs = [0.62, 0.08, 0.04, 0.26]          # both right, lost, gained, neither
    true = (probs[2] - probs[1]) * 100
    hits = 0
    for counts in rng.multinomial(50, probs, size=2000):
        lo, hi = paired_change_interval(*map(int, counts))
        hits += lo <= true <= hi
    assert 0.93 <= hits / 2000 <= 0.99
    lo, hi = paired_change_interval(35, 0, 0, 15)      # no flip: bounded, not certain
    assert lo < 0 < hi
    lo, hi = paired_change_interval(25, 10, 0, 15)     # ten lost, none gained
    assert lo < -20.0 < hi < 0


def test_the_gsm8k_subset_is_resolved_with_the_night(cfg, tmp_path):
    """The night holds its GSM8K plan (the baseline arm's servers first, into the night's
    folder); a data folder that is gone is refused when the night is resolved, before any
    server starts, not after the sweep."""
    night = night_of(cfg, date="2026-01-01", results=tmp_path / "results")
    assert night.gsm8k.labels == ("main", "main.r2")
    assert night.gsm8k.eval_dir == night.root / "nightly" / "gsm8k" / "base-n12"
    (night.gsm8k.source.data_dir / "test.jsonl").unlink()
    with pytest.raises(ConfigError, match="test.jsonl is missing"):
        night_of(cfg, date="2026-01-01", results=tmp_path / "results")
