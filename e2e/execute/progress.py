"""One plan's bookkeeping, for every executor: what is done, what each unit tried, what is
given up, and where the plan stands.

An executor decides where and when a unit's attempt runs (this host, one after another; a Ray
cluster, a block per host); the ``Ledger`` keeps the rest, the same way for both:

* a unit whose folder already holds a valid record of exactly that unit is skipped
  (``e2e.results.store.unit_state``: the results folder is the one source of truth);
* each attempt is one progress line: which attempt of ``max_attempts``, where the whole plan
  stands and an ETA (``ProgressClock``);
* what an attempt wrote goes to ``on_unit`` and into the ``Outcome``;
* a unit whose attempts are over (valid, or spent, now or in an earlier invocation) and whose
  folder does not hold it done is given up; with ``fail_fast`` the plan stops there.

The ETA is the wall time since the first unit started, over the units made so far, times the
units left: the plan's own pace. On one host that is the mean wall time of a unit; on a
cluster, where units run on several hosts at once, it is the pace of all of them together.
Units already done, or whose attempts were spent before, cost nothing and are not counted; a
unit counts as made when it is valid or its attempts are spent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.console import Say
from e2e.plan import Unit
from e2e.results.store import unit_state

__all__ = ["Ledger", "Outcome", "OnUnit", "ProgressClock", "complete", "format_eta"]

OnUnit = Callable[[Path, Any], None]


@dataclass
class Outcome:
    """What an execution did: records made, units skipped (done already) and given up."""

    ran: list[Any] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def invalid(self) -> list[Any]:
        return [r for r in self.ran if not r.valid]


def complete(unit: Unit, records: Sequence[Any]) -> bool:
    """Whether ``records`` are a valid record of every run the unit makes (a duet's sides)."""
    return len(records) == len(unit.sides) and all(r.valid for r in records)


def format_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@dataclass
class ProgressClock:
    to_make: int
    made: int = 0  # valid, or attempts spent
    done: int = 0  # valid
    started: float | None = None

    def start(self) -> None:
        """The first unit starts now (later calls change nothing)."""
        if self.started is None:
            self.started = time.monotonic()

    def eta(self, now: float | None = None) -> str:
        if self.made == 0 or self.started is None:
            return "ETA after the first unit"
        per = ((time.monotonic() if now is None else now) - self.started) / self.made
        return f"ETA {format_eta(per * max(self.to_make - self.made, 0))}"

    def status(self, skipped: int, total: int) -> str:
        """'4 of 24 done · ETA 31m20s' (``skipped``: units done before this invocation)."""
        return f"{skipped + self.done} of {total} done · {self.eta()}"


class Ledger:
    """The bookkeeping of one execution of ``units`` into ``results`` (module docstring):
    ``todo`` the units to make, then per attempt ``started`` and ``made``, per unit ``ended``.
    ``outcome`` is what it did; ``stopped`` is true once ``fail_fast`` gave a unit up."""

    def __init__(self, experiment: str, units: Sequence[Unit], results: Path, *,
                 max_attempts: int, fail_fast: bool, on_unit: OnUnit, say: Say) -> None:
        self.experiment, self.results = experiment, Path(results)
        self.max_attempts, self.fail_fast = max_attempts, fail_fast
        self.on_unit, self.say = on_unit, say
        self.total = len(units)
        self.outcome = Outcome()
        self.todo: list[tuple[int, Unit, int]] = []  # (place in the plan, unit, attempts made)
        for i, unit in enumerate(units, 1):
            state = unit_state(self.results, experiment, unit)
            if state.done:
                self.outcome.skipped.append(unit.unit_id)
            else:
                self.todo.append((i, unit, state.attempts))
        self.clock = ProgressClock(to_make=sum(a < max_attempts for _, _, a in self.todo))
        self._tried: set[str] = set()  # units with an attempt in this execution
        self._over: set[str] = set()   # units whose attempts ended in this execution

    @property
    def stopped(self) -> bool:
        return self.outcome.stopped_early

    def attempts(self, unit: Unit) -> int:
        """The attempts the unit's folder counts now (every one is kept)."""
        return unit_state(self.results, self.experiment, unit).attempts

    def started(self, unit: Unit, attempt: int, name: str, where: str = "") -> None:
        """Attempt ``attempt`` of ``unit`` begins: one progress line, '``name`` (``where``
        attempt 2 of 3) · 4 of 24 done · ETA 31m20s'."""
        self._tried.add(unit.unit_id)
        self.clock.start()
        self.say(f"{name} ({where}attempt {attempt} of {self.max_attempts}) · "
                 f"{self.clock.status(len(self.outcome.skipped), self.total)}")

    def made(self, unit: Unit, written: Sequence[tuple[Path, Any]]) -> bool:
        """An attempt wrote ``written`` (a (folder, record) per run of the unit); True when
        that made the unit valid."""
        for folder, record in written:
            self.outcome.ran.append(record)
            self.on_unit(folder, record)
        valid = complete(unit, [record for _, record in written])
        self.clock.done += valid
        return valid

    def ended(self, unit: Unit) -> None:
        """The unit gets no further attempt (valid, or its attempts spent): it counts as made
        if it ran now, and is given up unless its folder holds it done."""
        if unit.unit_id in self._over:
            return
        self._over.add(unit.unit_id)
        self.clock.made += unit.unit_id in self._tried
        if not unit_state(self.results, self.experiment, unit).done:
            self.outcome.given_up.append(unit.unit_id)
            self.outcome.stopped_early |= self.fail_fast

    def is_over(self, unit: Unit) -> bool:
        return unit.unit_id in self._over
