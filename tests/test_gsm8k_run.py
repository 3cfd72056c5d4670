"""The GSM8K pipeline with a scripted server and lm-eval: order of arms, fresh server per
arm, resume, failures, mixed data refused, acceptance length, the report and the command.
(The real server and lm-eval run in test_gsm8k_integration.py.)"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.config import load_experiment
from e2e.errors import ConfigError, LoadError, ResultsError
from e2e.gsm8k.lmeval import find_output
from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k
from e2e.results.gsm8k import arm_is_complete, read_arm, read_verdicts
from scripted import Scripted

SAMPLES = Path(__file__).parent / "data" / "gsm8k_samples"
GSM8K_DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gsm8k").resolve()


@dataclass
class Fake:
    """Scripted world: which sample log each server's lm-eval run returns, in call order."""

    logs: list[str]
    fail_at: int | None = None
    fails: int = 1  # lm-eval fails on this many calls from fail_at on
    jobs: list = field(default_factory=list)
    scripted: Scripted = field(default_factory=Scripted)

    @property
    def served(self):
        return self.scripted.served

    @property
    def stopped(self):
        return self.scripted.stopped

    def lmeval(self, job, log_path):
        index = len(self.jobs)
        self.jobs.append(job)
        if self.fail_at is not None and self.fail_at <= index < self.fail_at + self.fails:
            raise LoadError("lm-eval exited with status 1")
        out = job.output_dir / "__tiny"
        out.mkdir(parents=True)
        shutil.copy(SAMPLES / self.logs[index], out / f"samples_{job.source.task}_x.jsonl")
        (out / "results_x.json").write_text(json.dumps({"results": {job.source.task: {}}}))
        return find_output(job.output_dir, job.source.task)

    def runner(self) -> Runner:
        return Runner(servers=self.scripted.servers, lmeval=self.lmeval, check=lambda: "0.4.13")


