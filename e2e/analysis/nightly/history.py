"""The nightly's selections from the history a night is judged against: the cells of the
earlier nights of one experiment and config (``e2e.results.HistoryCell`` records, as the
results store answers them: ``Store.cells(experiment=, config_hash=, before=tonight)``): the
night tonight is judged against (``select_baseline``), one night's cells (``night_cells``) and
a relative cell's ratio history (``ratio_history``) for the judge (``judge``). Pure
functions of those records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from e2e.analysis.nightly.judge import (UNJUDGED, busy_spread, first_look, looks_changed,
                                        measured_busy, within)
from e2e.analysis.nightly.metrics import nightly_metric
from e2e.errors import ConfigError
from e2e.results import (Baseline, CellKey, HistoryCell, NightCell, NightInfo, RatioHistory,
                         interference_of)

__all__ = ["night_cell", "night_cells", "select_baseline", "ratio_history", "cell_history",
           "undecided_nights"]


def night_cell(row: HistoryCell) -> NightCell:
    """A stored cell back as the judge's ``NightCell``."""
    return NightCell(key=CellKey(str(row.kind), str(row.arm), int(row.concurrency),
                                 str(row.spec_mode), str(row.metric)),
                     values=tuple(float(x) for x in row.values),
                     repeats=tuple(int(x) for x in row.repeats),
                     run_dirs=tuple(str(x) for x in row.run_dirs),
                     interference=interference_of(row.interference))


def night_cells(history: Iterable[HistoryCell], *, date: str) -> tuple[NightCell, ...]:
    """The cells of the night ``date`` in ``history`` (one experiment and config's cells)."""
    return tuple(night_cell(r) for r in history if r.date == date)


def select_baseline(history: Sequence[HistoryCell], *, date: str, experiment: str,
                    config_hash: str, pinned: str | None = None,
                    nights: Sequence[NightInfo] = ()) -> Baseline | None:
    """The night tonight (``date``) is judged against, from ``history``: the cells of the
    nights of tonight's experiment and config (``config_hash``) before tonight.

    Default: the latest of them whose status is ``pass``, or before any has passed one
    undecided only for want of a baseline (each judged cell's verdict ``UNJUDGED``: a first
    night); None when there is none.
    ``pinned``: that night, whatever its status; a ConfigError when it is tonight or later,
    is not among ``nights`` (every night of the experiment, ``Store.nights``), or was made
    with another config hash."""
    if pinned is not None:
        if pinned == date:
            raise ConfigError(f"the pinned baseline {pinned} is tonight itself; "
                              "pin an earlier night")
        night = [n for n in nights if n.date == pinned]
        if not night:
            dates = sorted({n.date for n in nights})
            raise ConfigError(f"the pinned baseline night {pinned} is not in the history of "
                              f"{experiment!r} (nights: {', '.join(dates) or 'none'})")
        hashes = {n.config_hash for n in night}
        if config_hash not in hashes:
            raise ConfigError(
                f"the pinned baseline night {pinned} was made with config "
                f"{', '.join(h[:12] for h in sorted(hashes))}, tonight's is {config_hash[:12]}: "
                "their cells do not measure the same thing; pin a night of this config")
        if pinned > date:
            raise ConfigError(f"the pinned baseline night {pinned} is after tonight ({date}); "
                              "pin an earlier night")
        status = next(n.status for n in night if n.config_hash == config_hash)
        return Baseline(pinned, night_cells(history, date=pinned), "pinned", status)
    ok = [r.date for r in history if r.night_status == "pass" and r.date < date]
    if not ok:  # a first night: undecided (exit 3) with nothing to judge against
        verdicts: dict[str, set[str]] = {}
        for r in history:
            if r.night_status == "undecided" and r.date < date:
                verdicts.setdefault(r.date, set()).add(str(r.verdict))
        ok = [d for d, seen in verdicts.items() if seen - {"not judged"} <= UNJUDGED]
    if not ok:
        return None
    chosen = max(ok)
    return Baseline(chosen, night_cells(history, date=chosen),
                    "last passing night with the same config hash")


