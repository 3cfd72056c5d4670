"""The command line: every typer command, each a thin function over the library (flags are
merged with the config once, one function does the work; printing, errors, exit codes and
signals are ``e2e.console``'s). Only this package imports typer; ``e2e.cli`` is the entry
point.

    e2e run | sweep | gsm8k | nightly      plan -> execute -> server session -> results
    e2e report | plan                      results -> aggregate -> render
    e2e import | export                    vllm bench files in and out
    e2e arms | build | micro | bisect      the arms, their builds, the kernels, a regression
"""

from __future__ import annotations

import typer

from e2e.commands._arms import arms, build
from e2e.commands._bisect import bisect_command
from e2e.commands._gsm8k import gsm8k_command
from e2e.commands._interop import export_command, import_app
from e2e.commands._micro import micro_command
from e2e.commands._nightly import nightly_command
from e2e.commands._plan import plan_target_effect
from e2e.commands._report import report
from e2e.commands._run import run
from e2e.commands._sweep import sweep

__all__ = [
    "app"
]

app = typer.Typer(
    help="e2e: prove what a change to an LLM serving engine (vLLM) does, end to end. Every "
    "command reads one experiment config (TOML; default: the embedded CPU experiment with a "
    "tiny offline Llama) and starts a fresh server for every run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("run")(run)
app.command("sweep")(sweep)
app.command("report")(report)
app.command("plan")(plan_target_effect)
app.command("gsm8k")(gsm8k_command)
app.command("nightly")(nightly_command)
app.command("bisect")(bisect_command)
app.add_typer(import_app, name="import")
app.command("export")(export_command)
app.command("arms")(arms)
app.command("build")(build)
app.command("micro")(micro_command)
