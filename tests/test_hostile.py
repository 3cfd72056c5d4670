"""Hostile input, secrets and faults (issue 24): names are data, never paths; no secret
reaches a file or a terminal; duplicate imports cannot change a verdict; every value from
outside is checked where it comes in; the server's spawn cannot be interrupted into an
orphan. A fuzz suite (hypothesis) over import files, usage and /metrics texts, names and
URLs, and a test per case of the issue."""

from __future__ import annotations

import functools

import json
import math
import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planted import files_under, holds
from typer.testing import CliRunner

from e2e.cli import app
from e2e.config import load_experiment
from e2e.names import check_name, parse_cpus
from e2e.errors import ConfigError, ResultsError
from e2e.interop import importing
from e2e.interop.importing import ImportOptions
from e2e.interop.vllm_bench import READER, check_result, read_results
from e2e.load.sse import StreamFailed, check_usage
from e2e.metrics import parse_samples
from e2e.redact import REDACTED, Redactor, remember, scrub
from e2e.session.external import parse_base_url

import_file = functools.partial(importing.import_file, reader=READER)

DATA = Path(__file__).parent / "data" / "vllm_bench"
BASE, DSPARK = DATA / "c1-base.json", DATA / "c1-dspark.json"
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
runner = CliRunner()


# ------------------------------------------------------------------ names ----

@pytest.mark.parametrize("name", ["../../victim", "/etc", "a/b", "..", "a\x00b", "x\ny",
                                  "abc\n", "a" * 5000, "", ".hidden", "a b", "é"])
def test_a_name_that_is_not_data_is_refused_with_the_rule(name):
    with pytest.raises(ConfigError, match="names are data, never paths"):
        check_name(name, "arm name")


@FUZZ
@given(st.text(max_size=80))
def test_fuzz_any_accepted_name_is_one_folder_inside_its_root(name):
    try:
        check_name(name)
    except ConfigError:
        return
    root = Path("/r")
    assert (root / name).parent == root and os.path.normpath(root / name) == str(root / name)


def test_import_with_an_arm_or_experiment_that_escapes_is_exit_2_and_writes_nothing(tmp_path):
    results = tmp_path / "a" / "b" / "r"
    for flags in (["--arm", "../../victim"], ["--experiment", "../../expx"],
                  ["--arm", "x\ny"], ["--arm", "a" * 5000]):
        got = runner.invoke(app, ["import", "vllm-bench", str(BASE), "--repeat", "1",
                                  "--results", str(results), "--experiment", "exp", *flags])
        assert got.exit_code == 2, got.output
        assert "never paths" in got.output
        assert got.exception is None or isinstance(got.exception, SystemExit)
    assert files_under(tmp_path) == []


def test_a_file_whose_arm_metadata_escapes_is_refused(tmp_path):
    doc = json.loads(BASE.read_text())
    doc["arm"] = "../../victim"
    (tmp_path / "f.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="arm name"):
        import_file(tmp_path / "f.json", ImportOptions(experiment="exp"), tmp_path / "r")
    assert not (tmp_path / "victim-c1-base-r2").exists() and not (tmp_path / "r").exists()


def test_a_symlink_that_leads_out_of_the_results_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "exp").symlink_to(outside)
    with pytest.raises(ResultsError, match="outside"):
        import_file(BASE, ImportOptions(experiment="exp"), tmp_path / "r")
    assert files_under(outside) == []


def test_export_never_overwrites_without_force(tmp_path):
    import_file(BASE, ImportOptions(experiment="exp"), tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "main-c1-base-r2.json").write_text("mine")
    got = runner.invoke(app, ["export", str(tmp_path / "exp"), "--out", str(out)])
    assert got.exit_code == 2 and "--force" in got.output
    assert (out / "main-c1-base-r2.json").read_text() == "mine"
    got = runner.invoke(app, ["export", str(tmp_path / "exp"), "--out", str(out), "--force"])
    assert got.exit_code == 0 and json.loads((out / "main-c1-base-r2.json").read_text())


