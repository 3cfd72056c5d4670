"""The nightly results store (e2e.results.open_store) on both of its databases: the embedded SQLite
file and a real PostgreSQL server started for this module (tests/pgcluster.py; no mock).

Each contract test runs on both: the history frame round-trips; a rerun of a night replaces
it (no duplicate row in any table); a writer SIGKILLed in the middle of a night leaves the
store exactly as it was; two processes writing at once both land; migrations are versioned
and a newer store is refused; history.parquet imports once; a password never enters a config,
a record or a message; GSM8K documents are kept for a later night whose files are gone."""

from __future__ import annotations

import dataclasses

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
import sqlalchemy as sa

import pgcluster
from conftest import ROOT
from old_history import append_night
from e2e.errors import ConfigError, ResultsError
from e2e.results._nightly_history import HISTORY_COLUMNS, history_path
from e2e.results.nightly_store import (SCHEMA_VERSION as STORE_SCHEMA_VERSION, masked_url,
                                        resolve_url)
from e2e.results import CellKey, HistoryCell, NightCell, night_rows, open_store
from e2e.results.gsm8k import SampleVerdict
from e2e.analysis.nightly.judge import Rules, judge_night
from e2e.results import ChangePoint

RULES = Rules(thresholds={"base": {"tpot_ms_median": 2.0}})
TPOT = CellKey("load", "main", 1, "base", "tpot_ms_median")
TTFT = CellKey("load", "main", 1, "base", "ttft_ms_mean")
GSM = CellKey("gsm8k", "main", 0, "base", "gsm8k_strict")
TABLES = ["nights", "night_cells", "verdicts", "change_points", "gsm8k_documents", "builds"]


@pytest.fixture(scope="module")
def postgres():
    cluster = pgcluster.start()
    os.environ[pgcluster.PASSWORD_VAR] = cluster.password
    yield cluster
    os.environ.pop(pgcluster.PASSWORD_VAR, None)
    cluster.stop()


