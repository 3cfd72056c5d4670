"""Tonight of a nightly config, resolved once (``night_of``) before anything runs: the
experiment it runs on this host, its folders, the plan of each look, the cells it expects
and judges, and the judge's rules. Measuring, assessing and writing a night (and its dry run)
read this one value (``Night``), never the config again.

    NightlyConfig (settings.py: the TOML, validated; the config hash)
      -> night_of: --arm-setting overrides, one server at a time where the host lacks duet
         slots, looks (``night_looks``) and their plans (``plan_night``), expected cells
         (``expected_cells``) and the ratio cells judged (``judged_key``), the rules
      -> Night
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.analysis.nightly import Rules, judged_metrics
from e2e.config import BuildSpec, Experiment
from e2e.errors import ConfigError
from e2e.names import plugin_settings
from e2e.nightly.settings import NightlyConfig, NightlySettings
from e2e.results import GSM8K_METRIC, CellKey, Looks, relative_arm

if TYPE_CHECKING:
    from e2e.gsm8k.run import GSM8KPlan

__all__ = ["with_arm_settings", "Night", "night_of", "night_dir", "one_at_a_time", "plan_night",
           "night_looks", "judged_key", "expected_cells", "gsm8k_plan"]


def with_arm_settings(experiment: Experiment, arms: tuple[str, ...],
                      overrides: dict[str, Any]) -> Experiment:
    """The experiment with ``overrides`` merged into each listed arm's plugin settings."""
    if not overrides:
        return experiment
    new_arms = dict(experiment.arms)
    for name in arms:
        arm = experiment.arms[name]  # the nightly's arms are the config's (parse_nightly)
        try:
            plugin = plugin_settings({**arm.plugin, **overrides})
        except ValueError as exc:
            raise ConfigError(f"--arm-setting on arm {name!r}: {exc}") from None
        new_arms[name] = arm.model_copy(update={"plugin": plugin})
    return experiment.model_copy(update={"arms": new_arms})


@dataclass(frozen=True)
class Night:
    """A night resolved once (``night_of``), the one value the pipeline's stages pass: its
    date and results folder; the experiment it runs (``--arm-setting`` values applied; one
    server at a time where the host lacks duet slots, ``alone`` saying why) and each arm's
    build; what it measures (arms, the config hash, the plan of each look, the rounds of each
    look); how it is judged (the ``[nightly]`` settings, the judge's ``rules``, the cells it
    expects and the ratio cells it judges); the baseline night pinned (``--baseline-night``,
    else ``[nightly] baseline_night``), the store's URL (``--store``, else ``[nightly]
    store``) and the overrides as given."""

    date: str
    results: Path
    experiment: Experiment
    settings: NightlySettings
    config_hash: str
    source: str
    arms: tuple[str, ...]
    builds: dict[str, BuildSpec]
    looks: Looks
    rounds: tuple[int, ...]
    plans: tuple[list, ...]
    expected: tuple[CellKey, ...]
    judged: tuple[CellKey, ...]
    rules: Rules
    gsm8k: GSM8KPlan | None = None
    alone: str | None = None
    pinned: str | None = None
    store: str | None = None
    arm_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def reference(self) -> str | None:
        """The arm every other arm is judged relative to (``[nightly] reference``), or None."""
        return self.settings.reference

    @property
    def baseline_arm(self) -> str:
        """The arm comparisons between arms are made against (``[nightly] baseline``)."""
        return self.settings.baseline

    def rounds_for(self, reported: int) -> int:
        """The plan's runs (rounds, warmups included) that give ``reported`` reported ones."""
        return reported + self.experiment.report_from_run - 1

    @property
    def root(self) -> Path:
        """``<results>/nightly/<date>/``: the night's folder."""
        return night_dir(self.results, self.date)

    @property
    def folder(self) -> Path:
        """``<results>/nightly/<date>/<experiment>``: the sweep's runs."""
        return self.root / self.experiment.name

    @property
    def prefix(self) -> str:
        """``folder`` relative to the results folder (how the store names run folders)."""
        return self.folder.relative_to(self.results).as_posix()


def night_of(cfg: NightlyConfig, *, date: str, results: Path,
             arm_overrides: dict[str, Any] | None = None, pinned: str | None = None,
             store: str | None = None) -> Night:
    """Tonight of ``cfg``, resolved once: its experiment with the ``--arm-setting`` overrides
    on the built arms, run one server at a time where this host lacks the duet slots it
    names; the plan of each look, the cells it expects and judges, the judge's rules."""
    overrides = dict(arm_overrides or {})
    experiment = cfg.experiment
    alone = one_at_a_time(experiment, cfg.reference)
    if alone and experiment.duet.enabled:  # the host lacks a slot: one server at a time
        experiment = experiment.model_copy(update={"duet": experiment.duet.model_copy(
            update={"enabled": False})})
    rounds = night_looks(cfg)
    expected = tuple(expected_cells(cfg))
    # the plan's units name arms, not their plugin settings: planned before the overrides
    plans = tuple(plan_night(cfg, experiment, runs=n) for n in rounds)
    judged = tuple(judged_key(cfg, k) for k in expected if k.kind == "load")
    experiment = with_arm_settings(experiment, cfg.built_arms, overrides)
    return Night(
        date=date, results=Path(results), experiment=experiment, settings=cfg.settings,
        config_hash=cfg.config_hash, source=cfg.source, arms=cfg.arms,
        builds={a: experiment.arms[a].build or experiment.server.build for a in cfg.arms},
        looks=cfg.looks, rounds=rounds, plans=plans, expected=expected, judged=judged,
        rules=Rules.from_settings(cfg.settings, cfg.looks),
        gsm8k=gsm8k_plan(cfg, experiment, night_dir(results, date)),
        alone=alone, pinned=pinned or cfg.settings.baseline_night,
        store=store or cfg.settings.store, arm_overrides=overrides)


