"""The plan: a list of units. For a sweep, arms x concurrencies x spec modes x repeats,
interleaved.

Round k holds run k of every cell and arm; within a round the arms of one cell run back to
back. The arm order of each round comes from a **Williams design** (``williams``): over a whole
cycle of its rows (n rows for an even number of arms n, 2n for an odd one) every arm runs in
every position equally often and follows every other arm equally often, so a linear drift of the
machine (thermal, background load) and the carry-over of one run into the next land on every arm
alike. The rows are taken in an order drawn from the results folder's own **order seed**
(``folder_order``: drawn when a sweep first plans into a new folder, or given with
``--order-seed``, and recorded in its ``order.json``, so a resumed sweep plans the same order and
two sweeps of one config get different ones; the load's prompt seed is not touched, so every arm
and every sweep still gets the same prompts), starting at the first reported round, so the reported rounds are a complete Williams
design whenever their number is a multiple of the cycle, and otherwise the first rows of it in
a seeded order (no arm repeats a position before every arm has had every position). The order of round k depends only
on k, the arms and the seed: adding rounds (``--until-settled``) never reorders the earlier ones.
A results folder started before this order (no ``order.json``) keeps the old one, the arm list
rotated by one each round (``order_of``). The plan is a pure function of its inputs. (GSM8K
units are planned by ``e2e.gsm8k.run.resolve_plan``; whether a unit is done is read by
``e2e.results.store.unit_state``.)
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from itertools import combinations

from e2e.config import Experiment
from e2e.errors import ConfigError
from e2e.plan._units import DuetSpec, RunSpec

__all__ = ["make_plan", "rounds", "williams", "round_orders", "duet_rounds", "Order",
           "ORDER_FILE", "FolderOrder", "claim_order", "folder_order", "order_of", "record_order",
           "describe_order", "order_seed"]

Order = Literal["williams", "rotation"]
ORDER_FILE = "order.json"


def williams(n: int) -> list[list[int]]:
    """Rows of a Williams design for ``n`` treatments (Williams 1949): row 0 is
    0, 1, n−1, 2, n−2, …; row i adds i (mod n). For even n these n rows are a Latin square in
    which every treatment follows every other exactly once; for odd n the n mirrored rows are
    added (2n rows), after which every ordered pair of neighbours occurs exactly twice."""
    if n < 1:
        raise ValueError(f"a Williams design needs at least 1 treatment, got {n}")
    first = [0]
    lo, hi = 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2 == 1 and n > 1:
        rows += [row[::-1] for row in rows]
    return rows


def round_orders(arms: list[str], runs: int, *, report_from_run: int = 1, seed: int = 0,
                 order: Order = "williams") -> list[list[str]]:
    """The arm order of rounds 1..``runs``. ``williams``: the rows of ``williams(len(arms))``,
    arms relabelled and rows permuted by a generator seeded with ``seed``; reported round j
    (j = 0 at ``report_from_run``) takes row j of that cycle (mod its length), a warmup round
    before it the row the cycle gives it counting backwards. The Latin square's n rows come
    first (in a seeded order) and, for odd n, their mirrors after, in the same order: so any
    n or fewer consecutive reported rounds put every arm in a different position. ``rotation``: the arm list rotated
    by k − 1 in round k (the order before the Williams design; kept for folders made with it)."""
    if order == "rotation":
        return [arms[(k - 1) % len(arms):] + arms[:(k - 1) % len(arms)] for k in range(1, runs + 1)]
    if order != "williams":
        raise ValueError(f"unknown order {order!r}")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, len(arms)])
    label = [arms[i] for i in rng.permutation(len(arms))]
    rows = williams(len(arms))
    n = len(arms)
    shifts = rng.permutation(n)  # the Latin square's rows first, the mirrored ones after
    rows = [rows[i] for i in shifts] + [rows[n + i] for i in shifts if len(rows) > n]
    return [[label[x] for x in rows[(k - report_from_run) % len(rows)]] for k in range(1, runs + 1)]


def duet_rounds(arms: list[str], slots: int, runs: int, *, report_from_run: int = 1,
                seed: int = 0) -> list[list[tuple[str, ...]]]:
    """The duets of rounds 1..``runs`` for ``slots`` slots: per round, a list of duets, each
    the arms in slot order. With no more arms than slots one duet per round holds every arm
    (on the first len(arms) slots); with more, every round holds every ``slots``-subset of
    the arms once (so every pair of arms meets equally often, ``C(n-2, k-2)`` times a round).
    Within a duet, the arm at position p of its subset sits in slot (p + j) mod k in reported
    round j (counting back for warmup rounds), so over any k consecutive rounds every arm sits
    in every slot of each of its duets once: a slot that is faster lands on every arm alike.
    Arms are relabelled and the subsets ordered by a generator seeded with ``seed``; round k
    depends only on k, the arms, the slots and the seed."""
    if slots < 2:
        raise ValueError(f"a duet needs at least 2 slots, got {slots}")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, len(arms), slots, 0xD0E7])
    label = [arms[i] for i in rng.permutation(len(arms))]
    k = min(slots, len(arms))
    groups = list(combinations(label, k))
    groups = [groups[i] for i in rng.permutation(len(groups))]
    out = []
    for r in range(1, runs + 1):
        j = r - report_from_run
        shift = j % k
        out.append([tuple(g[(p - shift) % k] for p in range(k)) for g in groups])
    return out


def make_plan(
    experiment: Experiment,
    *,
    arms: list[str] | None = None,
    concurrencies: list[int] | None = None,
    spec_modes: list[bool] | None = None,
    runs: int | None = None,
    order: Order = "williams",
    duet: bool | None = None,
    seed: int | None = None,
) -> list[RunSpec] | list[DuetSpec]:
    """The sweep's units in plan order. ``seed``: the arm order's seed (a results folder's,
    ``folder_order``; None: ``order_seed``, the load's seed, for plans with no folder). ``duet`` (None: the config's ``[duet] enabled``) plans
    duets instead of single runs (``duet_rounds``): round k holds, per concurrency and spec
    mode, the round's duets, each a DuetSpec whose sides are run k of their arms."""
    arms = arms or [name for name, arm in experiment.arms.items() if not arm.opt_in]
    for arm in arms:
        experiment.arm(arm)
    if len(set(arms)) != len(arms):
        raise ConfigError(f"--arms names an arm twice ({', '.join(arms)}); to measure noise, "
                          "add a second arm with the same settings (e.g. main-repeat)")
    concurrencies = concurrencies or list(experiment.load.concurrencies)
    spec_modes = spec_modes if spec_modes is not None else [False, True]
    runs = runs or experiment.repeats
    seed = order_seed(experiment) if seed is None else int(seed)
    if experiment.duet.enabled if duet is None else duet:
        return _duet_plan(experiment, arms, concurrencies, spec_modes, runs, seed)
    orders = round_orders(arms, runs, report_from_run=experiment.report_from_run,
                          seed=seed, order=order)
    plan: list[RunSpec] = []
    for k in range(1, runs + 1):
        for concurrency in concurrencies:
            for dspark in spec_modes:
                for arm in orders[k - 1]:
                    plan.append(RunSpec.resolve(experiment, arm=arm, concurrency=concurrency,
                                                dspark=dspark, repeat=k))
    return plan


