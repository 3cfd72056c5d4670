"""A duet slot is checked as the server's own table is: a NUL byte or an '=' in a slot's env
passed the config and then failed every duet at Popen; both slots' servers on one core were
accepted silently. Now the first is bad input (exit 2, naming the key), the second is refused
with why, and slots that may share a core (unpinned, or hyperthreads of one physical core)
are warned about when the duet starts."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from e2e.cli import app
from e2e.config import DuetConfig, DuetSlot, parse_experiment
from e2e.paths import read_toml
from e2e.errors import ConfigError
from e2e.session.duet import shared_cores

DEFAULT = ROOT / "e2e" / "configs" / "default.toml"
runner = CliRunner()


def _with_slots(slots: list[dict]) -> dict:
    raw = read_toml(DEFAULT)
    raw["duet"] = {"enabled": True, "slots": slots}
    return raw


@pytest.mark.parametrize("env, why", [({"A=B": "1"}, "A=B"), ({"A": "x\x00y"}, "NUL"),
                                      ({"": "1"}, "not an environment variable name")])
def test_a_slot_env_that_no_process_can_carry_is_a_config_error(env, why):
    raw = _with_slots([{"server_cpus": "0", "client_cpus": "1", "env": env},
                       {"server_cpus": "1", "client_cpus": "0"}])
    with pytest.raises(ConfigError, match=r"duet\.slots\.0\.env") as refused:
        parse_experiment(raw, source="x.toml")
    assert why in str(refused.value)


def test_a_bad_slot_env_fails_the_dry_run_not_every_duet(tmp_path):
    text = DEFAULT.read_text() + ('\n[duet]\nslots = [{ server_cpus = "0", client_cpus = "1", '
                                  'env = { "CUDA=0" = "1" } }, { server_cpus = "1" }]\n')
    (tmp_path / "c.toml").write_text(text)
    got = runner.invoke(app, ["sweep", "--dry-run", "--duet", "--no-dspark", "--runs", "1",
                              "--config", str(tmp_path / "c.toml"), "--results",
                              str(tmp_path / "r")])
    assert got.exit_code == 2 and "duet.slots.0.env" in got.output
    assert "Traceback" not in got.output


@pytest.mark.parametrize("a, b, shared", [("0", "0", "0"), ("0-1", "1", "1"),
                                          ("0,2", "2-3", "2")])
def test_two_slots_servers_on_one_core_are_refused_with_why(a, b, shared):
    with pytest.raises(ValueError) as refused:
        DuetConfig(slots=[DuetSlot(server_cpus=a), DuetSlot(server_cpus=b)])
    said = str(refused.value)
    assert f"both run their servers on core(s) {shared}" in said
    assert "each slowed by the other" in said and "cores of its own" in said


def test_a_slots_server_beside_its_partners_load_generator_is_the_design():
    DuetConfig(slots=[DuetSlot(server_cpus="0", client_cpus="1"),
                      DuetSlot(server_cpus="1", client_cpus="0")])  # no error


def test_slots_that_may_share_a_core_are_warned_about(monkeypatch):
    names = ["slot0", "slot1"]
    assert shared_cores([DuetSlot(server_cpus="0"), DuetSlot(server_cpus="1")], names) == []
    assert shared_cores([DuetSlot(env={"CUDA_VISIBLE_DEVICES": "0"}),
                         DuetSlot(env={"CUDA_VISIBLE_DEVICES": "1"})], names) == []  # GPUs
    unpinned = shared_cores([DuetSlot(), DuetSlot()], names)
    assert len(unpinned) == 1 and "do not pin their servers" in unpinned[0]
    # CPUs 0 and 1 as hyperthreads of one physical core (this host's are separate cores:
    # its sysfs topology is replaced, the one thing a test cannot make the host show)
    import e2e.host

    monkeypatch.setattr(e2e.host, "physical_core", lambda cpu: (0, 0))
    smt = shared_cores([DuetSlot(server_cpus="0"), DuetSlot(server_cpus="1")], names)
    assert len(smt) == 1 and re.search(r"slot0 \(0\) and slot1 \(1\) run their servers on "
                                       r"hyperthreads of one physical core", smt[0])
