"""The command line. Commands are thin: flags merge with the config into one validated object,
then one function does the work. Errors from e2e print as one clear message (exit 1; 2 for
bad input); Ctrl-C and SIGTERM stop the server and keep what finished (exit 130)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from e2e.config import RunSpec, load_experiment
from e2e.errors import E2EError

app = typer.Typer(
    help="e2e: prove what a change to an LLM serving engine (vLLM) does, end to end.\n\n"
    "Every command reads one experiment config (TOML; default: the embedded CPU experiment "
    "with a tiny offline Llama) and starts a fresh server for every run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()

ConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="Experiment config (TOML). Default: the embedded configs/default.toml.",
    exists=False, dir_okay=False)]
ResultsOpt = Annotated[Path, typer.Option(
    "--results", help="Folder that receives results/<experiment>/<run id>/.")]
LockWaitOpt = Annotated[Optional[float], typer.Option(
    "--lock-wait", help="Seconds to wait for another e2e's server to finish "
    "(default: the config's server.lock_wait_s, 0 = refuse).", min=0)]


def _raise_on_sigterm(signum, frame):  # pragma: no cover - exercised by fault tests
    raise KeyboardInterrupt


def _guard(fn):
    """Run a command body, mapping e2e's errors and interrupts to exit codes."""
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        return fn()
    except E2EError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: the server was stopped; finished results are kept")
        raise typer.Exit(130) from None


def _fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}{unit}"


