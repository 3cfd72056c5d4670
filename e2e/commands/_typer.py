"""How e2e's commands meet typer: one command class and one group class for every command.

- A flag (``--dry-run``, ``--quiet``, ``--help``) shows no type in ``--help``: typer prints
  ``<bool>`` beside every flag, which reads as if the flag took a value.
- A flag renamed so that one idea has one name keeps its old spelling as a hidden alias
  (``RENAMED``): what a user typed before still works, ``--help`` shows the one name.
- A number flag is finite (``e2e.config.finite``, the config's number rule): click reads
  ``inf``, ``nan`` and ``1e400`` as floats, and a NaN passes every ``min``/``max`` range.
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group", "RENAMED", "command_class"]

RENAMED: dict[str, dict[str, str]] = {
    # command: {old spelling: the one name now}
    "micro": {"--report-from": "--report-from-run"},
    "capacity": {"--repeats": "--runs"},
    "nightly": {"--baseline": "--baseline-night"},
}


def _no_bool_metavar(params):
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""  # typer shows the metavar in the type column; a flag has none
    return params


def _renamed(args: list[str], renamed: dict[str, str]) -> list[str]:
    """``args`` with each old spelling (``--old`` or ``--old=value``) replaced by its name
    now, up to a ``--`` (after it everything is an argument)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        if name in renamed:
            arg = renamed[name] + (eq + value if eq else "")
        out.append(arg)
    return out


class Command(TyperCommand):
    """A typer command whose flags show no ``<bool>`` and whose ``renamed`` old spellings
    still parse (hidden from ``--help``)."""

    renamed: dict[str, str] = {}

    def get_params(self, ctx):
        return _no_bool_metavar(super().get_params(ctx))

    def parse_args(self, ctx, args):
        from e2e.config import finite

        rest = super().parse_args(ctx, _renamed(list(args), self.renamed))
        for param in self.get_params(ctx):
            try:
                finite(ctx.params.get(param.name or ""))
            except ValueError as exc:
                raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None
        return rest


class Group(TyperGroup):
    """The ``e2e`` group (and ``e2e import``): its ``--help`` and ``--version`` show no
    ``<bool>`` either."""

    def get_params(self, ctx):
        return _no_bool_metavar(super().get_params(ctx))


def command_class(name: str) -> type[Command]:
    """The command class of ``e2e <name>``: ``Command`` with that command's ``RENAMED``."""
    renamed = RENAMED.get(name)
    if not renamed:
        return Command
    return type(f"{name.title().replace('-', '')}Command", (Command,), {"renamed": renamed})
