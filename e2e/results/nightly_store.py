"""The nightly results store: every night in one database, behind SQLAlchemy Core.

    [nightly] store = "sqlite:///nightly/history.db"          the default (embedded, no server)
    [nightly] store = "postgresql+psycopg://e2e@db.example/e2e"   a team's (PostgreSQL)

A relative SQLite path is resolved against the results folder (the default is
``<results>/nightly/history.db``, beside the old ``history.parquet``). A password never goes
into a config or a record: libpq reads ``PGPASSWORD`` (or ``~/.pgpass``), or the URL names a
variable, ``postgresql+psycopg://e2e:${E2E_DB_PASSWORD}@host/db``, expanded when connecting;
URLs are only ever printed with the password masked (``masked_url``).

Tables (``SCHEMA_VERSION`` 3):

    schema_version   version, applied_at, description: the migrations applied, in order
    nights           one row per (date, experiment, config_hash): status, baseline, host,
                     e2e commit, --arm-setting overrides, the night's problems, report paths,
                     its outputs against the reference's (version 3: ``e2e.analysis.nightly.outputs.check_outputs``
                     checks as JSON; NULL where not compared)
    night_cells      one row per (night, kind, arm, concurrency, spec_mode, metric): the per-run
                     values, repeats and run folders (what history.parquet held per row), and
                     each run's recorded interference (version 2; NULL where none was recorded)
    verdicts         one row per night cell: verdict, change, interval, threshold, p, source
    change_points    the change points found over the history on that night
    gsm8k_documents  one row per (night, arm folder, document): strict match and prompt hash
    builds           one row per (night, arm): engine, version, commit, packages hash,
                     interpreter, git commit of a git-built arm (the provenance)
    imports          each history.parquet imported (by sha256), so an import runs once

Writes: ``write_night`` replaces one night in ONE transaction (upsert of the night row, then
its cells, verdicts, change points, documents and builds deleted and inserted again), so a
rerun of a night never duplicates it, a writer killed midway leaves the store as it was, and
two writers at once serialize on the night's row (PostgreSQL's row lock on the upsert; SQLite's
``BEGIN IMMEDIATE``). Unique constraints on every natural key make a duplicate impossible even
for a writer that does not use this module.

Migrations: ``MIGRATIONS`` is an ordered list of (version, description, function); opening a
store applies those above the recorded version in one transaction (under an advisory lock on
PostgreSQL), and a store newer than this e2e is refused. To change the schema, append a
function (``ALTER TABLE`` through ``conn.execute``) with the next number and bump
``SCHEMA_VERSION``; never edit an applied one.

Reading: ``cells()`` returns the night cells as typed records (``HistoryCell``), those of one
experiment and config before a night being the history that night is judged against (the
baseline night, a ratio's history and the change points are pure functions of them,
``e2e.analysis``); ``history()`` returns the same rows as the frame ``history.parquet`` held
(``HISTORY_COLUMNS``), for the trend plots and ``e2e history``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url

from e2e.config import parse_date
from e2e.errors import ConfigError, ResultsError
from e2e.paths import MAX_READ_BYTES, read_bounded
from e2e.redact import mask_pairs, remember, scrub
from e2e.results.gsm8k import SampleVerdict
from e2e.results._nightly import (GSM8KAgreement, HistoryCell, Judgement, NightRef,
                                  NightInfo, StoredChangePoint, StoredNight, StoredVerdict)
from e2e.results._nightly_history import (HISTORY_FILE, history_frame, read_history,
                                          stored_interference)
from e2e.results.store import utc_now

__all__ = ["SCHEMA_VERSION", "DEFAULT_STORE", "Store", "open_store", "resolve_url",
           "masked_url", "masked_text", "MIGRATIONS", "metadata", "nights"]

SCHEMA_VERSION = 3
DEFAULT_STORE = "sqlite:///nightly/history.db"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

metadata = sa.MetaData()
_CELL = ("kind", "arm", "concurrency", "spec_mode", "metric")

schema_version = sa.Table(
    "schema_version", metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.String(40), nullable=False),
    sa.Column("description", sa.Text, nullable=False))

nights = sa.Table(
    "nights", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("date", sa.String(10), nullable=False),
    sa.Column("experiment", sa.String(200), nullable=False),
    sa.Column("config_hash", sa.String(128), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("exit_code", sa.Integer),
    sa.Column("recorded_at", sa.String(40)),
    sa.Column("baseline_date", sa.String(10)),
    sa.Column("baseline_reason", sa.Text),
    sa.Column("host", sa.String(255)),
    sa.Column("e2e_git_sha", sa.String(64)),
    sa.Column("arm_overrides", sa.JSON),
    sa.Column("problems", sa.JSON),
    sa.Column("night_dir", sa.Text),        # relative to the results folder
    sa.Column("report_path", sa.Text),      # relative to the results folder
    sa.Column("summary_path", sa.Text),
    sa.Column("outputs", sa.JSON(none_as_null=True)),  # version 3
    sa.UniqueConstraint("date", "experiment", "config_hash", name="uq_nights_night"))


def _night_fk() -> sa.Column:
    return sa.Column("night_id", sa.Integer, sa.ForeignKey("nights.id", ondelete="CASCADE"),
                     nullable=False, index=True)


def _cell_columns() -> list[sa.Column]:
    return [sa.Column("kind", sa.String(20), nullable=False),
            sa.Column("arm", sa.String(200), nullable=False),
            sa.Column("concurrency", sa.Integer, nullable=False),
            sa.Column("spec_mode", sa.String(20), nullable=False),
            sa.Column("metric", sa.String(100), nullable=False)]


night_cells = sa.Table(
    "night_cells", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _night_fk(),
    *_cell_columns(),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("median", sa.Float), sa.Column("low", sa.Float), sa.Column("high", sa.Float),
    sa.Column("values", sa.JSON, nullable=False),
    sa.Column("repeats", sa.JSON, nullable=False),
    sa.Column("run_dirs", sa.JSON, nullable=False),
    sa.Column("interference", sa.JSON(none_as_null=True)),  # version 2
    sa.UniqueConstraint("night_id", *_CELL, name="uq_night_cells_cell"))

verdicts = sa.Table(
    "verdicts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _night_fk(),
    *_cell_columns(),
    sa.Column("verdict", sa.String(30), nullable=False),
    sa.Column("pct", sa.Float), sa.Column("pct_low", sa.Float), sa.Column("pct_high", sa.Float),
    sa.Column("threshold", sa.Float), sa.Column("floor_pp", sa.Float),
    sa.Column("p_value", sa.Float), sa.Column("source", sa.Text), sa.Column("reason", sa.Text),
    sa.UniqueConstraint("night_id", *_CELL, name="uq_verdicts_cell"))

change_points = sa.Table(
    "change_points", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _night_fk(),
    *_cell_columns(),
    sa.Column("start", sa.String(10), nullable=False),
    sa.Column("break_date", sa.String(10)),
    sa.Column("before", sa.Float), sa.Column("after", sa.Float), sa.Column("pct", sa.Float),
    sa.Column("p_value", sa.Float),
    sa.Column("worse", sa.Boolean), sa.Column("latest", sa.Boolean),
    sa.Column("caught", sa.Boolean), sa.Column("regression", sa.Boolean),
    sa.Column("reason", sa.Text),
    sa.UniqueConstraint("night_id", *_CELL, "start", name="uq_change_points"))

gsm8k_documents = sa.Table(
    "gsm8k_documents", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _night_fk(),
    sa.Column("arm", sa.String(200), nullable=False),
    sa.Column("run_dir", sa.Text, nullable=False),
    sa.Column("doc_id", sa.Integer, nullable=False),
    sa.Column("prompt_hash", sa.String(128), nullable=False),
    sa.Column("strict", sa.Boolean, nullable=False),
    sa.Column("flexible", sa.Boolean),
    sa.UniqueConstraint("night_id", "run_dir", "doc_id", name="uq_gsm8k_documents"))

builds = sa.Table(
    "builds", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _night_fk(),
    sa.Column("arm", sa.String(200), nullable=False),
    sa.Column("engine", sa.Text), sa.Column("engine_version", sa.Text),
    sa.Column("engine_git_sha", sa.String(64)), sa.Column("packages_sha256", sa.String(64)),
    sa.Column("build_python", sa.Text), sa.Column("build_git_commit", sa.String(64)),
    sa.UniqueConstraint("night_id", "arm", name="uq_builds_arm"))

imports = sa.Table(
    "imports", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("nights", sa.Integer, nullable=False),
    sa.Column("imported_at", sa.String(40), nullable=False))

_CHILDREN = (night_cells, verdicts, change_points, gsm8k_documents, builds)


def _v1_initial(conn: Connection) -> None:
    """Version 1: every table above."""
    for table in (nights, *_CHILDREN, imports):
        table.create(conn, checkfirst=True)


def _v2_interference(conn: Connection) -> None:
    """Version 2: ``night_cells.interference``, so a history can leave busy nights out (a
    store created by this version's ``_v1_initial`` has it already)."""
    if "interference" not in {c["name"] for c in sa.inspect(conn).get_columns("night_cells")}:
        kind = sa.JSON().compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE night_cells ADD COLUMN interference {kind}"))


def _v3_outputs(conn: Connection) -> None:
    """Version 3: ``nights.outputs``, each night's outputs against the reference's, so a later
    night's divergence is judged against the earlier nights' (``e2e.analysis.nightly.outputs.check_outputs``)."""
    if "outputs" not in {c["name"] for c in sa.inspect(conn).get_columns("nights")}:
        kind = sa.JSON().compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE nights ADD COLUMN outputs {kind}"))


MIGRATIONS: list[tuple[int, str, Any]] = [
    (1, "nights, night_cells, verdicts, change_points, gsm8k_documents, builds, imports",
     _v1_initial),
    (2, "night_cells.interference: each run's recorded interference", _v2_interference),
    (3, "nights.outputs: the night's outputs against the reference's", _v3_outputs),
]
assert [m[0] for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


# --- URLs ----------------------------------------------------------------------------------

def resolve_url(url: str | None, results: Path) -> URL:
    """The store's URL: ``url`` (default ``DEFAULT_STORE``) with a relative SQLite path made
    relative to ``results``. ``${VAR}`` is left in place (expanded when connecting)."""
    text = url or DEFAULT_STORE
    try:
        parsed = make_url(text)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError
        raise ConfigError(f"[nightly] store {masked_text(text)!r}: not a database URL "
                          "(e.g. sqlite:///nightly/history.db or "
                          "postgresql+psycopg://user@host/db)") from exc
    secret_keys = sorted(k for k in parsed.query if _SECRET_QUERY.search(k))
    if (parsed.password is not None and not _VAR.fullmatch(str(parsed.password))) \
            or secret_keys or _authority(text).count("@") > 1:
        # printed from the text, not the parse: an unencoded @ in a password splits it
        # where a parser would not, and the query is not masked by SQLAlchemy
        raise ConfigError(f"the store URL {masked_text(text)} holds a password"
                          + (f" (in its query: {', '.join(secret_keys)})" if secret_keys else "")
                          # "password: x" would read as a pair to the redactor, masking x
                          + "; keep it out of configs and command lines: set PGPASSWORD, "
                          "or write ${VARIABLE} in the password's place and set that variable")
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError(f"[nightly] store {masked_text(text)}: use sqlite:/// or "
                          "postgresql+psycopg:// (other databases are not tested)")
    if backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise ConfigError("[nightly] store: an in-memory SQLite database keeps nothing; "
                              "give a file, e.g. sqlite:///nightly/history.db")
        path = Path(parsed.database)
        if not path.is_absolute():
            path = Path(results) / path
        parsed = parsed.set(database=str(path))
    return parsed


_SECRET_QUERY = re.compile(r"(?i)pass|pwd|secret|token|key")


def _authority(text: str) -> str:
    """What lies between ``scheme://`` and the path (where user:password@host is)."""
    rest = text.split("://", 1)[1] if "://" in text else ""
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


def masked_text(text: str) -> str:
    """A store URL (or any text meant as one, a DSN too) as it may be printed: everything
    between ``scheme://user:`` and the last ``@`` before the host shown as ***, every
    ``password=`` pair masked."""
    def userinfo(m: re.Match) -> str:
        user, colon, _ = m.group(2).partition(":")
        return f"{m.group(1)}{user}{':***' if colon else ''}@"

    text = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)@(?=[^@]*$)", userinfo, str(text),
                  flags=re.S) if "@" in str(text) else str(text)
    return mask_pairs(text)


