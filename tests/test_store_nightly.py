"""Whole ``e2e nightly`` runs against one PostgreSQL store (a real server, tests/pgcluster.py),
with a scripted vLLM (tests/fakevllm.py: a real server process behind e2e's real session):

- two nightlies of two "hosts" (their own E2E_HOME, results folder and experiment) started at
  the same moment both land in the store, every cell once; a rerun of a night changes nothing;
- a nightly SIGKILLed inside its write to the store leaves the store as it was, and the same
  command afterwards lands the night once;
- ``e2e history`` lists the nights and exports a cell as CSV and JSON; ``e2e dashboard``
  draws the store."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa

import fakevllm
import pgcluster
from conftest import ROOT

pytestmark = pytest.mark.slow  # the whole module is the slow tier

TABLES = ["nights", "night_cells", "verdicts", "builds"]


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()
                                if x is not None) + " }"
    raise TypeError(v)


def to_toml(data: dict, prefix: str = "") -> str:
    """A small TOML writer for an experiment's dump (tables, scalars, lists, inline dicts)."""
    lines, tables = [], []
    for k, v in data.items():
        if v is None:
            continue
        if isinstance(v, dict) and (not v or any(isinstance(x, dict) for x in v.values())
                                    or k in ("server", "load", "executor", "build", "arms",
                                             "speculators", "nightly", "thresholds")):
            tables.append((k, v))
        else:
            lines.append(f"{json.dumps(k)} = {toml_value(v)}")
    out = "\n".join(lines) + "\n"
    for k, v in tables:
        name = f"{prefix}{json.dumps(k)}"
        out += f"\n[{name}]\n" + to_toml(v, prefix=name + ".")
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from e2e.session.tinymodel import build_tiny_llama

    root = tmp_path_factory.mktemp("nightly-pg")
    cluster = pgcluster.start()
    model = build_tiny_llama(root / "model")
    fake = fakevllm.install(root / "fake")
    yield {"root": root, "cluster": cluster, "model": model, "fake": fake}
    cluster.stop()


def nightly_config(world, name: str) -> Path:
    exp = fakevllm.experiment(world["fake"], str(world["model"]), name=name)
    raw = exp.model_dump(mode="json", exclude_none=True)
    raw["repeats"], raw["report_from_run"] = 2, 1
    raw["nightly"] = {"arms": ["main"], "concurrencies": [1], "spec_modes": ["base"],
                      "runs": 2, "store": world["cluster"].url(),
                      "thresholds": {"base": {"tpot_ms_mean": 2.0}}}
    path = world["root"] / f"{name}.toml"
    path.write_text(to_toml(raw))
    return path


def env_for(world, host: str) -> dict[str, str]:
    home = world["root"] / f"home-{host}"
    home.mkdir(exist_ok=True)
    return {**os.environ, "E2E_HOME": str(home), "PYTHONPATH": str(ROOT),
            pgcluster.PASSWORD_VAR: world["cluster"].password}


def nightly(world, host: str, name: str, date: str = "2026-01-01", *, launcher=None):
    argv = [sys.executable, "-m", "e2e.cli"] if launcher is None else [sys.executable, "-c",
                                                                        launcher]
    argv += ["nightly", "--config", str(nightly_config(world, name)), "--results",
             str(world["root"] / f"results-{host}"), "--date", date, "-q"]
    return subprocess.Popen(argv, env=env_for(world, host), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=world["root"])


def counts(world) -> dict[str, int]:
    engine = sa.create_engine(world["cluster"].url().replace(
        f"${{{pgcluster.PASSWORD_VAR}}}", world["cluster"].password))
    try:
        with engine.connect() as conn:
            return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
                    for t in TABLES}
    finally:
        engine.dispose()


def e2e(world, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "e2e.cli", *args], env=env_for(world, "a"),
                          capture_output=True, text=True, timeout=300, cwd=world["root"])