def ratio_history(history: Sequence[HistoryCell], key: CellKey, *, limit: int,
                  threshold: float | None = None, since: str | None = None,
                  pinned: str | None = None, interference_max: float | None = None,
                  confidence: float = 0.95, first: int | None = None) -> RatioHistory:
    """A relative cell's history to judge tonight against: the first ``limit`` nights of
    ``history`` (the cells of the nights of tonight's experiment and config before tonight)
    since the history started that joined it.

    A night joins when its verdict for ``key`` said no change within ``threshold`` ("noise")
    or there was nothing to judge it against yet ("no baseline"); one whose interval reached
    past the threshold ("undecided") joins unless it looks changed (``looks_changed``), and a
    night that looks changed is held out until it shows no change beyond the threshold
    against the history as it has grown since (``within``). A call (regressed or
    improved) never joins, nor a night measured beside other work (its median run's recorded
    interference at least ``interference_max`` cores; nights stored without interference are
    kept), nor a night whose runs spread far beyond the history's usual within-night spread
    (``busy_spread``, against the nights joined before it): one busy night cannot widen the
    history's spread for good; it does not part the nights either side of it either (the
    night before a busy one stays "the night before" for the two-night rule and for a
    confirmed improvement). Once it holds ``limit`` nights it is full: later nights are
    judged against it and never join, so a step or a slow drift is judged against the level before it and never
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
    anchors = [(since, f"since {since} (changepoints.since)")] if since else []
    pins = [pinned] if pinned else [
        r.baseline_date for r in history
        if r.baseline_reason == "pinned" and isinstance(r.baseline_date, str)]
    if pins:
        pin = max(pins)
        anchors.append((pin, f"since {pin}, the baseline night pinned"))
    start, why = max(anchors) if anchors else (None, "")
    mine = [r for r in history
            if (r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric)
            == (key.kind, key.arm, int(key.concurrency), key.spec_mode, key.metric)
            and (start is None or r.date >= start)]
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
                    waiting[1].values, first_look(window, first), threshold,
                    higher_is_better=better, confidence=confidence):
                held.remove(waiting)
                window.append(waiting)

    def changed(cell: NightCell) -> bool:
        return threshold is not None and len(window) >= 2 and looks_changed(
            cell.values, first_look(window, first), threshold,
            higher_is_better=better)

    for row in sorted(mine, key=lambda r: r.date):
        day, verdict, low, high = str(row.date), str(row.verdict), row.pct_low, row.pct_high
        cell = night_cell(row)
        if (interference_max is not None and (cell.busy_share or 0.0) >= interference_max) \
                or (len(window) >= 2 and busy_spread(cell.values, first_look(window, first))):
            continue   # a busy night says nothing: the nights either side of it stay a pair
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


def undecided_nights(history: Sequence[HistoryCell], key: CellKey, *,
                     interference_max: float, after: str | None = None,
                     usual: Sequence[Sequence[float]] = ()) -> int:
    """The nights in a row, the latest of ``history`` (the cells of this experiment and
    config's nights before tonight) last, whose verdict for ``key`` was undecided (ended
    undecided at the night's last look), counted back to the night ``after`` (exclusive: the
    last night of a full ratio history, or a pinned baseline night). A night measured beside
    other work (``measured_busy``) is skipped, as the ratio's history skips it, and so is one
    busy by its own spread against ``usual`` (the history nights' runs, ``busy_spread``); any
    other verdict ends the count."""
    mine = sorted((r for r in history
                   if (r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric)
                   == (key.kind, key.arm, key.concurrency, key.spec_mode, key.metric)
                   and (after is None or str(r.date) > after)),
                  key=lambda r: str(r.date), reverse=True)
    count = 0
    for row in mine:
        cell = night_cell(row)
        if measured_busy(cell, interference_max) or (len(usual) >= 2
                                                     and busy_spread(cell.values, usual)):
            continue
        if row.verdict != "undecided":
            break
        count += 1
    return count


def cell_history(history: Sequence[HistoryCell], *, metric: str, arm: str | None = None,
                 concurrency: int | None = None, spec_mode: str | None = None,
                 experiment: str | None = None) -> list[HistoryCell]:
    """The night cells of one cell (one a night), oldest first (``e2e history --metric``); a
    ConfigError naming what the history holds when nothing matches, or naming the cells that
    match when the ones left out (None) leave several."""
    wanted = {"arm": arm, "concurrency": concurrency, "spec_mode": spec_mode,
              "experiment": experiment}
    rows = [r for r in history if r.metric == metric
            and all(v is None or getattr(r, k) == v for k, v in wanted.items())]
    if not rows:
        cells = sorted({f"{r.arm} c{r.concurrency} {r.spec_mode} {r.metric}" for r in history})
        raise ConfigError(f"no night has the cell {arm or '*'} c{concurrency or '*'} "
                          f"{spec_mode or '*'} {metric}; the store has: "
                          f"{', '.join(cells[:20]) or 'no nights'}")
    keys = list(dict.fromkeys((r.experiment, r.config_hash, r.kind, r.arm, r.concurrency,
                               r.spec_mode) for r in rows))
    if len(keys) > 1 and (arm is None or concurrency is None or spec_mode is None):
        found = ", ".join(f"{k[3]} c{k[4]} {k[5]}" for k in keys)
        raise ConfigError(f"{metric}: several cells match ({found}); give --arm, "
                          "--concurrency and --spec-mode")
    return sorted(rows, key=lambda r: (r.date, r.experiment))
