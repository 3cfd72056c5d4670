"""The GSM8K pipeline: resolve the plan, then for each arm a fresh server, lm-eval against
it, verdicts saved; then the agreement report.

    plan = resolve_plan(experiment, arms="main,main,pr", dspark=False, limit=50, ...)
    report = run_gsm8k(plan)             # resumable: finished arms are skipped

The server and lm-eval are reached through a ``Runner`` so tests can put fakes in their place.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ContextManager, Protocol

from e2e.config import Experiment
from e2e.errors import ConfigError, E2EError, ResultsError
from e2e.gsm8k import store
from e2e.gsm8k.agreement import FLEXIBLE, STRICT, acceptance_length, accuracy, parse_samples
from e2e.gsm8k.lmeval import LmEvalJob, LmEvalOutput, check_lm_eval, lmeval_argv, run_lmeval
from e2e.gsm8k.records import REFERENCE_ARM, ArmResult, EvalInfo, arm_label, label_occurrence
from e2e.gsm8k.render import render_csv, render_markdown
from e2e.gsm8k.summary import GSM8KReport
from e2e.gsm8k.task import TaskSource, resolve_data, write_local_task
from e2e.paths import atomic_write_json
from e2e.records import SpecCounters

__all__ = ["GSM8KPlan", "Runner", "resolve_plan", "run_gsm8k", "write_gsm8k_report"]

DEFAULT_CONCURRENCY = 32


class ServerHandle(Protocol):
    base_url: str
    model: str

    def scrape_metrics(self) -> str: ...


ServeFn = Callable[..., ContextManager[ServerHandle]]


def _default_serve(experiment: Experiment, arm: str, *, dspark: bool, log_path: Path) -> ContextManager[ServerHandle]:
    from e2e.server import serve

    return serve(experiment, arm, dspark=dspark, log_path=log_path)


def _default_counters(metrics_text: str) -> SpecCounters:
    from e2e.metrics import spec_counters

    return spec_counters(metrics_text)


@dataclass(frozen=True)
class Runner:
    """How the pipeline reaches the outside world: a server per arm, lm-eval, the counters."""

    serve: ServeFn = _default_serve
    lmeval: Callable[[LmEvalJob, Path], LmEvalOutput] = run_lmeval
    counters: Callable[[str], SpecCounters] = _default_counters
    check: Callable[[], str] = check_lm_eval
    log: Callable[[str], None] = lambda message: None


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

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        labels = []
        for arm in self.arms:
            seen[arm] = seen.get(arm, 0) + 1
            labels.append(arm_label(arm, seen[arm]))
        object.__setattr__(self, "labels", tuple(labels))

    @property
    def spec_mode(self) -> str:
        return "dspark" if self.dspark else "base"

    @property
    def eval_dir(self) -> Path:
        return (store.gsm8k_dir(self.results, self.experiment.name)
                / store.eval_dir_name(self.spec_mode, self.limit))


def resolve_plan(experiment: Experiment, *, arms: str, dspark: bool, limit: int | None,
                 concurrency: int = DEFAULT_CONCURRENCY, data: Path | str | None = None,
                 results: Path | str = "results") -> GSM8KPlan:
    """Validate a command's flags against the experiment, once."""
    names = tuple(a.strip() for a in arms.split(",") if a.strip())
    if not names:
        raise ConfigError("--arms is empty; give e.g. --arms main,main,pr")
    for name in names:
        experiment.arm(name)
        if label_occurrence(name)[1] != 1:
            raise ConfigError(f"arm name {name!r} looks like a repeat label ('<arm>.r<k>'); rename it")
    if REFERENCE_ARM not in names:
        raise ConfigError(f"--arms must include {REFERENCE_ARM!r}: every arm's verdicts are "
                          f"compared with it (got {', '.join(names)})")
    if dspark:
        experiment.speculator("dspark")
    if limit is not None and limit <= 0:
        raise ConfigError(f"--limit must be a positive number of documents, got {limit}")
    if concurrency <= 0:
        raise ConfigError(f"--concurrency must be positive, got {concurrency}")
    return GSM8KPlan(experiment=experiment, arms=names, dspark=dspark, limit=limit,
                     concurrency=concurrency, source=resolve_data(data), results=Path(results))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _prepare_eval(plan: GSM8KPlan, version: str) -> EvalInfo:
    """Create or reopen the evaluation folder; refuse to mix data sources or lm-eval versions."""
    existing = store.read_eval_info(plan.eval_dir)
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
    store.write_eval_info(plan.eval_dir, info)
    return info


def _read_samples(path: Path) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError) as exc:
        raise ResultsError(f"cannot read lm-eval samples {path}: {exc}") from exc


