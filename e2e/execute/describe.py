"""A plan described without starting or building anything (``e2e sweep --dry-run``): a header
that says what will happen (the builds, the model, how many servers, roughly how long), then
each unit's round, state, workload, server command and environment (redacted); and each arm's
build, environment and settings (``e2e arms``)."""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from e2e.session import check_units, describe_source, server_launch
from e2e.config import Experiment
from e2e.plan import Unit
from e2e.results.store import unit_state

__all__ = ["describe_arms", "describe_plan", "plan_header", "build_line"]


def describe_plan(experiment: Experiment, plan: Sequence[Unit], results: Path) -> list[str]:
    """One block per planned unit: its round, state, workload, server command and environment
    (redacted). Starts and builds nothing; a plan with a run out of bounds (its schedule, prompt
    tokens or longest request: ``check_units``) is refused as the sweep would refuse it."""
    check_units(experiment, plan)
    redactor = experiment.redactor()
    lines = []
    for i, unit in enumerate(plan, 1):
        state = unit_state(results, experiment.name, unit)
        status = "done" if state.done else (f"rerun (attempt {state.attempts + 1})"
                                            if state.attempts else "to run")
        lines.append(f"[{i}/{len(plan)}] {unit.unit_id}  round {unit.repeat}  {status}")
        lines.append(f"  {unit.kind}:{' ' * (8 - len(unit.kind))}{unit.describe()}")
        if unit.kind == "duet":
            names = experiment.duet.slot_names()
            for side in unit.sides:
                lines.append(f"  slot {names[side.slot]}: {side.run_id}")
                lines += ["  " + line for line in _server_lines(
                    experiment, side, redactor, experiment.duet.slots[side.slot])]
            continue
        lines += _server_lines(experiment, unit, redactor)
    return lines


def _server_lines(experiment: Experiment, unit: Unit, redactor, slot=None) -> list[str]:
    """A unit's server command, environment and CPUs (a duet side's: its ``slot``'s)."""
    launch = server_launch(experiment, unit.arm, dspark=unit.dspark, dry=True)
    external = experiment.server.external
    port = slot.port if slot is not None else 0
    if external:
        argv = [f"(none: measures the running server at {redactor.url(external)})"]
    else:
        argv = redactor.argv(launch.argv(port))
        if not port:
            argv[-1] = "<free port>"
    lines = [f"  command: {argv[0]}" if external else f"  command: {shlex.join(argv)}"]
    shown = redactor.env({**launch.env, **(slot.env if slot is not None else {})})
    lines.append("  env:     " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items())))
    server, client = ((slot.server_cpus, slot.client_cpus) if slot is not None
                      else (experiment.server.cpus, experiment.load.cpus))
    if server or client:
        swap = ("; the sides trade CPUs between load windows ([duet] swap)"
                if slot is not None and experiment.duet.swap else "")
        lines.append(f"  cpus:    server {server or 'unpinned'}, load generator "
                     f"{client or 'unpinned'}{swap}")
    return lines


def _sources(experiment: Experiment, arms: Sequence[str]) -> dict[str, dict]:
    """``describe_source`` of each arm's build, each distinct build described once (a git URL
    is asked with ``git ls-remote``, which may take seconds)."""
    seen: dict[str, dict] = {}
    out = {}
    for name in arms:
        build = experiment.build_of(name)
        key = build.model_dump_json()
        if key not in seen:
            seen[key] = describe_source(build)
        out[name] = seen[key]
    return out


def build_line(source: dict) -> str:
    """One line for a build ``describe_source`` described: ``git /src/vllm@main → 1a2b3c4d5e6f``,
    ``wheel dist/vllm-….whl (sha256 …)``, ``python /usr/bin/python3``, ``requirements …``."""
    kind = source["kind"]
    if kind == "python":
        return f"python {source['python']}" + ("" if source.get("exists") else " (missing)")
    if kind == "git":
        commit = source.get("commit")
        text = (f"git {source['repo']}@{source['ref']} → "
                + (f"{commit[:12]}" + ("" if source.get("resolved") == "in the local repository"
                                       else f" ({source['resolved']})")
                   if commit else f"? ({source['resolved']})"))
    elif kind == "wheel":
        text = f"wheel {source['wheel']}" + (
            f" (sha256 {source['sha256'][:12]})" if source.get("sha256") else
            " (missing)" if source.get("missing") else " (downloaded at build time)")
    else:
        text = "requirements"
    if source.get("requirements"):
        text += (" + " if kind != "requirements" else " ") + " ".join(source["requirements"])
    if "built" in source:
        text += ("; built" if source["built"] else "; not built yet (e2e build makes it)")
    return text


def describe_arms(experiment: Experiment, arms: Sequence[str] | None = None) -> tuple[dict, dict]:
    """(document, comments) of what each arm runs, for ``e2e arms``: a config that loads back
    (``name``, ``[server] model``, the speculator profiles, and each arm with its build as the
    config gives it and the environment, arguments and plugin settings its server gets, the
    server's merged in), secrets redacted through the experiment's ``Redactor``. What is a
    fact rather than a setting (a git ref's commit, a wheel's sha256, the managed environment
    and whether it is built: ``describe_source``) is a comment above the arm's table, so the
    saved output is a config."""
    redactor = experiment.redactor()
    server = experiment.server
    document: dict = {"name": experiment.name, "server": {"model": redactor.text(server.model)}}
    if experiment.speculators:
        document["speculators"] = redactor.config(dict(experiment.speculators))
    comments: dict[str, list[str]] = {}
    table: dict = {}
    names = list(arms or experiment.arms)
    sources = _sources(experiment, names)
    for name in names:
        arm = experiment.arm(name)
        build = experiment.build_of(name)
        source = redactor.config(dict(sources[name]))
        entry: dict = {"description": redactor.text(arm.description) or None,
                       "build": redactor.config(build.model_dump(exclude_defaults=True)),
                       "env": redactor.env({**server.env, **arm.env}),
                       "args": redactor.argv([*server.args, *arm.args]),
                       "plugin": redactor.config(arm.plugin)}
        if arm.opt_in:
            entry["opt_in"] = True
        table[name] = entry
        comments[f"arms.{name}"] = [f"{name}: {build_line(source)}", *_facts(source)]
    document["arms"] = table
    return document, comments


