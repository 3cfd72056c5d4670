"""Executors run a plan's units: in order, resuming, with progress for the whole plan.

An executor takes the units (in the plan's order: rounds, every arm of a cell back to back,
arms in the plan's balanced order) and a ``run_unit`` function (the server session) and:

* skips units already done (a valid record of exactly that unit in the results folder);
* reruns invalid ones until ``max_attempts`` is spent (every attempt is kept);
* reports progress for the whole plan: done/total and an ETA from the units made so far;
* with ``fail_fast``, stops at the first unit given up.

That bookkeeping is one ``Ledger`` (``e2e.execute.progress``) that every executor drives; an
executor only decides where and when each attempt runs. ``LocalExecutor`` runs units one
after another on this host. The interface is the seam a cluster executor plugs into: it must
keep the same contract (the driver's results folder is the one source of truth; units are
whole folders).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from e2e.console import Say
from e2e.plan import Unit
from e2e.execute.progress import Ledger, OnUnit, Outcome, complete

__all__ = ["Outcome", "Executor", "LocalExecutor", "RunUnit", "OnUnit", "blocks",
           "block_key", "complete", "SessionUnit"]

RunUnit = Callable[[Unit], "tuple[Path, Any] | list[tuple[Path, Any]]"]


class Executor(Protocol):
    def run(self, experiment: str, units: Sequence[Unit], results: Path, run_unit: RunUnit, *,
            max_attempts: int = 2, fail_fast: bool = False,
            on_unit: OnUnit = lambda folder, record: None,
            say: Say = lambda message: None) -> Outcome: ...


class LocalExecutor:
    """Every unit on this host, one at a time, in the plan's order."""

    def run(self, experiment: str, units: Sequence[Unit], results: Path, run_unit: RunUnit, *,
            max_attempts: int = 2, fail_fast: bool = False,
            on_unit: OnUnit = lambda folder, record: None,
            say: Say = lambda message: None) -> Outcome:
        ledger = Ledger(experiment, units, results, max_attempts=max_attempts,
                        fail_fast=fail_fast, on_unit=on_unit, say=say)
        for i, unit, attempts in ledger.todo:
            while attempts < max_attempts:
                attempts += 1
                ledger.started(unit, attempts, f"[{i}/{ledger.total}] {unit.unit_id}")
                if ledger.made(unit, written(run_unit(unit))):
                    break
            ledger.ended(unit)
            if ledger.stopped:
                break
        return ledger.outcome


def written(result) -> list[tuple[Path, Any]]:
    """What a ``run_unit`` call wrote: its (folder, record), or a duet's, one per side."""
    return list(result) if isinstance(result, list) else [result]


# --- Helpers a cluster executor needs (e2e.execute.ray) -------------------------------------


def block_key(unit: Unit) -> tuple:
    """What a block shares: a load unit's round, concurrency and spec mode (every arm of that
    cell, back to back, in the plan's order); a GSM8K unit's evaluation (every arm's
    servers for it)."""
    if unit.kind == "gsm8k":
        return ("gsm8k", unit.eval_name, unit.data, unit.concurrency)
    return (unit.kind, unit.repeat, unit.concurrency, unit.dspark)


def blocks(units: Sequence[Unit]) -> list[list[Unit]]:
    """The plan's units cut into blocks: runs of consecutive units with the same
    ``block_key``, in plan order. A block is what one host runs back to back, so drift on
    that host lands on every arm of the block alike (interleaving, as on one host)."""
    out: list[list[Unit]] = []
    for unit in units:
        if out and block_key(out[-1][-1]) == block_key(unit):
            out[-1].append(unit)
        else:
            out.append([unit])
    return out


@dataclass(frozen=True)
class SessionUnit:
    """``run_unit`` as a value: the server session (``e2e.session.session.run_unit``) for one
    experiment, results folder and options. Picklable, so that a cluster executor can send it
    to a worker and point it at a scratch folder there (``at``) instead of the driver's."""

    experiment: Any  # e2e.config.Experiment
    results: Path
    options: Any = None  # e2e.session.session.SessionOptions; None: the defaults

    def __call__(self, unit: Unit) -> tuple[Path, Any] | list[tuple[Path, Any]]:
        """The unit's (folder, record); a duet's, one per side (``e2e.session.run_duet``)."""
        from e2e.session import SessionOptions, run_duet, run_unit

        if unit.kind == "duet":
            return run_duet(self.experiment, unit, self.results, self.options or SessionOptions())
        return run_unit(self.experiment, unit, self.results, self.options or SessionOptions())

    def at(self, results: Path | None = None, **options: Any) -> SessionUnit:
        """The same session writing under ``results`` (None: where it writes now), with
        ``options`` (SessionOptions fields such as ``say`` or ``progress``) replaced."""
        from dataclasses import replace

        from e2e.session import SessionOptions

        base = self.options or SessionOptions()
        folder = self.results if results is None else Path(results)
        return SessionUnit(self.experiment, folder, replace(base, **options) if options else base)
