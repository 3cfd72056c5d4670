"""Secrets a careless teammate puts where e2e prints: a store URL with the password in its
query, a libpq DSN, an unencoded ``@`` in a password, a ``${VAR}`` in the host; and the
environment's common secret names (``DB_PASS``, ``MYSQL_PWD``, ``GPG_PASSPHRASE``,
``CI_JOB_JWT``), a ``password=`` inside a connection string, and a ``secret_pattern`` of one's
own, which adds to the default instead of replacing it."""

from __future__ import annotations

import tomllib

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from e2e.errors import ConfigError, ResultsError
from e2e.results.nightly_store import masked_text, resolve_url
from e2e.results import open_store
from e2e.redact import DEFAULT_SECRET_PATTERN, REDACTED, Redactor, scrub

PW = "hunter2xyz"


@pytest.mark.parametrize("url", [
    f"postgresql+psycopg://e2e@db.example.org/e2e?password={PW}",
    f"postgresql://e2e@db/e2e?sslmode=require&PassWord={PW}",
    f"postgresql+psycopg://e2e:p@{PW}@db.example.org/e2e",       # an unencoded @
    f"postgresql+psycopg://e2e:{PW}@db/e2e",
    f"host=db.example.org user=e2e password={PW} dbname=e2e",    # a libpq DSN
    f"postgresql+psycopg://e2e@db/e2e?passfile=/x&password={PW}",
])
def test_a_store_url_with_a_password_is_refused_without_printing_it(tmp_path, url):
    with pytest.raises(ConfigError) as caught:
        resolve_url(url, tmp_path)
    assert PW not in str(caught.value) and PW[2:] not in str(caught.value), str(caught.value)
    assert PW not in masked_text(url)


def test_a_variable_in_the_host_is_not_expanded_into_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_T_HOST_SECRET", PW)
    with pytest.raises(ResultsError) as caught:
        open_store("postgresql+psycopg://e2e@${E2E_T_HOST_SECRET}:1/e2e", tmp_path)
    assert PW not in str(caught.value)


def test_the_password_variable_is_still_read_at_connect_time(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_T_PW", PW)
    with pytest.raises(ResultsError) as caught:
        open_store("postgresql+psycopg://e2e:${E2E_T_PW}@127.0.0.1:1/e2e", tmp_path)
    assert "127.0.0.1" in str(caught.value) and PW not in str(caught.value)


ENV = {"DB_PASS": "s1-" + PW, "MYSQL_PWD": "s2-" + PW, "GPG_PASSPHRASE": "s3-" + PW,
       "CI_JOB_JWT": "s4-" + PW, "SENTRY_DSN": "s5-" + PW, "DB_PRIVATE_KEY_FILE": "s6-" + PW}


def test_the_default_pattern_covers_the_common_names():
    redacted = Redactor().env({**ENV, "HOME": "/root", "VLLM_CPU_KVCACHE_SPACE": "4",
                               "DATABASE": f"host=db user=u password={PW} dbname=x"})
    assert all(redacted[name] == REDACTED for name in ENV), redacted
    assert redacted["HOME"] == "/root" and redacted["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert PW not in redacted["DATABASE"] and "host=db" in redacted["DATABASE"]


@pytest.mark.parametrize("text", [f"password={PW}", f"PWD={PW};Server=x", f"pass = {PW}",
                                  f"sslpassword='{PW} x'", f'Password="{PW}"',
                                  f"?user=u&password={PW}&x=1", f"passphrase: {PW}"])
def test_a_password_pair_in_any_text_is_masked(text):
    assert PW not in scrub(text)


def test_ordinary_text_is_left_alone():
    for text in ("bypass=1", "first pass: 3 ms", "compass", "status: pass"):
        assert scrub(text) == text


def test_a_custom_pattern_adds_to_the_default():
    redactor = Redactor(r"(?i)^MYCORP_")
    env = redactor.env({**ENV, "MYCORP_THING": "m-" + PW, "HF_TOKEN": "h-" + PW, "HOME": "/r"})
    assert all(env[n] == REDACTED for n in [*ENV, "MYCORP_THING", "HF_TOKEN"]), env
    assert env["HOME"] == "/r"
    assert Redactor(DEFAULT_SECRET_PATTERN).regexes == Redactor().regexes


def _config(tmp_path, pattern: str | None = None):
    text = (ROOT / "e2e" / "configs" / "default.toml").read_text()
    raw = tomllib.loads(text)
    env = ", ".join(f'{k} = "{v}"' for k, v in ENV.items())
    text = text.replace("env = { VLLM_CPU_KVCACHE_SPACE",
                        f'env = {{ {env}, CONN = "host=db password={PW}", VLLM_CPU_KVCACHE_SPACE')
    assert "DB_PASS" in text and raw
    if pattern:
        text = text.replace("[server]\n", f"[server]\nsecret_pattern = '{pattern}'\n", 1)
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("pattern", [None, r"(?i)^MYCORP_"])
@pytest.mark.parametrize("command", [["arms"], ["sweep", "--dry-run", "--runs", "1"]])
def test_arms_and_dry_run_print_no_secret(tmp_path, command, pattern):
    from e2e.cli import app

    path = _config(tmp_path, pattern)
    result = CliRunner().invoke(app, [*command, "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "DB_PASS" in result.output or command == ["arms"]
    assert PW not in result.output, result.output
