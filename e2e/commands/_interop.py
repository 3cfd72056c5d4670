"""``e2e import vllm-bench|aiperf|guidellm`` and ``e2e export``: thin typer commands over the
formats ``e2e.interop.formats`` registers (``READERS``, ``WRITERS``: the command's name is the
format's). Registered in e2e.cli with::

    app.add_typer(import_app, name="import")
    app.command("export")(export_command)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.commands._options import LockWaitOpt, flag_groups
from e2e.console import guard, print_run, say
from e2e.console import out as output
from e2e.errors import ConfigError

__all__ = ["import_app", "import_vllm_bench", "import_aiperf", "import_guidellm",
           "export_command", "EXPORT_FORMATS"]

EXPORT_FORMATS = ("vllm-bench",)  # --format's choices: e2e.interop.formats.WRITERS's names

import_app = typer.Typer(
    help="Bring other tools' results into a results folder, beside e2e's own runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@import_app.command("vllm-bench")
def import_vllm_bench(
    files: Annotated[list[Path], typer.Argument(
        help="vllm bench serve --save-result files (JSON; --append-result files too).")],
    arm: Annotated[Optional[str], typer.Option(
        help="Arm the runs belong to (default: the file's `arm` metadata, else its label).")] = None,
    concurrency: Annotated[Optional[int], typer.Option(
        help="Requests in flight (default: the file's max_concurrency).", min=1)] = None,
    dspark: Annotated[Optional[bool], typer.Option(
        "--dspark/--no-dspark", help="Spec mode (default: the file's `spec_mode` metadata, "
        "else dspark when the file has spec-decode figures).", show_default=False)] = None,
    prompts: Annotated[Optional[int], typer.Option(
        help="Measured requests (default: the file's num_prompts).", min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(
        help="Prompt tokens asked for (default: the file's `input_len` metadata, else the "
        "most common prompt length).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(
        help="Completion tokens asked for (default: as --input-len).", min=2)] = None,
    seed: Annotated[Optional[int], typer.Option(
        help="Prompt seed (vllm bench serve does not record its --seed; default 0).")] = None,
    warmup_requests: Annotated[Optional[int], typer.Option(
        help="Warmup requests before the measured ones (not recorded by vllm bench serve; "
        "default 0).", min=0)] = None,
    repeat: Annotated[Optional[int], typer.Option(
        help="Repeat number of the first run (default: the next free one from the folder's "
        "report_from_run, so the report counts it).", min=1)] = None,
    strict_lengths: Annotated[bool, typer.Option(
        "--strict-lengths", help="A prompt or completion of other than the asked length "
        "makes the run invalid (default: a warning; vLLM's random dataset can be a token off).")] = False,
    experiment: Annotated[Optional[str], typer.Option(
        help="Experiment folder the runs join (default: the config's name).")] = None,
    config: Annotated[Optional[Path], typer.Option(
        "--config", "-c", help="Experiment config whose name is the default --experiment (and "
        "its server.lock_wait_s the default --lock-wait).", dir_okay=False)] = None,
    results: Annotated[Path, typer.Option(
        help="Folder that receives results/<experiment>/<run id>/.")] = Path("results"),
    force: Annotated[bool, typer.Option(
        "--force", help="Import a result the folder already holds again, replacing it "
        "(default: skip it, so a file imported twice is not counted twice).")] = False,
    lock_wait: LockWaitOpt = None,
) -> None:
    """Turn vllm bench serve result files into runs in results/<experiment>/ (run.json, and
    requests.parquet when the file was saved with --save-detailed), so `e2e report` shows
    them beside e2e's own runs."""

    _import_tool("vllm-bench", files, experiment=experiment, config=config, results=results,
                 lock_wait=lock_wait, arm=arm, concurrency=concurrency, dspark=dspark,
                 prompts=prompts, input_len=input_len, output_len=output_len, seed=seed,
                 warmup_requests=warmup_requests, repeat=repeat, strict_lengths=strict_lengths,
                 force=force)


def _folder(experiment: str | None, config: Path | None,
            lock_wait: float | None) -> tuple[str, float]:
    """The experiment folder an import joins and how long it waits for another e2e writing
    there: the flags, else the config's name and ``server.lock_wait_s``."""
    if experiment is not None and lock_wait is not None:
        return experiment, lock_wait
    from e2e.config import load_experiment

    loaded = load_experiment(config)
    return (loaded.name if experiment is None else experiment,
            loaded.server.lock_wait_s if lock_wait is None else lock_wait)


def _import_tool(tool: str, files: list[Path], *, experiment, config, results, lock_wait,
                 **flags) -> None:
    """``e2e import <tool>``: each file's runs into results/<experiment>/, read by the format
    ``tool`` names (``e2e.interop.formats.READERS``)."""

    def body() -> None:
        from e2e.interop.formats import READERS
        from e2e.interop.importing import ImportOptions, import_file

        name, wait_s = _folder(experiment, config, lock_wait)
        if flags.get("repeat") is not None and len(files) > 1:
            raise ConfigError("--repeat numbers one run; with several files leave it out "
                              "(each takes the next free repeat)")
        options = ImportOptions(experiment=name, lock_wait_s=wait_s, **flags)
        for path in files:
            for folder, record in import_file(path, options, results, reader=READERS[tool],
                                              on_skip=say):
                print_run(folder, record, brief=True)  # its first warning names the file

    guard(body)