def masked_url(url: URL | str) -> str:
    """The URL as it may be printed: the password (or its ``${VAR}``) shown as ***."""
    if isinstance(url, str):
        return masked_text(url)
    return url.render_as_string(hide_password=True)


def _expanded(url: URL) -> URL:
    """``url`` with each ``${VAR}`` of its password (or other parts) taken from the
    environment; a ConfigError naming the variable when it is not set."""
    def sub(value: str | None) -> str | None:
        if value is None:
            return None

        def one(m: re.Match) -> str:
            if m.group(1) not in os.environ:
                raise ConfigError(f"the store URL {masked_url(url)} names ${{{m.group(1)}}}, "
                                  "which is not set in the environment")
            return os.environ[m.group(1)]
        return _VAR.sub(one, value)

    # only the password: a ${VAR} elsewhere (the host) would be printed in a connection
    # error, and the value with it
    password = sub(url.password)
    remember(password)
    return url.set(password=password)


# --- the store -----------------------------------------------------------------------------

def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)


class Store:
    """One results store. ``open_store`` makes one (migrated, the parquet history imported)."""

    def __init__(self, engine: Engine, url: URL) -> None:
        self.engine = engine
        self.url = url

    @property
    def masked(self) -> str:
        return masked_url(self.url)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    scratch: Any = None
    """A read-only view's scratch folder (a ``TemporaryDirectory``), removed at ``close``."""

    def close(self) -> None:
        self.engine.dispose()
        if self.scratch is not None:
            self.scratch.cleanup()
            self.scratch = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- schema ----------------------------------------------------------------------------
    def version(self) -> int:
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("schema_version"):
                return 0
            return int(conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar()
                       or 0)

    def migrate(self) -> list[int]:
        """Apply the migrations above the recorded version, in one transaction; returns the
        versions applied."""
        applied: list[int] = []
        with self.engine.begin() as conn:
            if not self.is_sqlite:  # two processes opening a new store at once
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(2603202601)"))
            schema_version.create(conn, checkfirst=True)
            current = int(conn.execute(sa.select(sa.func.max(schema_version.c.version)))
                          .scalar() or 0)
            if current > SCHEMA_VERSION:
                raise ResultsError(
                    f"the store {self.masked} has schema version {current}, this e2e knows "
                    f"up to {SCHEMA_VERSION}: upgrade e2e to use it")
            for version, description, step in MIGRATIONS:
                if version > current:
                    step(conn)
                    conn.execute(schema_version.insert().values(
                        version=version, applied_at=utc_now(), description=description))
                    applied.append(version)
        return applied

    # --- writing ---------------------------------------------------------------------------
    def _upsert_night(self, conn: Connection, values: dict[str, Any]) -> int:
        if self.is_sqlite:
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert
        key = ("date", "experiment", "config_hash")
        stmt = insert(nights).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=list(key),
            set_={k: stmt.excluded[k] for k in values if k not in key})
        return int(conn.execute(stmt.returning(nights.c.id)).scalar_one())

    def write_night(self, rows: pd.DataFrame, *, judgement: Judgement | None = None,
                    samples: Mapping[str, Sequence[Any]] | None = None,
                    paths: Mapping[str, str | None] | None = None,
                    problems: Sequence[str] = (), _after_cell=None) -> None:
        """Replace the night(s) of ``rows`` (``night_rows``' frame) in one
        transaction: the night, its cells and verdicts, the change points and GSM8K
        documents of ``judgement``/``samples`` (arm folder -> SampleVerdicts) and the builds.
        ``_after_cell`` (tests only) is called after each cell is written, inside the
        transaction, to kill a writer midway."""
        if rows.empty:
            return
        groups = rows.groupby(["date", "experiment", "config_hash"], sort=True)
        with self.engine.begin() as conn:
            for (date, experiment, config_hash), frame in groups:
                first = frame.iloc[0]
                overrides = first["arm_overrides"]
                if isinstance(overrides, str):
                    overrides = json.loads(overrides or "{}")
                p = dict(paths or {})
                night_id = self._upsert_night(conn, {
                    "date": str(date), "experiment": str(experiment),
                    "config_hash": str(config_hash), "status": str(first["night_status"]),
                    "exit_code": judgement.exit_code if judgement else None,
                    "recorded_at": _str(first["recorded_at"]),
                    "baseline_date": _str(first["baseline_date"]),
                    "baseline_reason": (judgement.baseline.reason
                                        if judgement and judgement.baseline else
                                        _str(first.get("baseline_reason"))),
                    "host": _str(first["host"]), "e2e_git_sha": _str(first["e2e_git_sha"]),
                    "arm_overrides": overrides or {},
                    "problems": list(problems or (judgement.problems if judgement else ())),
                    "night_dir": p.get("night_dir"), "report_path": p.get("report_path"),
                    "summary_path": p.get("summary_path"),
                    "outputs": ([c.to_json() for c in judgement.outputs]
                                if judgement is not None and judgement.date == date
                                and judgement.outputs else None)})
                for table in _CHILDREN:
                    conn.execute(table.delete().where(table.c.night_id == night_id))
                extra = {(v.key.kind, v.key.arm, int(v.key.concurrency), v.key.spec_mode,
                          v.key.metric): v for v in judgement.verdicts} if judgement else {}
                seen_arms: set[str] = set()
                for r in frame.itertuples(index=False):
                    cell = {"night_id": night_id, "kind": r.kind, "arm": r.arm,
                            "concurrency": int(r.concurrency), "spec_mode": r.spec_mode,
                            "metric": r.metric}
                    conn.execute(night_cells.insert().values(
                        **cell, n=int(r.n), median=_num(r.median), low=_num(r.low),
                        high=_num(r.high), values=[float(x) for x in r.values],
                        repeats=[int(x) for x in r.repeats],
                        run_dirs=[str(x) for x in r.run_dirs],
                        interference=stored_interference(r.interference)))
                    v = extra.get((r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric))
                    conn.execute(verdicts.insert().values(
                        **cell, verdict=str(r.verdict), pct=_num(r.pct),
                        pct_low=_num(r.pct_low), pct_high=_num(r.pct_high),
                        threshold=_num(r.threshold), floor_pp=_num(r.floor_pp),
                        p_value=_num(v.p_value) if v else None,
                        source=(v.source or None) if v else None,
                        reason=(v.reason or None) if v else None))
                    if r.arm not in seen_arms:
                        seen_arms.add(r.arm)
                        conn.execute(builds.insert().values(
                            night_id=night_id, arm=r.arm, engine=_str(r.engine),
                            engine_version=_str(r.engine_version),
                            engine_git_sha=_str(r.engine_git_sha),
                            packages_sha256=_str(r.packages_sha256),
                            build_python=_str(r.build_python),
                            build_git_commit=_str(r.build_git_commit)))
                    if _after_cell is not None:
                        _after_cell(conn)
                if judgement is not None and judgement.date == date:
                    for c in judgement.changes:
                        conn.execute(change_points.insert().values(
                            night_id=night_id, kind=c.key.kind, arm=c.key.arm,
                            concurrency=int(c.key.concurrency), spec_mode=c.key.spec_mode,
                            metric=c.key.metric, start=c.start, break_date=c.break_date,
                            before=_num(c.before), after=_num(c.after), pct=_num(c.pct),
                            p_value=_num(c.p_value), worse=bool(c.worse),
                            latest=bool(c.latest), caught=bool(c.caught),
                            regression=bool(c.regression), reason=c.reason or None))
                gsm8k_dirs = {d: r.arm for r in frame.itertuples(index=False)
                              if r.kind == "gsm8k" for d in r.run_dirs}
                docs = [{"night_id": night_id, "arm": gsm8k_dirs[d], "run_dir": d,
                         "doc_id": int(s.doc_id), "prompt_hash": s.prompt_hash,
                         "strict": bool(s.strict), "flexible": s.flexible}
                        for d, found in (samples or {}).items() if d in gsm8k_dirs
                        for s in found]
                if docs:
                    conn.execute(gsm8k_documents.insert(), docs)

    def import_parquet(self, path: Path) -> int:
        """Import a ``history.parquet`` once (recorded by its sha256): nights not in the
        store yet are added, nights already there are left as they are. Returns the nights
        added (0 when this file was imported before)."""
        path = Path(path)
        try:
            data = read_bounded(path, MAX_READ_BYTES, expect="a history.parquet e2e wrote")
        except ConfigError as exc:
            raise ResultsError(str(exc)) from None
        digest = hashlib.sha256(data).hexdigest()
        with self.engine.connect() as conn:
            if conn.execute(sa.select(imports.c.sha256).where(imports.c.sha256 == digest)
                            ).first():
                return 0
        frame = read_history(path)
        _check_dates(frame, path)
        have = {(n.date, n.experiment, n.config_hash) for n in self.nights()}
        if len(frame):
            mask = ~frame[["date", "experiment", "config_hash"]].astype(str).apply(
                tuple, axis=1).isin(have)
            new = frame[mask]
        else:
            new = frame
        added = new[["date", "experiment", "config_hash"]].drop_duplicates().shape[0]
        try:
            self.write_night(new)
        except (ValueError, TypeError, KeyError) as exc:  # a column of the wrong kind
            raise ResultsError(f"{path}: not an e2e nightly history ({exc.__class__.__name__}: "
                               f"{str(exc)[:200]}); nothing imported") from None
        with self.engine.begin() as conn:
            if self.is_sqlite:
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert
            conn.execute(insert(imports).values(
                sha256=digest, source=str(path), nights=int(added),
                imported_at=utc_now()).on_conflict_do_nothing())
        return int(added)

    # --- reading ---------------------------------------------------------------------------
    def history(self, *, experiment: str | None = None) -> pd.DataFrame:
        """Every night cell as ``history.parquet``'s frame (``HISTORY_COLUMNS``)."""
        return history_frame(self.cells(experiment=experiment))

    def cells(self, *, experiment: str | None = None, config_hash: str | None = None,
              before: str | None = None) -> list[HistoryCell]:
        """The night cells of ``experiment`` and ``config_hash`` on nights before ``before``
        (each left out: every experiment, every config, every night), by night then cell:
        the history a night is judged against is ``cells(experiment=, config_hash=,
        before=tonight)``."""
        n, c, v = nights.c, night_cells.c, verdicts.c
        b = builds.c
        query = (sa.select(
            n.date, n.experiment, n.config_hash, n.status.label("night_status"),
            n.recorded_at, c.kind, c.arm, c.concurrency, c.spec_mode, c.metric, c.n, c.median,
            c.low, c.high, c["values"], c.repeats, c.run_dirs, v.verdict, v.pct, v.pct_low,
            v.pct_high, v.threshold, v.floor_pp, n.baseline_date, b.engine, b.engine_version,
            b.engine_git_sha, b.packages_sha256, b.build_python, n.arm_overrides, n.e2e_git_sha,
            n.host, b.build_git_commit, c.interference, n.baseline_reason)
            .select_from(night_cells.join(nights, c.night_id == n.id)
                         .outerjoin(verdicts, sa.and_(v.night_id == c.night_id,
                                                      *[v[k] == c[k] for k in _CELL]))
                         .outerjoin(builds, sa.and_(b.night_id == c.night_id, b.arm == c.arm)))
            .order_by(n.date, n.experiment, c.kind, c.arm, c.spec_mode, c.concurrency,
                      c.metric))
        if experiment is not None:
            query = query.where(n.experiment == experiment)
        if config_hash is not None:
            query = query.where(n.config_hash == config_hash)
        if before is not None:
            query = query.where(n.date < before)
        with self.engine.connect() as conn:
            return [_history_cell(r._mapping) for r in conn.execute(query)]

    def nights(self, *, experiment: str | None = None) -> list[NightInfo]:
        n, v = nights.c, verdicts.c
        cells = (sa.select(sa.func.count()).select_from(night_cells)
                 .where(night_cells.c.night_id == n.id).scalar_subquery())
        bad = (sa.select(sa.func.count()).select_from(verdicts)
               .where(v.night_id == n.id, v.verdict == "regressed").scalar_subquery())
        query = sa.select(n.date, n.experiment, n.config_hash, n.status, cells.label("cells"),
                          bad.label("regressed"), n.host, n.recorded_at, n.baseline_date
                          ).order_by(n.date, n.experiment)
        if experiment is not None:
            query = query.where(n.experiment == experiment)
        with self.engine.connect() as conn:
            return [NightInfo.from_row(r._mapping) for r in conn.execute(query)]

    def outputs_history(self, *, experiment: str, config_hash: str, before: str
                        ) -> dict[tuple[str, int, str], list[tuple[str, int, int]]]:
        """The earlier nights' outputs checks of one config (dates before ``before``), per
        (arm, concurrency, spec mode): (date, compared, diverged), oldest first
        (``e2e.results.OutputsHistory``)."""
        n = nights.c
        query = (sa.select(n.date, n.outputs)
                 .where(n.experiment == experiment, n.config_hash == config_hash,
                        n.date < before, n.outputs.is_not(None)).order_by(n.date))
        out: dict[tuple[str, int, str], list[tuple[str, int, int]]] = {}
        with self.engine.connect() as conn:
            for date, checks in conn.execute(query):
                for c in checks if isinstance(checks, list) else ():
                    try:
                        key = (str(c["arm"]), int(c["concurrency"]), str(c["spec_mode"]))
                        out.setdefault(key, []).append(
                            (str(date), int(c["compared"]), int(c["diverged"])))
                    except (KeyError, TypeError, ValueError):
                        continue  # a row another tool wrote: not a yardstick
        return out

    def night_details(self) -> list[StoredNight]:
        """Every night's row (links, problems, exit code) for the dashboard."""
        with self.engine.connect() as conn:
            return [StoredNight.from_row(r._mapping) for r in conn.execute(
                sa.select(nights).order_by(nights.c.date, nights.c.experiment))]

    def change_points(self) -> list[StoredChangePoint]:
        """Every change point with its night's date, experiment and config hash."""
        n = nights.c
        with self.engine.connect() as conn:
            return [StoredChangePoint.from_row(r._mapping) for r in conn.execute(
                sa.select(change_points, n.date, n.experiment, n.config_hash)
                .join(nights, change_points.c.night_id == n.id)
                .order_by(n.date))]

    def verdict_details(self) -> list[StoredVerdict]:
        """Every night cell's verdict with its night's date, experiment and config hash."""
        n = nights.c
        with self.engine.connect() as conn:
            return [StoredVerdict.from_row(r._mapping) for r in conn.execute(
                sa.select(verdicts, n.date, n.experiment, n.config_hash)
                .join(nights, verdicts.c.night_id == n.id))]

    def gsm8k_documents(self, run_dirs: Iterable[str] | None = None) -> dict[str, tuple]:
        """Arm folder -> its SampleVerdicts, as recorded (the baseline night's verdicts when
        its folders are gone, e.g. on a CI runner wiped since)."""
        g = gsm8k_documents.c
        query = sa.select(g.run_dir, g.doc_id, g.prompt_hash, g.strict, g.flexible).order_by(
            g.run_dir, g.doc_id)
        if run_dirs is not None:
            wanted = list(dict.fromkeys(run_dirs))
            if not wanted:
                return {}
            query = query.where(g.run_dir.in_(wanted))
        out: dict[str, list] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                out.setdefault(r.run_dir, []).append(SampleVerdict(
                    doc_id=r.doc_id, prompt_hash=r.prompt_hash, strict=bool(r.strict),
                    flexible=r.flexible))
        return {k: tuple(v) for k, v in out.items()}

    def gsm8k_agreement(self) -> list[GSM8KAgreement]:
        """Per night and GSM8K arm folder: documents, strict-right, and how many changed
        against the same arm's first folder of the night before (for the dashboard)."""
        n, g = nights.c, gsm8k_documents.c
        query = (sa.select(n.date, n.experiment, n.config_hash, g.arm, g.run_dir, g.doc_id,
                           g.strict).join(nights, g.night_id == n.id)
                 .order_by(n.date, g.run_dir, g.doc_id))
        with self.engine.connect() as conn:
            rows = list(conn.execute(query))
        per: dict[tuple, dict[int, bool]] = {}
        for r in rows:
            per.setdefault((r.experiment, r.config_hash, r.arm, r.date, r.run_dir), {})[
                r.doc_id] = bool(r.strict)
        out: list[GSM8KAgreement] = []
        previous: dict[tuple, dict[int, bool]] = {}
        first_of_night: dict[tuple, str] = {}
        for (exp, h, arm, date, run_dir), docs in sorted(per.items()):
            key = (exp, h, arm)
            before = previous.get(key) if first_of_night.get(key + (date,)) is None else None
            first = first_of_night.setdefault(key + (date,), run_dir) == run_dir
            changed: dict[str, int] = {}
            if first:
                if before is not None:
                    shared = set(docs) & set(before)
                    changed = {"lost": sum(1 for d in shared if before[d] and not docs[d]),
                               "gained": sum(1 for d in shared if docs[d] and not before[d]),
                               "shared": len(shared)}
                previous[key] = docs
            out.append(GSM8KAgreement(night=NightRef(date, exp, h), arm=arm,
                                      run_dir=run_dir, documents=len(docs),
                                      right=sum(docs.values()), first=first, **changed))
        return out


