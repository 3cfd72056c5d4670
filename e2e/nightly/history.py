"""Selecting from the history frame (one row per night cell, ``e2e.results.HISTORY_COLUMNS``):
the night tonight is judged against (``select_baseline``), one night's cells (``night_cells``)
and a relative cell's ratio history (``ratio_history``). Pure functions of a frame; the frame
is the results store's ``history()`` (``e2e.results.open_store``).
"""

from __future__ import annotations

import math

import pandas as pd

from e2e.errors import ConfigError
from e2e.analysis import looks_changed, nightly_metric, within
from e2e.results import Baseline, CellKey, NightCell, RatioHistory, interference_of

__all__ = ["night_cells", "select_baseline", "ratio_history"]


def night_cells(history: pd.DataFrame, *, date: str, experiment: str,
                config_hash: str) -> tuple[NightCell, ...]:
    """The cells of one night of the history."""
    rows = history[(history["date"] == date) & (history["experiment"] == experiment)
                   & (history["config_hash"] == config_hash)]
    return tuple(
        NightCell(key=CellKey(str(r.kind), str(r.arm), int(r.concurrency), str(r.spec_mode),
                              str(r.metric)),
                  values=tuple(float(x) for x in r.values),
                  repeats=tuple(int(x) for x in r.repeats),
                  run_dirs=tuple(str(x) for x in r.run_dirs),
                  interference=interference_of(r.interference))
        for r in rows.itertuples(index=False))


def select_baseline(history: pd.DataFrame, *, date: str, experiment: str, config_hash: str,
                    pinned: str | None = None) -> Baseline | None:
    """The night tonight (``date``) is judged against.

    Default: the latest night before ``date`` of the same experiment and config hash whose
    status is ``pass``; None when there is none. ``pinned``: that night, whatever its status;
    a ConfigError when it is tonight, absent, or was made with another config hash."""
    same = history[history["experiment"] == experiment]
    if pinned is not None:
        if pinned == date:
            raise ConfigError(f"the pinned baseline {pinned} is tonight itself; pin an earlier night")
        night = same[same["date"] == pinned]
        if night.empty:
            dates = sorted(set(same["date"]))
            raise ConfigError(f"the pinned baseline night {pinned} is not in the history of "
                              f"{experiment!r} (nights: {', '.join(dates) or 'none'})")
        hashes = set(night["config_hash"])
        if config_hash not in hashes:
            raise ConfigError(
                f"the pinned baseline night {pinned} was made with config "
                f"{', '.join(h[:12] for h in sorted(hashes))}, tonight's is {config_hash[:12]}: "
                "their cells do not measure the same thing; pin a night of this config")
        status = str(night[night["config_hash"] == config_hash]["night_status"].iloc[0])
        return Baseline(pinned, night_cells(history, date=pinned, experiment=experiment,
                                            config_hash=config_hash), "pinned", status)
    ok = same[(same["config_hash"] == config_hash) & (same["night_status"] == "pass")
              & (same["date"] < date)]
    if ok.empty:
        return None
    chosen = str(ok["date"].max())
    return Baseline(chosen, night_cells(history, date=chosen, experiment=experiment,
                                        config_hash=config_hash),
                    "last passing night with the same config hash")


