"""Where run history lives: one SQLite file (the default) or a team's PostgreSQL database, one schema.

``open_store(where)``: ``where`` is a ``postgresql://`` (or ``postgres://``) URL, a path of a SQLite
file, or empty: ``$FOURFOLD_HISTORY``, else ``fourfold-history.sqlite`` in the caller's directory (a
directory given is a folder for that file). The store is schema-versioned (``fourfold_schema``):
a store of a newer schema is refused with what to do, an older one is migrated in place.

Tables (entries are :class:`fourfold.history.entry.Entry`; every column is plain SQL that both
databases read alike; JSON is text):

- ``fourfold_runs``: one row per run added: its release, tags, meta.json and summary.json, and
  the facts the list shows (fourfold version, dataset hash, target, model, machine);
- ``fourfold_figures``: per run, group (``level:scenario``) and report row: the run's value, its
  within-run variance and blocks (the block bootstrap of ``fourfold compare``), what the value rests
  on (``n``) and why it is not fit for a test (``too_few``);
- ``fourfold_histograms``: per run, group and per-request array (TTFT, E2E, TPOT, ITL): the
  log-bucket counts (:class:`fourfold.measure.histogram.LogHistogram`, 0.5 %), from which any
  quantile is recomputed.

Writers are safe side by side: SQLite in WAL mode, each write one ``BEGIN IMMEDIATE`` transaction
(a busy store is waited for, up to a minute); PostgreSQL in one transaction per write, the schema
created under an advisory lock. The password of a URL is never printed (:func:`shown`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import UsageError

__all__ = ["DEFAULT_FILE", "ENV", "SCHEMA_VERSION", "RunRow", "Store", "open_store", "shown"]

SCHEMA_VERSION = 1
DEFAULT_FILE = "fourfold-history.sqlite"
ENV = "FOURFOLD_HISTORY"
_LOCK_KEY = 4_044_202_612          # the PostgreSQL advisory lock the schema is created under
_BUSY_S = 60.0
_ORDER = "COALESCE(started_at, added_at), id"       # ISO 8601 UTC times: text order is time order

_TABLES = """
CREATE TABLE IF NOT EXISTS fourfold_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fourfold_runs (
    id {serial} PRIMARY KEY,
    release TEXT NOT NULL,
    run_id TEXT NOT NULL UNIQUE,
    run_path TEXT NOT NULL,
    added_at TEXT NOT NULL,
    started_at TEXT,
    level TEXT NOT NULL,
    fourfold_version TEXT,
    dataset_hash TEXT,
    target TEXT,
    model TEXT,
    machine TEXT,
    tags TEXT NOT NULL,
    meta TEXT NOT NULL,
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS fourfold_figures (
    run BIGINT NOT NULL REFERENCES fourfold_runs(id) ON DELETE CASCADE,
    grp TEXT NOT NULL,
    metric TEXT NOT NULL,
    label TEXT NOT NULL,
    unit TEXT NOT NULL,
    better TEXT NOT NULL,
    descriptive INTEGER NOT NULL,
    value DOUBLE PRECISION,
    n BIGINT NOT NULL,
    within_var DOUBLE PRECISION,
    blocks BIGINT NOT NULL,
    too_few TEXT NOT NULL,
    no_interval TEXT NOT NULL,
    PRIMARY KEY (run, grp, metric)
);
CREATE TABLE IF NOT EXISTS fourfold_groups (
    run BIGINT NOT NULL REFERENCES fourfold_runs(id) ON DELETE CASCADE,
    grp TEXT NOT NULL,
    flags TEXT NOT NULL,
    requests BIGINT NOT NULL,
    PRIMARY KEY (run, grp)
);
CREATE TABLE IF NOT EXISTS fourfold_histograms (
    run BIGINT NOT NULL REFERENCES fourfold_runs(id) ON DELETE CASCADE,
    grp TEXT NOT NULL,
    name TEXT NOT NULL,
    wire TEXT NOT NULL,
    PRIMARY KEY (run, grp, name)
);
CREATE INDEX IF NOT EXISTS fourfold_figures_by_group ON fourfold_figures (grp, metric)
"""
# schema version -> the statements that bring a store of the previous version to it
MIGRATIONS: dict[int, tuple[str, ...]] = {}

FIGURE_COLUMNS = ("grp", "metric", "label", "unit", "better", "descriptive", "value", "n", "within_var",
                  "blocks", "too_few", "no_interval")


@dataclass(frozen=True)
class RunRow:
    """A run in the history (``fourfold_runs`` without its JSON blobs unless asked)."""

    id: int
    release: str
    run_id: str
    run_path: str
    added_at: str
    started_at: str | None
    level: str
    fourfold_version: str | None
    dataset_hash: str | None
    target: str | None
    model: str | None
    machine: str | None
    tags: dict[str, str]


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def is_url(where: str) -> bool:
    return where.startswith(("postgresql://", "postgres://"))


def shown(where: str) -> str:
    """The store as it may be printed: a URL's password replaced by ``***``."""
    return re.sub(r"^(postgres(?:ql)?://[^:/@]*:)[^@]*@", r"\1***@", where)


def resolve(where: str | None, cwd: str | os.PathLike[str] | None = None) -> str:
    """The store named by ``where``, ``$FOURFOLD_HISTORY`` or the default file, paths made absolute
    from ``cwd`` (the caller's directory)."""
    where = where or os.environ.get(ENV, "") or DEFAULT_FILE
    if is_url(where):
        return where
    path = Path(cwd or os.getcwd()) / Path(where).expanduser()
    return str(path / DEFAULT_FILE if path.is_dir() else path)


class Store:
    """The history store over one database connection (DB-API: :mod:`sqlite3` or psycopg 3)."""

    def __init__(self, conn: Any, kind: str, where: str) -> None:
        self.conn, self.kind, self.where = conn, kind, where
        self._init_schema()

    # -- plumbing ---------------------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), tuple(params))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write: SQLite's ``BEGIN IMMEDIATE`` (the write lock at once, so two writers never both
        read then both write), PostgreSQL's transaction."""
        if self.kind == "postgresql":
            with self.conn.transaction():
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def _init_schema(self) -> None:
        serial = "BIGSERIAL" if self.kind == "postgresql" else "INTEGER"
        statements = [s.strip() for s in _TABLES.format(serial=serial).split(";") if s.strip()]
        with self.transaction():
            if self.kind == "postgresql":
                self.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK_KEY,))
            for statement in statements:
                self.execute(statement)
            found = self.execute("SELECT version FROM fourfold_schema").fetchall()
            if not found:
                self.execute("INSERT INTO fourfold_schema (version) VALUES (?)", (SCHEMA_VERSION,))
                return
            version = int(found[0][0])
            if version > SCHEMA_VERSION:
                raise UsageError(f"the history store {shown(self.where)} has schema {version}, newer than "
                                 f"this fourfold's ({SCHEMA_VERSION}): upgrade fourfold to use it")
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS.get(step, ()):
                    self.execute(statement)
            if version < SCHEMA_VERSION:
                self.execute("UPDATE fourfold_schema SET version = ?", (SCHEMA_VERSION,))

    # -- writing ----------------------------------------------------------------------------------------
    def add(self, run: dict[str, Any], groups: dict[str, dict[str, Any]], figures: list[dict[str, Any]],
            histograms: list[tuple[str, str, dict[str, Any]]]) -> int:
        """One run and what it keeps, in one transaction; its id. A run already in the history (the same
        ``run_id``) is refused with the release it was added as."""
        with self.transaction():
            found = self.execute("SELECT release FROM fourfold_runs WHERE run_id = ?",
                                 (run["run_id"],)).fetchall()
            if found:
                raise UsageError(f"run {run['run_id']} is already in the history as release {found[0][0]!r} "
                                 f"(fourfold history remove it first)")
            columns = list(run)
            values = [json.dumps(run[c], sort_keys=True) if c in ("tags", "meta", "summary") else run[c]
                      for c in columns]
            insert = (f"INSERT INTO fourfold_runs ({', '.join(columns)}) "
                      f"VALUES ({', '.join('?' * len(columns))}) RETURNING id")
            run_id = int(self.execute(insert, values).fetchone()[0])
            for name, group in groups.items():
                self.execute("INSERT INTO fourfold_groups (run, grp, flags, requests) VALUES (?, ?, ?, ?)",
                             (run_id, name, ",".join(sorted(group["flags"])), int(group["requests"])))
            insert = (f"INSERT INTO fourfold_figures (run, {', '.join(FIGURE_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * (len(FIGURE_COLUMNS) + 1))})")
            for figure in figures:
                self.execute(insert, (run_id, *(_finite(figure[c]) for c in FIGURE_COLUMNS)))
            for grp, name, wire in histograms:
                self.execute("INSERT INTO fourfold_histograms (run, grp, name, wire) VALUES (?, ?, ?, ?)",
                             (run_id, grp, name, json.dumps(wire)))
        return run_id

    def remove(self, ids: Sequence[int]) -> int:
        """Remove runs by id (with what they keep); how many there were."""
        gone = 0
        with self.transaction():
            for run_id in ids:
                for table in ("fourfold_histograms", "fourfold_figures", "fourfold_groups"):
                    self.execute(f"DELETE FROM {table} WHERE run = ?", (run_id,))
                gone += self.execute("DELETE FROM fourfold_runs WHERE id = ?", (run_id,)).rowcount or 0
        return gone

    # -- reading ----------------------------------------------------------------------------------------
    def runs(self, *, group: str | None = None) -> list[RunRow]:
        """Every run (those with ``group`` when given), in the order they ran (``started_at``; else when
        added): a release's place in a trend is when it was measured, whatever order runs were added in."""
        cols = ("id, release, run_id, run_path, added_at, started_at, level, fourfold_version, dataset_hash, "
                "target, model, machine, tags")
        if group is None:
            rows = self.execute(f"SELECT {cols} FROM fourfold_runs ORDER BY {_ORDER}").fetchall()
        else:
            rows = self.execute(f"SELECT {cols} FROM fourfold_runs WHERE id IN "
                                f"(SELECT run FROM fourfold_groups WHERE grp = ?) ORDER BY {_ORDER}",
                                (group,)).fetchall()
        names = [f.name for f in dataclasses.fields(RunRow)]
        return [RunRow(**{**dict(zip(names, row, strict=True)), "tags": json.loads(row[-1])}) for row in rows]

    def blobs(self, run_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """A run's meta.json and summary.json as kept."""
        meta, summary = self.execute("SELECT meta, summary FROM fourfold_runs WHERE id = ?",
                                     (run_id,)).fetchone()
        return json.loads(meta), json.loads(summary)

    def groups(self, run_ids: Sequence[int] | None = None
               ) -> dict[tuple[int, str], tuple[frozenset[str], int]]:
        """(run, group) -> (the group's flags, its requests)."""
        rows = self.execute("SELECT run, grp, flags, requests FROM fourfold_groups").fetchall()
        wanted = None if run_ids is None else set(run_ids)
        return {(int(r), g): (frozenset(f for f in flags.split(",") if f), int(n))
                for r, g, flags, n in rows if wanted is None or int(r) in wanted}

    def figures(self, group: str, run_ids: Sequence[int], metric: str | None = None) -> list[dict[str, Any]]:
        """The kept figures of ``group`` in these runs (one metric, or all), each with its ``run``."""
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        sql = (f"SELECT run, {', '.join(FIGURE_COLUMNS)} FROM fourfold_figures "
               f"WHERE grp = ? AND run IN ({marks})"
               + (" AND metric = ?" if metric is not None else "") + " ORDER BY run, metric")
        params = [group, *run_ids, *([metric] if metric is not None else [])]
        return [dict(zip(("run", *FIGURE_COLUMNS), row, strict=True)) for row in self.execute(sql, params)]

    def histograms(self, group: str, name: str, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """run -> the wire form of its ``name`` histogram in ``group``."""
        if not run_ids:
            return {}
        marks = ", ".join("?" * len(run_ids))
        rows = self.execute(f"SELECT run, wire FROM fourfold_histograms WHERE grp = ? AND name = ? "
                            f"AND run IN ({marks})", (group, name, *run_ids)).fetchall()
        return {int(r): json.loads(w) for r, w in rows}


def open_store(where: str | None = None, cwd: str | os.PathLike[str] | None = None) -> Store:
    """The store named by ``where`` (module docstring), created when new."""
    where = resolve(where, cwd)
    if is_url(where):
        try:
            import psycopg
        except ImportError as exc:
            raise UsageError("a PostgreSQL history needs psycopg: pip install 'fourfold[postgres]'") from exc
        try:
            pg = psycopg.connect(where, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise UsageError(f"the history store {shown(where)} cannot be reached: "
                             f"{shown(str(exc)).strip()}") from exc
        return Store(pg, "postgresql", where)
    path = Path(where)
    if not path.parent.is_dir():
        raise UsageError(f"no directory {path.parent} for the history file {path.name}")
    try:
        conn = sqlite3.connect(path, timeout=_BUSY_S, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{path}: not a fourfold history (SQLite: {exc})") from exc
    return Store(conn, "sqlite", where)
