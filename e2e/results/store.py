"""The results store: one folder per unit, its record written last.

    results/<experiment>/<run id>/                          a load run (run.json)
    results/<experiment>/gsm8k/<mode>-<n|all>/<label>/      a GSM8K evaluation (arm.json)

A unit is assembled in a hidden ``<experiment>/.partial/`` folder and appears at its place
by one atomic rename, so a unit folder is always whole. A rerun of a unit that exists (an
invalid one being retried) swaps the new folder in atomically and then moves the old one to
``.attempts/`` beside it: nothing is lost, and there is no moment without a folder.

One e2e writes runs into an experiment folder at a time (``writing``: an flock kept beside
the server lock, ``$E2E_HOME/locks/results-<hash of the folder's real path>.lock``, so a
command refused before it ran anything adds nothing to the results folder): two sweeps into
one folder would each decide a unit is not done, run it, and replace the other's run with
theirs (a valid run displaced by an invalid one). A second writer waits for the first, then
refuses naming its pid. Every command that writes runs or a folder's state holds it (sweep,
run, capacity, gsm8k, the nightly, import); ``e2e report`` and ``e2e export`` do not: they
write only ``report/`` and ``export/``, rebuilt whole from the runs there, so a report can be
made while a sweep runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from pydantic import ValidationError

from e2e.plan import DuetSpec, EvalSpec, Unit
from e2e.names import check_name
from e2e.errors import ConfigError, NoSuchResults, ResultsBusyError, ResultsError
from e2e.paths import (as_umask_allows, atomic_write_bytes, atomic_write_json, flocked,
                       no_links, read_bounded, replace_dir, within)
from e2e.results._check import disagreement, outputs_disagreement, outputs_sha256
from e2e.results.records import RequestRecord, RunRecord

__all__ = ["writing", "load_records", "resume_state", "experiment_dir", "unit_dir", "record_name", "new_partial_dir", "finalize",
           "finalize_unit", "UnitState", "unit_state", "write_requests", "read_requests",
           "read_outputs", "load_outputs",
           "write_run", "read_run", "iter_runs", "next_repeat", "utc_now"]

RUN_JSON = "run.json"
ARM_JSON = "arm.json"
REQUESTS = "requests.parquet"
ATTEMPTS = ".attempts"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def experiment_dir(results: Path, experiment: str) -> Path:
    """``results/<experiment>``: the name checked by the one name rule, the folder refused
    when it resolves outside ``results`` (a symbolic link that leads out)."""
    check_name(experiment, "experiment name")
    return within(results, Path(results) / experiment, "an experiment folder")


_HELD: dict[str, int] = {}  # experiment folders this process writes now (re-entered: counted)


@contextlib.contextmanager
def writing(results: Path, experiment: str, *, wait_s: float = 0.0) -> Iterator[None]:
    """Hold ``results/<experiment>`` for this process's writes (module docstring): another
    e2e writing there makes this one wait up to ``wait_s`` (``server.lock_wait_s``,
    ``--lock-wait``, as for the server lock) and then raise ResultsBusyError naming its pid.
    Re-entered by the same process (a sweep around each of its executions) it holds on."""
    import hashlib

    from e2e.paths import e2e_home

    folder = experiment_dir(results, experiment)
    key = os.path.realpath(folder)
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    digest = hashlib.sha256(key.encode(errors="surrogateescape")).hexdigest()[:24]
    path = e2e_home() / "locks" / f"results-{digest}.lock"

    def busy(holder: str) -> ResultsBusyError:
        return ResultsBusyError(
            f"another e2e (pid {holder}) is writing runs into {folder} (lock {path}); two "
            "writers would replace each other's runs: wait for it to finish (--lock-wait "
            "SECONDS waits for it), stop it, or give another --results folder")

    with flocked(path, deadline=time.monotonic() + wait_s, busy=busy):
        _HELD[key] = 1
        try:
            yield
        finally:
            _HELD.pop(key, None)


def unit_dir(results: Path, experiment: str, unit: Unit) -> Path:
    """Where a finished unit's folder lives."""
    root = experiment_dir(results, experiment)
    if isinstance(unit, EvalSpec):
        return root / "gsm8k" / unit.eval_name / unit.label
    return root / unit.run_id


def record_name(unit: Unit) -> str:
    """The record file of a unit's folder: run.json (load) or arm.json (GSM8K)."""
    return ARM_JSON if isinstance(unit, EvalSpec) else RUN_JSON