def ratio_history(history: pd.DataFrame, key: CellKey, *, date: str, experiment: str,
                  config_hash: str, limit: int, threshold: float | None = None,
                  since: str | None = None, pinned: str | None = None,
                  interference_max: float | None = None,
                  confidence: float = 0.95) -> RatioHistory:
    """A relative cell's history to judge tonight (``date``) against: the first ``limit``
    nights of this experiment and config hash since the history started that joined it.

    A night joins when its verdict for ``key`` said no change within ``threshold`` ("noise")
    or there was nothing to judge it against yet ("no baseline"); one whose interval reached
    past the threshold ("undecided") joins unless it looks changed (``e2e.analysis.looks_changed``), and a
    night that looks changed is held out until it shows no change beyond the threshold
    against the history as it has grown since (``e2e.analysis.within``). A call (regressed or
    improved) never joins, nor a night measured beside other work (its median run's recorded
    interference at least ``interference_max`` cores; nights stored without interference are
    kept). Once it holds ``limit`` nights it is full: later nights are judged against it and
    never join, so a step or a slow drift is judged against the level before it and never
    absorbed.

    The history starts at the latest of: ``since`` (``changepoints.since``), the baseline
    night a person pinned (``pinned`` tonight, else the latest pin an earlier night was judged
    with: a pin holds for the nights after it, and that night joins whatever its verdict),
    and the first of two nights in a row called improved (a new level starts only where a
    second night confirms it). Also found: a regression called since the start and not seen
    to return (``regressed_since``; a night judged "noise" or "improved" closes it),
    whether the last night, still regressed, showed no change beyond half the threshold
    (``returning``: the interval's worse end under the smallest change a night calls; a
    second such night in a row returns it), and whether the last night, not called, looked
    changed (``suspect``: a second such night in a row is a regression)."""
    rows = history[(history["experiment"] == experiment) & (history["config_hash"] == config_hash)
                   & (history["date"] < date)]
    anchors = [(since, f"since {since} (changepoints.since)")] if since else []
    pins = [pinned] if pinned else [
        d for d in rows.loc[rows["baseline_reason"] == "pinned", "baseline_date"]
        if isinstance(d, str)]
    if pins:
        pin = max(pins)
        anchors.append((pin, f"since {pin}, the baseline night pinned"))
    start, why = max(anchors) if anchors else (None, "")
    mine = rows[(rows["kind"] == key.kind) & (rows["arm"] == key.arm)
                & (rows["concurrency"].astype(int) == int(key.concurrency))
                & (rows["spec_mode"] == key.spec_mode) & (rows["metric"] == key.metric)]
    if start is not None:
        mine = mine[mine["date"] >= start]
    better = nightly_metric(key.metric).higher_is_better if key.kind == "load" else False
    sign = -1.0 if better else 1.0
    window: list[tuple[str, NightCell]] = []
    held: list[tuple[str, NightCell]] = []   # nights that looked changed, waiting
    regressed: str | None = None
    returning = False
    suspect: str | None = None  # the night before, if it looked changed
    last_improved: tuple[str, NightCell] | None = None  # the night before, if called improved

    def admit(night: tuple[str, NightCell]) -> None:
        window.append(night)
        for waiting in list(held):  # the grown history may now show a held night's level
            if len(window) < limit and threshold is not None and within(
                    waiting[1].values, [c.values for _, c in window], threshold,
                    higher_is_better=better, confidence=confidence):
                held.remove(waiting)
                window.append(waiting)

    def changed(cell: NightCell) -> bool:
        return threshold is not None and len(window) >= 2 and looks_changed(
            cell.values, [c.values for _, c in window], threshold, higher_is_better=better)

    mine = mine.sort_values("date")
    for day, verdict, values, repeats, run_dirs, busy, low, high in zip(
            mine["date"].astype(str), mine["verdict"].astype(str), mine["values"],
            mine["repeats"], mine["run_dirs"], mine["interference"], mine["pct_low"],
            mine["pct_high"]):
        cell = NightCell(key, tuple(float(x) for x in values), tuple(int(x) for x in repeats),
                         tuple(str(x) for x in run_dirs), interference_of(busy))
        if interference_max is not None and (cell.busy_share or 0.0) >= interference_max:
            last_improved = suspect = None
            continue
        suspect = day if verdict == "undecided" and changed(cell) else None
        if verdict == "improved" and last_improved is not None:
            window, held, regressed = [last_improved, (day, cell)], [], None  # a new level
            start, why = last_improved[0], f"since {last_improved[0]}, a confirmed improvement"
            last_improved, returning = None, False
            continue
        last_improved = (day, cell) if verdict == "improved" else None
        pin = day == start and why.endswith("pinned")
        if verdict == "regressed" and not pin:
            worse = low if better else high
            returning = (regressed is not None and threshold is not None and worse is not None
                         and not math.isnan(float(worse))
                         and sign * float(worse) <= threshold / 2.0)
            regressed = regressed or day
        elif verdict in ("noise", "improved") or pin:
            regressed, returning = None, False
        if len(window) >= limit:
            continue
        if pin or verdict in ("no baseline", "noise", "new cell"):
            admit((day, cell))
        elif verdict == "undecided":
            if suspect:
                held.append((day, cell))
            else:
                admit((day, cell))
    return RatioHistory(nights=tuple(window), since=start, why=why or "since the first night",
                        full=len(window) >= limit, regressed_since=regressed,
                        returning=returning, suspect=suspect)
