"""`e2e nightly` against the real CPU server with the embedded config cut to a tiny load (2
prompts x 1031 in / 32 out, 2 windows, 2 duets of tonight's build beside the pinned reference,
concurrency 1, no speculator): the first night has no baseline and passes,
and rerunning the same date resumes (no run is made again, the history is not duplicated);
the secrets planted in the config are in no file it writes (runs, store, report, dashboard,
trends) and in no output."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from conftest import ROOT
from planted import Planted
from e2e.commands import nightly_command
from e2e.results import open_store

pytestmark = pytest.mark.server
PLANTED = Planted("NIGHTLY")


def tiny_config(tmp_path):
    text = PLANTED.toml((ROOT / "configs" / "nightly.toml").read_text())
    for old, new in [("report_from_run = 2", "report_from_run = 1"),
                     ("prompts_per_concurrency = 8", "prompts_per_concurrency = 2"),
                     ("output_len = 128", "output_len = 32"),
                     ("warmup_requests = 2", "warmup_requests = 1"),
                     ("windows = 4", "windows = 2"),
                     ("runs = 9", "runs = 2"),
                     ("max_runs = 33", "max_runs = 4"),
                     # the quiet check runs, but a busy shared host cannot fail the test: no
                     # process can use 64 cores' worth here (the refusal is test_faults')
                     ("require_quiet = 0.5", "require_quiet = 64.0"),
                     ("quiet_wait_s = 600", "quiet_wait_s = 0")]:
        assert old in text, old
        text = text.replace(old, new)
    assert "lock_wait_s = 900" in text
    path = tmp_path / "nightly.toml"
    path.write_text(text)
    return path


def test_first_night_passes_and_a_rerun_resumes(tmp_path, server_python):
    app = typer.Typer()
    app.command("nightly")(nightly_command)
    app.command("other")(lambda: None)
    config, results = tiny_config(tmp_path), tmp_path / "results"
    args = ["nightly", "--config", str(config), "--results", str(results), "--date",
            "2026-01-01", "-q"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 3, first.output  # undecided: nothing to judge against yet
    night = results / "nightly" / "2026-01-01" / "nightly"
    assert "UNDECIDED (exit 3)" in first.output and "Baseline**: none" in first.output
    runs = sorted(p.name for p in night.glob("*-c1-base-r*") if (p / "run.json").exists())
    # tonight's build beside the pinned reference, two duets (the night's history is being
    # built: no look asks for more)
    assert runs == ["main-c1-base-r1-d1", "main-c1-base-r2-d1", "reference-c1-base-r1-d1",
                    "reference-c1-base-r2-d1"]
    assert (results / "nightly" / "history.db").is_file()  # the default store: SQLite
    assert not (results / "nightly" / "history.parquet").exists()
    with open_store(None, results) as store:
        history = store.history()
    tpot = history[history["metric"] == "server_tpot_ms_mean"].set_index("arm")
    assert set(tpot.index) == {"main", "reference", "main-vs-reference"}
    assert tpot.loc["main-vs-reference", "n"] == 2
    assert tpot.loc["main-vs-reference", "verdict"] == "no baseline"  # judged: it builds
    assert tpot.loc["main", "verdict"] == "not judged"  # the absolute cells are recorded
    assert tpot.loc["main", "engine_version"] == "0.32.0"
    (check,) = json.loads((night / "judgement.json").read_text())["outputs"]
    assert check["finding"] is False and check["compared"] > 0 and check["diverged"] == 0
    assert "outputs identical to the reference" in (night / "summary.md").read_text()
    assert (night / "summary.md").exists() and (night / "report" / "report.md").exists()
    assert (night / "trends" / "server_tpot_ms_mean.png").read_bytes().startswith(b"\x89PNG")
    stamp = (night / "main-c1-base-r2-d1" / "run.json").stat().st_mtime_ns

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 3, again.output
    assert (night / "main-c1-base-r2-d1" / "run.json").stat().st_mtime_ns == stamp
    with open_store(None, results) as store:
        assert store.history().shape == history.shape
        assert [n.date for n in store.nights()] == ["2026-01-01"]
    assert (night / "summary-github.md").read_text().startswith("<!-- e2e-report -->")
    assert (night / "report" / "index.html").is_file()
    judgement = json.loads((night / "judgement.json").read_text())
    assert judgement["status"] == "undecided" and judgement["baseline"] is None
    assert judgement["exit_code"] == 3
    argv = json.loads((night / "main-c1-base-r1-d1" / "run.json").read_text())["server"]["argv"]
    assert argv.count("--api-key") == 2  # planted: e2e's and the config's
    # the walk finds the mark where it was planted, the config, and nowhere else
    assert PLANTED.leaks(tmp_path, output=first.output + again.output) == [str(config)]