_DB = iter(range(1000))


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    """A fresh, empty store URL of each kind (a new database per test on the server)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'history.db'}"
    cluster = request.getfixturevalue("postgres")
    name = f"t{next(_DB)}"
    cluster.psql(f"CREATE DATABASE {name}", database="postgres")
    return cluster.url(name)


def cell(key, values, date):
    return NightCell(key, tuple(values), tuple(range(2, 2 + len(values))),
                     tuple(f"nightly/{date}/nightly/main-c1-base-r{k}"
                           for k in range(2, 2 + len(values))))


def night(date, values=(10.0, 10.05, 9.95), *, experiment="nightly", status=None,
          cells=None):
    cells = cells or [cell(TPOT, values, date), cell(TTFT, (50.0, 51.0, 49.0), date)]
    j = judge_night(date, cells, None, RULES, expected=[TPOT])
    if status:
        j = type(j)(date=j.date, baseline=None, verdicts=j.verdicts, status=status)
    rows = night_rows(j, experiment=experiment, config_hash="H1", recorded_at=f"{date}T03:00Z",
                      cells=cells, builds={"main": {"engine_version": "0.32.0",
                                                    "engine_git_sha": "a" * 40,
                                                    "packages_sha256": "p" * 64}},
                      arm_overrides={"step_delay_us": 500}, e2e_git_sha="e" * 40, host="h1")
    return j, rows


def counts(store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in TABLES}


def test_a_night_round_trips_as_the_history_frame(url, tmp_path):
    j, rows = night("2026-01-01")
    with open_store(url, tmp_path) as store:
        assert store.version() == STORE_SCHEMA_VERSION
        store.write_night(rows, judgement=j)
        back = store.history()
    assert list(back.columns) == HISTORY_COLUMNS
    for column in ("date", "experiment", "config_hash", "night_status", "kind", "arm",
                   "concurrency", "spec_mode", "metric", "n", "verdict", "engine_version",
                   "engine_git_sha", "packages_sha256", "arm_overrides", "host"):
        assert list(back[column]) == list(rows[column]), column
    assert [list(v) for v in back["values"]] == [list(v) for v in rows["values"]]
    assert [list(v) for v in back["run_dirs"]] == [list(v) for v in rows["run_dirs"]]
    assert json.loads(back["arm_overrides"].iloc[0]) == {"step_delay_us": 500}


def test_the_night_cells_come_back_as_typed_records(url, tmp_path):
    j, rows = night("2026-01-01")
    other_j, other = night("2026-01-02", experiment="other")
    with open_store(url, tmp_path) as store:
        store.write_night(rows, judgement=j)
        store.write_night(other, judgement=other_j)
        cells = store.cells(experiment="nightly")
    assert cells and all(isinstance(c, HistoryCell) for c in cells)
    got = sorted((c.date, c.experiment, c.kind, c.arm, c.concurrency, c.metric, c.verdict,
                  tuple(c.values), c.engine_version) for c in cells)
    want = sorted((r.date, r.experiment, r.kind, r.arm, r.concurrency, r.metric, r.verdict,
                   tuple(r.values), r.engine_version) for r in rows.itertuples(index=False))
    assert got == want
    assert {json.loads(c.arm_overrides)["step_delay_us"] for c in cells} == {500}


def test_a_rerun_night_replaces_itself_and_duplicates_nothing(url, tmp_path):
    with open_store(url, tmp_path) as store:
        store.write_night(night("2026-01-01")[1], judgement=night("2026-01-01")[0])
        store.write_night(night("2026-01-02", status="incomplete")[1])
        before = counts(store)
        j, rows = night("2026-01-02", (10.1, 10.2, 10.0))     # the resumed night, finished
        store.write_night(rows, judgement=j)
        store.write_night(rows, judgement=j)                   # and written again
        assert counts(store) == before
        h = store.history()
        assert sorted(set(h["date"])) == ["2026-01-01", "2026-01-02"]
        assert h[(h["date"] == "2026-01-02") & (h["metric"] == "tpot_ms_median")][
            "median"].tolist() == [10.1]
        assert [n.status for n in store.nights()] == ["undecided", "undecided"]  # no baseline


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{tests!r}, {root!r}]
    from test_store import night
    from e2e.results import open_store
    store = open_store({url!r}, {results!r})
    j, rows = night("2026-01-02", (11.0, 11.1, 10.9))
    seen = []
    def after_cell(conn):
        seen.append(1)
        if len(seen) == 2:  # the night row and its first cells are written, uncommitted
            print("mid-write", flush=True)
            time.sleep(600)
    store.write_night(rows, judgement=j, _after_cell=after_cell)
""")


@pytest.mark.slow
def test_a_writer_killed_mid_night_leaves_the_store_as_it_was(url, tmp_path):
    with open_store(url, tmp_path) as store:
        j, rows = night("2026-01-01")
        store.write_night(rows, judgement=j)
        before, history = counts(store), store.history()
    script = _KILLED_WRITER.format(tests=str(ROOT / "tests"), root=str(ROOT), url=url,
                                   results=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    try:
        assert proc.stdout.readline().strip() == "mid-write"
        os.kill(proc.pid, signal.SIGKILL)   # no cleanup, no rollback from the writer
    finally:
        proc.wait(30)
    with open_store(url, tmp_path) as store:
        assert counts(store) == before
        pd.testing.assert_frame_equal(store.history(), history)
        assert [n.date for n in store.nights()] == ["2026-01-01"]


_WRITER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{tests!r}, {root!r}]
    from test_store import night
    from e2e.results import open_store
    j, rows = night({date!r}, experiment={experiment!r})
    go = {go!r}
    while time.time() < go:
        time.sleep(0.005)
    store = open_store({url!r}, {results!r})
    store.write_night(rows, judgement=j)
    print("written", flush=True)
