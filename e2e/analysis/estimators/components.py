"""Where the noise lives: between fresh servers or within one (``[load] windows = k``).

A run is one fresh server; with k load windows it measures the same load k times back to
back. On the log scale a window's value is

    ln y = (arm, block effects) + s + w,   s ~ (0, σ_b²) per server,  w ~ (0, σ_w²) per window,

so a run's value (over its k windows) has variance σ_b² + σ_w²/k, which is the per-run residual
variance the cell's model estimates (``cell_model``'s ``s2``). σ_w² comes from the windows
themselves: a two-way fit of ln y on run + window position (statsmodels OLS), so a first window
that is slower in every server is an effect of its own (``first_window``), not within-server
noise. σ_b² is then the rest (the ANOVA estimator of a one-way random effect, floored at 0).

Planning (``e2e plan``) uses the two parts: a design of n servers × k' windows has per-run
variance σ_b² + σ_w²/k', and costs n × (the run's fixed time + k' × a window's time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

__all__ = ["Components", "RunCost", "components", "run_costs"]


@dataclass(frozen=True)
class Components:
    """The per-run noise of one (concurrency, spec mode, metric) split in two (log units).

    ``within_sd``: sd of one window's ln y inside one server, on ``within_df`` df;
    ``between_sd``: sd of a server's own level beyond what its windows explain (0 when the
    per-run noise is no larger than σ_w²/k); ``run_sd``: the per-run residual sd they split
    (the model's, before shared noise and the floor); ``windows``: windows per run (the most
    common); ``first_window``: mean ln(first window / the run's other windows) over the runs,
    with its standard error (> 0: the first window after a fresh start is slower)."""

    windows: int
    runs: int
    within_sd: float
    within_df: int
    between_sd: float
    run_sd: float
    first_window: float | None = None
    first_window_se: float | None = None

    @property
    def between_share(self) -> float:
        """σ_b² / (σ_b² + σ_w²/k): the share of a run's variance that more windows cannot
        shrink."""
        total = self.between_sd ** 2 + self.within_sd ** 2 / self.windows
        return self.between_sd ** 2 / total if total > 0 else 0.0

    def run_sd_with(self, windows: int) -> float:
        """The per-run sd of a design with ``windows`` windows per server."""
        return math.sqrt(self.between_sd ** 2 + self.within_sd ** 2 / windows)


def components(windows: Sequence[Sequence[float | None]], run_s2: float,
               run_df: float) -> Components | None:
    """``windows``: each reported run's window values of one metric (every arm of the cell);
    ``run_s2``: the per-run residual variance of the run values (ln units) the comparisons use,
    on ``run_df`` df. None without at least 2 runs of at least 2 usable windows each."""
    import pandas as pd
    import statsmodels.formula.api as smf

    rows = []
    for run, values in enumerate(windows):
        logs = [math.log(v) for v in values
                if v is not None and math.isfinite(v) and v > 0]
        if len(logs) == len(values) and len(logs) >= 2:
            rows += [(run, pos, y) for pos, y in enumerate(logs)]
    frame = pd.DataFrame(rows, columns=["run", "pos", "y"])
    runs = frame["run"].nunique() if len(frame) else 0
    if runs < 2 or run_df <= 0:
        return None
    fit = smf.ols("y ~ C(run) + C(pos)", data=frame).fit()
    df = int(fit.df_resid)
    if df < 1:
        return None
    within_s2 = float(fit.ssr) / df
    k = int(frame.groupby("run").size().mode().iloc[0])
    between_s2 = max(run_s2 - within_s2 / k, 0.0)
    first = []
    for _, g in frame.groupby("run"):
        y = g.sort_values("pos")["y"].to_numpy()
        first.append(y[0] - y[1:].mean())
    first_arr = np.asarray(first)
    se = float(first_arr.std(ddof=1) / math.sqrt(len(first_arr))) if len(first_arr) > 1 else None
    return Components(windows=k, runs=runs, within_sd=math.sqrt(within_s2), within_df=df,
                      between_sd=math.sqrt(between_s2), run_sd=math.sqrt(max(run_s2, 0.0)),
                      first_window=float(first_arr.mean()), first_window_se=se)


@dataclass(frozen=True)
class RunCost:
    """What one run of a (concurrency, spec mode) cost in wall time (medians over its runs):
    ``fixed_s`` everything but the measured load (server start, health, plugin check, warmup,
    stop), ``window_s`` one load window."""

    fixed_s: float
    window_s: float

    def seconds(self, windows: int) -> float:
        return self.fixed_s + windows * self.window_s


def run_costs(records) -> dict[tuple[int, str], RunCost]:
    """Per (concurrency, spec mode), the median fixed and per-window time of the valid runs
    (from ``started_at``/``finished_at`` and each window's or the run's load duration)."""
    per: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for r in records:
        if not r.valid or r.metrics is None:
            continue
        try:
            wall = (datetime.fromisoformat(str(r.finished_at))
                    - datetime.fromisoformat(str(r.started_at))).total_seconds()
        except (TypeError, ValueError):
            continue
        loads = [w.duration_s for w in r.windows] or [r.metrics.duration_s]
        if wall <= 0 or not all(math.isfinite(d) and d > 0 for d in loads):
            continue
        per.setdefault((int(r.spec.concurrency), r.spec.spec_mode), []).append(
            (max(wall - sum(loads), 0.0), sum(loads) / len(loads)))
    return {k: RunCost(fixed_s=float(np.median([f for f, _ in v])),
                       window_s=float(np.median([w for _, w in v])))
            for k, v in per.items()}
