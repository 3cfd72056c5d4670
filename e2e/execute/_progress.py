"""The one progress clock of a plan, for every executor: where the plan stands and an ETA.

The ETA is the wall time since the first unit started, over the units made so far, times the
units left: the plan's own pace. On one host that is the mean wall time of a unit; on a
cluster, where units run on several hosts at once, it is the pace of all of them together.
Units already done cost nothing and are not counted; a unit counts as made when it is valid
or its attempts are spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["ProgressClock", "format_eta"]


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
