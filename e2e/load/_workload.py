"""The reference load as a session workload: seeded warmup requests, then the measured load,
then the run's metrics and validity (``run.json``, ``requests.parquet``).
"""

from __future__ import annotations

from pathlib import Path

from e2e import metrics as m
from e2e.console import Say
from e2e.arms import ServerLaunch
from e2e.config import LoadConfig, RunSpec
from e2e.load._generator import LoadOutcome, LoadSpec, make_prompts, run_load, run_measured_load, vocabulary
from e2e.host import pinned_process
from e2e.results import Placement
from e2e.load._bursts import burst_summary
from e2e.results import PlacementInfo, RequestRecord, RunRecord
from e2e.metrics import goodput
from e2e.slo import parse_slo
from e2e.results import write_requests

__all__ = ["LoadWorkload"]


class LoadWorkload:
    """``spec``'s prompts against a server: warmup (never measured), then the measured load."""

    def __init__(self, spec: RunSpec, launch: ServerLaunch, load: LoadConfig, *,
                 progress: bool = True, say: Say = lambda message: None):
        self.spec, self.launch, self.load = spec, launch, load
        self.progress, self.say = progress, say
        vocab, specials = vocabulary(launch.tokenizer or launch.model)
        self.prompts = make_prompts(spec.prompts, spec.input_len, vocab_size=vocab,
                                    exclude=specials, seed=spec.seed, stream=0)
        self.warmups = make_prompts(spec.warmup_requests, spec.input_len, vocab_size=vocab,
                                    exclude=specials, seed=spec.seed, stream=1)
        self.finished: list[RequestRecord] = []
        self.client: Placement | None = None
        self.outcome: LoadOutcome | None = None

    def _load(self, server, batch: list[list[int]], concurrency: int) -> LoadSpec:
        spec = self.spec
        return LoadSpec(base_url=server.base_url, model=self.launch.model, prompts=batch,
                        output_len=spec.output_len, concurrency=concurrency,
                        request_timeout_s=self.load.request_timeout_s,
                        stall_timeout_s=self.load.stall_timeout_s, headers=server.headers(),
                        workers=self.load.workers, request_rate=spec.request_rate,
                        burstiness=spec.burstiness, max_concurrency=spec.max_concurrency,
                        seed=spec.seed)

    def warmup(self, server) -> None:
        if self.warmups:
            with pinned_process(self.load.cpus):
                run_load(self._load(server, self.warmups,
                                    min(self.spec.concurrency, len(self.warmups))),
                         progress=self.progress, label="warmup")

    def measure(self, server, folder: Path) -> None:
        self.say(f"measuring {self.spec.prompts} requests at concurrency {self.spec.concurrency}")
        # pinned only while it drives the load: a server started later must not inherit it
        with pinned_process(self.load.cpus) as self.client:
            self.outcome = run_measured_load(
                self._load(server, self.prompts, self.spec.concurrency), progress=self.progress,
                label=self.spec.run_id, on_done=self.finished.append)

    def record(self, info, folder: Path) -> RunRecord:
        spec, kind = self.spec, self.launch.kind
        finished = sorted(self.finished, key=lambda r: r.index)
        before = m.spec_counters(info.metrics_before, kind) if info.metrics_before else None
        after = m.spec_counters(info.metrics_after, kind) if info.metrics_after else None
        scraped = ((m.parse_samples(info.metrics_before), m.parse_samples(info.metrics_after))
                   if info.metrics_before and info.metrics_after else None)  # parsed once
        server_tpot = (m.histogram_mean_delta(*scraped, kind.server_tpot_metric)
                       if scraped else None)
        summary = m.summarize_run(finished, counters_before=before if spec.dspark else None,
                                  counters_after=after if spec.dspark else None,
                                  server_tpot_s=server_tpot) if finished else None
        reasons = info.reasons
        if not reasons or finished:  # a server that never served has its reason already
            reasons += m.validity_reasons(finished, input_len=spec.input_len,
                                          output_len=spec.output_len, expected=spec.prompts)
        if spec.dspark and summary is not None and summary.acceptance_length is None and not reasons:
            reasons.append("the speculator made no drafts: the spec-decode counters did not move")
        if summary is not None and scraped:
            means = {key: m.histogram_mean_delta(*scraped, name)
                     for key, name in (("server_ttft_ms_mean", kind.server_ttft_metric),
                                       ("server_e2el_ms_mean", kind.server_e2el_metric)) if name}
            summary = summary.model_copy(update={k: v * 1000.0 for k, v in means.items()
                                                 if v is not None})
        bursts = burst_summary(finished, server_tpot_s=server_tpot) if finished else None
        if bursts is not None:
            info.warnings += bursts.warnings
            if summary is not None:
                summary = summary.model_copy(update={"burst_share": bursts.tpot_affected_share})
        if summary is not None and self.load.slo:
            met = goodput(finished, parse_slo(self.load.slo), duration_s=summary.duration_s)
            summary = summary.model_copy(update={"goodput_slo": self.load.slo,
                                                 "goodput_share": met.share,
                                                 "goodput_req_s": met.req_s})
        if summary and summary.acceptance_length is not None and summary.acceptance_length <= 1.0:
            info.warnings.append(f"acceptance length {summary.acceptance_length:.3f}: nothing accepted")
        outcome = self.outcome
        if outcome is not None and outcome.client.saturated:
            info.warnings.append(f"the load generator was saturated "
                                 f"({outcome.client.saturated_because}): its own queueing may "
                                 "show as latency; raise load.workers (--client-workers)")
        if (outcome is not None and outcome.offered_rate and outcome.achieved_rate is not None
                and outcome.achieved_rate < 0.98 * outcome.offered_rate):
            info.warnings.append(f"achieved {outcome.achieved_rate:.2f} req/s of the offered "
                                 f"{outcome.offered_rate:g} (more than 2 % short): the client "
                                 "could not keep the schedule")
        write_requests(folder / "requests.parquet", finished)
        return RunRecord(
            experiment=info.experiment, run_id=spec.run_id, spec=spec,
            arm_settings=info.arm_settings, config=info.config, server=info.server,
            provenance=info.provenance, plugin=info.plugin, started_at=info.started_at,
            placement=(info.placement or PlacementInfo()).model_copy(update={"client": self.client}),
            host_noise=info.host_noise, bursts=bursts,
            client=outcome.client if outcome is not None else None,
            offered_rate=outcome.offered_rate if outcome is not None else None,
            achieved_rate=outcome.achieved_rate if outcome is not None else None,
            finished_at=info.finished_at, counters_before=before, counters_after=after,
            metrics=summary, valid=not reasons, invalid_reasons=reasons, warnings=info.warnings)
