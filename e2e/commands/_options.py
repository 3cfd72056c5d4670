"""The flags several commands share, each written once: the config and results folder, and
the measurement flags that ``run`` and ``sweep`` both take (``@flag_groups`` adds them to a
command and hands it one ``Measurement``, which merges them into the config)."""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

__all__ = ["ConfigOpt", "ResultsOpt", "StoreResultsOpt", "StoreOpt", "StoreConfigOpt", "JsonOpt", "ExecutorOpt", "NoPluginCheckOpt",
           "LockWaitOpt", "BaseUrlOpt", "SloOpt", "ServerCpusOpt", "ClientCpusOpt",
           "RequireQuietOpt", "WorkersOpt", "WindowsOpt", "RateOpt", "BurstinessOpt", "MaxConcOpt",
           "MaxScheduleOpt", "DuetOpt", "SwapOpt", "SpecOpt", "with_duet", "spec_name",
           "Measurement", "flag_groups", "csv_list", "int_list", "unreachable_concurrency",
           "FormatOpt", "OutputFormat", "QuietOpt", "output_format"]

ConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="Experiment config (TOML). Default: the embedded configs/default.toml.",
    exists=False, dir_okay=False)]
ResultsOpt = Annotated[Path, typer.Option(
    "--results", help="Folder that receives results/<experiment>/<run id>/.")]
DuetOpt = Annotated[Optional[bool], typer.Option(
    "--duet/--no-duet", help="Measure the arms together in time (the config's \\[duet] "
    "slots): each unit runs one arm per slot at once, so host drift lands on every arm "
    "alike (default: the config's \\[duet] enabled).")]
SwapOpt = Annotated[Optional[bool], typer.Option(
    "--swap/--no-swap", help="In duets, the sides trade CPUs between load windows, so each "
    "run meets every slot's cores (needs --windows a multiple of the slots; default: the "
    "config's \\[duet] swap).")]
LockWaitOpt = Annotated[Optional[float], typer.Option(
    "--lock-wait", help="Seconds to wait for another e2e's server to finish, or for another "
    "e2e writing into the same results folder (default: the config's server.lock_wait_s, 0 = "
    "refuse).", min=0)]
BaseUrlOpt = Annotated[Optional[str], typer.Option(
    "--base-url", help="Measure this already-running OpenAI-compatible server instead of "
    "starting a fresh one (not a fresh server: recorded and flagged in the report); API key "
    "from $E2E_API_KEY or $OPENAI_API_KEY.")]
SloOpt = Annotated[Optional[str], typer.Option(
    "--slo", help="Goodput objectives, e.g. ttft=200ms,tpot=50ms,e2e=2s: the share of requests "
    "meeting every one, and requests/s that did.")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", hidden=True, help="The same as --format json (kept for old command lines).")]
OutputFormat = Literal["text", "json"]
FormatOpt = Annotated[Optional[OutputFormat], typer.Option(
    "--format", help="What to print: text, or json (one JSON document on stdout, human text "
    "on stderr; keys in docs/reference/json.md). \\[default: text]", show_default=False)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines or bars.")]
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
WindowsOpt = Annotated[Optional[int], typer.Option(
    "--windows", help="Load windows per fresh server: the measured load k times back to back "
    "in one server, so the report splits the noise into between- and within-server parts "
    "(default: load.windows, 1).", min=1, max=64)]
MaxScheduleOpt = Annotated[Optional[float], typer.Option(
    "--max-schedule", help="The longest arrival schedule a run may have, in seconds (an open "
    "loop's prompts / rate, a trace's span / speedup); a longer one is refused before any "
    "server starts (default: load.max_schedule_s, else prompts x load.request_timeout_s).",
    min=0.001)]
MaxConcOpt = Annotated[Optional[int], typer.Option(
    "--max-concurrency", help="Open loop: at most this many requests in flight.", min=1)]
StoreResultsOpt = Annotated[Path, typer.Option(
    "--results", help="Results folder (the default SQLite store is <results>/nightly/history.db; "
    "reports are linked there).")]
StoreOpt = Annotated[Optional[str], typer.Option(
    "--store", help="The results store URL (default: the config's \\[nightly] store).")]
StoreConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="Nightly config whose \\[nightly] store to read (default: the embedded "
    "configs/nightly.toml).", dir_okay=False)]
ExecutorOpt = Annotated[Optional[Literal["local", "ray"]], typer.Option(
    "--executor", help="Where units run: local (this host) or ray (a Ray cluster, one unit per "
    "host; see docs/how-to/cluster.md). Default: the config's \\[executor] kind.")]
NoPluginCheckOpt = Annotated[bool, typer.Option(
    "--no-plugin-check", help="Do not require the worker's e2e-plugin line before measuring "
    "(for engines without e2e's plugin); recorded in every record as plugin.check = skipped.")]
