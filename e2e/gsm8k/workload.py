"""A GSM8K evaluation as a server-session workload: lm-eval (pinned) against the unit's fresh
server, its sample log turned into per-document verdicts, the arm's record (``arm.json``,
``verdicts.jsonl``). The session around it starts and checks the server, scrapes /metrics
before and after (the acceptance length over the eval) and writes the provenance.

The pipeline hands the session ``GSM8KWorkloads`` (``SessionOptions.workloads``): an
``EvalSpec`` gets a ``GSM8KWorkload``, any other unit the session's own workload."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.analysis.outputs import acceptance_length, verdict_accuracy
from e2e.arms import ServerLaunch
from e2e.console import Say
from e2e.config import Experiment
from e2e.plan import EvalSpec, Unit
from e2e.errors import ResultsError
from e2e.gsm8k.lmeval import (FLEXIBLE, STRICT, LmEvalJob, LmEvalOutput, check_lm_eval,
                              lmeval_argv, parse_samples, run_lmeval)
from e2e.gsm8k.task import resolve_data, write_local_task
from e2e.metrics import spec_counters
from e2e.results.gsm8k import VERDICTS_FILE, ArmResult, SampleVerdict, write_verdicts
from e2e.session import Workloads

__all__ = ["GSM8KWorkload", "GSM8KWorkloads"]


def _read_samples(path: Path) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError) as exc:
        raise ResultsError(f"cannot read lm-eval samples {path}: {exc}") from exc


class GSM8KWorkload:
    """One arm's GSM8K evaluation (``EvalSpec``) against its server."""

    def __init__(self, spec: EvalSpec, launch: ServerLaunch, *, api_key: str | None = None,
                 lmeval: Callable[[LmEvalJob, Path], LmEvalOutput] | None = None,
                 check: Callable[[], str] | None = None,
                 say: Say = lambda message: None):
        self.spec, self.launch, self.api_key, self.say = spec, launch, api_key, say
        self.lmeval = lmeval or run_lmeval
        self.version = (check or check_lm_eval)()
        self.source = resolve_data(spec.data)
        self.job: LmEvalJob | None = None
        self.output: LmEvalOutput | None = None
        self.verdicts: tuple[SampleVerdict, ...] = ()
        self.wall_s = 0.0

    def warmup(self, server) -> None:
        """None: lm-eval's requests are all measured."""

    def measure(self, server, folder: Path) -> None:
        spec = self.spec
        folder = Path(folder).resolve()  # lm-eval runs in another working directory
        self.job = LmEvalJob(base_url=server.base_url, model=server.model, source=self.source,
                             output_dir=folder / "lm_eval", concurrency=spec.concurrency,
                             limit=spec.limit, include_path=write_local_task(self.source, folder / "task"),
                             api_key=self.api_key)
        self.say(f"lm-eval GSM8K ({spec.spec_mode}, "
                 f"{'all' if spec.limit is None else spec.limit} docs) against {server.base_url}")
        t0 = time.monotonic()
        self.output = self.lmeval(self.job, folder / "lm_eval.log")
        self.wall_s = time.monotonic() - t0
        verdicts = parse_samples(_read_samples(self.output.samples_path),
                                 source=str(self.output.samples_path))
        if not verdicts:
            raise ResultsError(f"{self.output.samples_path}: lm-eval logged no documents")
        self.verdicts = verdicts

    def record(self, info, folder: Path) -> ArmResult:
        spec, output, verdicts = self.spec, self.output, self.verdicts
        warnings = info.warnings
        kind = self.launch.kind
        before = spec_counters(info.metrics_before, kind) if info.metrics_before else None
        after = spec_counters(info.metrics_after, kind) if info.metrics_after else None
        length = acceptance_length(before, after) if spec.dspark else None
        ours = verdict_accuracy(verdicts) if verdicts else None
        if output is not None and verdicts:
            theirs = output.results.get(f"exact_match,{STRICT}")
            if isinstance(theirs, (int, float)) and ours is not None and abs(theirs - ours) > 1e-9:
                warnings.append(f"lm-eval reports strict-match {theirs:.4f} but its samples give "
                                f"{ours:.4f}")
            if spec.limit is not None and len(verdicts) != spec.limit:
                warnings.append(f"asked for {spec.limit} documents, lm-eval evaluated {len(verdicts)}")
            if spec.dspark and length is None:
                warnings.append("no drafts were counted during the eval: no acceptance length "
                                "(is the speculator on, and vLLM not run with --disable-log-stats?)")
        if not verdicts and not info.reasons:
            info.reasons.append("lm-eval produced no verdicts")
        if verdicts:
            write_verdicts(folder / VERDICTS_FILE, verdicts)
        results = output.results if output is not None else {}
        return ArmResult(
            experiment=info.experiment, label=spec.label, arm=spec.arm, occurrence=spec.repeat,
            spec_mode=spec.spec_mode, limit=spec.limit, concurrency=spec.concurrency,
            data=self.source.describe(), lm_eval_version=self.version,
            lm_eval_argv=lmeval_argv(self.job) if self.job else [],
            base_url=info.server.base_url, model=self.launch.model, n=len(verdicts),
            accuracy_strict=ours or 0.0,
            accuracy_flexible=verdict_accuracy(verdicts, flexible=True) if verdicts else None,
            lm_eval_results={k: v for k, v in results.items()
                             if isinstance(v, (int, float, str))
                             and (STRICT in k or FLEXIBLE in k or k == "sample_len")},
            counters_before=before, counters_after=after, acceptance_length=length,
            started_at=info.started_at, finished_at=info.finished_at,
            wall_s=round(self.wall_s, 3), warnings=warnings, spec=spec, config=info.config,
            arm_settings=info.arm_settings, server=info.server, provenance=info.provenance,
            plugin=info.plugin, valid=not info.reasons, invalid_reasons=info.reasons)


@dataclass(frozen=True)
class GSM8KWorkloads(Workloads):
    """The session's workloads with GSM8K's. ``lmeval`` and ``check`` reach lm-eval (replaced
    in tests by scripted ones); None means the real lm-eval."""

    lmeval: Callable | None = None
    check: Callable[[], str] | None = None

    def __call__(self, experiment: Experiment, unit: Unit, launch: ServerLaunch, options):
        if isinstance(unit, EvalSpec):
            return GSM8KWorkload(unit, launch, api_key=experiment.server.api_key,
                                 lmeval=self.lmeval, check=self.check, say=options.say)
        return super().__call__(experiment, unit, launch, options)
