"""One number rule and one date rule: every number a config table or a flag gives is finite and
within what its consumer accepts, and every date e2e takes from outside is a calendar date
written YYYY-MM-DD in ASCII digits with nothing after. Both are checked when the config (or the
command line) is read: a refusal is exit 2 naming the key or flag, before any server starts and
before anything is written. No server."""

from __future__ import annotations

import datetime
import json
import math
import re
import tomllib
import types
import typing

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.core import TyperCommand
from typer.testing import CliRunner

import e2e.pipeline
from conftest import ROOT
from e2e.analysis.estimators.estimates import welch_log_ratio
from e2e.capacity import SearchSettings
from e2e.cli import app
from e2e.config import (MAX_PROMPTS, MAX_SCHEDULE_S, MAX_WAIT_S, Experiment, Table,
                        TraceReplay, load_experiment, parse_date, parse_experiment)
from e2e.errors import ConfigError
from e2e.nightly.settings import NightlySettings, parse_nightly
from e2e.plan import RunSpec
from e2e.session import check_units

runner = CliRunner()
DEFAULT_TOML = (ROOT / "e2e" / "configs" / "default.toml").read_text()
NIGHTLY_TOML = (ROOT / "e2e" / "configs" / "nightly.toml").read_text()
TRACE = ROOT / "tests" / "data" / "traces" / "mooncake_small.jsonl"

HOSTILE = [math.inf, -math.inf, math.nan, 1e308, -1e308, -0.0, 0.0, 5e-324, -5e-324,
           2.2250738585072014e-308, 1e-300, -1.0, 1.0, 0.5, 100.0, 1e10, 1e20]
floats = st.one_of(st.sampled_from(HOSTILE), st.floats(allow_nan=True, allow_infinity=True))


def _toml(tmp_path, text: str, name: str = "c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _set(text: str, key: str, value: str) -> str:
    """``text`` (a TOML file) with its top-level-table line ``key = ...`` replaced."""
    out, n = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text)
    assert n == 1, key
    return out


def _refused(got, *words: str) -> str:
    """The output of a refused command: exit 2, no traceback, the words named."""
    said = " ".join(got.output.split())
    assert got.exit_code == 2, said
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    assert "Traceback" not in got.output
    for word in words:
        assert word in said, said
    return said


@pytest.fixture
def no_server(monkeypatch):
    """A unit that reaches the executor fails the test at once (instead of building and
    starting servers): what is refused must be refused before it."""
    def started(*args, **kwargs):
        raise AssertionError("a unit reached the executor: a server would start")

    monkeypatch.setattr(e2e.pipeline, "execute", started)
    monkeypatch.setattr(e2e.pipeline, "sweep", started)


# --- 1: the bounded-run limit is finite whatever the timeout ---------------------------------

@pytest.mark.parametrize("timeout", ["inf", "1e308", "nan", "1e30"])
def test_a_capacity_search_at_a_micro_rate_is_refused_whatever_the_request_timeout(
        tmp_path, no_server, timeout):
    config = _toml(tmp_path, _set(DEFAULT_TOML, "request_timeout_s", timeout))
    got = runner.invoke(app, ["capacity", "--slo", "tpot=20ms", "--min-rate", "1e-6",
                              "--arms", "main,pr", "--config", str(config),
                              "--results", str(tmp_path / "r")])
    _refused(got, "load.request_timeout_s")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("timeout", ["inf", "1e308", f"{MAX_WAIT_S:.0f}"])
def test_a_trace_replayed_at_a_billionth_of_its_speed_is_refused_whatever_the_timeout(
        tmp_path, timeout):
    text = DEFAULT_TOML.replace(
        "[load]\n", f'[load]\nworkload = {{ kind = "trace", path = "{TRACE}", '
        f'speedup = 1e-9 }}\n', 1)
    config = _toml(tmp_path, _set(text, "request_timeout_s", timeout))
    got = runner.invoke(app, ["sweep", "--dry-run", "--no-dspark", "--runs", "2", "--config",
                              str(config), "--results", str(tmp_path / "r")])
    said = _refused(got)
    # the longest timeout the config takes still leaves the schedule out of bounds
    assert "load.request_timeout_s" in said and ("speedup" in said or "1e+308" in said
                                                 or "finite" in said), said
    assert not (tmp_path / "r").exists()