def new_partial_dir(results: Path, experiment: str, run_id: str) -> Path:
    check_name(run_id, "run id")
    root = no_links(experiment_dir(results, experiment),
                    experiment_dir(results, experiment) / ".partial", "a run folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{run_id}.", dir=root))
        as_umask_allows(folder, folder=True)  # a run folder as readable as the umask says
        return folder
    except OSError as exc:
        raise ResultsError(f"cannot create a run folder under {root}: {exc}") from exc


def next_attempt_dir(final: Path) -> Path:
    """Where the next earlier attempt of the unit at ``final`` goes: ``.attempts/<name>.<n>``,
    the first free n."""
    attempts = no_links(Path(final).parent, Path(final).parent / ATTEMPTS, "an earlier attempt")
    n = 1
    while (attempts / f"{Path(final).name}.{n}").exists():
        n += 1
    return no_links(attempts, attempts / f"{Path(final).name}.{n}", "an earlier attempt")


def finalize_unit(partial: Path, final: Path) -> Path:
    """Move a finished unit's folder into place atomically; an existing folder there (an
    earlier attempt) goes to ``.attempts/<name>.<n>`` once the new one is in place."""
    final = Path(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        replace_dir(partial, final, keep_old=next_attempt_dir(final))
    except OSError as exc:
        raise ResultsError(f"cannot move {partial} to {final}: {exc}; the unit's files are in "
                           f"{partial}") from exc
    return final


def finalize(partial: Path, results: Path, experiment: str, run_id: str) -> Path:
    """``finalize_unit`` for a load run's folder."""
    check_name(run_id, "run id")
    root = experiment_dir(results, experiment)
    return finalize_unit(partial, within(root, root / run_id, "a run folder"))


@dataclass(frozen=True)
class UnitState:
    """What the results folder says of one planned unit."""

    done: bool          # a valid record of exactly this unit exists: skip it
    attempts: int       # finished attempts so far (valid or not)
    last_reason: str | None = None


MAX_RECORD_BYTES = 64 << 20  # a run.json (or state file) is kilobytes; larger is not e2e's


def _read(path: Path) -> bytes:
    """A record or state file e2e wrote, bounded (a folder anyone can write to may hold a
    /dev/zero link or a runaway file): ConfigError past MAX_RECORD_BYTES."""
    return read_bounded(path, MAX_RECORD_BYTES, expect="a run.json e2e wrote", regular=True)


def unit_state(results: Path, experiment: str, unit: Unit) -> UnitState:
    """Done (valid, same spec), or how many attempts were made and why the last failed. An
    unreadable record, or one made with other settings, is never trusted: the unit is redone."""
    if isinstance(unit, DuetSpec):  # done when every side is; sides are retried together
        sides = [unit_state(results, experiment, side) for side in unit.sides]
        reasons = [s.last_reason for s in sides if s.last_reason]
        return UnitState(done=all(s.done for s in sides), attempts=max(s.attempts for s in sides),
                         last_reason="; ".join(reasons) or None)
    final = unit_dir(results, experiment, unit)
    attempts = final.parent / ATTEMPTS
    old = sum(not _interrupted(p / record_name(unit))
              for p in attempts.glob(f"{final.name}.*")) if attempts.is_dir() else 0
    path = final / record_name(unit)
    if not path.is_file():
        return UnitState(done=False, attempts=old)
    if _interrupted(path):  # a Ctrl-C is the user's, not the unit's: it spends no attempt
        return UnitState(done=False, attempts=old, last_reason="interrupted")
    try:
        data = json.loads(_read(path))
        spec = data.get("spec")
        same = (type(unit).model_validate(spec) == unit) if spec is not None else True
    except (OSError, ValueError, RecursionError, ConfigError, AttributeError) as exc:
        return UnitState(done=False, attempts=old + 1, last_reason=f"unreadable record: {exc}")
    if not same:
        return UnitState(done=False, attempts=old + 1,
                         last_reason="the unit on disk was made with other settings")
    valid = bool(data.get("valid", True))
    if valid and isinstance(unit, EvalSpec) and not (final / "verdicts.jsonl").is_file():
        valid = False
    reason = "; ".join(data.get("invalid_reasons") or []) or None
    if valid and not isinstance(unit, EvalSpec):  # figures that are not its requests': redo
        try:
            wrong = _untrusted(RunRecord.model_validate(data), final)
        except ValidationError as exc:
            wrong = _unreadable(exc)
        if wrong:
            return UnitState(done=False, attempts=old + 1, last_reason=f"run.json: {wrong}")
    return UnitState(done=valid, attempts=old + 1, last_reason=reason)


INTERRUPTED = "interrupted (Ctrl-C or SIGTERM)"
"""How the session's reason for a unit stopped by Ctrl-C or SIGTERM begins."""


def _interrupted(path: Path) -> bool:
    """Whether the record at ``path`` is of a unit stopped by Ctrl-C or SIGTERM (and nothing
    else went wrong): a rerun does not count it as one of the unit's attempts."""
    try:
        reasons = json.loads(_read(path)).get("invalid_reasons") or []
    except (OSError, ValueError, RecursionError, ConfigError, AttributeError):
        return False
    return bool(reasons) and all(str(r).startswith(INTERRUPTED) for r in reasons)


def _untrusted(record: RunRecord, folder: Path) -> str | None:
    """Why ``record``'s figures or recorded outputs cannot be trusted against its folder's
    requests.parquet (``e2e.results._check``), or None; imported runs and runs without the
    file unchecked, and the outputs of a record older than their digest (schema 1-6)."""
    path = Path(folder) / REQUESTS
    if "imported" in (record.provenance or {}) or not path.is_file():
        return None
    digested = record.outputs_sha256 is not None or record.schema_version >= OUTPUTS_DIGESTED
    try:
        wrong = (disagreement(record.metrics, read_requests(path, outputs=False))
                 if record.metrics is not None else None)
        if wrong is None and digested:
            wrong = outputs_disagreement(record.outputs_sha256, _outputs_sha256(path))
    except Exception as exc:  # noqa: BLE001 (a damaged parquet is the answer, not a crash)
        return f"its requests.parquet cannot be read ({type(exc).__name__})"
    return wrong


OUTPUTS_DIGESTED = 7  # the run.json schema from which every record has its outputs' digest


OUTPUTS = "output_token_ids"


def write_requests(path: Path, records: Sequence[RequestRecord]) -> str:
    """``requests.parquet``: one row per request; ``output_token_ids`` a list<int32> column
    (null where not recorded). Returns the digest of the outputs written (``outputs_sha256``):
    the run.json beside it records it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pd.DataFrame([r.model_dump(exclude={OUTPUTS}) for r in records],
                         columns=[k for k in RequestRecord.model_fields if k != OUTPUTS])
    frame["chunk_times_s"] = frame["chunk_times_s"].map(list)
    table = pa.Table.from_pandas(frame, preserve_index=False).append_column(
        OUTPUTS, pa.array([r.output_token_ids for r in records], type=pa.list_(pa.int32())))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())
    return outputs_sha256(table.column("index"), table.column(OUTPUTS))


def _outputs_sha256(path: Path) -> str:
    """The digest of a ``requests.parquet``'s outputs as stored (only those two columns read;
    a file without the outputs column: every output not recorded)."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=["index"] + ([OUTPUTS] if OUTPUTS in names else []))
    return outputs_sha256(table.column("index"),
                          table.column(OUTPUTS) if OUTPUTS in names else None)