""")


@pytest.mark.slow
@pytest.mark.parametrize("same_night", [False, True])
def test_two_writers_at_once_both_land_and_nothing_doubles(url, tmp_path, same_night):
    if same_night:
        with open_store(url, tmp_path):
            pass  # created and migrated; the writers below open it at the same moment
    # else both writers create and migrate the store at once (advisory lock / BEGIN IMMEDIATE)
    go = time.time() + 6.0  # both processes are started and waiting by then
    experiments = ["nightly", "nightly"] if same_night else ["nightly-a", "nightly-b"]
    procs = [subprocess.Popen(
        [sys.executable, "-c", _WRITER.format(tests=str(ROOT / "tests"), root=str(ROOT),
                                              url=url, results=str(tmp_path), date="2026-01-01",
                                              experiment=e, go=go)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for e in experiments]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    with open_store(url, tmp_path) as store:
        nights = store.nights()
        assert sorted(n.experiment for n in nights) == sorted(set(experiments))
        c = counts(store)
        per_night = 2  # cells (TPOT, TTFT)
        assert c["night_cells"] == c["verdicts"] == per_night * len(nights)
        assert c["builds"] == len(nights)


def test_migrations_are_versioned_and_a_newer_store_is_refused(url, tmp_path):
    with open_store(url, tmp_path) as store:
        assert store.migrate() == []        # nothing left to apply
        with store.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT version, description FROM schema_version")).all()
        assert [r[0] for r in rows] == [1, 2, 3] and "nights" in rows[0][1]
        with store.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO schema_version VALUES (99, 'x', 'from the future')"))
    with pytest.raises(ResultsError, match="schema version 99, this e2e knows up to 3"):
        open_store(url, tmp_path)


def test_a_version_1_store_gains_the_runs_interference_and_keeps_its_nights(url, tmp_path):
    # a store as version 1 left it (no night_cells.interference), one night in it
    with open_store(url, tmp_path) as store:
        store.write_night(night("2026-01-01")[1])
        with store.engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE night_cells DROP COLUMN interference"))
            conn.execute(sa.text("ALTER TABLE nights DROP COLUMN outputs"))
            conn.execute(sa.text("DELETE FROM schema_version WHERE version >= 2"))
        assert store.version() == 1
    busy = [cell(TPOT, (10.0, 10.1, 9.9), "2026-01-02"), cell(TTFT, (50.0, 51.0, 49.0), "2026-01-02")]
    busy[0] = dataclasses.replace(busy[0], interference=(0.6, None, 0.4))
    with open_store(url, tmp_path) as store:      # opening migrates it
        assert store.version() == STORE_SCHEMA_VERSION == 3
        store.write_night(night("2026-01-02", cells=busy)[1])
        h = store.history()
    tpot = h[h["metric"] == "tpot_ms_median"].set_index("date")["interference"]
    assert tpot["2026-01-01"] is None                       # the old night: none recorded
    assert list(tpot["2026-01-02"]) == [0.6, None, 0.4]     # the new one, as measured
    assert h[(h["metric"] == "ttft_ms_mean") & (h["date"] == "2026-01-02")][
        "interference"].iloc[0] is None


def test_an_old_stores_rows_read_back_as_a_night_and_the_live_records(url, tmp_path):
    """A store as version 1 left it reads back composed: each stored record is its night
    (date, experiment, config hash) and the live record (the cell's key, the verdict, the
    change point), the change point equal to the one judged."""
    j, rows = night("2026-01-01")
    change = ChangePoint(TPOT, start="2026-01-01", break_date="2026-01-01", before=10.0,
                         after=10.8, pct=8.0, p_value=0.01, worse=True, latest=True,
                         caught=False, regression=True, reason="a step")
    j = dataclasses.replace(j, changes=(change,))
    with open_store(url, tmp_path) as store:
        store.write_night(rows, judgement=j)
        with store.engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE night_cells DROP COLUMN interference"))
            conn.execute(sa.text("ALTER TABLE nights DROP COLUMN outputs"))
            conn.execute(sa.text("DELETE FROM schema_version WHERE version >= 2"))
    with open_store(url, tmp_path) as store:      # opening migrates it
        cells, verdicts, changes = (store.cells(), store.verdict_details(),
                                    store.change_points())
    night_of = ("2026-01-01", "nightly", "H1")
    assert {(c.night.date, c.night.experiment, c.night.config_hash) for c in cells} == {night_of}
    assert sorted(c.key for c in cells) == sorted([TPOT, TTFT])
    assert [(c.date, c.arm, c.metric) for c in cells if c.key == TPOT] == [
        ("2026-01-01", "main", "tpot_ms_median")]            # read by its parts too
    judged = {v.key: v.judged for v in verdicts}
    want = {v.key: v for v in j.verdicts}
    assert set(judged) == set(want)
    assert {k: (v.verdict, v.interval, v.threshold) for k, v in judged.items()} == {
        k: (v.verdict, v.interval, v.threshold) for k, v in want.items()}
    (stored,) = changes
    assert stored.change == change and stored.key == TPOT
    assert (stored.night.date, stored.night.experiment, stored.night.config_hash) == night_of


def test_the_parquet_history_imports_once(url, tmp_path):
    results = tmp_path / "results"
    for date in ("2026-01-01", "2026-01-02"):
        append_night(history_path(results), night(date)[1])
    with open_store(url, results) as store:
        assert [n.date for n in store.nights()] == ["2026-01-01", "2026-01-02"]
        first = counts(store)
        assert store.import_parquet(history_path(results)) == 0   # the same file again
    with open_store(url, results) as store:                         # and on the next open
        assert counts(store) == first
        # a night written to the store since is not overwritten by an older file's copy
        store.write_night(night("2026-01-02", (12.0, 12.1, 11.9))[1])
        append_night(history_path(results), night("2026-01-03")[1])
    with open_store(url, results) as store:
        h = store.history()
        assert sorted(set(h["date"])) == ["2026-01-01", "2026-01-02", "2026-01-03"]
        assert h[(h["date"] == "2026-01-02") & (h["metric"] == "tpot_ms_median")][
            "median"].tolist() == [12.0]


def test_gsm8k_documents_are_kept_and_read_back(url, tmp_path):
    dirs = ("nightly/2026-01-01/nightly/gsm8k/base-n4/main",)
    gsm = NightCell(GSM, (0.75,), (1,), dirs)
    j = judge_night("2026-01-01", [gsm], None, RULES)
    rows = night_rows(j, experiment="nightly", config_hash="H1", recorded_at="t", cells=[gsm],
                      builds={}, arm_overrides={}, e2e_git_sha=None, host="h")
    docs = tuple(SampleVerdict(doc_id=d, prompt_hash=f"h{d}", strict=d != 2) for d in range(4))
    with open_store(url, tmp_path) as store:
        store.write_night(rows, judgement=j, samples={dirs[0]: docs})
        assert store.gsm8k_documents(dirs) == {dirs[0]: docs}
        (agreement,) = store.gsm8k_agreement()
        assert (agreement.documents, agreement.right) == (4, 3)


def test_urls_passwords_and_masking(tmp_path, monkeypatch):
    assert resolve_url(None, tmp_path).database == str(tmp_path / "nightly" / "history.db")
    assert resolve_url("sqlite:////abs/h.db", tmp_path).database == "/abs/h.db"
    assert resolve_url("postgresql://u@db/x", tmp_path).drivername == "postgresql+psycopg"
    with pytest.raises(ConfigError, match="holds a password"):
        resolve_url("postgresql://u:hunter2@db/x", tmp_path)
    for bad in ("mysql://u@db/x", "sqlite://", "not a url"):
        with pytest.raises(ConfigError):
            resolve_url(bad, tmp_path)
    url = resolve_url("postgresql+psycopg://u:${E2E_SECRET}@127.0.0.1:1/x", tmp_path)
    assert "E2E_SECRET" not in masked_url(url) and "***" in masked_url(url)
    monkeypatch.delenv("E2E_SECRET", raising=False)
    with pytest.raises(ConfigError, match=r"names \$\{E2E_SECRET\}, which is not set"):
        open_store("postgresql+psycopg://u:${E2E_SECRET}@127.0.0.1:1/x", tmp_path)


def test_postgres_password_comes_from_the_environment_only(postgres, tmp_path, monkeypatch):
    url = postgres.url()
    assert postgres.password not in url
    j, rows = night("2026-01-01")
    with open_store(url, tmp_path) as store:
        store.write_night(rows, judgement=j)
        assert postgres.password not in store.masked
    dump = postgres.psql("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM nights) t")
    dump += postgres.psql("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM builds) t")
    assert "h1" in dump and postgres.password not in dump
    # a wrong password: a clear error that names the store with the password masked
    monkeypatch.setenv(pgcluster.PASSWORD_VAR, "wrong-" + postgres.password)
    with pytest.raises(ResultsError, match="cannot open the results store") as info:
        open_store(url, tmp_path)
    assert postgres.password not in str(info.value) and "***" in str(info.value)
    # PGPASSWORD, libpq's own variable, works with a URL that names no password at all
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    plain = f"postgresql+psycopg://postgres@127.0.0.1:{postgres.port}/e2e"
    with open_store(plain, tmp_path) as store:
        assert [n.date for n in store.nights()] == ["2026-01-01"]


@pytest.mark.slow
def test_history_command_on_the_default_sqlite_store(tmp_path):
    """`e2e history` with no server: the default store under --results."""
    from typer.testing import CliRunner

    from e2e.cli import app

    results = tmp_path / "results"
    results.mkdir()
    empty = CliRunner().invoke(app, ["history", "--results", str(results)])
    assert empty.exit_code == 0 and "no nights in the store" in empty.output
    assert list(results.iterdir()) == []  # a listing writes nothing, not even an empty store
    site = CliRunner().invoke(app, ["dashboard", "--results", str(results),
                                    "--out", str(tmp_path / "site")])
    assert site.exit_code == 0, site.output
    assert list(results.iterdir()) == []
    with open_store(None, results) as store:
        for date, values in (("2026-01-01", (10.0, 10.1, 9.9)), ("2026-01-02", (10.2, 10.3, 10.1))):
            j, rows = night(date, values)
            store.write_night(rows, judgement=j)
    listing = CliRunner().invoke(app, ["history", "--results", str(results)])
    assert listing.exit_code == 0, listing.output
    assert [line.split()[0] for line in listing.output.splitlines()[1:]] == ["2026-01-01",
                                                                             "2026-01-02"]
    as_json = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    listed = json.loads(as_json.output)  # each night one flat object, its night's columns first
    assert [list(n)[:5] for n in listed] == [["date", "experiment", "config_hash", "status",
                                             "cells"]] * 2
    assert [n["date"] for n in listed] == ["2026-01-01", "2026-01-02"]
    out = tmp_path / "tpot.csv"
    export = CliRunner().invoke(app, ["history", "--results", str(results), "--metric",
                                      "tpot_ms_median", "--format", "csv", "--out", str(out)])
    assert export.exit_code == 0, export.output
    import csv as csv_mod

    rows = list(csv_mod.DictReader(out.open()))
    assert [(r["date"], float(r["median"]), r["values"]) for r in rows] == [
        ("2026-01-01", 10.0, "10 10.1 9.9"), ("2026-01-02", 10.2, "10.2 10.3 10.1")]
    for args, message in ((["--format", "xml"], "'xml' is not one of"),
                          (["--metric", "tpot_ms_median", "--arm", "pr"], "no night has the cell"),
                          (["--store", "postgresql://u:pw@h/db"],
                           "holds a password; keep it out of configs")):   # whole, not masked
        bad = CliRunner().invoke(app, ["history", "--results", str(results), *args])
        assert bad.exit_code == 2 and message in bad.output, (args, bad.output)
        assert "pw@" not in bad.output


def test_a_dry_run_creates_no_store(tmp_path):
    from typer.testing import CliRunner

    from e2e.cli import app

    results = tmp_path / "results"
    dry = CliRunner().invoke(app, ["nightly", "--results", str(results), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "baseline: none" in dry.output and not results.exists()


@pytest.mark.slow
def test_a_nightly_with_a_store_it_cannot_reach_fails_before_running(tmp_path, monkeypatch):
    """Exit 2 at once, the password masked, no run made (not after hours of runs)."""
    import socket

    from typer.testing import CliRunner

    from e2e.cli import app

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("E2E_T_PW", "s3cret-value")
    results = tmp_path / "results"
    out = CliRunner().invoke(app, ["nightly", "--results", str(results), "--date", "2026-01-01",
                                   "--store", f"postgresql://e2e:${{E2E_T_PW}}@127.0.0.1:{port}/e2e",
                                   "-q"])
    assert out.exit_code == 2, out.output
    assert "cannot open the results store postgresql+psycopg://***@127.0.0.1" in out.output
    assert "s3cret-value" not in out.output
    assert not list(results.glob("nightly/2026-01-01/*/*/run.json"))