@settings(max_examples=40, deadline=None)
@given(timeout=st.floats(min_value=5e-324, max_value=MAX_WAIT_S),
       prompts=st.integers(1, MAX_PROMPTS), windows=st.integers(1, 64))
def test_no_request_timeout_lifts_the_schedule_limit(timeout, prompts, windows):
    """Whatever timeout the config takes, a rate of 1e-6 req/s (1e6 s a request) is refused,
    and so is a schedule past MAX_SCHEDULE_S (the derived limit's cap) however many requests."""
    experiment = load_experiment().override("load", request_timeout_s=timeout, windows=windows,
                                            max_prompt_tokens=10**12)
    n = prompts * windows
    for rate in (1e-6, n / (2 * MAX_SCHEDULE_S)):
        spec = RunSpec(arm="main", concurrency=1, dspark=False, prompts=prompts, input_len=8,
                       output_len=8, seed=0, warmup_requests=0, windows=windows,
                       request_rate=rate)
        with pytest.raises(ConfigError, match="longer than the limit"):
            check_units(experiment, [spec])


# --- 8: the equivalence band the report tests is the one the config takes -------------------

@pytest.mark.parametrize("pct", ["inf", "1e308", "100", "100.0", "250", "nan", "0", "-1"])
def test_an_equivalence_band_the_report_cannot_test_is_refused_before_any_run(tmp_path, pct):
    text = DEFAULT_TOML.replace("report_from_run = 2", f"report_from_run = 2\nequivalence_pct = {pct}")
    got = runner.invoke(app, ["sweep", "--dry-run", "--no-dspark", "--runs", "2", "--config",
                              str(_toml(tmp_path, text)), "--results", str(tmp_path / "r")])
    _refused(got, "equivalence_pct")
    assert not (tmp_path / "r").exists()


_ESTIMATE = welch_log_ratio([10.0, 10.2, 9.9], [10.1, 10.0, 10.3])


@settings(max_examples=120, deadline=None)
@given(floats)
@example(99.99999999999999)
@example(100.0)
def test_the_config_takes_an_equivalence_band_exactly_when_the_report_can_test_it(pct):
    raw = tomllib.loads(DEFAULT_TOML)
    raw["equivalence_pct"] = pct
    try:
        parse_experiment(raw, source="fuzz.toml")
        loads = True
    except ConfigError as exc:
        assert "equivalence_pct" in str(exc)
        loads = False
    try:
        _ESTIMATE.tost_p_value(pct)
        tests = True
    except ValueError:
        tests = False
    assert loads == tests, pct


# --- 11: a speculator profile's numbers ------------------------------------------------------

@pytest.mark.parametrize("line", [
    "num_speculative_tokens = nan", "num_speculative_tokens = inf", "num_speculative_tokens = 1e308",
    "num_speculative_tokens = 0", "num_speculative_tokens = -3", "num_speculative_tokens = 2.5",
    "num_speculative_tokens = true", "num_speculative_tokens = 100000",
    "num_speculative_tokens = 3\ndraft_scale = nan",
    "num_speculative_tokens = 3\ndraft = { scale = -inf }",
    "num_speculative_tokens = 3\nrates = [0.5, nan]",
    "num_speculative_tokens = 3\npinned = nan", "num_speculative_tokens = 3\npinned = inf",
])
def test_a_speculator_profile_with_a_number_vllm_cannot_take_is_refused(tmp_path, line):
    text = DEFAULT_TOML.replace("num_speculative_tokens = 3", line, 1)
    got = runner.invoke(app, ["sweep", "--dry-run", "--dspark", "--runs", "2", "--config",
                              str(_toml(tmp_path, text)), "--results", str(tmp_path / "r")])
    _refused(got, "speculators.dspark")
    assert "NaN" not in got.output and "Infinity" not in got.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("pin", ["nan", "inf", "-inf", "1e308"])
def test_a_pinned_acceptance_flag_that_is_not_a_length_is_refused(tmp_path, pin):
    got = runner.invoke(app, ["sweep", "--dry-run", "--dspark", "--runs", "2",
                              "--pin-acceptance", pin, "--results", str(tmp_path / "r")])
    _refused(got, "speculators.dspark.pinned")
    assert not (tmp_path / "r").exists()