def read_requests(path: Path, *, outputs: bool = True) -> list[RequestRecord]:
    """The records of a ``requests.parquet``; a file written before outputs were recorded
    (no ``output_token_ids`` column) reads with every output None (not recorded), as does
    every file with ``outputs=False`` (the column is not read: the timings' checks need
    none of it)."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    frame = pq.read_table(path, columns=[c for c in names if outputs or c != OUTPUTS]).to_pandas()
    out = []
    for row in frame.to_dict("records"):
        ids = row.pop(OUTPUTS, None)
        row = {k: (None if (not isinstance(v, (list, tuple)) and not hasattr(v, "__len__")
                            and pd.isna(v)) else v) for k, v in row.items()}
        row[OUTPUTS] = None if ids is None else tuple(ids.tolist())
        row["chunk_times_s"] = tuple(float(x) for x in row["chunk_times_s"])
        for key in ("prompt_tokens", "completion_tokens", "status"):
            if row.get(key) is not None:
                row[key] = int(row[key])
        if "retried" in row:  # files written before the column have none: False
            row["retried"] = bool(row["retried"])
        out.append(RequestRecord.model_validate(row))
    return out


def read_outputs(path: Path) -> dict[int, tuple[int, ...] | None]:
    """A ``requests.parquet``'s outputs by request index (only those two columns are read);
    every output None in a file written before outputs were recorded."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=["index"] + ([OUTPUTS] if OUTPUTS in names else []))
    indices = table.column("index").to_pylist()
    if OUTPUTS not in names:
        return dict.fromkeys(indices)
    return {i: None if ids is None else tuple(ids)
            for i, ids in zip(indices, table.column(OUTPUTS).to_pylist())}