def _duet_plan(experiment: Experiment, arms: list[str], concurrencies: list[int],
               spec_modes: list[bool], runs: int, seed: int) -> list[DuetSpec]:
    if len(arms) < 2:
        raise ConfigError(f"a duet measures at least two arms together; --arms gives "
                          f"{', '.join(arms) or 'none'}")
    slots = len(experiment.duet.slots)
    duets = duet_rounds(arms, slots, runs, report_from_run=experiment.report_from_run, seed=seed)
    windows = experiment.load.windows
    sides = {len(group) for rnd in duets for group in rnd}
    if experiment.duet.swap and any(windows % k for k in sides):
        raise ConfigError(f"[duet] swap: {windows} load window(s) per run cannot meet each of "
                          f"{max(sides)} slots equally often; give --windows (or load.windows) "
                          f"a multiple of {max(sides)}, or drop swap")
    plan: list[DuetSpec] = []
    for k in range(1, runs + 1):
        for concurrency in concurrencies:
            for dspark in spec_modes:
                for d, group in enumerate(duets[k - 1], 1):
                    sides = [RunSpec.resolve(experiment, arm=arm, concurrency=concurrency,
                                             dspark=dspark, repeat=k).model_copy(
                                                 update={"duet": d, "slot": i})
                             for i, arm in enumerate(group)]
                    plan.append(DuetSpec(sides=tuple(sides)))
    return plan


