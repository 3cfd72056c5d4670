"""The results store: ``results/<experiment>/<run id>/`` with run.json written last.

A run is assembled in a hidden ``.partial`` folder and renamed into place when its files are
written, so a folder named after a run is always whole. A rerun of a run that exists (an
invalid one being retried) moves the old folder to ``.attempts/`` first: nothing is lost.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from e2e.errors import ResultsError
from e2e.paths import atomic_write_bytes, atomic_write_json
from e2e.records import RequestRecord, RunRecord

__all__ = ["experiment_dir", "new_partial_dir", "finalize", "write_requests", "read_requests",
           "write_run", "read_run", "iter_runs", "next_repeat", "utc_now"]

RUN_JSON = "run.json"
REQUESTS = "requests.parquet"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def experiment_dir(results: Path, experiment: str) -> Path:
    return Path(results) / experiment


def new_partial_dir(results: Path, experiment: str, run_id: str) -> Path:
    root = experiment_dir(results, experiment) / ".partial"
    try:
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{run_id}.", dir=root))
    except OSError as exc:
        raise ResultsError(f"cannot create a run folder under {root}: {exc}") from exc


def finalize(partial: Path, results: Path, experiment: str, run_id: str) -> Path:
    final = experiment_dir(results, experiment) / run_id
    try:
        if final.exists():
            attempts = final.parent / ".attempts"
            attempts.mkdir(exist_ok=True)
            n = 1
            while (attempts / f"{run_id}.{n}").exists():
                n += 1
            os.replace(final, attempts / f"{run_id}.{n}")
        os.replace(partial, final)
    except OSError as exc:
        raise ResultsError(f"cannot move {partial} to {final}: {exc}; the run's files are in "
                           f"{partial}") from exc
    return final


def write_requests(path: Path, records: Sequence[RequestRecord]) -> None:
    frame = pd.DataFrame([r.model_dump() for r in records],
                         columns=list(RequestRecord.model_fields))
    frame["chunk_times_s"] = frame["chunk_times_s"].map(list)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


def read_requests(path: Path) -> list[RequestRecord]:
    frame = pd.read_parquet(path)
    out = []
    for row in frame.to_dict("records"):
        row = {k: (None if (not isinstance(v, (list, tuple)) and not hasattr(v, "__len__")
                            and pd.isna(v)) else v) for k, v in row.items()}
        row["chunk_times_s"] = tuple(float(x) for x in row["chunk_times_s"])
        for key in ("prompt_tokens", "completion_tokens", "status"):
            if row.get(key) is not None:
                row[key] = int(row[key])
        out.append(RequestRecord.model_validate(row))
    return out


def write_run(folder: Path, record: RunRecord) -> None:
    atomic_write_json(Path(folder) / RUN_JSON, record.model_dump(mode="json"))


def read_run(folder: Path) -> RunRecord:
    path = Path(folder) / RUN_JSON
    try:
        return RunRecord.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from exc


def iter_runs(results: Path, experiment: str) -> Iterator[tuple[Path, RunRecord]]:
    """Every finished run of an experiment (folders with run.json, hidden ones skipped)."""
    root = experiment_dir(results, experiment)
    if not root.is_dir():
        return
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or not (folder / RUN_JSON).is_file():
            continue
        yield folder, read_run(folder)


def next_repeat(results: Path, experiment: str, cell: str) -> int:
    """The first repeat number of ``cell`` with no run folder yet."""
    root = experiment_dir(results, experiment)
    k = 1
    while (root / f"{cell}-r{k}").exists():
        k += 1
    return k