def test_the_dry_run_prints_the_speculative_config_as_strict_json(tmp_path):
    got = runner.invoke(app, ["sweep", "--dry-run", "--dspark", "--runs", "2",
                              "--pin-acceptance", "2.5", "--results", str(tmp_path / "r")])
    assert got.exit_code == 0, got.output
    found = re.findall(r"--speculative-config '([^']*)'", got.output)
    assert found
    for text in found:
        def refuse(name):
            raise AssertionError(f"not JSON: {name} in {text}")
        doc = json.loads(text, parse_constant=refuse)
        assert doc["num_speculative_tokens"] == 3
        assert doc["synthetic_acceptance_length"] == 2.5


# --- 12: runs no report will show -------------------------------------------------------------

def test_report_from_run_past_repeats_is_refused_at_load(tmp_path, no_server):
    text = _set(DEFAULT_TOML, "report_from_run", "5")
    got = runner.invoke(app, ["sweep", "--no-dspark", "--config", str(_toml(tmp_path, text)),
                              "--results", str(tmp_path / "r")])
    _refused(got, "report_from_run 5 is past repeats 4")
    assert not (tmp_path / "r").exists()
    # at repeats it is one reported run a cell: taken
    assert parse_experiment(tomllib.loads(_set(DEFAULT_TOML, "report_from_run", "4"))).repeats == 4


def test_a_night_of_fewer_runs_than_report_from_run_is_refused():
    raw = tomllib.loads(NIGHTLY_TOML)
    raw["nightly"]["runs"] = raw["report_from_run"] - 1
    with pytest.raises(ConfigError, match="nightly.runs 1 is below report_from_run 2"):
        parse_nightly(raw, source="n.toml")


# --- 13: dates ------------------------------------------------------------------------------

BAD_DATES = ["2026-13-01", "2026-02-30", "٢٠٢٦-١٢-٠٧", "2026-12-07\n", " 2026-12-07",
             "2026-12-07 ", "20261207", "2026-W49-1", "2026-12-7", "+2026-12-07", "2026-12-07x",
             "２０２６-１２-０７", "", "0000-01-01"]


@pytest.mark.parametrize("date", BAD_DATES)
@pytest.mark.parametrize("flag", ["--date", "--baseline-night"])
def test_a_night_date_that_is_not_a_date_is_refused_before_anything(tmp_path, date, flag):
    got = runner.invoke(app, ["nightly", "--dry-run", flag, date,
                              "--results", str(tmp_path / "r")])
    said = _refused(got, flag, "is not a date")
    assert len(got.output.strip().splitlines()) == 1, got.output
    assert "\n" not in said
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("key", ["since", "baseline_night"])
@pytest.mark.parametrize("date", BAD_DATES)
def test_a_nightly_config_date_that_is_not_a_date_is_refused(key, date):
    raw = tomllib.loads(NIGHTLY_TOML)
    table = raw["nightly"].setdefault("changepoints", {}) if key == "since" else raw["nightly"]
    table[key] = date
    with pytest.raises(ConfigError, match="is not a date"):
        parse_nightly(raw, source="n.toml")


@settings(max_examples=120, deadline=None)
@given(st.one_of(st.text(max_size=14),
                 st.dates().map(lambda d: d.isoformat()),
                 st.dates().map(lambda d: d.isoformat()).flatmap(
                     lambda d: st.tuples(st.text(max_size=2), st.text(max_size=2)).map(
                         lambda ab: ab[0] + d + ab[1]))))
def test_any_text_is_a_date_only_when_it_is_one(text):
    try:
        got = parse_date(text)
    except ValueError as exc:
        assert "is not a date" in str(exc) and "\n" not in str(exc)
        return
    assert got == text and text.isascii() and len(text) == 10
    assert datetime.date.fromisoformat(text).isoformat() == text


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=14))
def test_any_date_flag_is_refused_in_one_line_or_taken(tmp_path, text):
    """--date of any text: a date goes on (here to a config that is not there), anything else
    is refused naming the flag, in one line; neither writes anything."""
    if "\x00" in text or text.startswith("-"):
        return  # not a value argv can carry / read as another flag
    got = runner.invoke(app, ["nightly", "--dry-run", "--date", text, "--config",
                              str(tmp_path / "missing.toml"), "--results", str(tmp_path / "r")])
    assert got.exit_code == 2 and "Traceback" not in got.output, got.output
    try:
        parse_date(text)
    except ValueError:
        assert "--date" in got.output and len(got.output.strip().splitlines()) == 1, got.output
    assert not (tmp_path / "r").exists()


