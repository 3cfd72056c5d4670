"""Values that passed validation and then raised a traceback (issue 34 item 9): a NUL byte or
an '=' in a server's args or environment names, an unresolvable server.host, a read-only or
impossible E2E_HOME, TOML nested 50,000 deep. Each is now bad input: exit 2, one line that
names the value, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from e2e.config import parse_experiment
from e2e.paths import read_toml
from e2e.errors import ConfigError
from e2e.session.server import free_port

DEFAULT = ROOT / "e2e" / "configs" / "default.toml"


@pytest.mark.parametrize("where, table", [
    ("server.env", {"server": {"env": {"A=B": "1"}}}),
    ("server.env", {"server": {"env": {"A": "x\x00y"}}}),
    ("server.env", {"server": {"env": {"": "1"}}}),
    ("server.args", {"server": {"args": ["--x", "a\x00b"]}}),
    ("arms.main.env", {"arms": {"main": {"env": {"X\x00": "1"}}}}),
    ("arms.main.args", {"arms": {"main": {"args": ["\x00"]}}}),
    ("server.build.env", {"server": {"build": {"env": {"P=Q": "1"}}}}),
])
def test_a_nul_or_equals_sign_is_a_config_error(where, table):
    raw = read_toml(DEFAULT)
    for key, value in table.items():
        for sub, inner in value.items():
            if isinstance(inner, dict) and isinstance(raw.get(key, {}).get(sub), dict):
                raw[key][sub] = {**raw[key][sub], **inner}
            else:
                raw.setdefault(key, {})[sub] = inner
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        parse_experiment(raw, source="x.toml")


def test_an_unresolvable_host_is_a_config_error():
    with pytest.raises(ConfigError, match="server.host 'no.such.host.invalid'"):
        free_port("no.such.host.invalid")


@pytest.mark.slow
@pytest.mark.parametrize("home", ["/proc/e2e-home", "/dev/null/e2e"])
def test_an_unusable_e2e_home_is_bad_input_without_a_traceback(tmp_path, home):
    proc = subprocess.run([sys.executable, "-m", "e2e.cli", "run", "--results", str(tmp_path),
                           "--prompts", "1"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "E2E_HOME": home, "PYTHONPATH": str(ROOT)},
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "E2E_HOME" in proc.stderr, proc.stderr[-2000:]
