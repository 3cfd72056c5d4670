"""Where GSM8K results live and how they are read back.

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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError

from e2e.analysis import GSM8KReport, GSM8KSection, summarize_gsm8k
from e2e.errors import ConfigError, ResultsError
from e2e.paths import (MAX_READ_BYTES, atomic_write_bytes, atomic_write_json,
                       atomic_write_text, read_bounded)
from e2e.results import ArmResult, EvalInfo, SampleVerdict

__all__ = ["gsm8k_dir", "eval_dir_name", "read_eval_info", "write_eval_info", "read_arm",
           "write_verdicts", "read_verdicts", "is_complete", "load_section", "load_report",
           "write_report"]

ARM_FILE = "arm.json"
VERDICTS_FILE = "verdicts.jsonl"
EVAL_FILE = "eval.json"


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


def is_complete(arm_dir: Path) -> bool:
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


def load_section(eval_dir: Path) -> GSM8KSection | None:
    """Summarize one evaluation folder's finished arms; None if it has none."""
    info = read_eval_info(eval_dir)
    if info is None:
        return None
    arms = []
    for arm_dir in sorted(p for p in Path(eval_dir).iterdir() if p.is_dir()):
        if not is_complete(arm_dir):
            continue
        result = read_arm(arm_dir)
        if result.valid:
            arms.append((result, read_verdicts(arm_dir / VERDICTS_FILE)))
    return summarize_gsm8k(info, arms) if arms else None


def load_report(results: Path, experiment: str) -> GSM8KReport | None:
    """Every GSM8K evaluation of ``experiment`` under ``results``; None if there is none.
    Sections are ordered base before dspark, full runs before limited ones."""
    root = gsm8k_dir(results, experiment)
    if not root.is_dir():
        return None
    sections: list[GSM8KSection] = []
    for eval_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        section = load_section(eval_dir)
        if section is not None:
            sections.append(section)
    sections.sort(key=lambda s: (s.spec_mode != "base", s.spec_mode, s.limit is not None,
                                 -(s.limit or 0)))
    return GSM8KReport(sections=tuple(sections)) if sections else None


def write_report(results: Path, experiment: str, markdown: bytes, csv: bytes) -> Sequence[Path]:
    root = gsm8k_dir(results, experiment)
    paths = [root / "gsm8k.md", root / "gsm8k.csv"]
    atomic_write_bytes(paths[0], markdown)
    atomic_write_bytes(paths[1], csv)
    return paths