def _history_cell(row: Mapping[str, Any]) -> HistoryCell:
    values = dict(row)
    values["arm_overrides"] = json.dumps(values["arm_overrides"] or {}, sort_keys=True)
    if values["verdict"] is None:  # a cell recorded without a verdict
        values["verdict"] = "not judged"
    for col in ("pct", "pct_low", "pct_high", "threshold", "floor_pp", "median", "low", "high"):
        values[col] = _nan(values[col])
    return HistoryCell.from_row(values)


def _check_dates(frame: pd.DataFrame, path: Path) -> None:
    """A history from elsewhere is data of unknown origin: every night's ``date`` (and
    ``baseline_date`` where set) must be a calendar date, YYYY-MM-DD, or nothing is imported
    (the dashboard and the judgement key on it)."""
    for column, optional in (("date", False), ("baseline_date", True)):
        for value in frame[column].tolist():
            if optional and (value is None or (isinstance(value, float) and math.isnan(value))):
                continue
            try:
                parse_date(value)
            except ValueError as exc:
                raise ResultsError(f"{path}: {column} {exc}; "
                                   "nothing imported: move the file aside or fix it")


def _str(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _engine(url: URL) -> Engine:
    real = _expanded(url)
    if url.get_backend_name() == "sqlite":
        Path(real.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(real, connect_args={"timeout": 120})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_conn, record):  # pysqlite: let SQLAlchemy issue BEGIN itself
            dbapi_conn.isolation_level = None
            dbapi_conn.execute("PRAGMA foreign_keys = ON")
            dbapi_conn.execute("PRAGMA busy_timeout = 120000")

        @sa.event.listens_for(engine, "begin")
        def _begin(conn):  # take the write lock at BEGIN: two writers queue, never deadlock
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        return engine
    return sa.create_engine(real, pool_pre_ping=True,
                            connect_args={"connect_timeout": 30,
                                          "application_name": "e2e nightly"})


def open_store(url: str | None, results: Path, *, import_history: bool = True,
               create: bool = True) -> Store:
    """Open (create, migrate) the store of ``url`` (``[nightly] store``; default the SQLite
    file under ``results``), and import ``<results>/nightly/history.parquet`` once when one is
    there. A store that cannot be reached is a ResultsError with the URL masked.
    ``create=False`` (a listing, a dry run): a SQLite store that is not there is read through
    an empty scratch store (an old history.parquet imported into it), so reading writes
    nothing under ``results``."""
    resolved = resolve_url(url, results)
    scratch = None
    engine_url = resolved
    if not create and resolved.get_backend_name() == "sqlite" \
            and not Path(resolved.database).exists():
        scratch = tempfile.TemporaryDirectory(prefix="e2e-store-")
        engine_url = resolved.set(database=str(Path(scratch.name) / "history.db"))
    store = Store(_engine(engine_url), resolved)
    store.scratch = scratch
    try:
        store.migrate()
        legacy = Path(results) / "nightly" / HISTORY_FILE
        if import_history and legacy.is_file():
            store.import_parquet(legacy)
    except ResultsError:
        store.close()
        raise
    except sa.exc.OperationalError as exc:
        store.close()
        detail = str(getattr(exc, "orig", exc)).strip().splitlines()
        raise ResultsError(f"cannot open the results store {store.masked}: "
                           f"{scrub(detail[0] if detail else str(exc))}") from None
    except sa.exc.SQLAlchemyError as exc:
        store.close()
        raise ResultsError(f"the results store {store.masked}: {exc.__class__.__name__}: "
                           f"{scrub(str(exc).splitlines()[0])}") from None
    return store
