"""The command line: every typer command, each a thin function over the library (flags are
merged with the config once, one function does the work; printing, errors, exit codes and
signals are ``e2e.console``'s). Only this package imports typer; ``e2e.cli`` is the entry
point. Exported: ``app``, and ``nightly_command`` (the function behind ``e2e nightly``, for a
caller that mounts it on an app of its own).

    e2e run | sweep | gsm8k | nightly      plan -> execute -> server session -> results
    e2e capacity                           per arm: search a rate within an SLO -> execute
    e2e history | dashboard                the nightly store: nights, a cell's history, a site
    e2e report | plan                      results -> aggregate -> render
    e2e import | export                    vllm bench files in and out
    e2e arms | build | micro | bisect      the arms, their builds, the kernels, a regression
    e2e unit                               the arms' and mutants' test matrix
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Annotated

import typer

from e2e.commands._arms import arms, build
from e2e.commands._bisect import bisect_command
from e2e.commands._capacity import capacity_command
from e2e.commands._dashboard import dashboard_command
from e2e.commands._gsm8k import gsm8k_command
from e2e.commands._history import history_command
from e2e.commands._interop import export_command, import_app
from e2e.commands._micro import micro_command
from e2e.commands._nightly import nightly_command
from e2e.commands._plan import plan_target_effect
from e2e.commands._report import report
from e2e.commands._run import run
from e2e.commands._sweep import sweep
from e2e.commands._typer import Command, Group, command_class
from e2e.commands._unit import unit_command

__all__ = [
    "app", "nightly_command"
]

app = typer.Typer(
    cls=Group,
    help="e2e: prove what a change to an LLM serving engine (vLLM) does, end to end. Every "
    "command reads one experiment config (TOML; default: the embedded CPU experiment with a "
    "tiny offline Llama) and starts a fresh server for every run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



def _prose(doc: str | None) -> str:
    """A docstring as help text: its lines joined into sentences, paragraphs kept (a
    docstring's hard line breaks would otherwise show in ``--help`` mid-sentence)."""
    text = inspect.cleandoc(doc or "")
    return "\n\n".join(re.sub(r"\s*\n\s*", " ", part) for part in text.split("\n\n"))


def _version(value: bool) -> None:
    if value:
        from e2e.session import source_facts

        facts = source_facts()
        where = ""
        if facts["git_sha"]:
            where = f" (commit {facts['git_sha'][:12]}{', with uncommitted changes' if facts['dirty'] else ''})"
        typer.echo(f"e2e {facts['version']}{where}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", help="Print e2e's version (and its checkout's commit) and exit.",
        callback=_version, is_eager=True)] = False) -> None:
    """e2e: prove what a change to an LLM serving engine (vLLM) does, end to end."""


def _add(name: str, fn: Callable) -> None:
    app.command(name, cls=command_class(name), help=_prose(fn.__doc__))(fn)


for _name, _fn in (("run", run), ("sweep", sweep), ("report", report),
                   ("plan", plan_target_effect), ("gsm8k", gsm8k_command),
                   ("nightly", nightly_command), ("history", history_command),
                   ("dashboard", dashboard_command), ("bisect", bisect_command),
                   ("export", export_command), ("arms", arms), ("build", build),
                   ("micro", micro_command), ("unit", unit_command),
                   ("capacity", capacity_command)):
    _add(_name, _fn)
for _info in import_app.registered_commands:  # e2e import vllm-bench|aiperf|guidellm
    _info.cls = Command
app.add_typer(import_app, name="import", cls=Group)