_Arm = Annotated[str, typer.Option(help="Arm the runs belong to (the tool records none).")]
_InputLen = Annotated[Optional[int], typer.Option(
    help="Prompt tokens asked for (default: the most common prompt length).", min=1)]
_OutputLen = Annotated[Optional[int], typer.Option(
    help="Completion tokens asked for (default: the most common completion length).", min=2)]
_Seed = Annotated[Optional[int], typer.Option(help="Prompt seed (default: the tool's, else 0).")]
_Warmups = Annotated[Optional[int], typer.Option(
    help="Warmup requests before the measured ones (default 0).", min=0)]
_Repeat = Annotated[Optional[int], typer.Option(
    help="Repeat number of the first run (default: the next free one from the folder's "
    "report_from_run).", min=1)]
_Strict = Annotated[bool, typer.Option(
    "--strict-lengths", help="A prompt or completion of other than the asked length makes "
    "the run invalid (default: a warning: the tool counts tokens with its own tokenizer).")]
_Experiment = Annotated[Optional[str], typer.Option(
    help="Experiment folder the runs join (default: the config's name).")]
_Config = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="Experiment config whose name is the default --experiment (and its "
    "server.lock_wait_s the default --lock-wait).", dir_okay=False)]
_Results = Annotated[Path, typer.Option(help="Folder that receives results/<experiment>/<run id>/.")]
_Force = Annotated[bool, typer.Option(
    "--force", help="Import a result the folder already holds again, replacing it.")]


@dataclass(frozen=True)
class ToolFlags:
    """The flags ``e2e import aiperf`` and ``e2e import guidellm`` share (after the files,
    the arm and the concurrency)."""

    input_len: _InputLen = None
    output_len: _OutputLen = None
    seed: _Seed = None
    warmup_requests: _Warmups = None
    repeat: _Repeat = None
    strict_lengths: _Strict = False
    experiment: _Experiment = None
    config: _Config = None
    results: _Results = Path("results")
    force: _Force = False
    lock_wait: LockWaitOpt = None


@import_app.command("aiperf")
@flag_groups
def import_aiperf(
    files: Annotated[list[Path], typer.Argument(
        help="AIPerf profile_export.jsonl files, or the artifact folders that hold them.")],
    arm: _Arm,
    concurrency: Annotated[Optional[int], typer.Option(
        help="Requests in flight (default: profile_export_aiperf.json's concurrency).",
        min=1)] = None,
    flags: ToolFlags = ToolFlags(),
) -> None:
    """Turn AIPerf's per-request export (`aiperf profile`'s profile_export.jsonl) into a run
    in results/<experiment>/ (run.json and requests.parquet), so `e2e report` gives it e2e's
    statistics beside e2e's own runs."""
    _import_tool("aiperf", files, **asdict(flags), arm=arm, concurrency=concurrency)


@import_app.command("guidellm")
@flag_groups
def import_guidellm(
    files: Annotated[list[Path], typer.Argument(
        help="GuideLLM benchmark reports (`guidellm benchmark`'s benchmarks.json).")],
    arm: _Arm,
    concurrency: Annotated[Optional[int], typer.Option(
        help="Requests in flight (default: a concurrent benchmark's streams).", min=1)] = None,
    flags: ToolFlags = ToolFlags(),
) -> None:
    """Turn a GuideLLM benchmark report into runs in results/<experiment>/ (one per
    benchmark of the report: run.json and requests.parquet), so `e2e report` gives them
    e2e's statistics beside e2e's own runs."""
    _import_tool("guidellm", files, **asdict(flags), arm=arm, concurrency=concurrency)


def export_command(
    results_dir: Annotated[Path, typer.Argument(
        help="An experiment's results folder, e.g. results/default.")],
    format: Annotated[Literal["vllm-bench"], typer.Option(
        "--format", help="Output format.")] = "vllm-bench",
    out: Annotated[Optional[Path], typer.Option(
        help="Folder for the files (default: RESULTS_DIR/export/<format>).")] = None,
    include_invalid: Annotated[bool, typer.Option(
        "--include-invalid", help="Export invalid runs too (default: valid runs only).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite files of the same name in --out (default: refuse).")] = False,
) -> None:
    """Write each run of a results folder in another tool's format: `vllm-bench` writes
    <run id>.json as `vllm bench serve --save-result --save-detailed` does."""

    def body() -> None:
        from e2e.interop.formats import WRITERS

        if format not in WRITERS:
            raise ConfigError(f"unknown --format {format!r}; known: {', '.join(WRITERS)}")
        target = out if out is not None else Path(results_dir) / "export" / format
        written, skipped = WRITERS[format](results_dir, target, include_invalid=include_invalid,
                                           force=force)
        for path in written:
            output.print(str(path), highlight=False, markup=False, soft_wrap=True)
        for line in skipped:
            say(f"skipped {line}")
        say(f"{len(written)} run(s) written to {target}, {len(skipped)} skipped")

    guard(body)