def test_export_skips_a_run_id_that_leads_out_and_a_run_json_that_is_not_a_run(tmp_path):
    import_file(BASE, ImportOptions(experiment="exp"), tmp_path / "r")
    exp = tmp_path / "r" / "exp"
    (good,) = exp.glob("*/run.json")
    record = json.loads(good.read_text())
    record["run_id"] = "../../evil"
    (exp / "edited").mkdir()
    (exp / "edited" / "run.json").write_text(json.dumps(record))
    (exp / "broken").mkdir()
    (exp / "broken" / "run.json").write_text(json.dumps({"run_id": "x"}))
    out = tmp_path / "deep" / "er" / "out"
    got = runner.invoke(app, ["export", str(exp), "--out", str(out)])
    assert got.exit_code == 0, got.output
    assert sorted(p.name for p in out.iterdir()) == ["main-c1-base-r2.json"]
    assert "skipped edited: run id '../../evil'" in got.output
    assert "broken/run.json: not a valid run record (9 error(s), first: experiment: " in \
        got.output.replace("\n", "")
    assert "Field required [type=missing" not in got.output  # one line, not pydantic's screen
    assert [p for p in files_under(tmp_path) if exp not in p.parents] == [
        out / "main-c1-base-r2.json"]


# ------------------------------------------------------------------ bounds ----

@pytest.mark.parametrize("args", [["sweep", "--dry-run", "--runs", "100000000000"],
                                  ["run", "--concurrency", "100000000000"]])
def test_huge_counts_are_exit_2(args):
    assert runner.invoke(app, args).exit_code == 2


CAPPED = "at most 2 requests are ever in flight"


def test_a_sweep_warns_once_of_an_in_flight_bound_beyond_its_prompts():
    """A sweep's closed loop always has prompts_per_concurrency x concurrency prompts, so its
    bound that can exceed them is an open loop's --max-concurrency; the warning is e2e run's."""
    got = runner.invoke(app, ["sweep", "--dry-run", "--request-rate", "5", "--max-concurrency",
                              "1000", "--prompts-per-concurrency", "1", "--concurrency", "2",
                              "--runs", "2", "--no-dspark"])
    assert got.exit_code == 0, got.output
    assert got.output.count("warning: --max-concurrency 1000 exceeds the 2 measured prompts: "
                            f"{CAPPED}, so the cap never binds") == 1, got.output
    got = runner.invoke(app, ["sweep", "--dry-run", "--prompts-per-concurrency", "1",
                              "--concurrency", "64", "--runs", "1", "--no-dspark"])
    assert got.exit_code == 0 and "warning" not in got.output, got.output


def test_a_run_warns_of_a_concurrency_beyond_its_prompts(tmp_path):
    got = runner.invoke(app, ["run", "--base-url", "http://127.0.0.1:1", "--concurrency", "5",
                              "--prompts", "2", "-q", "--results", str(tmp_path)])
    assert ("warning: --concurrency 5 exceeds the 2 measured prompts: "
            f"{CAPPED}, so the run measures concurrency 2, not 5") in got.output, got.output


def test_repeats_in_a_config_are_bounded(tmp_path):
    text = (Path(__file__).parents[1] / "e2e" / "configs" / "default.toml").read_text()
    (tmp_path / "c.toml").write_text(text.replace("repeats = 4", "repeats = 999999999999999999999")
                                     if "repeats = 4" in text else text + "\nrepeats = 999999999999\n")
    got = runner.invoke(app, ["sweep", "--dry-run", "--config", str(tmp_path / "c.toml")])
    assert got.exit_code == 2, got.output


def test_a_cpu_set_beyond_any_host_is_refused_and_the_applied_set_is_the_real_one():
    with pytest.raises(ConfigError, match="beyond any host"):
        parse_cpus("0-99999")
    from e2e.host import pin_process

    before = os.sched_getaffinity(0)
    try:
        placement = pin_process(f"0-{max(before) + 100}")
        assert placement.applied is not None and set(placement.applied) <= before
    finally:
        os.sched_setaffinity(0, before)


def test_report_only_with_a_value_of_the_wrong_kind_says_so(tmp_path):
    import_file(BASE, ImportOptions(experiment="exp"), tmp_path)
    got = runner.invoke(app, ["report", str(tmp_path / "exp"), "--only", "output_len=abc"])
    assert got.exit_code == 2 and "output_len is a whole number" in got.output


def test_a_record_of_a_newer_schema_is_refused_by_name(tmp_path):
    (folder, record), = import_file(BASE, ImportOptions(experiment="exp"), tmp_path)
    doc = json.loads((folder / "run.json").read_text())
    doc["schema_version"] = 999
    (folder / "run.json").write_text(json.dumps(doc))
    from e2e.results.store import load_records

    records, problems = load_records(tmp_path / "exp")
    assert records == () and "newer" in problems[0] or "999" in problems[0], problems


