"""Run lm-eval (pinned 0.4.13) as a subprocess against one arm's server, find its output and
read its sample log into per-document verdicts (``parse_samples``).

The command is ``python -m lm_eval run --model local-completions`` with
``tokenizer_backend=None,tokenized_requests=False`` (no tokenizer download; prompts go as
text), 5-shot, seed 1234 for every generator (the few-shot sampler's included), and
``--log_samples``. lm-eval sends ``Authorization: Bearer $OPENAI_API_KEY``: a server API key
travels in that variable, never on the command line.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.errors import BuildError, LoadError, ResultsError
from e2e.gsm8k.task import TaskSource
from e2e.results.gsm8k import SampleVerdict

__all__ = ["LM_EVAL_VERSION", "NUM_FEWSHOT", "SEED", "MAX_RETRIES", "STRICT", "FLEXIBLE",
           "LmEvalJob", "LmEvalOutput", "check_lm_eval", "lmeval_argv", "lmeval_env",
           "run_lmeval", "find_output", "parse_samples"]

LM_EVAL_VERSION = "0.4.13"
NUM_FEWSHOT = 5
SEED = 1234
MAX_RETRIES = 3
STRICT = "strict-match"
FLEXIBLE = "flexible-extract"


@dataclass(frozen=True)
class LmEvalJob:
    """One lm-eval invocation: which server, which task, where the output goes."""

    base_url: str
    model: str
    source: TaskSource
    output_dir: Path
    concurrency: int
    limit: int | None = None
    include_path: Path | None = None
    api_key: str | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class LmEvalOutput:
    results: dict[str, Any]
    samples_path: Path
    results_path: Path


def check_lm_eval() -> str:
    """The installed lm-eval's version; an error unless it is the pinned one (the verdicts
    depend on how it builds prompts and extracts answers)."""
    if importlib.util.find_spec("lm_eval") is None:
        raise BuildError("lm-eval is not installed in e2e's environment (it is one of e2e's "
                         "dependencies: reinstall e2e, e.g. pip install -e .); or pip install "
                         f"'lm-eval[api]=={LM_EVAL_VERSION}'")
    try:
        version = importlib.metadata.version("lm_eval")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    if version != LM_EVAL_VERSION:
        raise BuildError(f"lm-eval {version} is installed but e2e is pinned to {LM_EVAL_VERSION} "
                         f"(prompts and verdicts depend on it): pip install "
                         f"'lm-eval[api]=={LM_EVAL_VERSION}'")
    missing = [m for m in ("aiohttp", "tenacity", "requests", "tqdm") if importlib.util.find_spec(m) is None]
    if missing:
        raise BuildError(f"lm-eval's API models need {', '.join(missing)}: pip install "
                         f"'lm-eval[api]=={LM_EVAL_VERSION}'")
    return version


def _model_args(job: LmEvalJob) -> str:
    base_url = job.base_url.rstrip("/") + "/v1/completions"
    for name, value in (("base_url", base_url), ("model", job.model)):
        if "," in value or "=" in value:
            raise LoadError(f"lm-eval cannot take a {name} containing ',' or '=': {value!r}")
    args = [f"base_url={base_url}", f"model={job.model}", "tokenizer_backend=None",
            "tokenized_requests=False", f"num_concurrent={job.concurrency}",
            f"max_retries={MAX_RETRIES}"]
    if job.timeout_s is not None:
        args.append(f"timeout={int(job.timeout_s)}")
    return ",".join(args)


def lmeval_argv(job: LmEvalJob, python: str | None = None) -> list[str]:
    """The lm-eval command for ``job`` (pure)."""
    argv = [python or sys.executable, "-m", "lm_eval", "run",
            "--model", "local-completions", "--model_args", _model_args(job),
            "--tasks", job.source.task, "--num_fewshot", str(NUM_FEWSHOT),
            "--batch_size", "1", "--seed", str(SEED),
            "--log_samples", "--output_path", str(job.output_dir)]
    if job.include_path is not None:
        argv += ["--include_path", str(job.include_path)]
    if job.limit is not None:
        argv += ["--limit", str(job.limit)]
    return argv


def lmeval_env(job: LmEvalJob, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """lm-eval's environment: the API key (if any) in OPENAI_API_KEY; with local data, the
    Hugging Face libraries told to stay offline."""
    env = dict(os.environ if base is None else base)
    env.pop("OPENAI_API_KEY", None)
    if job.api_key:
        env["OPENAI_API_KEY"] = job.api_key
    if job.source.data_dir is not None:
        env["HF_DATASETS_OFFLINE"] = "1"
        env["HF_HUB_OFFLINE"] = "1"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_lmeval(job: LmEvalJob, log_path: Path) -> LmEvalOutput:
    """Run lm-eval to completion, its output in ``log_path``; raise LoadError if it fails."""
    argv = lmeval_argv(job)
    job.output_dir.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=lmeval_env(job),
                                  cwd=job.output_dir, check=False)
    except OSError as exc:
        raise LoadError(f"could not start lm-eval: {exc}") from exc
    if proc.returncode != 0:
        raise LoadError(f"lm-eval exited with status {proc.returncode} against {job.base_url}; "
                        f"last lines of {log_path}:\n{_tail(log_path)}")
    return find_output(job.output_dir, job.source.task)


def find_output(output_dir: Path, task: str) -> LmEvalOutput:
    """lm-eval writes ``<output>/<model, sanitized>/results_<date>.json`` and
    ``samples_<task>_<date>.jsonl``; find the one pair (an arm's folder holds one run)."""
    results = sorted(glob.glob(str(Path(output_dir) / "*" / "results_*.json")))
    samples = sorted(glob.glob(str(Path(output_dir) / "*" / f"samples_{glob.escape(task)}_*.jsonl")))
    if len(results) != 1 or len(samples) != 1:
        raise ResultsError(f"{output_dir}: expected one lm-eval results file and one samples "
                           f"file for {task}, found {len(results)} and {len(samples)}")
    try:
        data = json.loads(Path(results[0]).read_text(encoding="utf-8"))
        task_results = data["results"][task]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{results[0]}: unreadable lm-eval results ({exc})") from exc
    return LmEvalOutput(results=task_results, samples_path=Path(samples[0]),
                        results_path=Path(results[0]))


def _verdict(value: Any, where: str) -> bool:
    if isinstance(value, bool) or value in (0, 1, 0.0, 1.0):
        return bool(value)
    raise ResultsError(f"{where}: exact_match is {value!r}, expected 0 or 1")


def parse_samples(rows: Iterable[Mapping[str, Any]], *, source: str = "sample log") -> tuple[SampleVerdict, ...]:
    """Turn lm-eval's ``--log_samples`` rows (one per document per filter) into one verdict
    per document, sorted by ``doc_id``. Every document needs a strict-match row; a document
    whose filters carry different prompt hashes, or a repeated (doc, filter) row, is an error."""
    by_doc: dict[int, dict[str, tuple[str, bool]]] = {}
    for line_no, row in enumerate(rows, 1):
        where = f"{source}, row {line_no}"
        try:
            doc_id, prompt_hash, filter_name = row["doc_id"], row["prompt_hash"], row["filter"]
            value = row["exact_match"]
        except (KeyError, TypeError) as exc:
            raise ResultsError(f"{where}: missing field {exc}; is this an lm-eval "
                               "--log_samples file of a GSM8K task?") from None
        if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
            raise ResultsError(f"{where}: doc_id {doc_id!r} is not a document index")
        filters = by_doc.setdefault(doc_id, {})
        if filter_name in filters:
            raise ResultsError(f"{where}: doc {doc_id} appears twice for filter {filter_name!r}")
        filters[filter_name] = (str(prompt_hash), _verdict(value, where))
    verdicts = []
    for doc_id in sorted(by_doc):
        filters = by_doc[doc_id]
        if STRICT not in filters:
            raise ResultsError(f"{source}: doc {doc_id} has no {STRICT!r} row "
                               f"(filters: {', '.join(sorted(filters))})")
        hashes = {h for h, _ in filters.values()}
        if len(hashes) != 1:
            raise ResultsError(f"{source}: doc {doc_id} has different prompt hashes per filter")
        flexible = filters.get(FLEXIBLE)
        verdicts.append(SampleVerdict(doc_id=doc_id, prompt_hash=filters[STRICT][0],
                                      strict=filters[STRICT][1],
                                      flexible=flexible[1] if flexible else None))
    return tuple(verdicts)
