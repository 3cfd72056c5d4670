"""The local task builds byte-identical prompts to lm-eval's own gsm8k task.

lm-eval's stock task (from the installed package's gsm8k.yaml) reads ``openai/gsm8k`` from
the hub; here its ``datasets.load_dataset`` call is answered from the local JSONL files, so
both tasks see the same rows and any difference comes from the task definitions.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from e2e.errors import ConfigError
from e2e.gsm8k.task import LOCAL_TASK, STOCK_TASK, local_task_yaml, resolve_data, write_local_task

pytestmark = pytest.mark.slow  # the whole module is the slow tier

lm_eval = pytest.importorskip("lm_eval")
yaml = pytest.importorskip("yaml")

DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gsm8k").resolve()
DATASET_KEYS = {"task", "tag", "dataset_path", "dataset_name", "dataset_kwargs"}


def stock_yaml() -> dict:
    path = importlib.resources.files("lm_eval") / "tasks" / "gsm8k" / "gsm8k.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_local_yaml_is_the_stock_task_but_for_the_dataset(tmp_path):
    local = yaml.safe_load(local_task_yaml(tmp_path))
    stock = stock_yaml()
    assert {k: v for k, v in local.items() if k not in DATASET_KEYS} == \
        {k: v for k, v in stock.items() if k not in DATASET_KEYS}
    assert local["task"] == LOCAL_TASK
    assert local["dataset_path"] == "json" and local["dataset_name"] is None
    assert local["dataset_kwargs"]["data_files"] == {
        "train": str(tmp_path / "train.jsonl"), "test": str(tmp_path / "test.jsonl")}


def test_local_yaml_survives_odd_paths(tmp_path):
    odd = tmp_path / 'a dir: with "quotes" #and {braces}'
    local = yaml.safe_load(local_task_yaml(odd))
    assert local["dataset_kwargs"]["data_files"]["test"] == str(odd / "test.jsonl")


def test_resolve_data_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such folder"):
        resolve_data(tmp_path / "missing")
    (tmp_path / "test.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match="train.jsonl is missing"):
        resolve_data(tmp_path)
    assert resolve_data(None).task == STOCK_TASK


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """The stock and the local task, loaded once (indexing lm-eval's tasks takes seconds)."""
    if not (DATA / "test.jsonl").is_file():
        pytest.skip(f"no GSM8K data at {DATA}")
    import datasets
    import lm_eval.api.task as task_module
    from lm_eval.tasks import TaskManager

    task_dir = tmp_path_factory.mktemp("task")
    write_local_task(resolve_data(DATA), task_dir)
    real = datasets.load_dataset

    def hub_from_local(path=None, name=None, **kwargs):
        if path == "openai/gsm8k":
            assert name == "main"
            return real("json", data_files={s: str(DATA / f"{s}.jsonl") for s in ("train", "test")})
        return real(path=path, name=name, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(task_module.datasets, "load_dataset", hub_from_local)
        return TaskManager(include_path=str(task_dir)).load([STOCK_TASK, LOCAL_TASK])["tasks"]


def _prompts(tasks, *, limit=None, samples=None, seed=1234):
    """{task name: [(doc_id, prompt)]}, built as lm-eval's evaluator does."""
    out = {}
    for name, task in tasks.items():
        task.set_fewshot_seed(seed=seed)
        task.build_all_requests(limit=limit, samples=samples, rank=0, world_size=1)
        out[name] = [(i.doc_id, i.arguments[0]) for i in task.instances]
    return out


def test_prompts_match_stock_task_first_docs(tasks):
    out = _prompts(tasks, limit=6)
    stock, local = out[STOCK_TASK], out[LOCAL_TASK]
    assert [d for d, _ in local] == list(range(6))
    assert local == stock
    doc0 = local[0][1]
    assert doc0.count("Question: ") == 6  # five shots and the question
    assert doc0.endswith("Question: Janet\u2019s ducks lay 16 eggs per day. She eats three for "
                         "breakfast every morning and bakes muffins for her friends every day "
                         "with four. She sells the remainder at the farmers' market daily for $2 "
                         "per fresh duck egg. How much in dollars does she make every day at the "
                         "farmers' market?\nAnswer:")


def test_prompts_match_stock_task_scattered_docs(tasks):
    out = _prompts(tasks, samples=[17, 500, 1318])
    assert len(out[LOCAL_TASK]) == 3
    assert out[LOCAL_TASK] == out[STOCK_TASK]


def test_prompt_comparison_can_fail(tasks):
    """The few-shot examples depend on the seed: another seed gives other prompts, so the
    equality above is not vacuous."""
    a = _prompts(tasks, limit=2)[LOCAL_TASK]
    b = _prompts(tasks, limit=2, seed=1235)[LOCAL_TASK]
    assert a[0][1] != b[0][1]
    assert a[0][1].rsplit("Question: ", 1)[1] == b[0][1].rsplit("Question: ", 1)[1]


def test_scattered_docs_are_the_asked_for_questions(tasks):
    import json

    rows = (DATA / "test.jsonl").read_text(encoding="utf-8").splitlines()
    out = _prompts(tasks, samples=[17, 500, 1318])[LOCAL_TASK]
    for (_, prompt), index in zip(out, [17, 500, 1318], strict=True):
        question = json.loads(rows[index])["question"]
        assert prompt.endswith(f"Question: {question}\nAnswer:")