def _run_arm(plan: GSM8KPlan, label: str, version: str, runner: Runner) -> None:
    arm, occurrence = label_occurrence(label)
    final = plan.eval_dir / label
    partial = plan.eval_dir / f"{label}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    started, t0 = _now(), time.monotonic()
    task_dir = write_local_task(plan.source, plan.eval_dir / "task")
    before = after = None
    try:
        with runner.serve(plan.experiment, arm, dspark=plan.dspark,
                          log_path=partial / "server.log") as server:
            job = LmEvalJob(base_url=server.base_url, model=server.model, source=plan.source,
                            output_dir=partial / "lm_eval", concurrency=plan.concurrency,
                            limit=plan.limit, include_path=task_dir,
                            api_key=plan.experiment.server.api_key)
            if plan.dspark:
                before = runner.counters(server.scrape_metrics())
            output = runner.lmeval(job, partial / "lm_eval.log")
            if plan.dspark:
                after = runner.counters(server.scrape_metrics())
        verdicts = parse_samples(_read_samples(output.samples_path), source=str(output.samples_path))
        if not verdicts:
            raise ResultsError(f"{output.samples_path}: lm-eval logged no documents")
        warnings = []
        theirs = output.results.get(f"exact_match,{STRICT}")
        ours = accuracy(verdicts)
        if isinstance(theirs, (int, float)) and ours is not None and abs(theirs - ours) > 1e-9:
            warnings.append(f"lm-eval reports strict-match {theirs:.4f} but its samples give "
                            f"{ours:.4f}")
        if plan.limit is not None and len(verdicts) != plan.limit:
            warnings.append(f"asked for {plan.limit} documents, lm-eval evaluated {len(verdicts)}")
        length = acceptance_length(before, after)
        if plan.dspark and length is None:
            warnings.append("no drafts were counted during the eval: no acceptance length "
                            "(is the speculator on, and vLLM not run with --disable-log-stats?)")
        store.write_verdicts(partial / store.VERDICTS_FILE, verdicts)
        result = ArmResult(
            experiment=plan.experiment.name, label=label, arm=arm, occurrence=occurrence,
            spec_mode=plan.spec_mode, limit=plan.limit, concurrency=plan.concurrency,
            data=plan.source.describe(), lm_eval_version=version,
            lm_eval_argv=lmeval_argv(job), base_url=server.base_url, model=server.model,
            n=len(verdicts), accuracy_strict=ours or 0.0,
            accuracy_flexible=accuracy(verdicts, flexible=True),
            lm_eval_results={k: v for k, v in output.results.items()
                             if isinstance(v, (int, float, str)) and (STRICT in k or FLEXIBLE in k or k == "sample_len")},
            counters_before=before, counters_after=after, acceptance_length=length,
            started_at=started, finished_at=_now(), wall_s=round(time.monotonic() - t0, 3),
            warnings=warnings)
        atomic_write_json(partial / store.ARM_FILE, result.model_dump(mode="json"))
    except BaseException as exc:
        with contextlib.suppress(E2EError, OSError):
            atomic_write_json(partial / "failure.json",
                              {"label": label, "error": f"{type(exc).__name__}: {exc}",
                               "started_at": started, "failed_at": _now()})
        raise
    if final.exists():
        shutil.rmtree(final)
    partial.replace(final)


def run_gsm8k(plan: GSM8KPlan, runner: Runner | None = None) -> GSM8KReport:
    """Run every arm of ``plan`` not already finished, saving each as it ends; then write and
    return the report over every GSM8K evaluation of the experiment."""
    runner = runner or Runner()
    version = runner.check()
    _prepare_eval(plan, version)
    for index, label in enumerate(plan.labels, 1):
        arm_dir = plan.eval_dir / label
        if store.is_complete(arm_dir):
            runner.log(f"[{index}/{len(plan.labels)}] {label}: already done ({arm_dir}), skipped")
            continue
        runner.log(f"[{index}/{len(plan.labels)}] {label}: fresh server, lm-eval GSM8K "
                   f"({plan.spec_mode}, {'all' if plan.limit is None else plan.limit} docs)")
        t0 = time.monotonic()
        _run_arm(plan, label, version, runner)
        result = store.read_arm(arm_dir)
        extra = (f", acceptance length {result.acceptance_length:.3f}"
                 if result.acceptance_length is not None else "")
        runner.log(f"[{index}/{len(plan.labels)}] {label}: strict-match {result.accuracy_strict:.4f} "
                   f"on {result.n} docs{extra} ({time.monotonic() - t0:.0f} s)")
    report = store.load_report(plan.results, plan.experiment.name)
    if report is None:  # pragma: no cover - we just wrote at least one arm
        raise ResultsError(f"no GSM8K results under {plan.eval_dir}")
    write_gsm8k_report(plan.results, plan.experiment.name, report)
    return report


def write_gsm8k_report(results: Path, experiment: str, report: GSM8KReport) -> list[Path]:
    return list(store.write_report(results, experiment, render_markdown(report), render_csv(report)))