# ------------------------------------------------------------ import files ----

def _doc(**changes):
    doc = json.loads(BASE.read_text())
    doc.update(changes)
    return doc


@pytest.mark.parametrize("changes", [
    {"completed": 1e30}, {"duration": 1e308}, {"duration": float("nan")}, {"duration": -1},
    {"itls": 3}, {"start_times": ["a", "b"]}, {"output_lens": [float("inf")]},
    {"max_concurrency": 1e25}, {"ttfts": [-1.0] * 8}, {"mean_ttft_ms": -5},
])
def test_a_bad_value_in_an_import_file_is_a_clear_error(tmp_path, changes):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_doc(**changes)))
    with pytest.raises(ConfigError):
        read_results(path)
    got = runner.invoke(app, ["import", "vllm-bench", str(path), "--experiment", "exp",
                              "--results", str(tmp_path / "r")])
    assert got.exit_code == 2, got.output
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("run.json"))


@pytest.mark.parametrize("content", [b"\xff\xfe{", b"[" * 100_000 + b"]" * 100_000,
                                     json.dumps({"completed": 1, "duration": 1,
                                                 "num_prompts": 1, "x": [[[[[[[[[[[[[[[[[[[[
                                                     [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
                                                 }).encode()])
def test_undecodable_or_deep_files_are_exit_2(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    got = runner.invoke(app, ["import", "vllm-bench", str(path), "--experiment", "exp",
                              "--results", str(tmp_path / "r")])
    assert got.exit_code == 2, got.output


def test_import_of_an_endless_file_stops_as_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="larger than .* give the JSON file"):
        read_results(Path("/dev/zero"))
    got = runner.invoke(app, ["import", "vllm-bench", "/dev/zero", "--experiment", "exp",
                              "--results", str(tmp_path / "r")])
    assert got.exit_code == 2 and "Traceback" not in got.output


@FUZZ
@given(st.dictionaries(st.sampled_from(["completed", "duration", "num_prompts", "failed",
                                        "max_concurrency", "ttfts", "itls", "output_lens",
                                        "start_times", "mean_ttft_ms", "errors", "arm"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                 st.text(max_size=5),
                                 st.lists(st.one_of(st.floats(), st.integers(),
                                                    st.lists(st.floats(), max_size=3)),
                                          max_size=4)), max_size=12))
def test_fuzz_an_import_document_is_checked_or_refused(doc):
    try:
        checked = check_result(doc, "f")
    except ConfigError:
        return
    for key in ("completed", "duration", "num_prompts"):
        assert math.isfinite(float(checked[key]))


@pytest.mark.slow
def test_the_same_result_imported_again_leaves_the_verdict_unchanged(tmp_path):
    from e2e.render import build_report

    once, many = tmp_path / "once", tmp_path / "many"
    for results, times in ((once, 1), (many, 4)):
        for _ in range(times):
            import_file(BASE, ImportOptions(experiment="exp", arm="main"), results)
            import_file(DSPARK, ImportOptions(experiment="exp", arm="pr", dspark=False),
                        results)
    assert len(list((many / "exp").glob("*/run.json"))) == 2  # skipped, not counted again
    a, b = build_report(once / "exp").markdown, build_report(many / "exp").markdown
    assert a == b


# ------------------------------------------------------ usage and /metrics ----

@pytest.mark.parametrize("usage", [{"completion_tokens": 1e30}, {"prompt_tokens": "3"},
                                   {"completion_tokens": -1}, [1, 2], {"prompt_tokens": True}])
def test_a_usage_that_is_not_token_counts_fails_the_request(usage):
    with pytest.raises(StreamFailed, match="usage is not token counts"):
        check_usage(usage)


@FUZZ
@given(st.one_of(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "x"]),
                                 st.one_of(st.integers(), st.floats(), st.text(max_size=3),
                                           st.none())),
                 st.lists(st.integers(), max_size=2), st.text(max_size=4)))
def test_fuzz_usage_is_token_counts_or_a_failed_request(usage):
    try:
        check_usage(usage)
    except StreamFailed:
        return
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        assert value is None or (type(value) is int and 0 <= value < 2**31)


def test_a_bad_metrics_sample_drops_itself_not_the_scrape():
    text = ("# TYPE a counter\na_total 5\nb{x=\"1\"} not-a-number\nc NaN\nd +Inf\n"
            "e 1e300\nf 2\n")
    assert parse_samples(text) == {"a_total": 5.0, "f": 2.0}


@FUZZ
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_fuzz_metrics_text_gives_finite_samples(text):
    samples = parse_samples(text)
    assert all(math.isfinite(v) for v in samples.values())


# ------------------------------------------------------------------- URLs ----

@pytest.mark.parametrize(("url", "base"), [
    ("http://h:8000/v1", "http://h:8000"), ("http://h:8000/v1/", "http://h:8000"),
    ("http://h:8000/", "http://h:8000"), ("https://h/x/v1", "https://h/x"),
])
def test_base_url_never_doubles_v1(url, base):
    assert parse_base_url(url)[0] == base


@pytest.mark.parametrize("url", ["ftp://h", "h:8000", "http://h:8000/?q=1", "http://h#f",
                                 "http://h:99999", "http://", "http://h\n:1"])
def test_a_bad_base_url_is_a_config_error(url):
    with pytest.raises(ConfigError):
        parse_base_url(url)


def test_credentials_in_a_base_url_are_taken_out_and_masked():
    base, creds = parse_base_url("http://user:pwSECRET99@h:8000")
    assert base == "http://h:8000" and creds == ("user", "pwSECRET99")
    assert "pwSECRET99" not in scrub("GET http://user:pwSECRET99@h:8000 failed")


@FUZZ
@given(st.text(max_size=60))
def test_fuzz_a_base_url_is_parsed_or_refused(text):
    try:
        base, _ = parse_base_url(text)
    except ConfigError:
        return
    assert base.startswith(("http://", "https://")) and "@" not in base
    assert not base.endswith("/v1") and "?" not in base


def test_dry_run_with_a_base_url_shows_the_url_not_a_local_command():
    got = runner.invoke(app, ["sweep", "--dry-run", "--base-url", "http://u:pwSECRET77@h:9/v1",
                              "--runs", "1", "--concurrency", "1", "--no-dspark"])
    assert got.exit_code == 0, got.output
    assert "measures the running server at http://***@h:9/v1" in got.output
    assert "pwSECRET77" not in got.output and "vllm.entrypoints" not in got.output


# ---------------------------------------------------------------- secrets ----

def _secret_config(tmp_path: Path) -> Path:
    text = (Path(__file__).parents[1] / "e2e" / "configs" / "default.toml").read_text()
    text = text.replace('args = ["--enforce-eager",',
                        'args = ["--api-key", "argSECRET123", "--hf-token=hfargSECRET123", '
                        '"--enforce-eager",', 1)
    text = text.replace('env = { VLLM_CPU_KVCACHE_SPACE = "1",',
                        'env = { SESSION_COOKIE = "cookieSECRET123", DATABASE_URL = '
                        '"postgres://u:dbSECRET123@db/x", VLLM_CPU_KVCACHE_SPACE = "1",', 1)
    assert text.count("SECRET123") == 4
    path = tmp_path / "secret.toml"
    path.write_text(text)
    return path


def test_the_default_pattern_and_the_config_snapshot_hide_every_secret(tmp_path):
    experiment = load_experiment(_secret_config(tmp_path))
    from e2e.session.session import redacted_config

    snapshot = json.dumps(redacted_config(experiment))
    assert "SECRET123" not in snapshot and REDACTED in snapshot
    got = runner.invoke(app, ["arms", "--config", str(_secret_config(tmp_path))])
    assert got.exit_code == 0 and "SECRET123" not in got.output, got.output
    got = runner.invoke(app, ["sweep", "--dry-run", "--config", str(_secret_config(tmp_path)),
                              "--runs", "1", "--concurrency", "1", "--no-dspark"])
    assert got.exit_code == 0 and "SECRET123" not in got.output, got.output


def test_a_remembered_secret_is_scrubbed_from_any_text_and_every_record():
    remember("sk-PLANTED-777")
    assert scrub("401: Authorization: Bearer sk-PLANTED-777 refused") == \
        f"401: Authorization: Bearer {REDACTED} refused"
    from e2e.results.records import RequestRecord

    assert "sk-PLANTED-777" not in RequestRecord(index=0, send_s=0.0,
                                                 error="HTTP 401: sk-PLANTED-777").error
    assert Redactor().argv(["--x", "prefix-sk-PLANTED-777"]) == ["--x", f"prefix-{REDACTED}"]


@pytest.mark.slow
def test_an_external_server_that_echoes_the_key_leaks_nothing(tmp_path, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self):
            body = json.dumps({"data": [{"id": "m"}]} if self.path == "/v1/models" else
                              {"error": f"bad auth {self.headers.get('Authorization')}"}).encode()
            self.send_response(200 if self.path == "/v1/models" else 401)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("E2E_API_KEY", "sk-SECRET123")
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    try:
        got = runner.invoke(app, ["run", "--base-url",
                                  f"http://user:pwSECRET123@127.0.0.1:{server.server_port}/v1",
                                  "--prompts", "1", "--results", str(tmp_path / "r"), "-q"])
    finally:
        server.shutdown()
    assert got.exit_code != 0 and "answered 401" in got.output, got.output
    assert "SECRET123" not in got.output
    assert holds(tmp_path, "SECRET123") == []


@pytest.mark.slow
def test_a_run_writes_no_planted_secret_anywhere(tmp_path, monkeypatch):
    """A real session (the scripted vLLM process of tests/fakevllm.py, which logs its
    arguments as vLLM does) with secrets in args, env and the API key: grep every file."""
    import fakevllm

    from e2e.plan import RunSpec
    from e2e.session import SessionOptions, run_unit
    from e2e.session.tinymodel import build_tiny_llama

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    experiment = fakevllm.experiment(fakevllm.install(tmp_path / "fake"), str(build_tiny_llama()))
    raw = experiment.model_dump(mode="json")
    raw["server"]["args"] = ["--api-key", "argSECRET123", "--hf-token=hfargSECRET123"]
    raw["server"]["env"].update(SESSION_COOKIE="cookieSECRET123",
                                DATABASE_URL="postgres://u:dbSECRET123@db/x")
    raw["server"]["build"]["env"] = {"GH_TOKEN": "buildSECRET123"}
    experiment = type(experiment).model_validate(raw)
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False, prompts=2)
    folder, record = run_unit(experiment, spec, tmp_path / "results",
                              SessionOptions(progress=False, plugin_check=False))
    assert record.valid, record.invalid_reasons
    assert "argSECRET123" not in (folder / "server.log").read_text()
    assert "args:" in (folder / "server.log").read_text()  # the log was kept, only scrubbed
    assert holds(tmp_path / "results", "SECRET123") == []


# ------------------------------------------------------------------ faults ----

STEPS = ("before the spawn", "after the spawn", "at the handle", "at the state file")


@pytest.mark.parametrize("step", STEPS)
def test_a_signal_at_every_step_of_the_spawn_leaves_no_server(step, tmp_path, monkeypatch):
    import dataclasses

    from e2e.arms import ServerLaunch
    from e2e.kinds import VLLM
    from e2e.session import server as _server

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    sleeper = dataclasses.replace(VLLM, entry=("-c", "import time; time.sleep(600)"))
    launch = ServerLaunch(arm="main", python=Path(sys.executable), args=(), kind=sleeper)
    spawned: list[int] = []
    real_popen, real_server = _server.subprocess.Popen, _server.Server

    def term():
        os.kill(os.getpid(), signal.SIGTERM)

    def popen(*args, **kwargs):
        if step == "before the spawn":
            term()
        process = real_popen(*args, **kwargs)
        spawned.append(process.pid)
        if step == "after the spawn":
            term()
        return process

    def server(*args, **kwargs):
        if step == "at the handle":
            term()
        return real_server(*args, **kwargs)

    import e2e.paths

    real_write = e2e.paths.atomic_write_json

    def write(path, obj):
        if step == "at the state file" and Path(path).name == "server.json":
            term()
        return real_write(path, obj)

    monkeypatch.setattr(_server.subprocess, "Popen", popen)
    monkeypatch.setattr(_server, "Server", server)
    monkeypatch.setattr(e2e.paths, "atomic_write_json", write)

    def as_ctrl_c(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, as_ctrl_c)  # what the CLI's guard installs
    try:
        with pytest.raises(KeyboardInterrupt):
            _server.start(launch, tmp_path / "server.log", startup_timeout_s=30, stop_grace_s=5)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert spawned, "the server was spawned"
    for pid in spawned:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # its process group is gone