@pytest.fixture
def experiment():
    return load_experiment(None)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (folder / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    return folder


def plan(experiment, tmp_path, data, arms="main,main,pr", **kw):
    return resolve_plan(experiment, arms=arms, dspark=kw.pop("dspark", False),
                        limit=kw.pop("limit", 12), concurrency=4, data=data,
                        results=tmp_path / "results", **kw)


@pytest.mark.slow
def test_every_arm_on_its_own_server_and_report(experiment, tmp_path, data):
    fake = Fake(["main.jsonl", "main_repeat.jsonl", "pr.jsonl"])
    p = plan(experiment, tmp_path, data)
    assert p.labels == ("main", "main.r2", "pr")
    report = run_gsm8k(p, fake.runner())
    assert fake.served == [("main", False), ("main", False), ("pr", False)]
    assert fake.stopped == 3
    for label in p.labels:  # each arm's folder holds the task it ran
        assert (p.eval_dir / label / "task" / "e2e_gsm8k_local.yaml").is_file()
    section = report.sections[0]
    assert [(a.name, a.correct, a.n) for a in section.arms] == [
        ("main", 4, 12), ("main (repeat)", 4, 12), ("pr", 10, 12)]
    assert section.arms[2].agreement.same == 6
    for label in p.labels:
        assert (p.eval_dir / label / "server.log").read_text().startswith("fake server")
        assert len(read_verdicts(p.eval_dir / label / "verdicts.jsonl")) == 12
    md = (tmp_path / "results" / "default" / "gsm8k" / "gsm8k.md").read_text()
    assert "pr matches main's verdict on 6 of 12; repeat 10" in md
    assert (tmp_path / "results" / "default" / "gsm8k" / "gsm8k.csv").read_text().count("\n") == 4


@pytest.mark.slow
def test_resume_skips_finished_arms_and_redoes_a_failed_one(experiment, tmp_path, data):
    p = plan(experiment, tmp_path, data)
    fake = Fake(["main.jsonl", "main_repeat.jsonl", "pr.jsonl"], fail_at=1)
    with pytest.raises(ResultsError, match="main.r2 invalid after 1 attempt.*lm-eval exited"):
        run_gsm8k(p, fake.runner(), max_attempts=1)
    assert fake.stopped == 3  # every server was stopped, the failed arm's too; pr still ran
    assert arm_is_complete(p.eval_dir / "main")
    failed = read_arm(p.eval_dir / "main.r2")  # the failed attempt is kept, as invalid
    assert not failed.valid and "lm-eval exited" in failed.invalid_reasons[0]
    assert not arm_is_complete(p.eval_dir / "main.r2")

    fake = Fake(["main_repeat.jsonl"])
    run_gsm8k(p, fake.runner())
    assert fake.served == [("main", False)]  # only the failed arm is made again
    assert read_arm(p.eval_dir / "main.r2").occurrence == 2
    assert read_arm(p.eval_dir / "main.r2").valid
    assert (p.eval_dir / ".attempts" / "main.r2.1" / "arm.json").is_file()  # nothing lost


def test_other_data_in_the_same_folder_is_refused(experiment, tmp_path, data):
    run_gsm8k(plan(experiment, tmp_path, data, arms="main"), Fake(["main.jsonl"]).runner())
    (data / "test.jsonl").write_text('{"question": "other", "answer": "#### 2"}\n')
    with pytest.raises(ResultsError, match="other data"):
        run_gsm8k(plan(experiment, tmp_path, data, arms="main,pr"), Fake(["pr.jsonl"]).runner())


def test_different_prompts_between_arms_is_an_error(experiment, tmp_path, data):
    fake = Fake(["main.jsonl", "pr_other_prompt.jsonl"])
    with pytest.raises(ResultsError, match="different prompts"):
        run_gsm8k(plan(experiment, tmp_path, data, arms="main,pr"), fake.runner())


@pytest.mark.slow
def test_dspark_records_acceptance_length(experiment, tmp_path, data):
    fake = Fake(["main.jsonl", "pr.jsonl"])
    report = run_gsm8k(plan(experiment, tmp_path, data, arms="main,pr", dspark=True), fake.runner())
    assert fake.served == [("main", True), ("pr", True)]
    # counters scraped before and after each eval: 10 more drafts, 8 more accepted
    assert [a.acceptance_length for a in report.sections[0].arms] == [pytest.approx(1.8)] * 2
    result = read_arm(tmp_path / "results" / "default" / "gsm8k" / "dspark-n12" / "pr")
    assert result.counters_after.drafts - result.counters_before.drafts == 10


def test_plan_validation(experiment, tmp_path, data):
    with pytest.raises(ConfigError, match="unknown arm"):
        plan(experiment, tmp_path, data, arms="main,nope")
    with pytest.raises(ConfigError, match="must include 'main'"):
        plan(experiment, tmp_path, data, arms="pr,pr")
    with pytest.raises(ConfigError, match="--limit"):
        plan(experiment, tmp_path, data, limit=0)
    with pytest.raises(ConfigError, match="no such folder"):
        plan(experiment, tmp_path, tmp_path / "nowhere")
    assert plan(experiment, tmp_path, data, limit=None).eval_dir.name == "base-all"


def test_command_reports_errors_with_exit_code(tmp_path, monkeypatch):
    from e2e.cli import app

    result = CliRunner().invoke(app, ["gsm8k", "--arms", "pr", "--data", str(tmp_path),
                                      "--results", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "must include 'main'" in result.output
    result = CliRunner().invoke(app, ["gsm8k", "--help"])
    for flag in ("--arms", "--dspark", "--no-dspark", "--limit", "--concurrency", "--data",
                 "--config", "--results"):
        assert flag in result.output


def test_a_relative_results_folder_gives_lm_eval_absolute_paths(experiment, tmp_path, data,
                                                                 monkeypatch):
    """lm-eval runs in its output folder: a relative --results (the README's default) must
    reach it as absolute paths, or it finds no task there."""
    monkeypatch.chdir(tmp_path)
    p = resolve_plan(experiment, arms="main", dspark=False, limit=12, concurrency=4, data=data,
                     results="results")
    fake = Fake(["main.jsonl"])
    run_gsm8k(p, fake.runner())
    job = fake.jobs[0]
    assert job.include_path.is_absolute() and job.output_dir.is_absolute()
    arm = tmp_path / "results" / "default" / "gsm8k" / "base-n12" / "main"
    assert arm_is_complete(arm) and (arm / "task" / "e2e_gsm8k_local.yaml").is_file()