def order_seed(experiment: Experiment) -> int:
    """The arm order's seed of a plan with no results folder (nightly's bisection, tests,
    simulations): the load's seed. A sweep's folder has its own (``folder_order``)."""
    return int(experiment.load.seed)


MAX_ORDER_SEED = 2**31 - 1


@dataclass(frozen=True)
class FolderOrder:
    """How a results folder's rounds are ordered: the design (``order``), the seed its rows are
    drawn with, and where the seed came from: "recorded" (the folder's ``order.json``), "given"
    (``--order-seed``, not yet recorded) or "drawn" (a new folder's, drawn now, not yet
    recorded: a dry run draws one too but writes nothing, so the sweep draws its own)."""

    order: Order
    seed: int
    source: Literal["recorded", "given", "drawn"]


def _read_order(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8")[:10_000])
    except (OSError, ValueError, RecursionError):  # a deep one: not e2e's
        value = None
    if not isinstance(value, dict) or value.get("order") not in ("williams", "rotation"):
        raise ConfigError(f"{path}: unreadable or unknown order; remove it only if the folder "
                          "holds no runs")
    return value


def order_of(folder: Path) -> Order:
    """The order a results folder (``<results>/<experiment>``) is planned in: the one its
    ``order.json`` names; "rotation" for a folder with runs but no ``order.json`` (made before
    the Williams design: it keeps its order); "williams" for a new folder."""
    path = Path(folder) / ORDER_FILE
    if path.is_file():
        return _read_order(path)["order"]
    if any(Path(folder).glob("*/run.json")):
        return "rotation"
    return "williams"


def folder_order(folder: Path, experiment: Experiment, seed: int | None = None) -> FolderOrder:
    """The order and order seed of a results folder. A folder with an ``order.json`` keeps
    what it records (a seed given that differs is an error: it would reorder the rounds already
    made); one written before the order had its own seed recorded the load's seed, and one
    without a seed (made before the Williams design, rotated) takes the load's seed. A new
    folder takes ``seed`` when given, else a seed drawn now (``secrets``), so two sweeps of one
    config run their arms in different orders; ``record_order`` writes it when the sweep
    starts."""
    if seed is not None and not 0 <= int(seed) <= MAX_ORDER_SEED:
        raise ConfigError(f"--order-seed {seed}: give a whole number from 0 to {MAX_ORDER_SEED}")
    path = Path(folder) / ORDER_FILE
    order = order_of(folder)
    if path.is_file() or order == "rotation":
        recorded = _read_order(path).get("seed", order_seed(experiment)) if path.is_file() \
            else order_seed(experiment)
        if isinstance(recorded, bool) or not isinstance(recorded, int):
            raise ConfigError(f"{path}: its seed {recorded!r} is not a whole number; restore it "
                              "(the folder's runs were planned with it)")
        if seed is not None and int(seed) != recorded:
            raise ConfigError(f"--order-seed {seed}: {folder} was planned with order seed "
                              f"{recorded} and keeps it (another seed would reorder its rounds); "
                              "leave --order-seed out, give that seed, or use a new --results "
                              "folder")
        return FolderOrder(order, int(recorded), "recorded")
    if seed is not None:
        return FolderOrder(order, int(seed), "given")
    return FolderOrder(order, secrets.randbelow(MAX_ORDER_SEED + 1), "drawn")


def record_order(folder: Path, plan: FolderOrder) -> None:
    """Write ``order.json`` (atomically: the order, its seed and where the seed came from) the
    first time a sweep plans into ``folder``; a folder that has one keeps it."""
    from e2e.paths import atomic_write_text

    path = Path(folder) / ORDER_FILE
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"order": plan.order, "seed": plan.seed,
                                        "seed_source": plan.source}, indent=2) + "\n")


