"""The command line: thin typer commands on top of everything else (nothing imports this
module). Flags merge with the config into one validated object, then one function does the
work; printing, errors, exit codes and signals are ``e2e.console``'s.

    e2e run | sweep | gsm8k | nightly      plan -> executor -> server session -> results
    e2e report                             results -> aggregate -> render
    e2e arms | build | micro               inspect the arms, prepare builds, the kernels
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.config import RunSpec, load_experiment
from e2e.console import err, guard, out, print_run, say

app = typer.Typer(
    help="e2e: prove what a change to an LLM serving engine (vLLM) does, end to end.\n\n"
    "Every command reads one experiment config (TOML; default: the embedded CPU experiment "
    "with a tiny offline Llama) and starts a fresh server for every run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="Experiment config (TOML). Default: the embedded configs/default.toml.",
    exists=False, dir_okay=False)]
ResultsOpt = Annotated[Path, typer.Option(
    "--results", help="Folder that receives results/<experiment>/<run id>/.")]
LockWaitOpt = Annotated[Optional[float], typer.Option(
    "--lock-wait", help="Seconds to wait for another e2e's server to finish "
    "(default: the config's server.lock_wait_s, 0 = refuse).", min=0)]
BaseUrlOpt = Annotated[Optional[str], typer.Option(
    "--base-url", help="Measure this already-running OpenAI-compatible server instead of "
    "starting a fresh one (not a fresh server: recorded and flagged in the report); API key "
    "from $E2E_API_KEY or $OPENAI_API_KEY.")]
SloOpt = Annotated[Optional[str], typer.Option(
    "--slo", help="Goodput objectives, e.g. ttft=200ms,tpot=50ms,e2e=2s: the share of requests "
    "meeting every one, and requests/s that did.")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print the summary as one JSON document on stdout (human text goes to "
    "stderr); keys in docs/json.md.")]
ServerCpusOpt = Annotated[Optional[str], typer.Option(
    "--server-cpus", help="CPU set for the server's processes, e.g. 0 (default: the config's "
    "server.cpus); recorded in run.json.")]
ClientCpusOpt = Annotated[Optional[str], typer.Option(
    "--client-cpus", help="CPU set for the load generator, e.g. 1 (default: the config's "
    "load.cpus); recorded in run.json.")]
RequireQuietOpt = Annotated[Optional[float], typer.Option(
    "--require-quiet", help="Refuse to start a server while another process uses more than "
    "this share of a core (e.g. 0.2) or any GPU, naming it.", min=0.0)]
WorkersOpt = Annotated[Optional[int], typer.Option(
    "--client-workers", help="Client processes the streams are split over, one core each "
    "(default: load.workers, 1).", min=1)]
RateOpt = Annotated[Optional[float], typer.Option(
    "--request-rate", help="Open loop: requests/s with gamma arrivals (Poisson by default), "
    "instead of closed loop at --concurrency.", min=0.0)]
BurstinessOpt = Annotated[Optional[float], typer.Option(
    "--burstiness", help="Open loop: gamma shape of the arrival gaps (1 = Poisson, < 1 "
    "burstier).", min=0.0)]
MaxConcOpt = Annotated[Optional[int], typer.Option(
    "--max-concurrency", help="Open loop: at most this many requests in flight.", min=1)]
ExecutorOpt = Annotated[Optional[str], typer.Option(
    "--executor", help="Where units run: local (this host) or ray (a Ray cluster, one unit per "
    "host; see docs/cluster.md). Default: the config's [executor] kind.")]
NoPluginCheckOpt = Annotated[bool, typer.Option(
    "--no-plugin-check", help="Do not require the worker's e2e-plugin line before measuring "
    "(for engines without e2e's plugin); recorded in every record as plugin.check = skipped.")]


def _with_flags(experiment, *, lock_wait, base_url, server_cpus, require_quiet, slo,
                client_cpus, client_workers, request_rate, burstiness, max_concurrency,
                **load):
    """The experiment with the measurement flags that were given (not None) merged into its
    server and load tables (``load``: more load keys, e.g. sweep's lengths), validated like
    the file."""
    return experiment.override(
        "server", lock_wait_s=lock_wait, external=base_url, cpus=server_cpus,
        require_quiet=require_quiet,
    ).override(
        "load", slo=slo, cpus=client_cpus, workers=client_workers, request_rate=request_rate,
        burstiness=burstiness, max_concurrency=max_concurrency, **load)


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
    base_url: BaseUrlOpt = None,
    slo: SloOpt = None,
    server_cpus: ServerCpusOpt = None,
    client_cpus: ClientCpusOpt = None,
    require_quiet: RequireQuietOpt = None,
    client_workers: WorkersOpt = None,
    request_rate: RateOpt = None,
    burstiness: BurstinessOpt = None,
    max_concurrency: MaxConcOpt = None,
    no_plugin_check: NoPluginCheckOpt = False,
    json_: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """One run: a fresh server for ARM, the reference load at one concurrency, its metrics
    written to results/<experiment>/<run id>/ (run.json, requests.parquet, server.log,
    /metrics before and after)."""

    def body() -> None:
        from e2e.session._session import SessionOptions, run_unit
        from e2e.results._store import next_repeat

        experiment = _with_flags(
            load_experiment(config), lock_wait=lock_wait, base_url=base_url,
            server_cpus=server_cpus, require_quiet=require_quiet, slo=slo,
            client_cpus=client_cpus, client_workers=client_workers, request_rate=request_rate,
            burstiness=burstiness, max_concurrency=max_concurrency)
        spec = RunSpec.resolve(experiment, arm=arm, concurrency=concurrency, dspark=dspark,
                               prompts=prompts, input_len=input_len, output_len=output_len,
                               seed=seed)
        spec = spec.model_copy(update={"repeat": next_repeat(results, experiment.name, spec.cell)})
        session = SessionOptions(plugin_check=not no_plugin_check, progress=not quiet, say=say)
        folder, record = run_unit(experiment, spec, results, session)
        if json_:
            from e2e.render._json import dumps, run_json

            print_run(folder, record, console=err)
            sys.stdout.write(dumps(run_json(folder, record)) + "\n")
        else:
            print_run(folder, record)
        if not record.valid:
            raise SystemExit(1)

    guard(body)


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
    until_settled: Annotated[bool, typer.Option(
        "--until-settled", help="Keep adding whole rounds until every headline comparison is "
        "settled (a difference beyond the minimum effect, or equivalent within the band), with "
        "alpha spent over the looks so peeking adds no false calls; needs --max-runs.")] = False,
    max_runs: Annotated[Optional[int], typer.Option(
        "--max-runs", help="With --until-settled: at most this many runs per cell.", min=1)] = None,
    prompts_per_concurrency: Annotated[Optional[int], typer.Option(
        help="Measured requests per unit of concurrency (default: the config's, 32).", min=1)] = None,
    input_len: Annotated[Optional[int], typer.Option(help="Prompt tokens (default: config).", min=1)] = None,
    output_len: Annotated[Optional[int], typer.Option(help="Output tokens (default: config).", min=2)] = None,
    lock_wait: LockWaitOpt = None,
    base_url: BaseUrlOpt = None,
    slo: SloOpt = None,
    server_cpus: ServerCpusOpt = None,
    client_cpus: ClientCpusOpt = None,
    require_quiet: RequireQuietOpt = None,
    client_workers: WorkersOpt = None,
    request_rate: RateOpt = None,
    burstiness: BurstinessOpt = None,
    max_concurrency: MaxConcOpt = None,
    no_plugin_check: NoPluginCheckOpt = False,
    executor: ExecutorOpt = None,
    config: ConfigOpt = None,
    results: ResultsOpt = Path("results"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Run the experiment matrix: arms x concurrencies x spec modes x runs, interleaved
    (round k of every cell before round k+1, arm order rotated), resumable."""

    def body() -> None:
        from e2e.errors import ConfigError
        from e2e.pipeline import sweep as run_matrix
        from e2e.plan import make_plan
        from e2e.execute._ray import describe_cluster_plan, executor_from
        from e2e.session._session import SessionOptions
        from e2e.execute._describe import describe_plan

        if sum([dspark, no_dspark, both]) > 1:
            raise ConfigError("give at most one of --dspark, --no-dspark, --both")
        modes = [True] if dspark else [False] if no_dspark else [False, True]
        experiment = _with_flags(
            load_experiment(config), lock_wait=lock_wait, base_url=base_url,
            server_cpus=server_cpus, require_quiet=require_quiet, slo=slo,
            client_cpus=client_cpus, client_workers=client_workers, request_rate=request_rate,
            burstiness=burstiness, max_concurrency=max_concurrency,
            prompts_per_concurrency=prompts_per_concurrency, input_len=input_len,
            output_len=output_len)
        plan = make_plan(experiment, arms=_csv(arms), concurrencies=concurrency,
                         spec_modes=modes, runs=runs)
        if dry_run:
            for line in describe_plan(experiment, plan, results):
                out.print(line, highlight=False, soft_wrap=True, markup=False)
            if (executor or experiment.executor.kind) == "ray":
                for line in describe_cluster_plan(experiment, plan, results):
                    out.print(line, highlight=False, soft_wrap=True, markup=False)
            return
        runner = executor_from(experiment.executor, executor)
        session = SessionOptions(plugin_check=not no_plugin_check, progress=not quiet, say=say)
        on_unit = lambda folder, record: print_run(folder, record, brief=True)  # noqa: E731
        confidence = None
        if until_settled or max_runs is not None:
            from e2e.pipeline import sweep_until_settled

            if not (until_settled and max_runs):
                raise ConfigError("--until-settled and --max-runs N go together")
            outcome, settlement = sweep_until_settled(
                experiment, results, max_runs=max_runs, arms=_csv(arms),
                concurrencies=concurrency, spec_modes=modes, session=session,
                max_attempts=max_attempts, on_unit=on_unit, executor=runner)
            confidence = settlement.look_confidence
            out.print(f"until settled: {'settled' if settlement.settled else 'not settled'} "
                      f"after {settlement.rounds} reported round(s); the report's intervals are "
                      f"at the last look's {confidence * 100:.2f} % (alpha spent over the looks)",
                      highlight=False)
        else:
            outcome, _ = run_matrix(
                experiment, results, arms=_csv(arms), concurrencies=concurrency,
                spec_modes=modes, runs=runs, session=session, executor=runner,
                max_attempts=max_attempts, fail_fast=fail_fast, on_unit=on_unit,
                report=False)  # rendered below, with any GSM8K results
        if outcome.stopped_early:
            out.print("[red]sweep stopped[/] (--fail-fast): rerun the same command to resume",
                      highlight=False)
        out.print(f"sweep: {len(outcome.ran)} run(s) made, {len(outcome.skipped)} already done, "
                  f"{len(outcome.invalid)} invalid, {len(outcome.given_up)} given up", highlight=False)
        for run_id in outcome.given_up:
            out.print(f"  [red]given up:[/] {run_id} (see its run.json; attempts count across "
                      "reruns: rerun with a higher --max-attempts to try again)", highlight=False)
        if report:
            _report(results / experiment.name, confidence=confidence)
        if outcome.given_up:
            raise SystemExit(1)

    guard(body)


def _only(items: list[str] | None) -> dict[str, str]:
    from e2e.errors import ConfigError

    out_: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--only {item!r}: give FIELD=VALUE, e.g. output_len=128")
        out_[key.strip()] = value.strip()
    return out_


def _report(folder: Path, report_from_run: int | None = None, baseline: str = "main",
            only: dict[str, str] | None = None, json_: bool = False,
            confidence: float | None = None) -> None:
    from e2e.gsm8k import load_report, render_csv, render_markdown
    from e2e.paths import atomic_write_bytes
    from e2e.render._report import build_report

    folder = Path(folder)
    gsm8k = load_report(folder.parent, folder.name) if folder.is_dir() else None
    output = None
    if gsm8k is None or any(folder.glob("*/run.json")):  # else only GSM8K results here
        output = build_report(folder, report_from_run=report_from_run, baseline=baseline,
                              only=only, confidence=confidence)
    if json_:
        from e2e.render._json import dumps, gsm8k_json, report_json

        # e2e.render._report for a folder with load runs (its GSM8K evaluations under "gsm8k"),
        # e2e.gsm8k for one with GSM8K results only
        document = report_json(output.summary) if output is not None else gsm8k_json(gsm8k)
        if output is not None and gsm8k is not None:
            document["gsm8k"] = gsm8k_json(gsm8k)
        sys.stdout.write(dumps(document) + "\n")
    console = err if json_ else out
    if output is not None:
        console.print(output.markdown, highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]report written to {output.report_dir}[/]", highlight=False)
    if gsm8k is not None:
        text = render_markdown(gsm8k)
        atomic_write_bytes(folder / "report" / "gsm8k.md", text)
        atomic_write_bytes(folder / "report" / "gsm8k.csv", render_csv(gsm8k))
        console.print(text.decode(), highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]GSM8K report written to {folder / 'report'}[/]", highlight=False)


@app.command()
def report(
    results_dir: Annotated[Path, typer.Argument(
        help="An experiment's results folder, e.g. results/default.")],
    report_from_run: Annotated[Optional[int], typer.Option(
        help="First reported run of each cell (default: the config's report_from_run).",
        min=1)] = None,
    baseline: Annotated[str, typer.Option(help="Arm the others are compared with.")] = "main",
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", help="Report only runs whose spec has FIELD=VALUE (input_len, output_len, "
        "prompts, seed, warmup_requests, arm, concurrency, spec_mode); repeatable. Needed when "
        "a folder holds runs of unlike workloads, which are never averaged together.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Render a results folder: Markdown (PR-description tables), CSV and PNG plots."""
    guard(lambda: _report(results_dir, report_from_run, baseline, _only(only), json_))


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

    guard(body)


@app.command()
def build(
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's build.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Prepare server builds (managed environments) and the model ahead of time."""

    def body() -> None:
        from e2e.session._builds import resolve_python
        from e2e.session._tinymodel import resolve_model

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

    guard(body)


def _register_optional() -> None:
    """Commands that live in their own packages (they import torch, lm-eval and the like only
    when they run)."""
    from e2e.commands._bisect import bisect_command
    from e2e.commands._gsm8k import gsm8k_command
    from e2e.commands._interop import export_command, import_app
    from e2e.commands._micro import micro_command
    from e2e.commands._nightly import nightly_command
    from e2e.commands._plan import plan_target_effect

    app.command("gsm8k")(gsm8k_command)
    app.command("micro")(micro_command)
    app.command("nightly")(nightly_command)
    app.command("plan")(plan_target_effect)
    app.add_typer(import_app, name="import")
    app.command("export")(export_command)
    app.command("bisect")(bisect_command)


_register_optional()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
