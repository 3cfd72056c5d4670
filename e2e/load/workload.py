"""The reference load as a session workload: seeded warmup requests, then the measured load,
then the run's metrics and validity (``run.json``, ``requests.parquet``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
import time
from dataclasses import replace

import numpy as np
from pathlib import Path

from e2e import metrics as m
from e2e.console import Say
from e2e.arms import ServerLaunch
from e2e.config import LoadConfig
from e2e.plan import RunSpec, pinned_of
from e2e.load.cache import FRESH, CacheState, reset_prefix_cache
from e2e.load.generator import (LoadOutcome, LoadSpec, make_prompts, run_load, run_measured_load,
                                 vocabulary)
from e2e.load.draw import WARMUP_NOTE, Traffic, traffic
from e2e.host import pin_process, pinned_process
from e2e.results.records import (Placement, INTERFERENCE_SHARE, PlacementInfo, RequestRecord,
                                 RunRecord, SegmentMetrics, WorkloadInfo)
from e2e.load.bursts import burst_summary
from e2e.metrics import goodput
from e2e.slo import parse_slo
from e2e.results.store import write_requests
from e2e.paths import atomic_write_text
from e2e.redact import scrub

__all__ = ["first_lateness_s", "LoadWorkload", "HOLD_S", "combine_windows", "hold_batch",
           "interference", "retried_warning"]

_FILLER_STREAM = 1000  # a duet side's unmeasured load (windows use 0 and 2..65, warmup 1)


HOLD_S = 2.0  # an open-loop hold batch: the arrivals of this many seconds at the run's rate


def hold_batch(spec: RunSpec) -> int:
    """Requests in one batch of a duet side's hold: ``concurrency`` for a closed loop (the
    measured load's streams); for an open loop (``request_rate``) the arrivals of ``HOLD_S``
    at its rate, so a side that finished keeps its server as loaded as it was measured (one
    request at a time would leave its partner's tail beside a lighter neighbour), at most the
    run's prompts."""
    if spec.request_rate is None or spec.request_rate <= 0:
        return spec.concurrency
    return max(spec.concurrency, min(spec.prompts, math.ceil(spec.request_rate * HOLD_S)))


class LoadWorkload:
    """``spec``'s prompts against a server: warmup (never measured), then the measured load."""

    def __init__(self, spec: RunSpec, launch: ServerLaunch, load: LoadConfig, *,
                 progress: bool = True, say: Say = lambda message: None):
        self.spec, self.launch, self.load = spec, launch, load
        self.progress, self.say = progress, say
        vocab, specials = vocabulary(launch.tokenizer or launch.model)
        # window 0 draws stream 0 (as a run without windows), window w > 0 stream w + 1
        self.windows: list[Traffic] = [
            traffic(spec, vocab_size=vocab, exclude=specials, stream=0 if w == 0 else w + 1)
            for w in range(spec.windows)]
        self.cache: CacheState = FRESH
        self.warmups = make_prompts(spec.warmup_requests, spec.input_len, vocab_size=vocab,
                                    exclude=specials, seed=spec.seed, stream=1)
        self.finished: list[RequestRecord] = []
        self.client: Placement | None = None
        self.outcome: LoadOutcome | None = None
        self.outcomes: list[LoadOutcome] = []
        self.filler: list[list[int]] | None = None
        self.client_cpus = load.cpus  # where the load generator runs now (a duet swap moves it)
        # a swapping duet side's turn before window w > 0 (e2e.session.duet.Together.turn):
        # returns the load generator's CPUs for window w
        self.between_windows: Callable[[int], str | None] | None = None
        # /metrics at the start and end of each such turn: its hold's requests (never measured)
        # reach the server's counters, and are taken out of every server-side figure
        self.holds: list[tuple[str, str]] = []
        self.holds_unread: str | None = None  # why a turn's counters could not be read

    def _load(self, server, batch: list[list[int]] | Traffic, concurrency: int) -> LoadSpec:
        spec = self.spec
        shaped = batch if isinstance(batch, Traffic) else None
        return LoadSpec(base_url=server.base_url, model=self.launch.model,
                        prompts=shaped.prompts if shaped else batch,
                        output_lens=shaped.output_lens if shaped and shaped.kind != "reference" else None,
                        at_s=shaped.at_s if shaped else None,
                        sessions=shaped.sessions if shaped else None,
                        think_s=shaped.think_s if shaped else 0.0,
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

    def keep_busy(self, server) -> None:
        """One batch of requests shaped like the measured ones (own prompts, never recorded,
        ``hold_batch`` of them): a duet side's load while its partners still measure."""
        spec = self.spec
        if self.filler is None:
            vocab, specials = vocabulary(self.launch.tokenizer or self.launch.model)
            self.filler = make_prompts(hold_batch(spec), spec.input_len, vocab_size=vocab,
                                       exclude=specials, seed=spec.seed, stream=_FILLER_STREAM)
        with pinned_process(self.client_cpus):
            run_load(self._load(server, self.filler, spec.concurrency), progress=False,
                     label="holding")

    def measure(self, server, folder: Path) -> None:
        spec = self.spec
        windows = f" in {spec.windows} windows" if spec.windows > 1 else ""
        how = (f"at the trace's times" if self.windows[0].at_s is not None
               else f"at concurrency {spec.concurrency}")
        self.say(f"measuring {spec.prompts} requests {how}{windows}")
        # pinned only while it drives the load: a server started later must not inherit it
        if self.launch.external:  # a reused server may hold the measured prompts already
            self.cache = reset_prefix_cache(server.base_url, server.headers())
            if not self.cache.reset:
                self.say(f"prefix cache {self.cache.detail}")
        with pinned_process(self.load.cpus) as self.client:
            start = time.perf_counter()
            for w, prompts in enumerate(self.windows):
                if w and self.between_windows is not None:
                    held_from = self._scrape(server)
                    self.client_cpus = self.between_windows(w)
                    held_to = self._scrape(server) if held_from is not None else None
                    if held_from is not None and held_to is not None:
                        self.holds.append((held_from, held_to))
                    pin_process(self.client_cpus)  # undone with the block's pin on exit
                offset, first = time.perf_counter() - start, w * spec.prompts

                def done(record: RequestRecord, offset=offset, first=first) -> None:
                    self.finished.append(record if not first else _shifted(record, first, offset))

                label = spec.run_id if spec.windows == 1 else f"{spec.run_id} window {w + 1}"
                self.outcomes.append(run_measured_load(
                    self._load(server, prompts, spec.concurrency), progress=self.progress,
                    label=label, on_done=done))
        self.outcome = combine_windows(self.outcomes)

    def _scrape(self, server) -> str | None:
        try:
            return server.scrape_metrics()
        except Exception as exc:  # ServerError, or a server without /metrics
            self.holds_unread = scrub(str(exc))[:300]  # a server's text, into run.json
            return None

    def record(self, info, folder: Path) -> RunRecord:
        spec, kind = self.spec, self.launch.kind
        finished = sorted(self.finished, key=lambda r: r.index)
        before = m.spec_counters(info.metrics_before, kind) if info.metrics_before else None
        after = m.spec_counters(info.metrics_after, kind) if info.metrics_after else None
        scraped = ((m.parse_samples(info.metrics_before), m.parse_samples(info.metrics_after))
                   if info.metrics_before and info.metrics_after else None)  # parsed once
        if self.holds and after is not None and scraped:
            # a swapping duet side's holds between windows: their requests are not measured
            after = m.counters_without_holds(after, [(m.spec_counters(a, kind),
                                                      m.spec_counters(b, kind))
                                                     for a, b in self.holds])
            scraped = (scraped[0], m.without_holds(scraped[1], [
                (m.parse_samples(a), m.parse_samples(b)) for a, b in self.holds]))
            for w, (a, b) in enumerate(self.holds, start=1):
                atomic_write_text(folder / f"metrics_hold{w}_start.prom", a)
                atomic_write_text(folder / f"metrics_hold{w}_end.prom", b)
        if self.holds_unread and scraped:
            info.warnings.append(
                f"the server's counters could not be read around a hold between windows "
                f"({self.holds_unread}): its server-side figures include the hold's requests")
        server_tpot = (m.histogram_mean_delta(*scraped, kind.server_tpot_metric)
                       if scraped else None)
        summary = m.summarize_run(finished, counters_before=before if spec.dspark else None,
                                  counters_after=after if spec.dspark else None,
                                  server_tpot_s=server_tpot,
                                  per_window=spec.prompts if spec.windows > 1 else None,
                                  ) if finished else None
        reasons = info.reasons
        if not reasons or finished:  # a server that never served has its reason already
            if spec.workload is None:
                reasons += m.validity_reasons(finished, input_len=spec.input_len,
                                              output_len=spec.output_len,
                                              expected=spec.prompts * spec.windows)
            else:
                reasons += _length_reasons(finished, self.windows, spec.prompts)
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
        prefix = m.prefix_cache_delta(*scraped) if scraped else None
        if prefix is not None and prefix[2] is None and prefix[0] == 0 and any(r.ok for r in finished):
            # prompts were served and none was looked up (prefix caching off): none hit
            prefix = (prefix[0], prefix[1], 0.0)
        if summary is not None and prefix is not None and prefix[2] is not None:
            summary = summary.model_copy(update={"prefix_cache_hit_rate": prefix[2]})
        if self.cache.reset is False:
            info.warnings.append(f"the prefix cache was {self.cache.detail}")
        if summary is not None and self.load.slo:
            met = goodput(finished, parse_slo(self.load.slo), duration_s=summary.duration_s)
            summary = summary.model_copy(update={"goodput_slo": self.load.slo,
                                                 "goodput_share": met.share,
                                                 "goodput_req_s": met.req_s})
        if summary and summary.acceptance_length is not None and summary.acceptance_length <= 1.0:
            info.warnings.append(f"acceptance length {summary.acceptance_length:.3f}: nothing accepted")
        pin = pinned_of(info.config) if spec.dspark else None
        if (pin is not None and summary is not None and summary.acceptance_length is not None
                and abs(summary.acceptance_length - pin) > PIN_TOLERANCE * pin):
            info.warnings.append(
                f"acceptance length {summary.acceptance_length:.3f} with acceptance pinned at "
                f"{pin:g} (more than {PIN_TOLERANCE:.0%} away): the speculator drafted fewer "
                "tokens than the schedule accepts (an n-gram without a match drafts none), or "
                "the pin did not take (see the server log's e2e-plugin lines)")
        outcome = self.outcome
        others = interference(info.host_noise)
        if others:
            info.warnings.append(others)
        if outcome is not None and outcome.client.saturated:
            cause = ("another process, not the load, took its cores (see the warning on "
                     "other processes): rerun on a quiet host, or use --require-quiet"
                     if others and outcome.client.core_share < 0.5 else
                     "raise load.workers (--client-workers)")
            info.warnings.append(f"the load generator was saturated "
                                 f"({outcome.client.saturated_because}): its own queueing may "
                                 f"show as latency; {cause}")
        if (outcome is not None and outcome.offered_rate and outcome.achieved_rate is not None
                and outcome.achieved_rate < 0.98 * outcome.offered_rate):
            info.warnings.append(f"achieved {outcome.achieved_rate:.2f} req/s of the offered "
                                 f"{outcome.offered_rate:g} (more than 2 % short): the client "
                                 "could not keep the schedule")
        retried = sum(r.retried for r in finished)
        if retried:
            info.warnings.append(retried_warning(retried))
        first = first_lateness_s(self.outcomes)
        if first is not None and first * 1000.0 > FIRST_LATE_MS:
            info.warnings.append(
                f"the first scheduled arrival was sent {first * 1000.0:.1f} ms after its time "
                "(the load's start-up: the client's event loop or its host was busy), so its "
                "TTFT and the requests queued behind it read late")
        outputs_sha256 = write_requests(folder / "requests.parquet", finished)
        return RunRecord(
            experiment=info.experiment, run_id=spec.run_id, spec=spec,
            arm_settings=info.arm_settings, config=info.config, server=info.server,
            provenance=info.provenance, plugin=info.plugin, started_at=info.started_at,
            placement=(info.placement or PlacementInfo()).model_copy(update={"client": self.client}),
            host_noise=info.host_noise, bursts=bursts,
            client=outcome.client if outcome is not None else None, duet=info.duet,
            workload=self._workload_info(finished, prefix),
            offered_rate=outcome.offered_rate if outcome is not None else None,
            achieved_rate=outcome.achieved_rate if outcome is not None else None,
            finished_at=info.finished_at, counters_before=before, counters_after=after,
            metrics=summary, outputs_sha256=outputs_sha256,
            windows=_window_metrics(finished, spec) if summary else [],
            valid=not reasons, invalid_reasons=reasons, warnings=info.warnings)


    def _workload_info(self, finished: list[RequestRecord], prefix) -> WorkloadInfo:
        """What was sent (its hash over every window), the cache it met, the prefix cache's
        counters, how late a scheduled load's sends were, and each segment's figures."""
        spec, windows = self.spec, self.windows
        digest = windows[0].sha256() if len(windows) == 1 else _windows_sha256(w.sha256() for w in windows)
        late = _lateness_s(self.outcomes)
        late_ms = np.asarray(late, dtype=float) * 1000.0
        slo = parse_slo(self.load.slo) if self.load.slo else None
        def segment(r: RequestRecord) -> str:  # each window has its own traffic
            return windows[min(r.index // spec.prompts, len(windows) - 1)].segments[
                r.index % spec.prompts]

        names = windows[0].segments
        segments = []
        if len(set(names)) > 1:
            for name in dict.fromkeys(names):  # in order of first appearance
                part = [r for r in finished if segment(r) == name]
                if not part:
                    continue
                s = m.summarize_run(part)
                segments.append(SegmentMetrics(
                    name=name, requests=s.requests, ok_requests=s.ok_requests,
                    ttft_ms_mean=s.ttft_ms_mean, ttft_ms_median=s.ttft_ms_median,
                    ttft_ms_p99=s.ttft_ms_p99, tpot_ms_mean=s.tpot_ms_mean,
                    e2el_ms_mean=s.e2el_ms_mean,
                    goodput_share=goodput(part, slo).share if slo else None))
        return WorkloadInfo(
            kind=windows[0].kind, sha256=digest, requests=sum(len(w.prompts) for w in windows),
            input_tokens=sum(sum(w.input_lens) for w in windows),
            output_tokens=sum(sum(w.output_lens) for w in windows),
            source_sha256=windows[0].source_sha256, warmup=WARMUP_NOTE, cache=self.cache.detail,
            cache_reset=self.cache.reset,
            prefix_cache_queries=prefix[0] if prefix else None,
            prefix_cache_hits=prefix[1] if prefix else None,
            prefix_cache_hit_rate=prefix[2] if prefix else None,
            schedule_lateness_ms_p50=float(np.median(late_ms)) if late else None,
            schedule_lateness_ms_p99=float(np.percentile(late_ms, 99)) if late else None,
            schedule_lateness_ms_max=float(late_ms.max()) if late else None,
            segments=segments)


FIRST_LATE_MS = 5.0  # the first arrival's lateness that warns (a busy host's loop start-up)


def _lateness_s(outcomes: list[LoadOutcome]) -> list[float]:
    """How late every scheduled send was (open loops: a trace's times or a gamma schedule),
    seconds, over every window."""
    return [r.send_s - o.scheduled_s[r.index] for o in outcomes if o.scheduled_s
            for r in o.records]


def first_lateness_s(outcomes: list[LoadOutcome]) -> float | None:
    """The lateness of each window's first scheduled arrival (the one the load's start-up
    delays), the largest over windows; None for a closed loop."""
    firsts = [r.send_s - o.scheduled_s[r.index] for o in outcomes if o.scheduled_s
              for r in o.records if r.index == 0]
    return max(firsts) if firsts else None


def _windows_sha256(parts) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _length_reasons(finished: list[RequestRecord], windows: list[Traffic], per_window: int) -> list[str]:
    """A workload's validity: every request measured, each prompt and completion exactly the
    length its traffic gave it (per request: a trace's lengths differ)."""
    reasons: list[str] = []
    expected = sum(len(w.prompts) for w in windows)
    if len(finished) != expected:
        reasons.append(f"{len(finished)} of {expected} requests were measured")
    failed = [r for r in finished if not r.ok]
    if failed:
        reasons.append(f"{len(failed)} request(s) failed; first: request {failed[0].index}: "
                       f"{failed[0].error}")
    ok = [r for r in finished if r.ok]

    def want(r: RequestRecord) -> Traffic:
        return windows[min(r.index // per_window, len(windows) - 1)]

    bad_in = [r for r in ok if r.prompt_tokens != want(r).input_lens[r.index % per_window]]
    if bad_in:
        r = bad_in[0]
        reasons.append(f"{len(bad_in)} request(s) had a prompt of other than their own length "
                       f"(e.g. request {r.index}: {r.prompt_tokens} tokens, sent "
                       f"{want(r).input_lens[r.index % per_window]})")
    bad_out = [r for r in ok if r.completion_tokens != want(r).output_lens[r.index % per_window]]
    if bad_out:
        r = bad_out[0]
        reasons.append(f"{len(bad_out)} request(s) completed other than their max_tokens "
                       f"(e.g. request {r.index}: {r.completion_tokens} tokens of "
                       f"{want(r).output_lens[r.index % per_window]})")
    return reasons


PIN_TOLERANCE = 0.02  # measured vs pinned acceptance length that warns


INTERFERENCE_STEAL = 0.05  # the hypervisor's steal share that warns


def interference(noise) -> str | None:
    """The warning for a run measured while other processes used the host (``HostNoise``):
    at least ``INTERFERENCE_SHARE`` of a core, or steal at least ``INTERFERENCE_STEAL``,
    naming the busiest processes; None otherwise. On a shared host these runs are the slow
    ones (other_cpu_share tracked a server's speed at r = 0.82 while other work ran)."""
    if noise is None:
        return None
    parts = []
    if noise.other_cpu_share >= INTERFERENCE_SHARE:
        top = ", ".join(f"{p.name} (pid {p.pid}, {p.share or 0:.2f})" for p in noise.top_other[:3])
        parts.append(f"other processes used {noise.other_cpu_share:.2f} of a core"
                     + (f" (busiest: {top})" if top else ""))
    if noise.steal_share >= INTERFERENCE_STEAL:
        parts.append(f"the hypervisor stole {noise.steal_share:.0%} of the CPU time")
    if not parts:
        return None
    return ("measured while " + " and ".join(parts) + ": the host was not the run's alone, "
            "so its figures may be slow; a duet (--duet) measures arms under the same "
            "interference")


def _shifted(record: RequestRecord, first: int, offset_s: float) -> RequestRecord:
    """A later window's request as part of the run: its index after the earlier windows' and its
    times from the first window's start (each window's load clock starts at 0)."""
    def at(t: float | None) -> float | None:
        return None if t is None else t + offset_s

    return record.model_copy(update={
        "index": record.index + first, "send_s": record.send_s + offset_s,
        "first_token_s": at(record.first_token_s), "end_s": at(record.end_s),
        "chunk_times_s": tuple(t + offset_s for t in record.chunk_times_s)})


def combine_windows(outcomes: list[LoadOutcome]) -> LoadOutcome | None:
    """The windows' loads as one: the client figures of the window that cost the client most
    (a saturated window makes the run's client saturated), the rate over all of them."""
    if not outcomes:
        return None
    if len(outcomes) == 1:
        return outcomes[0]
    worst = max(outcomes, key=lambda o: (o.client.saturated, o.client.core_share))
    rates = [o.achieved_rate for o in outcomes]
    if any(r is None for r in rates):
        return replace(worst, achieved_rate=None)
    # requests over the time the windows took at their own rates (a window of rate 0, all
    # failed, adds none; all of them failed: 0)
    busy = sum(len(o.records) / r for o, r in zip(outcomes, rates) if r > 0)
    done = sum(len(o.records) for o, r in zip(outcomes, rates) if r > 0)
    return replace(worst, achieved_rate=done / busy if busy > 0 else 0.0)


def _window_metrics(finished: list[RequestRecord], spec: RunSpec) -> list:
    """Each window's client-side metrics (no /metrics scrape between windows, so no server
    figures); [] for a run of one window."""
    if spec.windows == 1:
        return []
    return [m.summarize_run([r for r in finished if w * spec.prompts <= r.index < (w + 1) * spec.prompts])
            for w in range(spec.windows)]


def retried_warning(count: int) -> str:
    """The run's note of requests sent twice: each timed from its second send, but a reader
    of run.json should know the server closed idle connections under the load."""
    what = "1 request was" if count == 1 else f"{count} requests were"
    return (f"{what} retried on a fresh connection after the server closed an idle "
            "keep-alive connection")
