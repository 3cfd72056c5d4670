"""GSM8K's typed, immutable records (one document's verdict, one arm's evaluation, one
evaluation folder) and where they live:

    results/<experiment>/gsm8k/
        gsm8k.md, gsm8k.csv                     the report over every evaluation below
        <spec mode>-<all|n<limit>>/             one evaluation: same data, limit, spec mode
            eval.json                           EvalInfo
            task/e2e_gsm8k_local.yaml           the local task (with --data)
            <label>/                            one arm on one fresh server (main, main.r2, pr)
                arm.json  verdicts.jsonl  server.log  lm_eval.log  lm_eval/...
            .attempts/<label>.<n>/              earlier (invalid) attempts, kept

An arm's folder is written by the server session like a load run's and appears only whole
(one atomic rename); a valid arm is skipped on resume, an invalid one is retried.

``arm.json`` and ``eval.json`` carry ``schema_version``; bump it when a field changes meaning.
  1: first version.
  2: arm.json is a unit record like run.json: ``spec``, ``config``, ``arm_settings``,
     ``server`` (argv, environment), ``provenance``, ``plugin``, ``valid`` and
     ``invalid_reasons``. An invalid arm is written too (and retried); version 1 files read
     as valid arms without those blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from e2e.plan import EvalSpec
from e2e.errors import ConfigError, ResultsError
from e2e.paths import MAX_READ_BYTES, atomic_write_json, atomic_write_text, read_bounded
from e2e.redact import scrub
from e2e.results.records import PluginInfo, ServerInfo, SpecCounters

__all__ = ["GSM8K_SCHEMA_VERSION", "GSM8K_REFERENCE_ARM", "VERDICTS_FILE", "SampleVerdict",
           "EvalInfo", "ArmResult", "Evaluation", "gsm8k_dir", "eval_dir_name",
           "read_eval_info", "write_eval_info", "arm_is_complete", "read_arm", "write_verdicts",
           "read_verdicts", "read_evaluations"]

GSM8K_SCHEMA_VERSION = 2
GSM8K_REFERENCE_ARM = "main"
"""The arm every other arm's verdicts are compared with, document by document."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SampleVerdict(_Record):
    """One GSM8K document as one arm answered it (from lm-eval's sample log)."""

    doc_id: int = Field(ge=0)
    prompt_hash: str = Field(min_length=1, description="sha256 of the prompt lm-eval sent.")
    strict: bool = Field(description="strict-match exact_match: the '#### N' answer is right.")
    flexible: bool | None = Field(None, description="flexible-extract exact_match, if logged.")


class EvalInfo(_Record):
    """What one GSM8K evaluation folder holds: every arm in it ran on this data and limit."""

    schema_version: int = GSM8K_SCHEMA_VERSION
    experiment: str
    spec_mode: str
    limit: int | None
    data: dict[str, Any]
    lm_eval_version: str
    arms: tuple[str, ...] = Field((), description="Arm labels in the order they were first asked for.")


class ArmResult(_Record):
    """Everything ``arm.json`` holds about one arm's GSM8K evaluation on one fresh server."""

    schema_version: int = GSM8K_SCHEMA_VERSION
    experiment: str
    label: str = Field(description="Folder name: the arm, or '<arm>.r<k>' for its k-th server.")
    arm: str
    occurrence: int = Field(ge=1)
    spec_mode: str
    limit: int | None
    concurrency: int = Field(gt=0)
    data: dict[str, Any]
    lm_eval_version: str
    lm_eval_argv: list[str] = Field(default_factory=list,
                                    description="The lm-eval command, secrets left out.")
    base_url: str
    model: str
    n: int = Field(0, ge=0)
    accuracy_strict: float = 0.0
    accuracy_flexible: float | None = None
    lm_eval_results: dict[str, Any] = Field(
        default_factory=dict, description="lm-eval's own aggregate numbers for the task.")
    counters_before: SpecCounters | None = None
    counters_after: SpecCounters | None = None
    acceptance_length: float | None = None
    started_at: str
    finished_at: str
    wall_s: float
    warnings: list[str] = Field(default_factory=list)
    spec: EvalSpec | None = None
    config: dict[str, Any] = Field(default_factory=dict,
                                   description="Snapshot of the experiment config (redacted).")
    arm_settings: dict[str, Any] = Field(default_factory=dict)
    server: ServerInfo | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    plugin: PluginInfo | None = None
    valid: bool = True
    invalid_reasons: list[str] = Field(default_factory=list)

    @field_validator("invalid_reasons", "warnings")
    @classmethod
    def _scrubbed(cls, value: list[str]) -> list[str]:  # no secret in a reason (e2e.redact)
        return [scrub(v) for v in value]


