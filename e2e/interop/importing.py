"""What every import of another tool's results shares, whichever tool wrote the file: a
tool's format as read (``Reader``: its documents, and one of them as a run; each registered
once in ``e2e.interop.formats``), the options the command line gives (``ImportOptions``), a
converted run (``ImportedRun``), the length check (``length_findings``) and the import into
the results store (``import_file``: idempotent by content, ``--force`` replaces, the folder
held as a sweep holds it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.errors import ConfigError
from e2e.names import check_name
from e2e.paths import read_bounded, sha256_file
from e2e.results.records import RequestRecord, RunRecord
from e2e.results.store import (REQUESTS, finalize, new_partial_dir, next_attempt_dir,
                               write_requests, write_run, writing)

__all__ = ["Reader", "ImportOptions", "ImportedRun", "import_note", "import_file",
           "content_sha256", "length_findings", "whole"]


@dataclass(frozen=True)
class ImportOptions:
    """What the command line says about imported runs; None: read it from the file.

    ``experiment`` names the results folder the runs join. ``strict_lengths`` makes a prompt
    or completion of other than the spec's length invalidate the run (as in an e2e run)
    instead of warning: vLLM's random dataset re-tokenizes text prompts, so a prompt may be a
    token longer or shorter than asked for."""

    experiment: str
    arm: str | None = None
    concurrency: int | None = None
    dspark: bool | None = None
    prompts: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    seed: int | None = None
    warmup_requests: int | None = None
    repeat: int | None = None
    strict_lengths: bool = False
    force: bool = False  # import a result again that the folder already holds (replacing it)
    lock_wait_s: float = 0.0  # how long to wait for another e2e writing into the folder

    def __post_init__(self) -> None:
        check_name(self.experiment, "--experiment")
        if self.arm is not None:
            check_name(self.arm, "--arm")


@dataclass(frozen=True)
class ImportedRun:
    record: RunRecord
    requests: tuple[RequestRecord, ...] | None  # None: the file has no per-request arrays


def import_note(source: str, tool: str) -> str:
    """The warning every imported run carries (until records get a source marker)."""
    return f"imported from {tool}: {source}"


@dataclass(frozen=True)
class Reader:
    """One tool's format, read: ``read(path)`` the documents of a file (bad input a
    ConfigError), ``convert(doc, options, *, source, repeat=None, provenance=None)`` one of
    them as a run (pure); ``locate(path)`` the file a path the user gave names (AIPerf: the
    artifact folder's profile_export.jsonl); ``tool`` its name in what e2e says."""

    tool: str
    read: Callable[[Path], list[dict[str, Any]]]
    convert: Callable[..., ImportedRun]
    locate: Callable[[Path], Path] = Path


def whole(value: Any, key: str) -> int | None:
    """An integer from a JSON number or a --metadata string; None if absent."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"the file's {key} is {value!r}, not a number") from None
    if not number.is_integer():
        raise ConfigError(f"the file's {key} is {value!r}, not a whole number")
    return int(number)


def length_findings(ok, input_len: int, output_len: int, *, strict: bool,
                    why: str) -> tuple[list[str], list[str]]:
    """(reasons, notes) about an imported run's requests whose prompt or completion was not
    the spec's length: reasons (the run is invalid) with ``strict``, else notes ending in
    ``why`` (how the other tool counts tokens) and how to make them reasons."""
    from e2e.interop._boundary import lengths_why

    reasons: list[str] = []
    notes: list[str] = []
    for what, attr, want in (("prompt", "prompt_tokens", input_len),
                             ("completion", "completion_tokens", output_len)):
        off = sorted({getattr(r, attr) for r in ok if getattr(r, attr) != want})
        if off:
            text = (f"{sum(getattr(r, attr) != want for r in ok)} of {len(ok)} {what}s had "
                    f"other than {want} tokens ({', '.join(map(str, off[:5]))})")
            if strict:
                reasons.append(text)
            else:
                notes.append(f"{text}; {lengths_why(off, want, why)} (--strict-lengths makes "
                             "this invalid)")
    return reasons, notes


# ---------------------------------------------------------------- import (files) ----


def _first_repeat(results: Path, experiment: str) -> int:
    """Imported runs are numbered from the folder's report_from_run (2 when it has none), so
    the report counts them: the file's own warmups (--num-warmups) are already behind them."""
    seen = []
    for path in (Path(results) / experiment).glob("*/run.json"):
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("config", {}).get(
                "report_from_run")
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable run is the report's to warn about, not the import's
        if isinstance(value, int) and not isinstance(value, bool):
            seen.append(value)
    return max(seen) if seen else 2


def _native_runs(results: Path, experiment: str, cell: str) -> list[str]:
    """Run folders of ``cell`` that e2e made itself (not imported)."""
    native = []
    for path in sorted((results / experiment).glob(f"{cell}-r*/run.json")):
        try:
            provenance = json.loads(path.read_text(encoding="utf-8")).get("provenance") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(provenance, dict) and "imported" not in provenance:
            native.append(path.parent.name)
    return native


def content_sha256(doc: Any) -> str:
    """The hash of a result's content, not its bytes: the same result pretty-printed, with
    its keys in another order, or twice in one file, is the same result."""
    import hashlib

    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8")).hexdigest()


def _imported_before(results: Path, experiment: str) -> dict[Any, str]:
    """The key of every result this experiment's folder already holds an import of -> the
    run id that holds it: its content hash, and (imports made before content hashes) the
    file's sha256 with the result's index."""
    seen: dict[Any, str] = {}
    for path in sorted((Path(results) / experiment).glob("*/run.json")):
        try:
            doc = json.loads(read_bounded(path, 64 << 20))
            imported = (doc.get("provenance") or {}).get("imported") or {}
            if imported.get("content_sha256"):
                seen.setdefault(str(imported["content_sha256"]), path.parent.name)
            key = (str(imported["sha256"]), int(imported.get("index") or 0))
        except (OSError, ValueError, AttributeError, KeyError, TypeError, ConfigError):
            continue  # not an import, or unreadable: the report warns about the latter
        seen.setdefault(key, path.parent.name)
    return seen


def import_file(path: Path, options: ImportOptions, results: Path, *, reader: Reader,
                on_skip: Callable[[str], None] | None = None) -> list[tuple[Path, RunRecord]]:
    """Import every result in ``path``, a file of ``reader``'s format, into
    ``results/<experiment>/``; one run folder each (run.json, and requests.parquet when the
    file has per-request figures).

    Idempotent: a result (its content's sha256, or the file's sha256 and its index in the
    file) the folder already holds is skipped, ``on_skip`` told why, so importing a file twice
    cannot count its runs twice; ``options.force`` replaces the earlier import in place (its
    run id kept). The experiment's folder is held meanwhile, as a sweep holds it: another e2e
    writing there makes the import wait ``options.lock_wait_s``, then refuse
    (ResultsBusyError) with nothing written."""
    path, results = reader.locate(Path(path)), Path(results)
    docs = reader.read(path)
    if options.repeat is not None and len(docs) > 1:
        raise ConfigError(f"{path} holds {len(docs)} results and --repeat numbers one run; "
                          "leave it out (each takes the next free repeat)")
    digest = sha256_file(path)
    # the folder held as a sweep holds it (e2e.results.store.writing): the repeat numbers this
    # import takes and the runs it writes are its alone
    with writing(results, options.experiment, wait_s=options.lock_wait_s):
        return _import_docs(docs, path, digest, options, results, on_skip=on_skip,
                            reader=reader)


def _import_docs(docs: list[dict[str, Any]], path: Path, digest: str, options: ImportOptions,
                 results: Path, *, on_skip: Callable[[str], None] | None,
                 reader: Reader) -> list[tuple[Path, RunRecord]]:
    """``import_file``'s writes, the folder held."""
    before = _imported_before(results, options.experiment)
    written = []
    # what the folder held before: imported runs change neither (no config, not e2e's own)
    first = None
    native_by_cell: dict[str, list[str]] = {}
    for i, doc in enumerate(docs):
        source = str(path) if len(docs) == 1 else f"{path} (result {i + 1})"
        cell = reader.convert(doc, options, source=source).record.spec.cell
        repeat = options.repeat  # asked for: an existing run of that number moves to .attempts
        content = content_sha256(doc)
        earlier = before.get(content) or before.get((digest, i))
        if earlier is not None and not options.force:
            if on_skip is not None:
                on_skip(f"{source}: already imported as {earlier} (the same result, content "
                        f"sha256 {content[:12]}); skipped (--force imports it again, "
                        "replacing it)")
            continue
        if earlier is not None and earlier.startswith(f"{cell}-r"):
            tail = earlier[len(cell) + 2:]
            repeat = int(tail) if tail.isdigit() else repeat  # --force: replace it in place
        if repeat is None:
            wanted = whole(doc.get("repeat"), "repeat")  # an e2e export's; kept when free
            taken = wanted is None or (results / options.experiment / f"{cell}-r{wanted}").exists()
            if taken and first is None:
                first = _first_repeat(results, options.experiment)
            repeat = wanted if not taken else first
            while taken and (results / options.experiment / f"{cell}-r{repeat}").exists():
                repeat += 1
        run = reader.convert(doc, options, source=source, repeat=repeat,
                     provenance={"path": str(path.resolve()), "sha256": digest, "index": i,
                                 "content_sha256": content})
        if cell not in native_by_cell:
            native_by_cell[cell] = _native_runs(results, options.experiment, cell)
        native = native_by_cell[cell]
        if native:
            record = run.record.model_copy(update={"warnings": [*run.record.warnings, (
                f"joins cell {cell} with e2e's own runs ({', '.join(native)}): its figures are "
                f"{reader.tool}'s (docs/how-to/interop.md says where they differ); give --arm "
                "to keep it apart")]})
            run = ImportedRun(record=record, requests=run.requests)
        partial = new_partial_dir(results, options.experiment, run.record.run_id)
        if run.requests is not None:
            write_requests(partial / REQUESTS, run.requests)
        write_run(partial, run.record)
        folder = finalize(partial, results, options.experiment, run.record.run_id)
        if earlier is not None and earlier != run.record.run_id:  # --force under another cell
            old = results / options.experiment / earlier
            aside = next_attempt_dir(old)
            aside.parent.mkdir(parents=True, exist_ok=True)
            os.rename(old, aside)  # the earlier import, kept beside like any replaced run
        before[content] = run.record.run_id  # the same result again in this file: skipped
        written.append((folder, run.record))
    return written
