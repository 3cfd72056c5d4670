"""``e2e micro``: the packing paths' micro-benchmark (measured by ``e2e.kernels.micro`` and
``e2e.kernels.step_bench``, written by ``e2e.render``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from e2e.commands._options import QuietOpt, csv_list, flag_groups
from e2e.console import guard, say
from e2e.console import out as output

__all__ = ["micro_command"]


@dataclass(frozen=True)
class MicroFlags:
    """``e2e micro``'s flags."""

    rows: Annotated[list[str] | None, typer.Option(
        metavar="N[,N...]", show_default=False,
        help="Row counts, comma-separated or repeated \\[default: 1,2,4,...,256,384].")] = None
    cols: Annotated[int, typer.Option(help="Columns (the SWA window).")] = 128
    runs: Annotated[int, typer.Option(help="Runs per (shape, path).")] = 4
    report_from_run: Annotated[int, typer.Option(
        "--report-from-run", help="First reported run: the median of runs report-from-run..runs "
        "is reported (earlier runs are warmups).")] = 2
    calls: Annotated[int, typer.Option(help="Calls per run (eager) and graph-replayed calls per run.")] = 500
    graph_calls: Annotated[int, typer.Option(help="Calls recorded in one CUDA graph.")] = 20
    paths: Annotated[list[str] | None, typer.Option(
        metavar="main|inplace|fused[,...]", show_default=False,
        help="Paths to time, comma-separated or repeated \\[default: all].")] = None
    out: Annotated[Path, typer.Option(help="Folder for micro.json, micro.md, micro.png.")] = Path("results/micro")
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="CPU under TRITON_INTERPRET=1: checks the pipeline, measures nothing.")] = False
    per_step: Annotated[bool, typer.Option(
        "--per-step", help="Also time the whole decode SWA metadata build (window + packing) per "
        "build and per V4.1/V4 step for main, pr, fused and the one launch (step.json, step.md).")] = False
    vllm_ops: Annotated[Path | None, typer.Option(
        help="vLLM's ops (for --per-step, and for vLLM's build beside the one launch's host "
        "cost) where vLLM is not installed: a file made by "
        "`python -m e2e.kernels.vllm_ops extract`.")] = None
    quiet: QuietOpt = False


@flag_groups
def micro_command(opts: MicroFlags) -> None:
    """Micro-benchmark the packing paths (µs per call, eager and in a CUDA graph)."""
    guard(lambda: _micro(opts))


def _micro(opts: MicroFlags) -> None:
    """Check that torch and Triton are there, measure (``e2e.kernels``), write and print
    (``e2e.render``)."""
    import importlib.util

    from e2e.errors import ConfigError

    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:  # before e2e.kernels, which imports torch
        raise ConfigError(f"e2e micro needs torch and Triton ({', '.join(missing)} missing); "
                          "install the kernels extra: pip install -e '.[kernels]' (on a "
                          "CPU-only machine the CPU torch wheel first, as .ci/run does)")
    from e2e.kernels.micro import BENCH_PATHS, DEFAULT_ROWS, MicroSpec, parse_int_list, run_micro
    from e2e.render import micro_markdown, write_micro

    log = (lambda message: None) if opts.quiet else say
    spec = MicroSpec(rows=parse_int_list(opts.rows, DEFAULT_ROWS), cols=opts.cols,
                     runs=opts.runs, report_from=opts.report_from_run, calls=opts.calls,
                     graph_calls=opts.graph_calls, paths=tuple(csv_list(opts.paths) or BENCH_PATHS),
                     dry_run=opts.dry_run)
    ops = None if opts.vllm_ops is None else _vllm_ops(opts.vllm_ops, opts.dry_run)
    result = run_micro(spec, log=log, ops=ops)
    written = write_micro(result, opts.out)
    step_text = None
    if opts.per_step:
        from e2e.kernels.step_bench import StepSpec, measure_steps
        from e2e.render import write_steps

        step_rows = tuple(r for r in spec.rows if r <= 384) or (1,)
        step_result = measure_steps(
            StepSpec(rows=step_rows, runs=spec.runs, report_from=spec.report_from,
                     graph_calls=spec.graph_calls),
            ops_file=opts.vllm_ops, dry_run=opts.dry_run, log=log)
        step_text, step_written = write_steps(step_result, opts.out)
        written += step_written
    output.print(micro_markdown(result), highlight=False, markup=False, soft_wrap=True)
    if step_text:
        output.print(step_text, highlight=False, markup=False, soft_wrap=True)
    output.print("wrote " + ", ".join(str(p) for p in written), highlight=False, markup=False)


def _vllm_ops(path: Path, dry_run: bool):
    """vLLM's ops from ``path`` (``e2e.kernels.step_bench.load_ops``), for vLLM's build beside
    the one launch's host cost; the Triton paths loaded first (interpreted on a dry run)."""
    from e2e.kernels import load_triton_paths
    from e2e.kernels.step_bench import load_ops

    if dry_run:
        import os

        os.environ["TRITON_INTERPRET"] = "1"
    load_triton_paths()
    return load_ops(path)
