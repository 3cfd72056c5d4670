"""The reference experiment as a config: its dry-run matches the reference item by item."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from conftest import ROOT
from e2e.cli import app
from e2e.config import load_experiment
from e2e.plan import make_plan

CONFIG = ROOT / "configs" / "dsv41-flash.toml"


def test_reference_settings():
    e = load_experiment(CONFIG)
    assert e.server.model == "deepseek-ai/DeepSeek-V4.1-Flash"
    assert (e.load.input_len, e.load.output_len, e.load.prompts_per_concurrency) == (1031, 509, 32)
    assert e.load.concurrencies == [1, 4, 64]
    assert (e.repeats, e.report_from_run) == (4, 2)
    assert list(e.arms) == ["main", "flag-off", "pr", "mono"]
    assert [name for name, arm in e.arms.items() if not arm.opt_in] == ["main", "flag-off", "pr"]
    assert e.arms["mono"].plugin == {"packing": "meta", "draft_update": True}
    assert e.speculator("dspark") == {"method": "dspark"}
    assert e.server.build.git.repo.endswith("vllm-project/vllm.git")
    assert e.server.build.env == {"VLLM_USE_PRECOMPILED": "1"}
    assert e.arms["pr"].plugin == {"packing": "inplace", "draft_update": True}
    assert e.arms["flag-off"].plugin == {"packing": "inplace", "draft_update": False}


def test_dry_run_prints_every_run_command_and_environment(tmp_path):
    result = CliRunner().invoke(app, ["sweep", "--config", str(CONFIG), "--dry-run",
                                      "--results", str(tmp_path), "--order-seed", "7"])
    assert result.exit_code == 0, result.output
    header, *blocks = result.output.split("\n[")  # the header says what will happen
    assert header.startswith("plan: 72 unit(s) of 3 arm(s) (main, flag-off, pr)")
    assert "git https://github.com/vllm-project/vllm.git@v0.33.0 → " in header
    plan = make_plan(load_experiment(CONFIG), seed=7)
    assert len(plan) == 3 * 3 * 2 * 4 == len(blocks)
    for spec, block in zip(plan, blocks):
        assert spec.run_id in block
        lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
                 for line in block.splitlines()[1:]}
        argv = shlex.split(lines["command"])
        assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
        flags = dict(zip(argv[3::1], argv[4::1]))
        assert flags["--model"] == "deepseek-ai/DeepSeek-V4.1-Flash"
        assert flags["--tensor-parallel-size"] == "2"
        assert flags["--kv-cache-dtype"] == "fp8"
        assert flags["--host"] == "127.0.0.1"
        if spec.dspark:
            assert json.loads(flags["--speculative-config"]) == {"method": "dspark"}
        else:
            assert "--speculative-config" not in argv
        env = dict(item.split("=", 1) for item in shlex.split(lines["env"]))
        assert env["VLLM_ROCM_USE_AITER"] == "1"
        assert env["E2E_ARM"] == spec.arm
        settings = json.loads(env["E2E_PLUGIN_SETTINGS"])
        assert settings["packing"] == ("main" if spec.arm == "main" else "inplace")
        assert f"{spec.prompts} prompts x 1031 in / 509 out, concurrency {spec.concurrency}" in lines["load"]
        assert spec.prompts == 32 * spec.concurrency
    assert not (tmp_path / "dsv41-flash").exists()
