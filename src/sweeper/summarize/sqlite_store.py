"""A SQLite tracking store read with SQL, without importing MLflow.

Importing mlflow and opening its SQL store cost far more than the queries a summary
needs (docs/benchmarks.md has the measurements). So when the store is a SQLite file
whose tables have the columns read here, the summary reads them directly, read-only
(`mode=ro`: nothing is written and no migration runs). A tracking server has its own
reader (`sweeper.summarize.http_store`); anything else (PostgreSQL, a schema without
these columns) goes through MLflow's client (`sweeper.summarize.mlflow_reader`), and
`tests/integration/test_summarize_store.py` holds both readers to the same records.

The rules are MLflow's own: only `active` runs and experiments count; a NaN metric is
stored as 0 with `is_nan` set and read back as NaN (MLflow's `SqlMetric`); runs come in
start-time order, ties by run id, as `MlflowClient.search_runs` orders them here.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from sweeper.summarize.records import Point
from sweeper.tracking.store import sqlite_path

CHUNK = 500
"""Run ids per query: far below SQLite's bound-variable limit."""

REQUIRED_COLUMNS = {
    "experiments": {"experiment_id", "name", "lifecycle_stage"},
    "runs": {"run_uuid", "name", "status", "start_time", "end_time", "lifecycle_stage"}
    | {"experiment_id"},
    "tags": {"key", "value", "run_uuid"},
    "params": {"key", "value", "run_uuid"},
    "latest_metrics": {"key", "value", "is_nan", "run_uuid"},
    "metrics": {"key", "value", "timestamp", "step", "run_uuid", "is_nan"},
}
LATEST_METRICS = (
    "SELECT run_uuid, key, CASE WHEN is_nan THEN NULL ELSE value END FROM latest_metrics"
)
"""A NaN latest value is stored as 0 with is_nan set; read as NULL, then NaN."""
DEFAULT_WORKSPACE = "default"
"""MLflow 3 scopes experiment names by workspace; without workspaces, all are here."""


class SqliteStore:
    """A SQLite tracking store opened read-only; `open_sqlite` checks it first."""

    def __init__(self, path: Path, workspaces: bool) -> None:
        self.path = path
        self._workspaces = workspaces

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True)

    def experiment(self, name: str) -> tuple[str, str] | None:
        """(experiment id, name) of the active experiment called `name`, or None."""
        query = (
            "SELECT experiment_id, name FROM experiments "
            "WHERE name = ? AND lifecycle_stage = 'active'"
        )
        args: tuple = (name,)
        if self._workspaces:
            query, args = query + " AND workspace = ?", (name, DEFAULT_WORKSPACE)
        with closing(self._connect()) as db:
            row = db.execute(query, args).fetchone()
        return (str(row[0]), row[1]) if row else None

    def experiment_tag(self, experiment_id: str, key: str) -> str | None:
        """The value of tag `key` of an experiment, None if it has none (or the store
        has no experiment tags table)."""
        query = "SELECT value FROM experiment_tags WHERE experiment_id = ? AND key = ?"
        with closing(self._connect()) as db:
            try:
                row = db.execute(query, (experiment_id, key)).fetchone()
            except sqlite3.OperationalError:
                return None
        return row[0] if row else None

    def experiment_names(self) -> list[str]:
        with closing(self._connect()) as db:
            rows = db.execute("SELECT name FROM experiments WHERE lifecycle_stage = 'active'")
            return sorted(name for (name,) in rows)

    def runs(self, experiment_id: str) -> list[dict[str, Any]]:
        """Every active run of the experiment, earliest started first, as the keyword
        arguments of `sweeper.summarize.mlflow_reader.record_of`."""
        with closing(self._connect()) as db:
            runs = db.execute(
                "SELECT run_uuid, name, status, start_time, end_time FROM runs "
                "WHERE experiment_id = ? AND lifecycle_stage = 'active' "
                "ORDER BY start_time ASC, run_uuid ASC",
                (int(experiment_id),),
            ).fetchall()
            ids = [run[0] for run in runs]
            tags = self._by_run(db, "SELECT run_uuid, key, value FROM tags", ids)
            params = self._by_run(db, "SELECT run_uuid, key, value FROM params", ids)
            latest = self._by_run(db, LATEST_METRICS, ids)
        return [
            {
                "run_id": run_id,
                "run_name": name or "",
                "status": status,
                "start_time": start,
                "end_time": end,
                "tags": tags.get(run_id, {}),
                "params": params.get(run_id, {}),
                "metrics": {
                    k: math.nan if v is None else float(v)
                    for k, v in latest.get(run_id, {}).items()
                },
            }
            for run_id, name, status, start, end in runs
        ]

    def tags(self, run_id: str) -> dict[str, str]:
        with closing(self._connect()) as db:
            found = self._by_run(db, "SELECT run_uuid, key, value FROM tags", [run_id])
        return found.get(run_id, {})

    def history_rows(
        self, run_ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, list[tuple[str, Point]]]:
        """key -> [(run id, point)] of every logged value of `keys` for `run_ids`."""
        rows: dict[str, list[tuple[str, Point]]] = {key: [] for key in keys}
        key_marks = ",".join("?" * len(keys))
        with closing(self._connect()) as db:
            for start in range(0, len(run_ids), CHUNK):
                chunk = list(run_ids[start : start + CHUNK])
                query = (
                    "SELECT run_uuid, key, step, timestamp, value, is_nan FROM metrics "
                    f"WHERE key IN ({key_marks}) AND run_uuid IN ({','.join('?' * len(chunk))})"
                )
                for run_id, key, step, timestamp, value, is_nan in db.execute(
                    query, (*keys, *chunk)
                ):
                    value = math.nan if is_nan else float(value)
                    rows[key].append((run_id, Point(int(step), int(timestamp), value)))
        return rows

    def artifact_uris(self, run_ids: Sequence[str]) -> dict[str, str]:
        """run id -> the run's artifact URI, as MLflow recorded it."""
        with closing(self._connect()) as db:
            found = self._by_run(db, "SELECT run_uuid, 'uri', artifact_uri FROM runs", run_ids)
        return {run_id: row["uri"] for run_id, row in found.items() if row["uri"]}

    @staticmethod
    def _by_run(
        db: sqlite3.Connection, select: str, run_ids: Sequence[str]
    ) -> dict[str, dict[str, str]]:
        """run id -> {key: value} from a `SELECT run_uuid, key, value FROM table`."""
        found: dict[str, dict[str, str]] = {}
        for start in range(0, len(run_ids), CHUNK):
            chunk = list(run_ids[start : start + CHUNK])
            query = f"{select} WHERE run_uuid IN ({','.join('?' * len(chunk))})"
            for run_id, key, value in db.execute(query, chunk):
                found.setdefault(run_id, {})[key] = value
        return found


def open_sqlite(uri: str) -> SqliteStore | None:
    """The store at `uri` if it is a SQLite file with the columns read here, else None
    (the caller then uses MLflow's client, which says what is wrong with the store)."""
    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)) as db:
            columns = {
                table: {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                for table in REQUIRED_COLUMNS
            }
    except sqlite3.Error:
        return None
    if any(not columns[table] >= needed for table, needed in REQUIRED_COLUMNS.items()):
        return None
    return SqliteStore(path, workspaces="workspace" in columns["experiments"])
