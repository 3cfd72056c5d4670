"""The server session holds every unit to the same rules: a GSM8K arm whose worker did not
apply the arm's settings is refused exactly as a load run is, both records carry the same
server, provenance and plugin blocks, and --no-plugin-check is recorded. (Scripted servers:
the real ones are in test_run_integration.py, test_plugin_server.py, test_gsm8k_sigterm.py.)"""

from __future__ import annotations

import json

import pytest

from e2e.plan import EvalSpec, RunSpec
from e2e.gsm8k.workload import GSM8KWorkloads
from e2e.session import SessionOptions, run_unit
from e2e.results.store import unit_state
from e2e.session import resolve_model
from scripted import Scripted

GSM8K = dict(limit=3, concurrency=2)


def never_called(job, log_path):  # lm-eval must not run on a server that was refused
    raise AssertionError("lm-eval ran against a server whose settings were not applied")


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve_model("e2e:tiny-llama")[0]


def options(scripted: Scripted, **kw) -> SessionOptions:
    return SessionOptions(progress=False, servers=scripted.servers,
                          workloads=GSM8KWorkloads(lmeval=never_called, check=lambda: "0.4.13"), **kw)


@pytest.mark.slow
def test_gsm8k_arm_without_applied_settings_is_refused_like_a_load_run(default_experiment,
                                                                        tmp_path, tiny):
    scripted = Scripted(applies=False, model=tiny)
    load = RunSpec.resolve(default_experiment, arm="pr", concurrency=1, dspark=False, prompts=2)
    gsm8k = EvalSpec(arm="pr", dspark=False, **GSM8K)
    _, run = run_unit(default_experiment, load, tmp_path, options(scripted))
    folder, arm = run_unit(default_experiment, gsm8k, tmp_path, options(scripted))

    for record in (run, arm):
        assert not record.valid
        assert record.invalid_reasons == [
            "arm settings not applied: e2e's vLLM plugin logged nothing: the server did "
            "not load it (e2e puts it first on the server's PYTHONPATH with a "
            "vllm.general_plugins entry point named 'e2e'): check that the server's "
            "interpreter honours PYTHONPATH (not -E/-I) and that VLLM_PLUGINS, if set, "
            "names e2e"]
        assert record.plugin.check == "failed"
    assert scripted.stopped == 2  # both servers stopped
    assert folder == tmp_path / "default" / "gsm8k" / "base-n3" / "pr"
    saved = json.loads((folder / "arm.json").read_text())
    assert saved["valid"] is False and saved["n"] == 0
    assert not (folder / "verdicts.jsonl").exists()
    for unit in (load, gsm8k):  # the executor will retry both
        state = unit_state(tmp_path, "default", unit)
        assert (state.done, state.attempts) == (False, 1)


@pytest.mark.slow
def test_gsm8k_and_load_records_carry_the_same_blocks(default_experiment, tmp_path, tiny):
    scripted = Scripted(applies=True, model=tiny)
    load = RunSpec.resolve(default_experiment, arm="pr", concurrency=1, dspark=False, prompts=2)
    gsm8k = EvalSpec(arm="pr", dspark=False, **GSM8K)

    def sample_lmeval(job, log_path):  # the server is accepted: lm-eval runs (and fails here)
        from e2e.errors import LoadError

        raise LoadError("lm-eval exited with status 1 (scripted)")

    opts = SessionOptions(progress=False, servers=scripted.servers,
                          workloads=GSM8KWorkloads(lmeval=sample_lmeval, check=lambda: "0.4.13"))
    _, run = run_unit(default_experiment, load, tmp_path, opts)  # no HTTP server: load fails
    _, arm = run_unit(default_experiment, gsm8k, tmp_path, opts)
    assert arm.invalid_reasons == ["lm-eval exited with status 1 (scripted)"]
    for record in (run, arm):
        assert record.plugin.check == "passed"
        assert (record.plugin.mode, record.plugin.where) == ("inject", "pid 4242, FakeModelRunner")
        assert record.plugin.settings == default_experiment.arm("pr").plugin
        assert record.server.env["E2E_PLUGIN_SETTINGS"]
        assert record.config["arms"]["pr"]["plugin"] == default_experiment.arm("pr").plugin
    assert set(run.provenance) == set(arm.provenance) == {"build", "e2e", "server_env", "host"}
    assert set(run.provenance["e2e"]) == {"version", "python", "git_sha", "dirty",
                                          "diff_sha256", "source_sha256", "plugin_sha256",
                                          "package"}
    assert run.server.model_dump().keys() == arm.server.model_dump().keys()
    assert arm.spec == gsm8k and run.spec == load


def test_no_plugin_check_is_explicit_and_recorded(default_experiment, tmp_path, tiny):
    scripted = Scripted(applies=False, model=tiny)
    gsm8k = EvalSpec(arm="pr", dspark=False, **GSM8K)

    def failing(job, log_path):
        from e2e.errors import LoadError

        raise LoadError("reached lm-eval")

    opts = SessionOptions(progress=False, servers=scripted.servers, plugin_check=False,
                          workloads=GSM8KWorkloads(lmeval=failing, check=lambda: "0.4.13"))
    _, arm = run_unit(default_experiment, gsm8k, tmp_path, opts)
    assert arm.invalid_reasons == ["reached lm-eval"]  # not refused: the check was skipped
    assert arm.plugin.check == "skipped" and "--no-plugin-check" in arm.plugin.detail


def test_a_second_ctrl_c_while_writing_loses_nothing(default_experiment, tmp_path, tiny,
                                                     monkeypatch):
    """First Ctrl-C mid-workload, a second one while the session writes the record: the
    unit's folder still gets its (invalid, interrupted) record, then Ctrl-C propagates."""
    import os
    import signal

    import e2e.session.session as session
    from e2e.session import shielded

    def interrupted(job, log_path):
        raise KeyboardInterrupt

    real = session.provenance

    def impatient(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, inside the shield
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "provenance", impatient)
    opts = SessionOptions(progress=False, servers=Scripted(model=tiny).servers,
                          workloads=GSM8KWorkloads(lmeval=interrupted, check=lambda: "0.4.13"))
    unit = EvalSpec(arm="main", dspark=False, **GSM8K)
    with pytest.raises(KeyboardInterrupt):
        run_unit(default_experiment, unit, tmp_path, opts)
    saved = json.loads((tmp_path / "default" / "gsm8k" / "base-n3" / "main" / "arm.json").read_text())
    assert saved["valid"] is False and "interrupted" in saved["invalid_reasons"][0]
    assert saved["provenance"]["e2e"]["source_sha256"]

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):  # a signal inside the shield comes out after it
        with shielded():
            os.kill(os.getpid(), signal.SIGTERM)
            after = "still running"
    assert after == "still running"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