@app.command()
def run(
    arm: Annotated[str, typer.Option(help="Arm to run (see `e2e arms`).")] = "main",
    concurrency: Annotated[int, typer.Option(help="Requests in flight.", min=1)] = 1,
    dspark: Annotated[bool, typer.Option(
        "--dspark/--no-dspark", help="Turn on the experiment's speculator profile.")] = False,
    prompts: Annotated[Optional[int], typer.Option(
        help="Measured requests (default: 32 x concurrency, from the config).", min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(
        help="Prompt length in tokens (default 1031).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(
        help="Completion length in tokens, ignore_eos (default 509).", min=2)] = None,
    seed: Annotated[Optional[int], typer.Option(help="Prompt seed (same prompts on every arm).")] = None,
    config: ConfigOpt = None,
    results: ResultsOpt = Path("results"),
    lock_wait: LockWaitOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """One run: a fresh server for ARM, the reference load at one concurrency, its metrics
    written to results/<experiment>/<run id>/ (run.json, requests.parquet, server.log,
    /metrics before and after)."""

    def body() -> None:
        from e2e.plugin_check import plugin_check
        from e2e.runner import run_one
        from e2e.store import next_repeat

        experiment = load_experiment(config).override("server", lock_wait_s=lock_wait)
        spec = RunSpec.resolve(experiment, arm=arm, concurrency=concurrency, dspark=dspark,
                               prompts=prompts, input_len=input_len, output_len=output_len,
                               seed=seed)
        spec = spec.model_copy(update={"repeat": next_repeat(results, experiment.name, spec.cell)})
        folder, record = run_one(experiment, spec, results, progress=not quiet,
                                 say=lambda s: err.print(f"[dim]{s}[/]", highlight=False),
                                 plugin_check=plugin_check)
        print_run(folder, record)
        if not record.valid:
            raise typer.Exit(1)

    _guard(body)


def print_run(folder: Path, record, brief: bool = False) -> None:
    mx = record.metrics
    status = "[green]valid[/]" if record.valid else "[bold red]INVALID[/]"
    headline = ""
    if brief and mx is not None:
        headline = (f"  ms/verify step {_fmt(mx.ms_per_verify_step, '', 3)}  acceptance "
                    f"{_fmt(mx.acceptance_length, '', 3)}" if record.spec.dspark else
                    f"  TPOT mean {_fmt(mx.tpot_ms_mean, '', 3)} ms  median "
                    f"{_fmt(mx.tpot_ms_median, '', 3)} ms")
    out.print(f"{record.run_id}: {status}{headline}  ->  {folder}", highlight=False)
    for reason in record.invalid_reasons:
        out.print(f"  [red]invalid:[/] {reason}", highlight=False)
    for warning in record.warnings:
        out.print(f"  [yellow]warning:[/] {warning}", highlight=False)
    if mx is None or brief:
        return
    rows = [
        ("requests ok", f"{mx.ok_requests} / {mx.requests}"),
        ("TTFT mean / median / p99", f"{_fmt(mx.ttft_ms_mean)} / {_fmt(mx.ttft_ms_median)} / {_fmt(mx.ttft_ms_p99)} ms"),
        ("TPOT mean / median / p99", f"{_fmt(mx.tpot_ms_mean, '', 3)} / {_fmt(mx.tpot_ms_median, '', 3)} / {_fmt(mx.tpot_ms_p99, '', 3)} ms"),
        ("server TPOT mean", f"{_fmt(mx.server_tpot_ms_mean, ' ms', 3)}"),
        ("inter-chunk mean / p99", f"{_fmt(mx.itl_ms_mean, '', 3)} / {_fmt(mx.itl_ms_p99, '', 3)} ms"),
        ("E2E latency mean / p99", f"{_fmt(mx.e2el_ms_mean)} / {_fmt(mx.e2el_ms_p99)} ms"),
        ("output throughput", f"{_fmt(mx.output_throughput_tok_s, ' tok/s', 1)}"),
        ("request throughput", f"{_fmt(mx.request_throughput_req_s, ' req/s', 3)}"),
    ]
    if record.spec.dspark:
        rows += [
            ("acceptance length", _fmt(mx.acceptance_length, "", 3)),
            ("acceptance rate", _fmt(mx.acceptance_rate, "", 3)),
            ("ms per verify step", f"{_fmt(mx.ms_per_verify_step, ' ms', 3)}  (= mean TPOT x acceptance length)"),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.print(f"  {key:<{width}}  {value}", highlight=False)


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
def sweep(
    arms: Annotated[Optional[str], typer.Option(
        "--arms", help="Comma-separated arms (default: all of the config's, in its order).")] = None,
    concurrency: Annotated[Optional[list[int]], typer.Option(
        "--concurrency", help="Concurrency to run; repeat the flag for several (default: config).")] = None,
    dspark: Annotated[bool, typer.Option("--dspark", help="Only with the speculator.")] = False,
    no_dspark: Annotated[bool, typer.Option("--no-dspark", help="Only without it.")] = False,
    both: Annotated[bool, typer.Option("--both", help="With and without it (the default).")] = False,
    runs: Annotated[Optional[int], typer.Option(
        help="Runs per cell (default: the config's repeats).", min=1)] = None,
    max_attempts: Annotated[int, typer.Option(
        help="Attempts per run before an invalid run is given up.", min=1)] = 2,
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Stop at the first run given up (default: move on).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan (every run's server command and env); start nothing.")] = False,
    report: Annotated[bool, typer.Option(help="Render the report when the sweep ends.")] = True,
    prompts_per_concurrency: Annotated[Optional[int], typer.Option(
        help="Measured requests per unit of concurrency (default: the config's, 32).", min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(help="Prompt tokens (default: config).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(help="Output tokens (default: config).", min=2)] = None,
    lock_wait: LockWaitOpt = None,
    config: ConfigOpt = None,
    results: ResultsOpt = Path("results"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Run the experiment matrix: arms x concurrencies x spec modes x runs, interleaved
    (round k of every cell before round k+1, arm order rotated), resumable."""

    def body() -> None:
        from e2e.errors import ConfigError
        from e2e.plan import make_plan
        from e2e.plugin_check import plugin_check
        from e2e.sweep import describe_plan, run_sweep

        if sum([dspark, no_dspark, both]) > 1:
            raise ConfigError("give at most one of --dspark, --no-dspark, --both")
        modes = [True] if dspark else [False] if no_dspark else [False, True]
        experiment = load_experiment(config).override(
            "load", prompts_per_concurrency=prompts_per_concurrency, input_len=input_len,
            output_len=output_len).override("server", lock_wait_s=lock_wait)
        plan = make_plan(experiment, arms=_csv(arms), concurrencies=concurrency,
                         spec_modes=modes, runs=runs)
        if dry_run:
            for line in describe_plan(experiment, plan, results):
                out.print(line, highlight=False, soft_wrap=True)
            return
        outcome = run_sweep(
            experiment, plan, results, max_attempts=max_attempts, progress=not quiet,
            say=lambda s: err.print(f"[dim]{s}[/]", highlight=False),
            on_run=lambda folder, record: print_run(folder, record, brief=True),
            plugin_check=plugin_check, fail_fast=fail_fast)
        if outcome.stopped_early:
            out.print("[red]sweep stopped[/] (--fail-fast): rerun the same command to resume",
                      highlight=False)
        out.print(f"sweep: {len(outcome.ran)} run(s) made, {len(outcome.skipped)} already done, "
                  f"{len(outcome.invalid)} invalid, {len(outcome.given_up)} given up", highlight=False)
        for run_id in outcome.given_up:
            out.print(f"  [red]given up:[/] {run_id} (see its run.json)", highlight=False)
        if report:
            _report(results / experiment.name)
        if outcome.given_up:
            raise typer.Exit(1)

    _guard(body)


def _report(folder: Path, report_from_run: int | None = None, baseline: str = "main") -> None:
    from e2e.errors import ResultsError
    from e2e.gsm8k import load_report, render_csv, render_markdown
    from e2e.paths import atomic_write_bytes
    from e2e.report import build_report

    folder = Path(folder)
    gsm8k = load_report(folder.parent, folder.name) if folder.is_dir() else None
    try:
        output = build_report(folder, report_from_run=report_from_run, baseline=baseline)
    except ResultsError:
        if gsm8k is None:
            raise
        output = None  # only GSM8K results here
    if output is not None:
        out.print(output.markdown, highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]report written to {output.report_dir}[/]", highlight=False)
    if gsm8k is not None:
        text = render_markdown(gsm8k)
        atomic_write_bytes(folder / "report" / "gsm8k.md", text)
        atomic_write_bytes(folder / "report" / "gsm8k.csv", render_csv(gsm8k))
        out.print(text.decode(), highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]GSM8K report written to {folder / 'report'}[/]", highlight=False)


@app.command()
def report(
    results_dir: Annotated[Path, typer.Argument(
        help="An experiment's results folder, e.g. results/default.")],
    report_from_run: Annotated[Optional[int], typer.Option(
        help="First reported run of each cell (default: the config's report_from_run).",
        min=1)] = None,
    baseline: Annotated[str, typer.Option(help="Arm the others are compared with.")] = "main",
) -> None:
    """Render a results folder: Markdown (PR-description tables), CSV and PNG plots."""
    _guard(lambda: _report(results_dir, report_from_run, baseline))


@app.command()
def arms(config: ConfigOpt = None) -> None:
    """List each arm of a config: its server build, environment and plugin settings."""

    def body() -> None:
        import json

        from e2e.arms import PLUGIN_ENV, redact_env

        experiment = load_experiment(config)
        pattern = experiment.server.secret_pattern
        for name, arm in experiment.arms.items():
            build = arm.build or experiment.server.build
            out.print(f"[bold]{name}[/]  {arm.description}", highlight=False)
            source = (f"python {build.python}" if build.python
                      else f"managed env: {' '.join(build.requirements)}")
            out.print(f"  build:   {source}", highlight=False)
            env = redact_env({**experiment.server.env, **arm.env}, pattern)
            if arm.plugin:
                env[PLUGIN_ENV] = json.dumps(arm.plugin, sort_keys=True)
            out.print(f"  env:     {env}", highlight=False)
            out.print(f"  args:    {[*experiment.server.args, *arm.args]}", highlight=False)
            out.print(f"  plugin:  {arm.plugin or '(none)'}", highlight=False)

    _guard(body)


@app.command()
def build(
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's build.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Prepare server builds (managed environments) and the model ahead of time."""

    def body() -> None:
        from e2e.builds import resolve_python
        from e2e.tinymodel import resolve_model

        experiment = load_experiment(config)
        names = [arm] if arm else list(experiment.arms)
        for name in names:
            settings = experiment.arm(name)
            python = resolve_python(settings.build or experiment.server.build,
                                    progress=lambda s: err.print(f"[dim]{s}[/]"))
            out.print(f"{name}: {python}", highlight=False)
        model, digest = resolve_model(experiment.server.model)
        out.print(f"model: {model}" + (f" (sha256 {digest[:12]})" if digest else ""),
                  highlight=False)

    _guard(body)


def _register_optional() -> None:
    """Commands that live in their own packages (they import torch, lm-eval and the like only
    when they run)."""
    from e2e.gsm8k.command import gsm8k_command
    from e2e.micro import micro_command
    from e2e.nightly.command import nightly_command

    app.command("gsm8k")(gsm8k_command)
    app.command("micro")(micro_command)
    app.command("nightly")(nightly_command)
    app.command("bisect")(__import__("e2e.bisect_command", fromlist=["bisect_command"]).bisect_command)


_register_optional()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