def gsm8k_plan(cfg: NightlyConfig, experiment: Experiment, root: Path) -> GSM8KPlan | None:
    """The night's GSM8K subset, None where it is off: every nightly arm on ``repeats`` fresh
    servers, the baseline arm's first (every verdict is compared with its first server), into
    the night's folder ``root``, its data folder checked and hashed. The config checked the
    arms and the speculator (``parse_nightly``)."""
    g = cfg.settings.gsm8k
    if not g.enabled:
        return None
    from e2e.gsm8k.run import GSM8KPlan, check_arms
    from e2e.gsm8k.task import resolve_data

    labels = [arm for arm in cfg.arms for _ in range(g.repeats)]
    base = cfg.baseline_arm
    if base in labels:
        labels = [base] * g.repeats + [a for a in labels if a != base]
    check_arms(tuple(labels))
    return GSM8KPlan(experiment=experiment, arms=tuple(labels), dspark=g.dspark, limit=g.limit,
                     concurrency=g.concurrency, source=resolve_data(cfg.gsm8k_data),
                     results=Path(root))


def night_dir(results: Path, date: str) -> Path:
    return Path(results) / "nightly" / date


def one_at_a_time(experiment: Experiment, reference: str | None = None) -> str | None:
    """Why a night with a ``reference`` arm runs one server at a time: not in duets (``[duet]
    enabled`` false, or ``--no-duet``), or fewer than two of its ``[duet]`` slots have every
    core they name among the cores this process may use on this host. None where it runs in
    duets, or has no reference arm."""
    import os

    from e2e.names import parse_cpus

    if not experiment.duet.enabled:
        return ("not in duets: [duet] enabled is false, or --no-duet" if reference else None)
    here = os.sched_getaffinity(0)
    usable = [s for s in experiment.duet.slots
              if all(parse_cpus(c) <= here for c in (s.server_cpus, s.client_cpus) if c)]
    if len(usable) >= 2:
        return None
    return (f"this host has {len(usable)} of the config's {len(experiment.duet.slots)} duet "
            f"slots (cores {', '.join(str(c) for c in sorted(here))} here)")


def plan_night(cfg: NightlyConfig, experiment: Experiment, runs: int | None = None):
    """The night's units for ``runs`` rounds (default: the config's ``runs``, the first look)."""
    from e2e.plan import make_plan

    return make_plan(experiment, arms=list(cfg.arms), concurrencies=list(cfg.concurrencies),
                     spec_modes=[m == "dspark" for m in cfg.spec_modes], runs=runs or cfg.runs)


def night_looks(cfg: NightlyConfig) -> tuple[int, ...]:
    """The rounds (warmups included) after which the night looks at its ratio cells: the
    config's ``runs``, then as many more at a time up to ``max_runs`` while a cell is not
    resolved; one look without a reference arm or ``max_runs``."""
    if not cfg.reference or not cfg.settings.max_runs:
        return (cfg.runs,)
    return tuple(cfg.rounds_for(k) for k in cfg.looks.schedule())


def judged_key(cfg: NightlyConfig, key: CellKey) -> CellKey:
    """The metric a headline threshold judges in ``key``'s cell: its server-built twin where
    the config builds the headline from the server's TPOT."""
    from e2e.analysis.sweep.headline import headline_metric, server_twin

    twin = server_twin(key.metric)
    if (cfg.settings.verify_step_from == "server" and twin
            and key.metric == headline_metric(key.concurrency, key.spec_mode)):
        return CellKey(key.kind, key.arm, key.concurrency, key.spec_mode, twin)
    return key


def expected_cells(cfg: NightlyConfig) -> list[CellKey]:
    """Every judged cell the plan should produce (so a cell whose runs all failed is seen)."""
    keys = []
    judged = ([relative_arm(a, cfg.reference) for a in cfg.arms if a != cfg.reference]
              if cfg.reference else list(cfg.arms))
    for arm in judged:
        for conc in cfg.concurrencies:
            for mode in cfg.spec_modes:
                for metric in judged_metrics(cfg.settings.thresholds, mode, conc):
                    keys.append(CellKey("load", arm, conc, mode, metric))
        if cfg.settings.gsm8k.enabled:
            mode = "dspark" if cfg.settings.gsm8k.dspark else "base"
            keys.append(CellKey("gsm8k", arm, 0, mode, GSM8K_METRIC))
    return keys
