"""Tracking servers for bench_summarize.py: the same runs behind `mlflow server`, on a
SQLite file and on PostgreSQL.

* Server on SQLite: a fresh copy of the benchmark's SQLite store (the file column keeps
  its own: a report logged through a server is tagged with the server's URI, so a
  shared store would look changed to the other path after every summary).
* Server on PostgreSQL: a database per store size in one PostgreSQL data folder
  (tests/support/postgres.py's server, Debian's binaries), cached beside the SQLite
  stores. A database is filled by copying every table of the SQLite store into the
  schema MLflow's own migrations create, with `COPY` (seconds for millions of metric
  rows, where logging them again would take as long as building the SQLite store), so
  both hold the same runs, ids included. A database is reused only if its copy
  completed.

Both servers run `mlflow server` as `sweeper cluster up` does: MLflow's default of 4
worker processes.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psutil

from tests.support.cluster import free_port, mlflow_server
from tests.support.postgres import PostgresServer, server_bin_dir

WORKERS = 4
"""`mlflow server`'s default, which `sweeper cluster up` keeps."""
SKIP_TABLES = {"alembic_version"}


@contextlib.contextmanager
def postgres(cache: Path) -> Iterator[PostgresServer]:
    """The cached PostgreSQL data folder under `cache`, started (initialised first if
    absent); stopped by its pid on exit."""
    root = cache / "pg"
    server = PostgresServer(root=root, port=free_port(), bin_dir=server_bin_dir())
    if not (root / "INITIALISED").exists():
        shutil.rmtree(root, ignore_errors=True)
        server.init()
        (root / "INITIALISED").write_text("initdb done\n")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def postgres_store(server: PostgresServer, sqlite_file: Path, name: str) -> str:
    """The URI of database `name` holding a copy of `sqlite_file` (copied once)."""
    done = server.root / f"{name}.COMPLETE"
    uri = f"postgresql://mlflow@127.0.0.1:{server.port}/{name}"
    if done.exists():
        return uri
    server.psql(f'DROP DATABASE IF EXISTS "{name}"')
    server.create_database(name)
    copy_tables(sqlite_file, uri)
    done.write_text(f"copied from {sqlite_file}\n")
    return uri


def copy_tables(sqlite_file: Path, uri: str) -> None:
    """MLflow's schema at `uri` (its migrations), emptied, then every row of every
    table of the SQLite store, and the id sequences moved past the copied ids. The
    rows are written as the superuser with foreign-key triggers off for the session
    (`session_replication_role = replica`), so tables go in any order."""
    import psycopg
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    SqlAlchemyStore(uri, (sqlite_file.parent / "mlartifacts").as_uri()).engine.dispose()
    with contextlib.closing(sqlite3.connect(sqlite_file)) as source:
        tables = [
            name
            for (name,) in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name not in SKIP_TABLES
        ]
        with psycopg.connect(uri.replace("//mlflow@", "//postgres@", 1)) as target:
            target.execute("SET session_replication_role = replica")
            pg_tables = {
                name
                for (name,) in target.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
            } - SKIP_TABLES
            target.execute(f"TRUNCATE {', '.join(sorted(pg_tables))} CASCADE")
            for table in tables:
                _copy_table(source, target, table)
            _move_sequences(target)


def _copy_table(source: sqlite3.Connection, target, table: str) -> None:
    columns = [row[1] for row in source.execute(f'PRAGMA table_info("{table}")')]
    names = ", ".join(f'"{c}"' for c in columns)
    rows = source.execute(f'SELECT {names} FROM "{table}"')
    with target.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)


def _move_sequences(target) -> None:
    serial = target.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND column_default LIKE 'nextval%'"
    ).fetchall()
    for table, column in serial:
        target.execute(
            f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
            f'COALESCE((SELECT MAX("{column}") FROM "{table}"), 0) + 1, false)'
        )


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + sys) of process `pid` and its live descendants: `mlflow
    server` and its workers, or the postmaster and its backends (which PostgreSQL puts
    in process groups of their own)."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                total += times.user + times.system
    return total


@contextlib.contextmanager
def sqlite_server(sqlite_file: Path, root: Path) -> Iterator[tuple[str, int]]:
    """`mlflow server` on a fresh copy of `sqlite_file`; its URI and pid."""
    root.mkdir(parents=True, exist_ok=True)
    copy = root / "server.db"
    shutil.copyfile(sqlite_file, copy)
    try:
        with mlflow_server(root, backend_store_uri=f"sqlite:///{copy}", workers=WORKERS) as s:
            yield s.uri, s.proc.pid
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres_server_uri(database_uri: str, root: Path) -> Iterator[tuple[str, int]]:
    """`mlflow server` on a PostgreSQL database; its URI and pid."""
    root.mkdir(parents=True, exist_ok=True)
    try:
        with mlflow_server(root, backend_store_uri=database_uri, workers=WORKERS) as s:
            yield s.uri, s.proc.pid
    finally:
        shutil.rmtree(root, ignore_errors=True)