_FACT_KEYS = ("commit", "resolved", "sha256", "venv", "exists")


def _facts(source: dict) -> list[str]:
    """The facts ``describe_source`` found beyond the build's settings, one ``key: value`` a
    line (``e2e arms`` prints them as comments)."""
    return [f"  {key}: {source[key]}" for key in _FACT_KEYS if source.get(key) is not None]


def _duration(record) -> float | None:
    try:
        start = datetime.fromisoformat(record.started_at.replace("Z", "+00:00"))
        end = datetime.fromisoformat(record.finished_at.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def plan_header(experiment: Experiment, plan: Sequence[Unit], results: Path, *,
                defaulted: Sequence[str] = (), executor: str = "local") -> list[str]:
    """What a plan will do, before its units: the results folder, the builds (a git build's
    repo@ref → commit and its worktree), the model, the spec modes, the load (naming the keys
    left to e2e's defaults, the reference change's shape: ``defaulted``), how many fresh
    servers and how many at once, and roughly how long (from this folder's finished runs,
    when it has any)."""
    from e2e.errors import NoSuchResults
    from e2e.results.store import load_records

    redactor = experiment.redactor()
    planned = {side.arm for unit in plan for side in unit.sides}
    arms = [a for a in experiment.arms if a in planned]  # the config's order
    sides = [side for unit in plan for side in unit.sides]
    states = [unit_state(results, experiment.name, unit) for unit in plan]
    to_run = [unit for unit, state in zip(plan, states) if not state.done]
    lines = [f"plan: {len(plan)} unit(s) of {len(arms)} arm(s) ({', '.join(arms)}) into "
             f"{Path(results) / experiment.name}; {len(plan) - len(to_run)} already done, "
             f"{len(to_run)} to run"]
    by_build: dict[str, list[str]] = {}
    sources = _sources(experiment, arms)
    for name in arms:
        source = sources[name]
        line = redactor.text(build_line(source))
        if source["kind"] == "git":
            line += "; its worktree under $E2E_HOME/src, installed editable"
        by_build.setdefault(line, []).append(name)
    lines.append("builds:")
    lines += [f"  {', '.join(names)}: {line}" for line, names in by_build.items()]
    lines.append(f"model: {redactor.text(experiment.server.model)}"
                 + (" (a tiny random-weight Llama e2e builds offline)"
                    if experiment.server.model == "e2e:tiny-llama" else ""))
    modes = sorted({side.spec_mode for side in sides if hasattr(side, "spec_mode")},
                   key=lambda m: m != "base")
    if modes:
        profile = experiment.default_speculator
        lines.append("spec modes: " + ", ".join(
            f"{m} (with [speculators.{profile}])" if m == "dspark" else f"{m} (no speculator)"
            for m in modes))
    load = experiment.load
    lines.append(f"load: {load.input_len} in / {load.output_len} out, "
                 f"{load.prompts_per_concurrency} prompts per unit of concurrency, "
                 f"concurrency {', '.join(str(c) for c in sorted({s.concurrency for s in sides if hasattr(s, 'concurrency')}))}, "
                 f"{load.warmup_requests} warmup request(s)")
    if defaulted:
        lines.append(f"  not in this config's [load], so e2e's defaults (the reference change's "
                     f"shape): {', '.join(f'{k} = {getattr(load, k)}' for k in defaulted)}; "
                     "set them in [load] to measure your own")
    rounds = max((unit.repeat for unit in plan), default=0)
    warmup = experiment.report_from_run - 1
    first = "the first round a warm-up" if warmup == 1 else f"the first {warmup} warm-up rounds"
    lines.append(f"rounds: {rounds}" + (
        f", {first}, not reported (report_from_run = {experiment.report_from_run}): "
        f"{max(rounds - warmup, 0)} reported" if warmup else
        ", every one reported (report_from_run = 1)"))
    servers = len(sides)
    at_once = (f"{len(plan[0].sides) if plan else 1} at once (duets: one per slot)"
               if plan and plan[0].kind == "duet" else
               "one per host at a time on a Ray cluster" if executor == "ray" else "one at a time")
    lines.append(f"servers: {servers} fresh server(s), {at_once}; each run starts its own and "
                 "stops it")
    try:
        records = load_records(Path(results) / experiment.name)[0]
    except NoSuchResults:
        records = ()
    durations = [d for d in (_duration(r) for r in records) if d is not None]
    if not to_run:
        lines.append("time: nothing left to run")
    elif durations:
        each = statistics.median(durations)
        lines.append(f"time: roughly {_minutes(each * len(to_run))} ({len(to_run)} unit(s) to "
                     f"run × {_minutes(each)}, the median of this folder's {len(durations)} "
                     "finished run(s), server start included)")
    else:
        lines.append(f"time: not known before a run is measured (this folder has none yet): "
                     f"each of the {len(to_run)} unit(s) starts a server (at most "
                     f"{experiment.server.startup_timeout_s:g} s) and sends its load; a dry run "
                     "after the first runs estimates the rest")
    return lines
