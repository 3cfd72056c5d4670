"""Spec modes as the config defines them: a config without ``[speculators]`` sweeps plainly,
``--spec NAME`` serves any ``[speculators.NAME]`` profile and ``--dspark`` is ``--spec dspark``
wherever it worked before."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from e2e.config import default_config_path, load_experiment, parse_experiment
from e2e.plan import pinned_of
from e2e.session.launch import speculative_config
from e2e.errors import ConfigError

runner = CliRunner()
EAGLE = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4,
         "prompt_lookup_min": 2}


def _raw() -> dict:
    return tomllib.loads(default_config_path().read_text())


def _write(tmp_path: Path, raw: dict, name: str) -> Path:
    """``raw`` as TOML (the few shapes the default config has)."""
    def value(v) -> str:
        return json.dumps(v) if not isinstance(v, dict) else (
            "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }")

    lines: list[str] = []

    def table(prefix: str, body: dict) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict) or k in ("env", "plugin")}
        lines.append(f"[{prefix}]")
        lines.extend(f"{k} = {value(v)}" for k, v in scalars.items())
        for k, v in body.items():
            if isinstance(v, dict) and k not in ("env", "plugin"):
                table(f"{prefix}.{k}", v)

    top = {k: v for k, v in raw.items() if not isinstance(v, dict)}
    lines.extend(f"{k} = {value(v)}" for k, v in top.items())
    for key, body in raw.items():
        if isinstance(body, dict) and key not in ("arms", "speculators", "unit"):
            table(key, body)
    for group in ("speculators", "arms"):
        for name, body in (raw.get(group) or {}).items():
            table(f"{group}.{name}", body)
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _config(tmp_path: Path, speculators: dict | None, name: str = "nospec") -> Path:
    raw = _raw()
    raw.pop("unit", None)
    raw["name"] = name
    raw.pop("speculators", None)
    if speculators is not None:
        raw["speculators"] = speculators
    return _write(tmp_path, raw, name)


def _units(output: str) -> list[str]:
    return re.findall(r"^\[\d+/\d+\] (\S+)", output, flags=re.M)


def test_a_config_without_speculators_plans_a_plain_sweep(tmp_path):
    config = _config(tmp_path, None)
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--results",
                                 str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    units = _units(result.output)
    assert units and all(u.endswith(("-base-r1", "-base-r2", "-base-r3", "-base-r4"))
                         for u in units), units
    assert "--speculative-config" not in result.output
    # asked for explicitly, the speculator is a clear error (exit 2), not a traceback
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--dspark"])
    assert result.exit_code == 2
    assert "no [speculators.dspark] profile" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--both"])
    assert result.exit_code == 2 and "no [speculators] profile" in result.output


def test_dspark_still_plans_both_modes_and_only_the_speculator(tmp_path):
    results = str(tmp_path / "results")
    both = runner.invoke(app, ["sweep", "--dry-run", "--results", results])
    assert both.exit_code == 0, both.output
    units = _units(both.output)
    assert any(u.endswith("-dspark-r1") for u in units) and any(u.endswith("-base-r1") for u in units)
    only = runner.invoke(app, ["sweep", "--dry-run", "--dspark", "--results", results,
                               "--order-seed", "1"])
    assert only.exit_code == 0 and all("-dspark-" in u for u in _units(only.output))
    same = runner.invoke(app, ["sweep", "--dry-run", "--spec", "dspark", "--results", results,
                               "--order-seed", "1"])
    assert _units(same.output) == _units(only.output)
    assert same.output.count('"method": "ngram"') == only.output.count('"method": "ngram"') > 0


def test_spec_name_serves_that_profile_and_records_it(tmp_path):
    config = _config(tmp_path, {"dspark": _raw()["speculators"]["dspark"], "eagle": EAGLE}, "two")
    argv = ["sweep", "-c", str(config), "--dry-run", "--results", str(tmp_path / "r"),
            "--concurrency", "1", "--arms", "main"]
    eagle = runner.invoke(app, argv + ["--spec", "eagle"])
    assert eagle.exit_code == 0, eagle.output
    assert '"num_speculative_tokens": 5' in eagle.output
    assert '"num_speculative_tokens": 3' not in eagle.output
    default = runner.invoke(app, argv)
    assert '"num_speculative_tokens": 3' in default.output  # dspark is the default profile
    # a misspelt profile: exit 2, the closest name and the profiles there are
    wrong = runner.invoke(app, argv + ["--spec", "eagel"])
    assert wrong.exit_code == 2
    assert "did you mean 'eagle'" in wrong.output and "dspark, eagle" in wrong.output
    clash = runner.invoke(app, argv + ["--spec", "eagle", "--dspark"])
    assert clash.exit_code == 2 and "--dspark is --spec dspark" in clash.output

    experiment = load_experiment(config)
    assert experiment.with_speculator("dspark") is experiment
    narrowed = experiment.with_speculator("eagle")
    snapshot = narrowed.model_dump(mode="json")
    assert snapshot["speculators"] == {"eagle": EAGLE}  # the record names what ran
    assert speculative_config(narrowed) == EAGLE


def test_a_lone_profile_of_another_name_is_the_default(tmp_path):
    config = _config(tmp_path, {"eagle": EAGLE}, "eagle")
    experiment = load_experiment(config)
    assert experiment.default_speculator == "eagle"
    assert speculative_config(experiment) == EAGLE
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--arms", "main",
                                 "--concurrency", "1", "--results", str(tmp_path / "r")])
    assert result.exit_code == 0 and any("-dspark-" in u for u in _units(result.output))
    # --dspark names the profile called dspark: this config has none
    with pytest.raises(ConfigError, match="profiles: eagle"):
        experiment.with_speculator("dspark")
    assert pinned_of({"speculators": {"eagle": {**EAGLE, "pinned": 3.0}}}) == 3.0
    pinned = experiment.pinned_to(3.0)
    assert pinned.pinned() == 3.0 and speculative_config(pinned)["synthetic_acceptance_length"] == 3.0


def test_run_takes_spec_too(tmp_path):
    config = _config(tmp_path, {"eagle": EAGLE}, "eagle")
    result = runner.invoke(app, ["run", "-c", str(config), "--spec", "nope"])
    assert result.exit_code == 2 and "unknown speculator profile 'nope'" in result.output


def test_a_misspelt_config_key_and_arm_say_what_was_meant(tmp_path):
    raw = _raw()
    raw.pop("unit", None)
    raw["load"]["concurrencys"] = [1]
    with pytest.raises(ConfigError, match=r"load.concurrencys: unknown key \(did you mean "
                                          r"'concurrencies'\?\)"):
        parse_experiment(raw)
    with pytest.raises(ConfigError, match=r"unknown arm 'mian' \(did you mean 'main'\?\)"):
        load_experiment().arm("mian")
