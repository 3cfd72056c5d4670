"""A nightly judged within the night: a reference arm measured beside tonight's build (in
duets), each night judged on tonight ÷ reference, against real server processes (the
scripted vLLM of tests/fakevllm.py). Also the verdict that says a night could not decide."""

from __future__ import annotations

import dataclasses
import json

import pytest

import fakevllm
from e2e.analysis.nightly.judge import Rules, judge_cell
from e2e.analysis.sweep.summary import Cell
from e2e.config import DuetConfig
from e2e.errors import ConfigError
from e2e.results import CellKey, NightCell
from e2e.nightly.measure import relative_cells
from e2e.nightly.run import NightlyOptions, run_nightly
from e2e.nightly.settings import parse_nightly


def _cell(arm, values, repeats, duets=()):
    return Cell(arm, 1, "base", "tpot_ms_mean", tuple(repeats), tuple(values), 0.0, 0.0, 0.0,
                hosts=("h",) * len(values), duets=tuple(duets))


def test_relative_cells_pair_runs_measured_together():
    ref = _cell("reference", [2.0, 4.0, 3.0], [2, 3, 4], duets=[1, 1, 1])
    main = _cell("main", [2.2, 4.4], [2, 4], duets=[1, 1])
    out = relative_cells([ref, main], "reference", lambda c: tuple(f"{c.arm}-{k}" for k in c.repeats))
    assert len(out) == 1 and out[0].key.arm == "main-vs-reference"
    # rounds 2 and 4 pair with the reference's runs of the same duet; round 3 has no partner
    assert out[0].values == pytest.approx((2.2 / 2.0, 4.4 / 3.0))
    assert out[0].repeats == (2, 4) and out[0].run_dirs == ("main-2", "main-4")
    assert out[0].interference == (None, None)  # nothing recorded
    # a ratio's interference is the larger of its two runs' (what the judge reads)
    ref = dataclasses.replace(ref, interference=(0.1, 0.9, 0.2))
    main = dataclasses.replace(main, interference=(0.3, None))
    (busy,) = relative_cells([ref, main], "reference", lambda c: tuple(c.arm for _ in c.values))
    assert busy.interference == (0.3, 0.2)


def test_a_night_whose_interval_reaches_past_the_threshold_is_undecided():
    key = CellKey("load", "main", 1, "base", "tpot_ms_mean")
    rules = Rules(thresholds={"base": {"tpot_ms_mean": 2.0}})
    wide = judge_cell(key, NightCell(key, (1.0, 1.3, 0.8)), NightCell(key, (1.1, 0.9, 1.2)), rules)
    assert wide.verdict == "undecided" and "could not have told" in wide.reason
    tight = judge_cell(key, NightCell(key, (1.0, 1.001, 0.999)),
                       NightCell(key, (1.0, 1.0005, 0.9995)), rules)
    assert tight.verdict == "noise"


def _raw(root, model):
    exp = fakevllm.experiment(fakevllm.install(root / "fake"), model, name="nd")
    raw = exp.model_dump(mode="json", exclude_none=True)
    raw["repeats"], raw["report_from_run"] = 3, 2
    raw["load"].update(output_len=60, prompts_per_concurrency=3)
    raw["server"]["env"]["FAKE_TPOT_S"] = "0.004"  # long beside an overloaded host's jitter
    raw["arms"] = {"reference": {"plugin": {"packing": "main"}},
                   "main": {"plugin": {"packing": "main"}}}
    raw["nightly"] = {"arms": ["reference", "main"], "reference": "reference",
                      "concurrencies": [1], "spec_modes": ["base"], "runs": 3,
                      "thresholds": {"base": {"tpot_ms_mean": 25.0}},
                      # CI hosts are shared: a change measured beside other work is judged
                      # undecided (tests/test_nightly_history_judge.py); here the delay is
                      # to be called whatever else runs
                      "interference_max": 64.0,
                      # 3 nights of 2 runs: t on 2 df; a level for three nights, not 400
                      "alpha": 0.05}
    return raw


def test_the_reference_must_be_a_nightly_arm(tmp_path):
    raw = _raw(tmp_path, "m")
    raw["nightly"]["reference"] = "nope"
    with pytest.raises(ConfigError, match="reference arm 'nope'"):
        parse_nightly(raw)


@pytest.mark.slow  # three nights of real server processes
def test_nights_are_judged_on_tonight_over_the_reference(tmp_path, monkeypatch):
    from dataclasses import replace

    from e2e.session.tinymodel import build_tiny_llama

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    cfg = parse_nightly(_raw(tmp_path, str(build_tiny_llama(tmp_path / "model"))))
    cfg = replace(cfg, experiment=cfg.experiment.model_copy(
        update={"duet": DuetConfig(enabled=True, barrier_timeout_s=60)}))
    results = tmp_path / "results"

    def night(date, **overrides):
        return run_nightly(cfg, NightlyOptions(results=results, date=date, progress=False,
                                               arm_overrides=overrides))

    first = night("2026-01-01")
    assert first.judgement.status == "undecided"  # nothing to judge against yet: exit 3
    second = night("2026-01-02")
    verdicts = {(v.key.arm, v.key.metric): v for v in second.judgement.verdicts}
    judged = verdicts[("main-vs-reference", "tpot_ms_mean")]
    assert judged.verdict == "no baseline" and second.judgement.status == "undecided"
    assert "holds 1 night(s)" in judged.reason  # the first nights build the ratio's history
    assert verdicts[("main", "tpot_ms_mean")].verdict == "not judged"  # absolute: recorded
    assert verdicts[("reference", "tpot_ms_mean")].verdict == "not judged"
    runs = sorted(p.name for p in second.folder.glob("*-c1-base-r*-d1"))
    assert len(runs) == 6  # 3 duets of reference and main
    third = night("2026-01-03")  # the third night of the history: still building it
    assert third.judgement.status == "undecided"
    # tonight's build 12 ms slower per token (the reference stays as pinned): a regression
    third = night("2026-01-04", step_delay_us=12000)
    verdicts = {(v.key.arm, v.key.metric): v for v in third.judgement.verdicts}
    assert verdicts[("main-vs-reference", "tpot_ms_mean")].verdict == "regressed"
    assert third.judgement.status == "regression"
    # --arm-setting reached tonight's build, not the pinned reference
    settings = {p.name.split("-")[0]: json.loads((p / "run.json").read_text())["arm_settings"]
                for p in third.folder.glob("*-c1-base-r*-d1")}
    assert settings["main"]["plugin"]["step_delay_us"] == 12000
    assert "step_delay_us" not in settings["reference"]["plugin"]
