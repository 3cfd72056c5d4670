"""Every run's duration and size is bounded before it starts: a schedule longer than its limit
(prompts x the request timeout, or --max-schedule), prompts the load generator could not hold,
a request longer than the model's context, a trace that is not a regular file, and a rate
whose run id would be in exponent notation are each refused (exit 2, one line that says what
it would take) before any server starts or any folder is made."""

from __future__ import annotations

import json
import math
import re
import os
import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from e2e.capacity.search import round_rate
from e2e.cli import app
from e2e.config import load_experiment
from e2e.plan import RunSpec
from e2e.names import safe_name
from e2e.errors import ConfigError
from e2e.session import check_units

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "traces" / "mooncake_small.jsonl"
runner = CliRunner()


def _config(tmp_path: Path, workload: str, **load: int) -> Path:
    """The embedded default with a workload (a TOML inline table) and [load] keys replaced."""
    text = (ROOT / "e2e" / "configs" / "default.toml").read_text()
    text = text.replace("[load]\n", f"[load]\nworkload = {workload}\n", 1)
    for key, value in load.items():
        text, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        assert n == 1, key
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def _dry(tmp_path: Path, config: Path, *flags: str):
    got = runner.invoke(app, ["sweep", "--dry-run", "--no-dspark", "--runs", "1", "--config",
                              str(config), "--results", str(tmp_path / "r"), *flags])
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    assert "Traceback" not in got.output
    return got.exit_code, " ".join(got.output.split())


# --- the schedule ------------------------------------------------------------------------------

def test_a_capacity_search_down_to_a_micro_rate_is_refused_before_anything(tmp_path):
    got = runner.invoke(app, ["capacity", "--slo", "tpot=20ms", "--min-rate", "1e-6",
                              "--arms", "main,pr", "--results", str(tmp_path / "r")])
    said = " ".join(got.output.split())
    assert got.exit_code == 2, said
    assert "--min-rate 1e-06" in said and "370 days" in said  # 32 requests x 1e6 s
    # what it would take: the lowest rate within 32 x 600 s, or the limit raised
    assert "give a rate of at least 0.00167 req/s" in said and "--max-schedule 32000000" in said
    assert not (tmp_path / "r").exists()


def test_a_trace_replayed_for_years_is_refused_and_the_limit_can_be_raised(tmp_path):
    config = _config(tmp_path, f'{{ kind = "trace", path = "{TRACE}", speedup = 1e-9 }}')
    code, said = _dry(tmp_path, config)
    assert code == 2 and "229 years" in said and "speedup 1e-09" in said
    assert "give a speedup of at least 0.000502" in said
    code, said = _dry(tmp_path, config, "--max-schedule", "7220000000")  # what it said
    assert code == 0, said
    code, _ = _dry(tmp_path, config, "--max-schedule", "7219999999")
    assert code == 2


def test_a_trace_timestamp_at_the_readers_cap_is_refused(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
                     '{"timestamp": 100000000000, "input_length": 10, "output_length": 5}\n')
    code, said = _dry(tmp_path, _config(tmp_path, f'{{ kind = "trace", path = "{trace}" }}'))
    assert code == 2 and "3.17 years" in said and "2 requests x the 600 s" in said


def test_a_multi_turn_think_time_schedule_names_the_think_time_it_would_take(tmp_path):
    experiment = load_experiment(_config(
        tmp_path, '{ kind = "multi-turn", sessions = 64, turns = 10, user_len = 8, '
                  'think_s = 3600 }', input_len=16, output_len=8))
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    # 64 sessions one after another, 9 think times each: 576 h; the limit 640 x 600 s
    with pytest.raises(ConfigError, match=r"give a think_s of at most 666 s"):
        check_units(experiment, [spec])


def test_a_schedule_at_its_limit_passes_and_closed_loops_have_none():
    experiment = load_experiment()
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    check_units(experiment, [spec])  # the reference: a closed loop
    at_limit = spec.model_copy(update={"request_rate": 1 / 600})  # 32 / rate = 32 x 600 s
    check_units(experiment, [at_limit])
    with pytest.raises(ConfigError, match="longer than the limit"):
        check_units(experiment, [spec.model_copy(update={"request_rate": 0.99 / 600})])


# --- only regular files are traces ------------------------------------------------------------

def test_a_fifo_as_a_trace_is_refused_at_once_not_read_forever(tmp_path):
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("blocked")))
    signal.alarm(20)  # the bug blocked forever in open(); fail instead of hanging the suite
    try:
        code, said = _dry(tmp_path, _config(tmp_path, f'{{ kind = "trace", path = "{fifo}" }}'))
    finally:
        signal.alarm(0)
    assert code == 2 and "is a named pipe (FIFO), not a regular file" in said


@pytest.mark.parametrize("where", ["/dev/zero", "{tmp}"])
def test_a_device_or_a_folder_as_a_trace_is_refused(tmp_path, where):
    path = where.replace("{tmp}", str(tmp_path))
    code, said = _dry(tmp_path, _config(tmp_path, f'{{ kind = "trace", path = "{path}" }}'))
    assert code == 2 and "not a regular file" in said


