"""The GSM8K task lm-eval runs: its own stock ``gsm8k`` (hub data), or e2e's local twin.

The local task is lm-eval 0.4.13's ``lm_eval/tasks/gsm8k/gsm8k.yaml`` with only the dataset
keys changed: ``dataset_path: json`` and absolute ``data_files`` (relative paths would resolve
against lm-eval's working directory). Everything that shapes a prompt or a verdict
(doc_to_text, doc_to_target, the train split as the few-shot pool, num_fewshot 5, stop
strings, greedy generation, the strict-match and flexible-extract filters, the exact_match
settings) is copied verbatim, so the prompts are byte-identical to the stock task's when the
JSONL rows are the hub's rows in the hub's order. ``tests/test_gsm8k_task.py`` checks this
against the stock YAML of the installed lm-eval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from e2e.errors import ConfigError
from e2e.paths import atomic_write_text, sha256_file

__all__ = ["STOCK_TASK", "LOCAL_TASK", "TaskSource", "resolve_data", "write_local_task"]

STOCK_TASK = "gsm8k"
LOCAL_TASK = "e2e_gsm8k_local"
SPLITS = ("train", "test")

# lm-eval 0.4.13 tasks/gsm8k/gsm8k.yaml, dataset keys replaced (see the module docstring).
# {data_files} is a JSON object, which is valid YAML flow syntax with any path in it.
_LOCAL_YAML = """\
# Written by e2e: lm-eval 0.4.13's gsm8k task reading local JSONL files.
task: {task}
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files: {data_files}
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\\\$"
      - "(?s).*#### "
      - "\\\\.$"
generation_kwargs:
  until:
    - "Question:"
    - "</s>"
    - "<|im_end|>"
  do_sample: false
  temperature: 0.0
repeats: 1
num_fewshot: 5
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
"""


@dataclass(frozen=True)
class TaskSource:
    """Where the GSM8K documents come from: the hub (``data_dir`` None) or local JSONL."""

    data_dir: Path | None = None
    sha256: tuple[tuple[str, str], ...] = ()

    @property
    def task(self) -> str:
        return STOCK_TASK if self.data_dir is None else LOCAL_TASK

    def describe(self) -> dict[str, object]:
        """The identity of the data, stored with results so a resume cannot mix sources."""
        if self.data_dir is None:
            return {"kind": "hub", "task": STOCK_TASK, "dataset": "openai/gsm8k (main)"}
        return {"kind": "local", "task": LOCAL_TASK, "dir": str(self.data_dir),
                "sha256": dict(self.sha256)}


def resolve_data(data_dir: Path | str | None) -> TaskSource:
    """Check a ``--data`` folder (``train.jsonl`` and ``test.jsonl``) and hash its files."""
    if data_dir is None:
        return TaskSource()
    root = Path(data_dir).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"--data {data_dir}: no such folder (it must hold train.jsonl and test.jsonl)")
    hashes = []
    for split in SPLITS:
        path = root / f"{split}.jsonl"
        if not path.is_file():
            raise ConfigError(f"--data {data_dir}: {path.name} is missing (GSM8K needs train.jsonl "
                              "for the 5-shot examples and test.jsonl for the questions)")
        hashes.append((path.name, sha256_file(path)))
    return TaskSource(data_dir=root, sha256=tuple(hashes))


def local_task_yaml(data_dir: Path) -> str:
    """The local task's YAML text for JSONL files in ``data_dir`` (an absolute folder)."""
    data_dir = Path(data_dir)
    if not data_dir.is_absolute():
        raise ValueError(f"data folder must be absolute, got {data_dir}")
    files = {split: str(data_dir / f"{split}.jsonl") for split in SPLITS}
    return _LOCAL_YAML.format(task=LOCAL_TASK, data_files=json.dumps(files))


def write_local_task(source: TaskSource, task_dir: Path) -> Path | None:
    """Write the local task YAML into ``task_dir`` (lm-eval's ``--include_path``); return the
    folder, or None for the hub source, which needs no task of e2e's own."""
    if source.data_dir is None:
        return None
    atomic_write_text(Path(task_dir) / f"{LOCAL_TASK}.yaml", local_task_yaml(source.data_dir))
    return Path(task_dir)
