"""The GSM8K pipeline: plan one unit per arm server, run them through the executor and
the server session (the same as load runs: plugin check, provenance, atomic folders,
resume, retries), then write the agreement report.

    plan = resolve_plan(experiment, arms="main,main,pr", dspark=False, limit=50, ...)
    report = run_gsm8k(plan)             # resumable: finished arms are skipped

Servers and lm-eval are reached through a ``Runner`` so tests can put scripted ones in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from e2e.analysis.outputs import GSM8KReport, gsm8k_report
from e2e.config import Experiment
from e2e.console import Say
from e2e.plan import GSM8K_CONCURRENCY, EvalSpec
from e2e.errors import ConfigError, ResultsError
from e2e.execute import Executor
from e2e.gsm8k.lmeval import LmEvalJob, LmEvalOutput, check_lm_eval, run_lmeval
from e2e.gsm8k.task import TaskSource, resolve_data
from e2e.gsm8k.workload import GSM8KWorkloads
from e2e.pipeline import execute
from e2e.render import write_gsm8k_report
from e2e.results.gsm8k import (GSM8K_REFERENCE_ARM, EvalInfo, eval_dir_name, gsm8k_dir,
                               read_eval_info, read_evaluations, write_eval_info)
from e2e.results.store import writing
from e2e.session import Servers, SessionOptions

__all__ = ["GSM8KPlan", "Runner", "check_arms", "resolve_plan", "run_gsm8k"]

DEFAULT_CONCURRENCY = GSM8K_CONCURRENCY


@dataclass(frozen=True)
class Runner:
    """How the pipeline reaches the outside world: the servers, lm-eval, progress lines."""

    servers: Servers | None = None  # None: fresh servers (or the config's external one)
    lmeval: Callable[[LmEvalJob, Path], LmEvalOutput] = run_lmeval
    check: Callable[[], str] = check_lm_eval
    log: Say = lambda message: None
    on_unit: Callable = lambda folder, record: None


@dataclass(frozen=True)
class GSM8KPlan:
    experiment: Experiment
    arms: tuple[str, ...]
    dspark: bool
    limit: int | None
    concurrency: int
    source: TaskSource
    results: Path
    labels: tuple[str, ...] = field(init=False)
    units: tuple[EvalSpec, ...] = field(init=False)

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        units = []
        for arm in self.arms:
            seen[arm] = seen.get(arm, 0) + 1
            units.append(EvalSpec(arm=arm, dspark=self.dspark, limit=self.limit,
                                  concurrency=self.concurrency,
                                  data=str(self.source.data_dir) if self.source.data_dir else None,
                                  repeat=seen[arm]))
        object.__setattr__(self, "units", tuple(units))
        object.__setattr__(self, "labels", tuple(u.label for u in units))

    @property
    def spec_mode(self) -> str:
        return "dspark" if self.dspark else "base"

    @property
    def eval_dir(self) -> Path:
        return (gsm8k_dir(self.results, self.experiment.name)
                / eval_dir_name(self.spec_mode, self.limit))


def _label_occurrence(label: str) -> tuple[str, int]:
    """``("main", 2)`` for ``main.r2`` (an arm's second server), ``("main", 1)`` for ``main``:
    the inverse of ``EvalSpec.label``."""
    arm, sep, rest = label.rpartition(".r")
    if sep and arm and rest.isdigit() and int(rest) >= 2:
        return arm, int(rest)
    return label, 1


def check_arms(names: tuple[str, ...]) -> None:
    """The arms of a GSM8K plan (each an arm of the experiment): none named like a repeat
    label, the reference arm among them."""
    for name in names:
        if _label_occurrence(name)[1] != 1:
            raise ConfigError(f"arm name {name!r} looks like a repeat label ('<arm>.r<k>'); rename it")
    if GSM8K_REFERENCE_ARM not in names:
        raise ConfigError(f"--arms must include {GSM8K_REFERENCE_ARM!r}: every arm's verdicts "
                          f"are compared with it (got {', '.join(names)})")


def resolve_plan(experiment: Experiment, *, arms: str, dspark: bool, limit: int | None,
                 concurrency: int = DEFAULT_CONCURRENCY, data: Path | str | None = None,
                 results: Path | str = "results") -> GSM8KPlan:
    """Validate a command's flags against the experiment, once."""
    names = tuple(a.strip() for a in arms.split(",") if a.strip())
    if not names:
        raise ConfigError("--arms is empty; give e.g. --arms main,main,pr")
    for name in names:
        experiment.arm(name)
    check_arms(names)
    if dspark:
        experiment.speculator()
        experiment.refuse_pinned("GSM8K")
    if limit is not None and limit <= 0:
        raise ConfigError(f"--limit must be a positive number of documents, got {limit}")
    if concurrency <= 0:
        raise ConfigError(f"--concurrency must be positive, got {concurrency}")
    return GSM8KPlan(experiment=experiment, arms=names, dspark=dspark, limit=limit,
                     concurrency=concurrency, source=resolve_data(data), results=Path(results))


def _prepare_eval(plan: GSM8KPlan, version: str) -> EvalInfo:
    """Create or reopen the evaluation folder; refuse to mix data sources or lm-eval versions."""
    existing = read_eval_info(plan.eval_dir)
    data = plan.source.describe()
    if existing is not None:
        if existing.data != data or existing.lm_eval_version != version:
            raise ResultsError(
                f"{plan.eval_dir} holds results from other data or another lm-eval "
                f"({existing.data.get('kind')}, lm-eval {existing.lm_eval_version}); their "
                "verdicts would not be comparable. Pass another --results folder or remove it.")
        arms = existing.arms + tuple(l for l in plan.labels if l not in existing.arms)
        info = existing.model_copy(update={"arms": arms})
    else:
        info = EvalInfo(experiment=plan.experiment.name, spec_mode=plan.spec_mode,
                        limit=plan.limit, data=data, lm_eval_version=version, arms=plan.labels)
    write_eval_info(plan.eval_dir, info)
    return info


def run_gsm8k(plan: GSM8KPlan, runner: Runner | None = None, *,
              executor: Executor | None = None, max_attempts: int = 2,
              plugin_check: bool = True, progress: bool = True) -> GSM8KReport:
    """Run every arm of ``plan`` not already finished (each on its own fresh server, through
    the server session), saving each as it ends; then write and return the report over every
    GSM8K evaluation of the experiment. The experiment's folder is held throughout
    (``e2e.results.store.writing``, as a sweep holds it). An arm still invalid after
    ``max_attempts`` is a ResultsError raised after the report is written (finished arms are
    kept)."""
    runner = runner or Runner()
    version = runner.check()
    session = SessionOptions(plugin_check=plugin_check, progress=progress, say=runner.log,
                             servers=runner.servers,
                             workloads=GSM8KWorkloads(lmeval=runner.lmeval, check=runner.check))
    # eval.json (read, merged, written), the arms and the report: one e2e writes them at a time
    with writing(plan.results, plan.experiment.name, wait_s=plan.experiment.server.lock_wait_s):
        _prepare_eval(plan, version)
        outcome = execute(plan.experiment, plan.units, plan.results, executor=executor,
                          session=session, max_attempts=max_attempts, on_unit=runner.on_unit)
        report = gsm8k_report(read_evaluations(plan.results, plan.experiment.name))
        if report is not None:
            write_gsm8k_report(plan.results, plan.experiment.name, report)
    if outcome.given_up:
        reasons = "; ".join(dict.fromkeys(r for rec in outcome.invalid for r in rec.invalid_reasons))
        raise ResultsError(f"GSM8K arm(s) {', '.join(outcome.given_up)} invalid after "
                           f"{max_attempts} attempt(s): {reasons} (see each arm.json under "
                           f"{plan.eval_dir}); finished arms are kept; rerun with a higher --max-attempts to try "
                           "again (attempts count across reruns)")
    if report is None:  # pragma: no cover - every arm is done here
        raise ResultsError(f"no GSM8K results under {plan.eval_dir}")
    return report