def load_outputs(results_dir: Path, records: Sequence[RunRecord],
                 ) -> tuple[dict[str, dict[int, tuple[int, ...] | None]], tuple[str, ...]]:
    """Each run's outputs (``read_outputs`` of ``<results_dir>/<run id>/requests.parquet``),
    by run id, and a message for each run whose file could not be read (its outputs then
    count as not recorded). Imported runs have none to read."""
    out: dict[str, dict[int, tuple[int, ...] | None]] = {}
    problems: list[str] = []
    for record in records:
        if "imported" in (record.provenance or {}):
            continue
        path = Path(results_dir) / check_name(record.run_id, "run id") / REQUESTS
        if not path.is_file():
            continue
        try:
            out[record.run_id] = read_outputs(path)
        except Exception as exc:  # noqa: BLE001 (a damaged parquet: outputs not recorded)
            problems.append(f"{record.run_id}: its outputs cannot be read "
                            f"({type(exc).__name__}); counted as not recorded")
    return out, tuple(problems)


def write_run(folder: Path, record: RunRecord) -> None:
    atomic_write_json(Path(folder) / RUN_JSON, record.model_dump(mode="json"))


def _unreadable(exc: OSError | ValidationError | ConfigError) -> str:
    """Why a run.json could not be read, in one line: a ValidationError (bad JSON is one too)
    names its first error only, as the whole of it is a screenful."""
    if isinstance(exc, OSError):
        return f"cannot read it ({exc.strerror or exc})"
    if isinstance(exc, ConfigError):  # read_bounded: too large, or unreadable
        return f"cannot read it ({exc})"
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the record"
    return f"not a valid run record ({exc.error_count()} error(s), first: {where}: {first['msg']})"


def read_run(folder: Path) -> RunRecord:
    path = Path(folder) / RUN_JSON
    try:
        return RunRecord.model_validate_json(_read(path))
    except (OSError, ValidationError, ConfigError) as exc:
        raise ResultsError(f"{path}: {_unreadable(exc)}") from exc


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


def load_records(results_dir: Path) -> tuple[tuple[RunRecord, ...], tuple[str, ...]]:
    """Every ``*/run.json`` directly under ``results_dir``, sorted by folder name, and a
    message for each one that could not be read or validated (the report shows them as
    warnings)."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise NoSuchResults(f"{results_dir}: no such results folder (give results/<experiment>)")
    records: list[RunRecord] = []
    problems: list[str] = []
    for path in sorted(results_dir.glob("*/run.json")):
        try:
            record = RunRecord.model_validate_json(_read(path))
        except (OSError, ValidationError, ConfigError) as exc:
            problems.append(f"skipped {path.parent.name}/run.json: {_unreadable(exc)}")
            continue
        wrong = _untrusted(record, path.parent)
        if wrong:
            problems.append(f"skipped {path.parent.name}/run.json: {wrong}")
            continue
        records.append(record)
    return tuple(records), tuple(problems)


def resume_state(path: Path, expected: dict[str, Any], *, what: dict[str, str] | None = None,
                 hint: str = "give another --results or remove that folder") -> dict | None:
    """The state a resumed folder's ``path`` (a JSON file) was started with, or None for a new
    folder. Every key of ``expected`` must be as it was: a resumed night, bisect search or
    sweep measures one thing, so anything else is a ``ResultsError`` that names the key
    (``what`` gives it words), both values and what to do."""
    if not path.exists():
        return None
    try:
        state = json.loads(_read(path))
    except (OSError, ValueError, RecursionError, ConfigError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}; move it aside to start over") from exc
    if not isinstance(state, dict):
        raise ResultsError(f"{path} is not a JSON object; move it aside to start over")
    for key, value in expected.items():
        if state.get(key) != value:
            started = f" on {state['started_at']}" if state.get("started_at") else ""
            raise ResultsError(
                f"{path.parent} was started{started} with another "
                f"{(what or {}).get(key, key)} ({state.get(key)!r}, now {value!r}): {hint}")
    return state
