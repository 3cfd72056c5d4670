"""The flags several commands share, each written once: the config and results folder, and
the measurement flags that ``run`` and ``sweep`` both take (merged into the config by
``measurement_flags``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["ConfigOpt", "ResultsOpt", "JsonOpt", "ExecutorOpt", "NoPluginCheckOpt",
           "LockWaitOpt", "BaseUrlOpt", "SloOpt", "ServerCpusOpt", "ClientCpusOpt",
           "RequireQuietOpt", "WorkersOpt", "RateOpt", "BurstinessOpt", "MaxConcOpt",
           "with_flags", "csv_list"]

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


def with_flags(experiment, *, lock_wait, base_url, server_cpus, require_quiet, slo,
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


def csv_list(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None