SpecOpt = Annotated[Optional[str], typer.Option(
    "--spec", metavar="NAME", help="Serve with the config's \\[speculators.NAME] profile (a vLLM "
    "speculative_config; a sweep runs only with it unless --both); --dspark is --spec dspark.", show_default=False)]
PinOpt = Annotated[Optional[str], typer.Option(
    "--pin-acceptance", help="Hold the speculator's acceptance length fixed for every arm "
    "(vLLM's synthetic rejection sampling; on the CPU build e2e's plugin supplies it): a length "
    "such as 3.2, or 'baseline' for the baseline arm's (main's) median measured one in this "
    "experiment's results. Runs go to <experiment>-pinned. Default: the profile's `pinned`.")]


@dataclass(frozen=True)
class Measurement:
    """The measurement flags of ``run`` and ``sweep`` (None: as the config says)."""

    config: ConfigOpt = None
    results: ResultsOpt = Path("results")
    lock_wait: LockWaitOpt = None
    base_url: BaseUrlOpt = None
    slo: SloOpt = None
    server_cpus: ServerCpusOpt = None
    client_cpus: ClientCpusOpt = None
    require_quiet: RequireQuietOpt = None
    client_workers: WorkersOpt = None
    request_rate: RateOpt = None
    burstiness: BurstinessOpt = None
    max_concurrency: MaxConcOpt = None
    max_schedule: MaxScheduleOpt = None
    windows: WindowsOpt = None
    no_plugin_check: NoPluginCheckOpt = False
    spec: SpecOpt = None
    pin_acceptance: PinOpt = None

    def experiment(self, *, speculator: str | None = None, **load):
        """The config with the flags that were given merged into its server and load tables
        (``load``: more load keys, e.g. sweep's lengths), validated like the file; with
        ``speculator`` (``spec_name``) its speculator spec mode runs that profile."""
        from e2e.config import load_experiment

        experiment = load_experiment(self.config).override(
            "server", lock_wait_s=self.lock_wait, external=self.base_url, cpus=self.server_cpus,
            require_quiet=self.require_quiet,
        ).override(
            "load", slo=self.slo, cpus=self.client_cpus, workers=self.client_workers,
            request_rate=self.request_rate, burstiness=self.burstiness,
            max_concurrency=self.max_concurrency, windows=self.windows,
            max_schedule_s=self.max_schedule, **load)
        if speculator is not None:
            experiment = experiment.with_speculator(speculator)
        return pin_acceptance(experiment, self.pin_acceptance, self.results)


def spec_name(spec: str | None, dspark: bool) -> str | None:
    """The speculator profile ``--spec NAME`` or ``--dspark`` (``--spec dspark``) names, or
    None when neither was given."""
    from e2e.errors import ConfigError
    from e2e.names import check_name

    if spec is None:
        return "dspark" if dspark else None
    if not spec.strip():
        raise ConfigError("--spec: give a profile name, e.g. --spec dspark")
    spec = check_name(spec.strip(), "--spec")
    if dspark and spec != "dspark":
        raise ConfigError(f"--dspark is --spec dspark: give one of --dspark and --spec {spec}")
    return spec


def pin_acceptance(experiment, value: str | None, results: Path, *, baseline: str = "main"):
    """The experiment with its speculator's acceptance pinned as ``value`` (the flag) or its
    profile's ``pinned`` say: a length, or "baseline": the median acceptance length of the
    baseline arm's valid reported runs with the speculator in ``results/<experiment>`` (an
    unpinned sweep made before). A pin from the flag or from "baseline" renames the experiment
    ``<name>-pinned`` (its own results folder); a length in the profile keeps the name."""
    from e2e.arms import PIN_BASELINE
    from e2e.errors import ConfigError, NoSuchResults

    if value is None:
        if experiment.pinned() != PIN_BASELINE:
            return experiment
        value = PIN_BASELINE
    if value.strip().lower() != PIN_BASELINE:
        try:
            length = float(value)
        except ValueError:
            raise ConfigError(f"--pin-acceptance {value!r}: give an acceptance length (e.g. "
                              f"3.2) or '{PIN_BASELINE}'") from None
        experiment.speculator()
        return experiment.pinned_to(length)
    import statistics

    from e2e.arms import default_profile
    from e2e.plan import pinned_of
    from e2e.results.store import load_records

    def records_in(folder: Path):
        try:
            return load_records(folder)[0]
        except NoSuchResults:
            return ()

    # a pinned folder begun before keeps its pin: resuming must not move it as main's runs grow
    made = {pinned_of(r.config) for r in records_in(Path(results) / f"{experiment.name}-pinned")}
    made.discard(None)
    if len(made) == 1:
        return experiment.pinned_to(made.pop())
    folder = Path(results) / experiment.name
    records = records_in(folder)
    lengths = [r.metrics.acceptance_length for r in records
               if r.valid and r.spec.dspark and r.spec.arm == baseline and r.metrics is not None
               and r.metrics.acceptance_length is not None
               and r.spec.repeat >= int(r.config.get("report_from_run") or 1)
               and pinned_of(r.config) is None
               and default_profile(r.config.get("speculators") or {}) == experiment.default_speculator]
    if not lengths:
        raise ConfigError(
            f"acceptance pinned to the baseline's: {folder} holds no valid reported run of "
            f"{baseline!r} with the speculator to take it from; run `e2e sweep --dspark --arms "
            f"{baseline}` first (same --config and --results), or give the length "
            "(--pin-acceptance 3.2)")
    return experiment.pinned_to(round(statistics.median(lengths), 3))


