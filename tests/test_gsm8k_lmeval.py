"""The lm-eval command, environment and output discovery (no lm-eval run here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.errors import LoadError, ResultsError
from e2e.gsm8k.lmeval import LmEvalJob, find_output, lmeval_argv, lmeval_env
from e2e.gsm8k.task import TaskSource


def job(tmp_path: Path, **kw) -> LmEvalJob:
    base = dict(base_url="http://127.0.0.1:8000/", model="/models/tiny", source=TaskSource(),
                output_dir=tmp_path / "out", concurrency=8)
    return LmEvalJob(**(base | kw))


def test_argv_hub_task(tmp_path):
    argv = lmeval_argv(job(tmp_path), python="py")
    assert argv[:4] == ["py", "-m", "lm_eval", "run"]
    model_args = argv[argv.index("--model_args") + 1]
    assert model_args == ("base_url=http://127.0.0.1:8000/v1/completions,model=/models/tiny,"
                          "tokenizer_backend=None,tokenized_requests=False,num_concurrent=8,"
                          "max_retries=3")
    assert argv[argv.index("--model") + 1] == "local-completions"
    assert argv[argv.index("--tasks") + 1] == "gsm8k"
    assert argv[argv.index("--num_fewshot") + 1] == "5"
    assert argv[argv.index("--seed") + 1] == "1234"
    assert "--log_samples" in argv
    assert "--limit" not in argv and "--include_path" not in argv


def test_argv_local_task_with_limit(tmp_path):
    source = TaskSource(data_dir=tmp_path)
    argv = lmeval_argv(job(tmp_path, source=source, limit=50, include_path=tmp_path / "task"))
    assert argv[argv.index("--tasks") + 1] == "e2e_gsm8k_local"
    assert argv[argv.index("--include_path") + 1] == str(tmp_path / "task")
    assert argv[argv.index("--limit") + 1] == "50"


def test_model_with_comma_is_refused(tmp_path):
    with pytest.raises(LoadError, match="model"):
        lmeval_argv(job(tmp_path, model="a,b"))


def test_env_carries_api_key_and_offline_flags(tmp_path):
    env = lmeval_env(job(tmp_path, api_key="s3cret"), base={"OPENAI_API_KEY": "other", "PATH": "/bin"})
    assert env["OPENAI_API_KEY"] == "s3cret" and env["PATH"] == "/bin"
    assert "HF_DATASETS_OFFLINE" not in env
    assert "s3cret" not in " ".join(lmeval_argv(job(tmp_path, api_key="s3cret")))
    env = lmeval_env(job(tmp_path, source=TaskSource(data_dir=tmp_path)), base={"OPENAI_API_KEY": "x"})
    assert "OPENAI_API_KEY" not in env
    assert env["HF_DATASETS_OFFLINE"] == "1" and env["HF_HUB_OFFLINE"] == "1"


def test_find_output(tmp_path):
    model_dir = tmp_path / "__models__tiny"
    model_dir.mkdir()
    (model_dir / "results_2026.json").write_text(json.dumps(
        {"results": {"gsm8k": {"exact_match,strict-match": 0.5}}}))
    (model_dir / "samples_gsm8k_2026.jsonl").write_text("{}\n")
    out = find_output(tmp_path, "gsm8k")
    assert out.results == {"exact_match,strict-match": 0.5}
    assert out.samples_path.name == "samples_gsm8k_2026.jsonl"
    with pytest.raises(ResultsError, match="found 1 and 0"):
        find_output(tmp_path, "e2e_gsm8k_local")
