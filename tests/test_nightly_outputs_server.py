"""`e2e nightly` against the real CPU server (the embedded config cut small, as
tests/test_nightly_server.py cuts it, with 128-token answers): an unchanged night's outputs
are identical to the reference's and it passes; a night whose build perturbs the first
layer's MLP output by 1 % (`--arm-setting perturb=0.01`) answers some prompts otherwise, its
summary says so first and it exits 1 (outputs_fail's default)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from test_nightly_server import tiny_config

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_a_perturbed_build_s_night_is_an_outputs_finding(tmp_path, server_python):
    config, results = tiny_config(tmp_path), tmp_path / "results"
    text = config.read_text()
    for old, new in [("output_len = 32", "output_len = 128"),
                     ("prompts_per_concurrency = 2", "prompts_per_concurrency = 4"),
                     ("max_runs = 4", "max_runs = 2")]:
        assert old in text, old
        text = text.replace(old, new)
    config.write_text(text)

    def night(date, *extra):
        return CliRunner().invoke(app, ["nightly", "--config", str(config), "--results",
                                        str(results), "--date", date, "-q", *extra])

    same = night("2026-01-01")
    assert same.exit_code == 0, same.output
    folder = results / "nightly" / "2026-01-01" / "nightly"
    (check,) = json.loads((folder / "judgement.json").read_text())["outputs"]
    assert check["finding"] is False and check["compared"] == 8 and check["diverged"] == 0
    assert "outputs identical to the reference (8 of 8 prompts)" in (folder / "summary.md").read_text()

    bad = night("2026-01-02", "--arm-setting", "perturb=0.01")
    assert bad.exit_code == 1, bad.output
    folder = results / "nightly" / "2026-01-02" / "nightly"
    (check,) = json.loads((folder / "judgement.json").read_text())["outputs"]
    assert check["finding"] is True and check["diverged"] > 0
    assert check["verdict"] == "diverges (earlier nights identical)"
    summary = (folder / "summary.md").read_text().splitlines()
    assert summary[2].startswith("- **Outputs: finding** — main-vs-reference c=1 base: outputs "
                                 "differ from the reference on "), summary[:4]
    print("\n".join(summary[:3]))