def test_two_nightlies_at_once_land_once_each(world):
    procs = [nightly(world, "a", "nightly-a"), nightly(world, "b", "nightly-b")]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for host, out in zip("ab", outs):
        (world["root"] / f"nightly-{host}.log").write_text(out)
    # a first night has nothing to judge against: undecided, exit 3
    assert [p.returncode for p in procs] == [3, 3], [o[-3000:] for o in outs]
    for out in outs:
        assert "UNDECIDED (exit 3)" in out and "store: postgresql+psycopg://***@" in out
        assert world["cluster"].password not in out
    first = counts(world)
    nights = world["cluster"].psql("SELECT experiment || ' ' || date || ' ' || status FROM "
                                   "nights ORDER BY experiment").split()
    assert nights == ["nightly-a", "2026-01-01", "undecided", "nightly-b", "2026-01-01",
                      "undecided"]
    cells = int(world["cluster"].psql("SELECT count(*) FROM night_cells WHERE night_id = "
                                      "(SELECT min(id) FROM nights)"))
    assert cells > 1 and first["night_cells"] == first["verdicts"] == 2 * cells
    assert first["builds"] == 2
    dup = world["cluster"].psql("SELECT count(*) FROM (SELECT night_id, kind, arm, concurrency, "
                                "spec_mode, metric FROM night_cells GROUP BY 1,2,3,4,5,6 "
                                "HAVING count(*) > 1) d")
    assert dup.strip() == "0"

    again = nightly(world, "a", "nightly-a")          # the same night again: resumed
    out = again.communicate(timeout=600)[0]
    assert again.returncode == 3, out[-3000:]
    assert counts(world) == first

    listing = e2e(world, "history", "--store", world["cluster"].url())
    assert listing.returncode == 0, listing.stderr
    assert "nightly-a" in listing.stdout and "nightly-b" in listing.stdout
    exported = e2e(world, "history", "--store", world["cluster"].url(), "--experiment",
                   "nightly-a", "--metric", "tpot_ms_mean", "--format", "csv")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [(r["date"], r["arm"], r["verdict"]) for r in rows] == [
        ("2026-01-01", "main", "no baseline")]
    as_json = json.loads(e2e(world, "history", "--store", world["cluster"].url(),
                             "--experiment", "nightly-b", "--metric", "tpot_ms_mean",
                             "--format", "json").stdout)
    assert as_json[0]["n"] == 2 and len(as_json[0]["values"]) == 2
    bad = e2e(world, "history", "--store", world["cluster"].url(), "--metric", "nope")
    assert bad.returncode == 2 and "no night has the cell" in bad.stderr
    # the night's own report as a pull-request comment: real runs of the scripted server
    night = world["root"] / "results-a" / "nightly" / "2026-01-01" / "nightly-a"
    comment = e2e(world, "report", str(night), "--format", "github", "--link",
                  "https://ci.example/report/index.html")
    assert comment.returncode == 0, comment.stderr
    assert comment.stdout.startswith("<!-- e2e-report -->") and len(comment.stdout.encode()) < 65536
    assert "| 1 | mean TPOT (ms) |" in comment.stdout
    assert (night / "report" / "index.html").is_file()
    summary = (night / "summary-github.md").read_text()
    assert summary.startswith("<!-- e2e-report -->\n# ❔ Nightly nightly-a 2026-01-01 — UNDECIDED")
    site = e2e(world, "dashboard", "--store", world["cluster"].url(), "--out",
               str(world["root"] / "site"))
    assert site.returncode == 0, site.stderr
    assert "nightly-a" in (world["root"] / "site" / "index.html").read_text()


# e2e nightly with one fault forced: the store write stops after its first cells (inside its
# transaction) and waits to be killed, so the kill lands mid-write every time.
KILLED = textwrap.dedent("""
    import sys, time
    from e2e.results import nightly_store as s
    real = s.Store.write_night
    def write_night(self, rows, **kw):
        calls = []
        def after_cell(conn):
            calls.append(1)
            if len(calls) == 2:
                print("mid-write", flush=True)
                time.sleep(600)
        return real(self, rows, **kw, _after_cell=after_cell)
    s.Store.write_night = write_night
    sys.argv = ["e2e"] + sys.argv[1:]
    from e2e.cli import app
    app()
""")


def test_a_nightly_killed_mid_write_leaves_the_store_as_it_was(world):
    before = counts(world)
    proc = nightly(world, "a", "nightly-a", date="2026-01-02", launcher=KILLED)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == "mid-write":
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    assert counts(world) == before
    assert world["cluster"].psql("SELECT count(*) FROM nights WHERE date = '2026-01-02'"
                                 ).strip() == "0"
    rerun = nightly(world, "a", "nightly-a", date="2026-01-02")   # resumes and lands once
    out = rerun.communicate(timeout=600)[0]
    assert rerun.returncode == 3, out[-3000:]  # the ratio's history still being built
    assert "Baseline**: night 2026-01-01" in out
    after = counts(world)
    assert after["nights"] == before["nights"] + 1
    assert after["night_cells"] - before["night_cells"] == \
        before["night_cells"] // before["nights"]
