"""Secrets and terminals: the one redactor (``e2e.redact``) learns ``key=value`` pairs
(``api_key=…``, ``--api-key …``, ``Authorization: …``, ``"token": "…"``) and bounds what it
copies from another tool's file (a 900-deep field, a 50 MB string); ``--arm-setting
api_key=…`` is refused without echoing the value; terminal escape sequences in stored or
imported text are shown, never acted on, by everything e2e prints."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from e2e.console import visible
from e2e.redact import REDACTED, copied, scrub

KEY = "sk-PLANTED-4242"
ESC = "\x1b]0;owned\x07\x1b[31m"


@pytest.mark.parametrize("text", [
    f"api_key={KEY}", f"error: api_key={KEY}; retry", f"API-KEY: {KEY}", f"x-api-key: {KEY}",
    f"aiperf profile --api-key {KEY} --url x", f"aiperf profile --api-key '{KEY}' --url x",
    f"--api-key={KEY}", f"--hf-token {KEY}", f"Authorization: Bearer {KEY}",
    f"Authorization: {KEY}", f"http://user:{KEY}@host:8000/v1", f'{{"api_key": "{KEY}"}}',
    f"{{'token': '{KEY}'}}", f"token={KEY}", f"HF_TOKEN={KEY}", f"client_secret={KEY}",
    f"?access_token={KEY}&x=1"])
def test_a_secret_named_pair_in_any_text_is_masked(text):
    assert KEY not in scrub(text) and REDACTED in scrub(text), scrub(text)


@pytest.mark.parametrize("text", [
    "first token: 12 ms", "max_tokens=16", "--max-tokens 16 --tokenizer /m/tok",
    "--use-server-token-count", "prompt tokens: 256", "bypass=1", "status: pass",
    "the secret: be quick"])
def test_ordinary_text_about_tokens_is_left_alone(text):
    assert scrub(text) == text


def test_copied_data_hides_secret_keys_and_bounds_depth_and_size():
    deep: object = "leaf"
    for _ in range(900):
        deep = {"a": deep}
    data = {"strategy": {"type_": "poisson", "rate": 3.0, "api_key": KEY, "token": KEY,
                         "max_tokens": 16, "tokenizer": "/m"},
            "cli_command": f"aiperf profile --api-key {KEY}", "deep": deep,
            "big": "x" * 50_000_000, "many": list(range(5000))}
    out = copied(data)
    text = json.dumps(out)
    assert KEY not in text and len(text) < 100_000
    assert out["strategy"] == {"type_": "poisson", "rate": 3.0, "api_key": REDACTED,
                               "token": REDACTED, "max_tokens": 16, "tokenizer": "/m"}
    assert "50,000,000 characters, cut" in out["big"]
    assert "nested deeper than 16 levels" in text
    assert out["many"][-1] == "… 4,000 more items not copied"


def test_an_arm_setting_with_a_secret_is_refused_without_echoing_it(tmp_path):
    result = CliRunner().invoke(app, ["nightly", "--dry-run", "--results", str(tmp_path),
                                      "--arm-setting", f"api_key={KEY}"])
    assert result.exit_code == 2, result.output
    assert "api_key" in result.output and KEY not in result.output, result.output


def test_visible_shows_control_characters_instead_of_acting_on_them():
    assert visible(f"host{ESC}\u202eevil") == "host\\x1b]0;owned\\x07\\x1b[31m\\u202eevil"
    assert visible("plain\ttext\nline") == "plain\ttext\nline"


def test_history_shows_a_stored_host_names_escape_sequence(tmp_path):
    import sqlalchemy as sa

    from e2e.results.nightly_store import metadata as STORE_METADATA
    from e2e.results import open_store

    nights = STORE_METADATA.tables["nights"]

    with open_store(None, tmp_path) as store:
        with store.engine.begin() as conn:
            conn.execute(sa.insert(nights).values(
                date="2026-12-01", experiment="exp", config_hash="c" * 12, status="ok",
                host=f"runner{ESC}-1"))
    for fmt in ("table", "csv"):
        result = CliRunner().invoke(app, ["history", "--results", str(tmp_path), "--format",
                                          fmt])
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "runner\\x1b]0;owned" in result.output
