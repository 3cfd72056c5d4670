"""One run, end to end: fresh server -> warmup -> /metrics -> load -> /metrics -> stop ->
metrics -> results. Whatever happens, the run folder is written with what was measured and
why the run is invalid if it is."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from e2e import metrics as m
from e2e.arms import redact_argv, redact_env, server_launch
from e2e.config import Experiment, RunSpec
from e2e.errors import E2EError, ServerBusyError, ServerError
from e2e.load import LoadSpec, make_prompts, run_load, vocabulary
from e2e.paths import atomic_write_text
from e2e.provenance import provenance
from e2e.records import RequestRecord, RunRecord, ServerInfo, SpecCounters
from e2e.server import serve
from e2e.store import finalize, new_partial_dir, utc_now, write_requests, write_run

__all__ = ["run_one", "redacted_config", "PluginCheck"]

# A hook checked after the server is healthy and before measuring; returns a reason the run
# must not be measured, or None. The plugin module provides one (issue 5).
PluginCheck = Callable[[Path, dict], "str | None"]


def redacted_config(experiment: Experiment) -> dict:
    data = experiment.model_dump(mode="json")
    pattern = experiment.server.secret_pattern
    server = data["server"]
    server["env"] = redact_env(server["env"], pattern)
    if server.get("api_key"):
        server["api_key"] = "***"
    for arm in data["arms"].values():
        arm["env"] = redact_env(arm["env"], pattern)
    return data


def run_one(
    experiment: Experiment,
    spec: RunSpec,
    results: Path,
    *,
    progress: bool = True,
    say: Callable[[str], None] = lambda message: None,
    plugin_check: PluginCheck | None = None,
) -> tuple[Path, RunRecord]:
    """Run ``spec`` on a fresh server and write it under ``results``. Returns the run folder
    and its record; an invalid run is written too (``record.valid`` is False). Ctrl-C stops
    the server, writes what finished as an invalid run and re-raises."""
    launch = server_launch(experiment, spec.arm, dspark=spec.dspark, progress=say)
    vocab, specials = vocabulary(launch.model)
    prompts = make_prompts(spec.prompts, spec.input_len, vocab_size=vocab, exclude=specials,
                           seed=spec.seed, stream=0)
    warmups = make_prompts(spec.warmup_requests, spec.input_len, vocab_size=vocab,
                           exclude=specials, seed=spec.seed, stream=1)
    partial = new_partial_dir(results, experiment.name, spec.run_id)
    pattern = experiment.server.secret_pattern
    started = utc_now()
    finished: list[RequestRecord] = []
    reasons: list[str] = []
    warnings: list[str] = []
    metrics_before = metrics_after = None
    server_argv: list[str] = launch.argv(0)
    base_url = f"http://{launch.host}"
    interrupted: BaseException | None = None
    load = experiment.load

    def load_spec(server, batch: list[list[int]], concurrency: int) -> LoadSpec:
        return LoadSpec(base_url=server.base_url, model=launch.model, prompts=batch,
                        output_len=spec.output_len, concurrency=concurrency,
                        request_timeout_s=load.request_timeout_s,
                        stall_timeout_s=load.stall_timeout_s, headers=server.headers())

    try:
        say(f"starting the {spec.arm} server ({'with' if spec.dspark else 'without'} "
            f"speculator); log: {partial / 'server.log'}")
        with serve(experiment, spec.arm, dspark=spec.dspark, log_path=partial / "server.log",
                   launch=launch, lock_wait_s=experiment.server.lock_wait_s) as server:
            server_argv, base_url = server.argv, server.base_url
            if plugin_check is not None:
                problem = plugin_check(partial / "server.log", experiment.arm(spec.arm).plugin)
                if problem:
                    raise ServerError(f"arm settings not applied: {problem}")
            if warmups:
                run_load(load_spec(server, warmups, min(spec.concurrency, len(warmups))),
                         progress=progress, label="warmup")
            metrics_before = server.scrape_metrics()
            say(f"measuring {spec.prompts} requests at concurrency {spec.concurrency}")
            run_load(load_spec(server, prompts, spec.concurrency), progress=progress,
                     label=spec.run_id, on_done=finished.append)
            if server.alive():
                metrics_after = server.scrape_metrics()
            else:
                reasons.append(f"the server exited (code {server.process.poll()}) during the load")
    except ServerBusyError:
        shutil.rmtree(partial, ignore_errors=True)  # nothing ran: leave no run folder
        raise
    except KeyboardInterrupt as exc:
        interrupted = exc
        reasons.append("interrupted (Ctrl-C or SIGTERM) before the load finished")
    except E2EError as exc:
        reasons.append(str(exc))

    finished.sort(key=lambda r: r.index)
    before = m.spec_counters(metrics_before, launch.kind) if metrics_before else None
    after = m.spec_counters(metrics_after, launch.kind) if metrics_after else None
    server_tpot = (m.histogram_mean_delta(metrics_before, metrics_after,
                                          launch.kind.server_tpot_metric)
                   if metrics_before and metrics_after else None)
    summary = m.summarize_run(finished, counters_before=before if spec.dspark else None,
                              counters_after=after if spec.dspark else None,
                              server_tpot_s=server_tpot) if finished else None
    if not reasons or finished:  # a server that never served has its reason already
        reasons += m.validity_reasons(finished, input_len=spec.input_len,
                                      output_len=spec.output_len, expected=spec.prompts)
    if spec.dspark and summary is not None and summary.acceptance_length is None and not reasons:
        reasons.append("the speculator made no drafts: the spec-decode counters did not move")
    if summary and summary.acceptance_length is not None and summary.acceptance_length <= 1.0:
        warnings.append(f"acceptance length {summary.acceptance_length:.3f}: nothing accepted")

    config = redacted_config(experiment)
    record = RunRecord(
        experiment=experiment.name,
        run_id=spec.run_id,
        spec=spec,
        arm_settings=config["arms"][spec.arm],
        config=config,
        server=ServerInfo(
            argv=redact_argv(server_argv, pattern, [launch.api_key or ""]),
            env=redact_env(launch.env, pattern),
            base_url=base_url,
            model=launch.model,
            model_hash=launch.model_hash,
        ),
        provenance=provenance(launch.python, launch.build),
        started_at=started,
        finished_at=utc_now(),
        counters_before=before,
        counters_after=after,
        metrics=summary,
        valid=not reasons,
        invalid_reasons=reasons,
        warnings=warnings,
    )
    if metrics_before:
        atomic_write_text(partial / "metrics_before.prom", metrics_before)
    if metrics_after:
        atomic_write_text(partial / "metrics_after.prom", metrics_after)
    write_requests(partial / "requests.parquet", finished)
    write_run(partial, record)
    folder = finalize(partial, results, experiment.name, spec.run_id)
    if interrupted is not None:
        raise interrupted
    return folder, record