# --- sizes: the model's context and the token budget -------------------------------------------

def test_a_user_message_longer_than_the_models_context_fails_the_dry_run(tmp_path):
    code, said = _dry(tmp_path, _config(
        tmp_path, '{ kind = "multi-turn", sessions = 4, turns = 3, user_len = 1000000000 }'))
    assert code == 2
    assert "longest request is 2,000,002,558 tokens" in said
    assert "the model's context of 4,096 tokens (--max-model-len 4096)" in said
    assert "user_len or turns" in said


def test_a_multi_turn_load_too_large_to_hold_is_refused_before_it_is_drawn(tmp_path):
    code, said = _dry(tmp_path, _config(
        tmp_path, '{ kind = "multi-turn", sessions = 2000, turns = 1000, user_len = 1 }',
        input_len=1, output_len=2))
    assert code == 2, said  # was MemoryError when the prompts were drawn
    assert "more than load.max_prompt_tokens 50,000,000" in said and "GiB" in said


def test_the_reference_prompts_count_against_the_budget_and_the_context(tmp_path):
    experiment = load_experiment()
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False)
    fits = spec.model_copy(update={"input_len": 4096 - 509})
    check_units(experiment, [fits])
    with pytest.raises(ConfigError, match=r"4,097 tokens \(prompt 3,588 \+ completion 509\)"):
        check_units(experiment, [spec.model_copy(update={"input_len": 4096 - 508})])
    small = experiment.override("load", max_prompt_tokens=32 * 1031 + 2 * 1031)
    check_units(small, [spec])  # 32 measured + 2 warmup prompts: exactly the budget
    with pytest.raises(ConfigError, match="max_prompt_tokens"):
        check_units(small.override("load", max_prompt_tokens=34 * 1031 - 1), [spec])


@pytest.mark.parametrize("args,context", [
    (["--max-model-len", "2k"], 2000), (["--max-model-len=2K"], 2048),
    (["--max_model_len", "1000"], 1000), (["--max-model-len", "-1"], 4096),
    (["--max-model-len", "auto"], 4096)])
def test_the_models_context_is_read_as_vllm_reads_the_flag(args, context):
    from e2e.session.bounds import model_context

    raw = load_experiment().model_dump(mode="json")
    raw["server"]["args"] = [a for a in raw["server"]["args"] if a not in ("--max-model-len",
                                                                          "4096")]
    raw["arms"]["main"]["args"] = args
    from e2e.config import Experiment

    assert model_context(Experiment.model_validate(raw), "main")[0] == context


def test_a_model_folders_config_gives_the_context(tmp_path):
    from e2e.config import Experiment
    from e2e.session.bounds import model_context

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    raw = load_experiment().model_dump(mode="json")
    raw["server"].update(model=str(tmp_path), args=[])
    assert model_context(Experiment.model_validate(raw), "main") == (
        512, f"{tmp_path / 'config.json'}'s max_position_embeddings")


# --- run ids never use exponent notation -------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e9))
def test_every_rate_a_search_can_reach_names_a_run(rate):
    spec = RunSpec.resolve(load_experiment(), arm="main", concurrency=1, dspark=False)
    run = spec.model_copy(update={"request_rate": round_rate(rate)})
    assert safe_name(run.run_id, "run id") and "e" not in run.run_id.split("rate")[1].split("-")[0]
    assert float(run.run_id.split("-rate")[1].split("-")[0]) == pytest.approx(
        round_rate(rate), rel=1e-5)


def test_a_capacity_search_up_to_a_billion_requests_a_second_runs_to_its_end(tmp_path,
                                                                            monkeypatch):
    """The search doubles from 4 req/s while the arm meets its objective; past 1e6 req/s
    ``%g`` gave ``3.68e+06``, which no run id may hold, and the search died there."""
    import test_capacity
    from e2e.capacity import SearchSettings, capacity
    from e2e.results.capacity import objective_of

    monkeypatch.setattr(test_capacity, "TRUTH", {"main": 3e8, "slow": 2e8})
    fake = test_capacity.FakeServers()
    search = SearchSettings(start=4.0, factor=16.0, max_rate=1e9, repeats=2, resolution=1.0)
    result = capacity(test_capacity._experiment(), tmp_path, arms=["main"],
                      objective=objective_of("tpot=20ms,ttft=500ms", 90.0, None), search=search,
                      executor=fake)
    assert max(float(r.split("-rate")[1].split("-")[0]) for r in fake.ran) > 1e8
    assert all(safe_name(r) for r in fake.ran)
    assert result.arms["main"].estimate is not None and math.isfinite(
        result.arms["main"].estimate.rate)


def test_a_rate_beyond_any_server_is_refused_not_turned_into_a_300_digit_run_id(tmp_path):
    for rate in ("1e300", "1e-300"):
        got = runner.invoke(app, ["run", "--request-rate", rate, "--prompts", "2",
                                  "--results", str(tmp_path / "r")])
        said = " ".join(got.output.split())
        assert got.exit_code == 2 and "Traceback" not in said, said
        assert len(said) < 400 and not (tmp_path / "r").exists()