def flag_groups(command):
    """Give ``command`` each of its flag groups' fields as its own options: a parameter typed
    as a frozen dataclass of typer options (``Measurement``, a command's own ``...Flags``) is
    replaced by that dataclass's fields, in their order, and the command gets the group made
    of them (what typer reads is the signature: the parameters, each group's in its place)."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for p in inspect.signature(command).parameters.values():
        kind = hints[p.name]
        if not is_dataclass(kind):
            parameters.append(p.replace(annotation=kind, kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        flag_hints = typing.get_type_hints(kind, include_extras=True)
        groups[p.name] = (kind, [f.name for f in fields(kind)])
        parameters += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                         default=f.default, annotation=flag_hints[f.name])
                       for f in fields(kind)]

    @functools.wraps(command)
    def wrapper(**kwargs):
        made = {name: kind(**{n: kwargs.pop(n) for n in names})
                for name, (kind, names) in groups.items()}
        return command(**made, **kwargs)

    del wrapper.__wrapped__  # typer reads the signature below, not the command's
    wrapper.__signature__ = inspect.Signature(parameters, return_annotation=None)
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def csv_list(value: str | list[str] | None) -> list[str] | None:
    """A list option's items: comma-separated, repeated, or both (``--arms main,pr``,
    ``--arms main --arms pr``); None when none was given."""
    if not value:
        return None
    values = [value] if isinstance(value, str) else list(value)
    items = [v.strip() for text in values for v in str(text).split(",") if v.strip()]
    return items or None


def int_list(value: list[str] | None, flag: str, *, low: int = 1,
             high: int | None = None) -> list[int] | None:
    """``csv_list`` of whole numbers in [low, high]; anything else is a ConfigError naming
    the flag and the item (exit 2)."""
    from e2e.errors import ConfigError

    items = csv_list(value)
    if items is None:
        return None
    out = []
    for item in items:
        try:
            number = int(item)
        except ValueError:
            raise ConfigError(f"{flag} {item!r}: give whole numbers, comma-separated or "
                              f"repeated (e.g. {flag} 1,4 or {flag} 1 {flag} 4)") from None
        if number < low or (high is not None and number > high):
            span = f"{low} to {high}" if high is not None else f"at least {low}"
            raise ConfigError(f"{flag} {number}: give a number {span}")
        out.append(number)
    return out


def output_format(format_: str | None, json_: bool, default: str = "text") -> str:
    """The one ``--format`` a command prints in: ``--json`` is ``--format json`` (kept as a
    hidden alias); the two disagreeing is a ConfigError."""
    from e2e.errors import ConfigError

    if json_ and format_ not in (None, "json"):
        raise ConfigError(f"--json is --format json: give one of --json and --format {format_}")
    return "json" if json_ else (format_ or default)



def unreachable_concurrency(specs) -> list[str]:
    """A warning per distinct in-flight bound the runs of ``specs`` cannot reach: a closed
    loop's concurrency, or an open loop's ``--max-concurrency``, above the measured prompts.
    At most that many requests are ever in flight, so the run measures less than its name
    says (``e2e run`` and ``e2e sweep`` share it)."""
    said: list[str] = []
    for spec in [side for unit in specs for side in unit.sides]:
        bound, flag = ((spec.concurrency, "--concurrency") if spec.request_rate is None
                       else (spec.max_concurrency, "--max-concurrency"))
        if bound is None or bound <= spec.prompts:
            continue
        then = (f"the run measures concurrency {spec.prompts}, not {bound}"
                if spec.request_rate is None else "the cap never binds")
        line = (f"warning: {flag} {bound} exceeds the {spec.prompts} measured prompts: "
                f"at most {spec.prompts} requests are ever in flight, so {then}")
        if line not in said:
            said.append(line)
    return said


def with_duet(experiment, duet: bool | None, swap: bool | None = None):
    """The experiment with ``--duet`` and ``--swap`` applied to its ``[duet]`` (checked as the
    file's table is: a ConfigError naming the problem)."""
    from pydantic import ValidationError

    from e2e.config import DuetConfig
    from e2e.console import describe_validation_error
    from e2e.errors import ConfigError

    changes = {k: v for k, v in (("enabled", duet), ("swap", swap)) if v is not None}
    if not changes:
        return experiment
    try:
        table = DuetConfig.model_validate({**experiment.duet.model_dump(), **changes})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, "--duet/--swap", DuetConfig)) from None
    return experiment.model_copy(update={"duet": table})