@contextlib.contextmanager
def claim_order(folder: Path, experiment: Experiment) -> Iterator[None]:
    """Around a single run (``e2e run``) into ``folder``: if the run makes the folder, record
    its order (Williams, a drawn seed) once it holds the run, so a sweep into it later plans
    the Williams design with the folder's own seed instead of taking the folder, which then
    holds runs but no ``order.json``, for one made before that design. A run refused before it
    recorded anything adds nothing to the folder."""
    new = not (Path(folder) / ORDER_FILE).is_file() and order_of(folder) == "williams"
    plan = folder_order(folder, experiment) if new else None
    try:
        yield
    finally:
        if plan is not None and any(Path(folder).glob("*/run.json")):
            record_order(folder, plan)


def _seed_words(plan: FolderOrder) -> str:
    if plan.source == "recorded":
        return f"order seed {plan.seed} (the folder's, from its {ORDER_FILE})"
    if plan.source == "given":
        return f"order seed {plan.seed} (--order-seed; recorded when the sweep starts)"
    return (f"order seed {plan.seed} (drawn for this dry run: the folder is new and the sweep "
            f"draws its own; to run this order, give --order-seed {plan.seed})")


def describe_order(experiment: Experiment, arms: list[str], runs: int, plan: FolderOrder,
                   duet: bool = False) -> list[str]:
    """Lines for ``--dry-run``: the design, its order seed (and where it comes from) and each
    round's arm order (or duets)."""
    order, seed = plan.order, plan.seed
    if duet:
        slots = experiment.duet.slot_names()
        rounds_ = duet_rounds(arms, len(slots), runs, report_from_run=experiment.report_from_run,
                              seed=seed)
        k = min(len(slots), len(arms))
        reported = runs - experiment.report_from_run + 1
        balance = ("are whole cycles: every arm in every slot equally often" if reported > 0
                   and reported % k == 0 else f"are not a multiple of {k}: some arm sits in "
                   "one slot more often, and a slot that runs faster favours it (give a "
                   f"multiple of {k} reported rounds)")
        head = (f"duets: {len(rounds_[0])} a round of {k} arms at once, one per slot "
                f"({', '.join(slots[:k])}), every pair of arms together equally often, "
                f"{_seed_words(plan)}; the {max(reported, 0)} reported rounds {balance}")
        return [head] + [f"  round {r}: " + " | ".join(" + ".join(g) for g in groups)
                         for r, groups in enumerate(rounds_, start=1)]
    orders = round_orders(arms, runs, report_from_run=experiment.report_from_run,
                          seed=seed, order=order)
    if order == "rotation":
        head = "arm order: rotated by one each round (the folder's order before the Williams design)"
    else:
        cycle = len(williams(len(arms)))
        reported = runs - experiment.report_from_run + 1
        whole = reported > 0 and reported % cycle == 0
        head = (f"arm order: Williams design over {len(arms)} arms (cycle of {cycle} rounds), rows "
                f"drawn with {_seed_words(plan)}; the {max(reported, 0)} reported rounds "
                + ("are complete cycles: every arm in every position and after every other "
                   "equally often" if whole else
                   f"are not a multiple of {cycle}: its first rows (every arm in a different "
                   "position each round, up to the number of arms)"))
    return [head] + [f"  round {k}: {' '.join(o)}" for k, o in enumerate(orders, start=1)]


def rounds(units: list) -> list[list]:
    """The plan's units grouped by round (their ``repeat``), in plan order."""
    out: dict[int, list[RunSpec]] = {}
    for unit in units:
        out.setdefault(unit.repeat, []).append(unit)
    return [out[k] for k in sorted(out)]