# --- the store ------------------------------------------------------------------------------

ARM_FILE = "arm.json"
VERDICTS_FILE = "verdicts.jsonl"
EVAL_FILE = "eval.json"


@dataclass(frozen=True)
class Evaluation:
    """One evaluation folder as read back: its ``eval.json`` and its valid finished arms, each
    with its verdicts, in folder order."""

    info: EvalInfo
    arms: tuple[tuple[ArmResult, tuple[SampleVerdict, ...]], ...]


def gsm8k_dir(results: Path, experiment: str) -> Path:
    return Path(results) / experiment / "gsm8k"


def eval_dir_name(spec_mode: str, limit: int | None) -> str:
    return f"{spec_mode}-{'all' if limit is None else f'n{limit}'}"


def _read_json(path: Path) -> object:
    try:
        return json.loads(read_bounded(path, MAX_READ_BYTES, expect="a file e2e wrote"))
    except (OSError, ValueError, RecursionError, ConfigError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from exc


def read_eval_info(eval_dir: Path) -> EvalInfo | None:
    path = Path(eval_dir) / EVAL_FILE
    if not path.exists():
        return None
    try:
        return EvalInfo.model_validate(_read_json(path))
    except ValidationError as exc:
        raise ResultsError(f"{path}: not an e2e GSM8K eval record: {exc}") from exc


def write_eval_info(eval_dir: Path, info: EvalInfo) -> None:
    atomic_write_json(Path(eval_dir) / EVAL_FILE, info.model_dump(mode="json"))


def arm_is_complete(arm_dir: Path) -> bool:
    """Whether an arm's folder holds its record and its verdicts."""
    return (Path(arm_dir) / ARM_FILE).is_file() and (Path(arm_dir) / VERDICTS_FILE).is_file()


def read_arm(arm_dir: Path) -> ArmResult:
    path = Path(arm_dir) / ARM_FILE
    try:
        return ArmResult.model_validate(_read_json(path))
    except ValidationError as exc:
        raise ResultsError(f"{path}: not an e2e GSM8K arm record: {exc}") from exc


def write_verdicts(path: Path, verdicts: Iterable[SampleVerdict]) -> None:
    text = "".join(v.model_dump_json() + "\n" for v in verdicts)
    atomic_write_text(path, text)


def read_verdicts(path: Path) -> tuple[SampleVerdict, ...]:
    try:
        lines = read_bounded(path, MAX_READ_BYTES, expect="verdicts e2e wrote").decode(
            "utf-8", errors="replace").splitlines()
    except (OSError, ConfigError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from exc
    try:
        return tuple(SampleVerdict.model_validate_json(line) for line in lines if line.strip())
    except ValidationError as exc:
        raise ResultsError(f"{path}: not e2e verdicts: {exc}") from exc


def _read_evaluation(eval_dir: Path) -> Evaluation | None:
    """One evaluation folder's finished valid arms; None without eval.json or such an arm."""
    info = read_eval_info(eval_dir)
    if info is None:
        return None
    arms = []
    for arm_dir in sorted(p for p in Path(eval_dir).iterdir() if p.is_dir()):
        if not arm_is_complete(arm_dir):
            continue
        result = read_arm(arm_dir)
        if result.valid:
            arms.append((result, read_verdicts(arm_dir / VERDICTS_FILE)))
    return Evaluation(info=info, arms=tuple(arms)) if arms else None


def read_evaluations(results: Path, experiment: str) -> tuple[Evaluation, ...]:
    """Every GSM8K evaluation of ``experiment`` under ``results`` with a finished valid arm,
    in folder order; none when the experiment has no GSM8K folder."""
    root = gsm8k_dir(results, experiment)
    if not root.is_dir():
        return ()
    found = (_read_evaluation(p) for p in sorted(root.iterdir()) if p.is_dir())
    return tuple(e for e in found if e is not None)