# --- every number of every config table -----------------------------------------------------

# a minimal table of each kind of [load.workload] (a new kind must be added here to be fuzzed)
WORKLOADS = {
    "shared-prefix": {"kind": "shared-prefix", "groups": 2, "per_group": 2, "prefix_len": 8},
    "trace": {"kind": "trace", "path": str(TRACE)},
    "multi-turn": {"kind": "multi-turn", "sessions": 2, "turns": 2, "user_len": 8},
}


def _leaves(annotation) -> list:
    """The types an annotation admits, Annotated, Optional and unions unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _leaves(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(annotation) for t in _leaves(a) if t is not type(None)]
    return [annotation]


def _numeric_keys(model: type[BaseModel], path: tuple, raw: dict) -> list[tuple[tuple, dict]]:
    """Every numeric key of ``model`` (nested tables, list items and table values too) as
    (key path, the raw config it is set in): found from the models' fields, so a new key is
    fuzzed without a test to change."""
    out = []
    for name, field in model.model_fields.items():
        for leaf in _leaves(field.annotation):
            out += _numeric_in(leaf, path + (name,), raw)
    return out


def _numeric_in(leaf, path: tuple, raw: dict) -> list[tuple[tuple, dict]]:
    origin = typing.get_origin(leaf)
    if leaf in (int, float):
        return [(path, raw)]
    if isinstance(leaf, type) and issubclass(leaf, BaseModel):
        if "kind" in leaf.model_fields and path[-1] == "workload":
            kind = typing.get_args(leaf.model_fields["kind"].annotation)[0]
            assert kind in WORKLOADS, f"add a minimal [load.workload] kind = {kind!r} to WORKLOADS"
            raw = json.loads(json.dumps(raw))
            _node(raw, path[:-1])[path[-1]] = dict(WORKLOADS[kind])
        return _numeric_keys(leaf, path, raw)
    if origin is list:
        return [(p, r) for leaf_ in _leaves(typing.get_args(leaf)[0])
                for p, r in _numeric_in(leaf_, path + (0,), raw)]
    if origin is dict:
        value = typing.get_args(leaf)[1]
        existing = _get(raw, path)
        key = next(iter(existing)) if isinstance(existing, dict) and existing else "base"
        return [(p, r) for leaf_ in _leaves(value) for p, r in _numeric_in(leaf_, path + (key,), raw)]
    return []


def _node(raw, path: tuple):
    for key in path:
        if isinstance(key, int):
            raw = raw[key]
        else:
            raw = raw.setdefault(key, {})
    return raw


def _get(raw, path: tuple):
    for key in path:
        try:
            raw = raw[key]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _put(raw: dict, path: tuple, value) -> dict:
    raw = json.loads(json.dumps(raw))
    parent = path[:-1]
    node = raw
    for i, key in enumerate(parent):
        nxt = path[i + 1]
        if isinstance(key, int):
            while len(node) <= key:
                node.append({} if not isinstance(nxt, int) else [])
            node = node[key]
        else:
            if key not in node or not isinstance(node[key], (dict, list)):
                node[key] = [] if isinstance(nxt, int) else {}
            node = node[key]
    last = path[-1]
    if isinstance(last, int):
        if len(node) <= last:
            node.extend([value] * (last + 1 - len(node)))
        node[last] = value
    else:
        node[last] = value
    return raw


_NIGHTLY_RAW = tomllib.loads(NIGHTLY_TOML)
_EXPERIMENT_RAW = {k: v for k, v in _NIGHTLY_RAW.items() if k != "nightly"}
KEYS = (_numeric_keys(Experiment, (), _EXPERIMENT_RAW)
        + _numeric_keys(NightlySettings, ("nightly",), _NIGHTLY_RAW)
        # a speculator profile is vLLM's: untyped numbers, and e2e's own two
        + [(("speculators", "dspark", key), _NIGHTLY_RAW | {"speculators": {"dspark": {
            "method": "ngram", "num_speculative_tokens": 3}}})
           for key in ("num_speculative_tokens", "pinned", "prompt_lookup_max")]
        + [(("arms", "main", "plugin", "perturb"), _NIGHTLY_RAW)])


def test_the_walk_finds_the_numeric_keys_of_every_table():
    names = {".".join(map(str, p)) for p, _ in KEYS}
    for key in ("load.request_timeout_s", "load.burstiness", "load.workload.speedup",
                "load.workload.think_s", "equivalence_pct", "duet.min_overlap",
                "server.quiet_wait_s", "nightly.alpha", "nightly.gsm8k.min_drop_pp",
                "nightly.thresholds.base.headline", "nightly.changepoints.alpha",
                "load.concurrencies.0", "duet.slots.0.port", "speculators.dspark.pinned"):
        assert key in names, key
    assert len(names) > 50


def _numbers(value):
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=floats)
def test_any_float_in_any_numeric_key_loads_finite_or_is_one_clear_error(key, value):
    path, base = key
    raw = _put(base, path, value)
    try:
        cfg = parse_nightly(raw, source="fuzz.toml")
    except ConfigError as exc:
        text = str(exc)
        lines = text.splitlines()
        assert lines[0].startswith("fuzz.toml") or "speculators." in lines[0], text
        assert len(lines) <= 2, text  # the file, then the one key that is wrong
        return
    numbers = list(_numbers(cfg.experiment)) + list(_numbers(cfg.settings))
    assert all(math.isfinite(n) for n in numbers), (path, value)
    for duration in (cfg.experiment.load.request_timeout_s, cfg.experiment.server.lock_wait_s,
                     cfg.experiment.server.startup_timeout_s):
        assert duration <= MAX_WAIT_S


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(SearchSettings.model_fields)), value=floats)
def test_any_float_in_the_capacity_search_settings_is_finite_or_refused(name, value):
    values = {"start": 4.0, name: value}
    try:
        search = SearchSettings(**values)
    except ValueError:  # pydantic's ValidationError; the command names the flag
        return
    assert all(math.isfinite(n) for n in _numbers(search))


def _tables(model: type[BaseModel], seen: set) -> None:
    seen.add(model)
    for field in model.model_fields.values():
        for leaf in _leaves(field.annotation):
            for inner in [leaf, *typing.get_args(leaf)]:
                for t in _leaves(inner):
                    if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                        _tables(t, seen)


def test_every_config_table_holds_the_number_rule():
    seen: set = set()
    for root in (Experiment, NightlySettings, SearchSettings, TraceReplay):
        _tables(root, seen)
    assert len(seen) > 15
    for model in seen:
        assert issubclass(model, Table), f"{model.__name__} is a config table: make it a Table"


# --- every float flag of every command --------------------------------------------------------

def _float_flags() -> list[tuple[list[str], str]]:
    import typer
    from typer import _click as click

    found = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, path + [name])
            return
        for param in command.get_params(click.Context(command)):
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is not None and descriptor.annotation is float and param.opts:
                found.append((path, param.opts[0]))

    walk(typer.main.get_command(app), [])
    return found


FLOAT_FLAGS = _float_flags()


def test_the_walk_finds_the_float_flags():
    flags = {f"{' '.join(path)} {flag}" for path, flag in FLOAT_FLAGS}
    assert {"sweep --lock-wait", "capacity --factor", "bisect --threshold",
            "plan --power"} <= flags


_REQUIRED = {"plan": ["--target-effect", "1%", "results"], "bisect": ["--good", "a", "--bad", "b"],
             **{tool: ["run.json", "--arm", "main"] for tool in ("vllm-bench", "aiperf", "guidellm")}}


@pytest.mark.parametrize("flag", FLOAT_FLAGS, ids=lambda f: f"{' '.join(f[0])} {f[1]}")
def test_a_float_flag_that_is_not_finite_is_refused_before_the_command_runs(monkeypatch, flag):
    path, name = flag

    def ran(self, ctx):
        raise AssertionError(f"{' '.join(path)} ran with {name} not finite")

    monkeypatch.setattr(TyperCommand, "invoke", ran)  # every e2e command's class is one
    for value in ("inf", "-nan", "-1e400"):
        got = runner.invoke(app, [*path, *_REQUIRED.get(path[-1], []), f"{name}={value}"])
        assert got.exit_code == 2, got.output
        assert "Traceback" not in got.output and name in got.output, got.output
