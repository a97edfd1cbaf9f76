"""Where a summary reads its runs from: SQL on a SQLite file, a tracking server's REST
API, or MLflow's client.

`open_source` picks the SQLite reader (`sweeper.summarize.sqlite_store`) for a SQLite
store with the expected columns and the REST reader (`sweeper.summarize.http_store`)
for an http(s) tracking server that needs no credentials, so that neither imports
mlflow at all (importing it would cost more than the rest of a 1,000-run summary;
docs/benchmarks.md has the measurements), and MLflow's client for everything else
(other databases, servers with credentials). All give the same `RunRecord`s and
histories; the summariser sees only this interface.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from sweeper.summarize.http_store import HttpReadFailed, HttpStore, open_http
from sweeper.summarize.mlflow_reader import (
    History,
    SummarizeError,
    as_history,
    check_store,
    find_experiment,
    load_histories,
    load_runs,
    open_client,
    records_of,
    unknown_experiment,
)
from sweeper.summarize.records import RunRecord
from sweeper.summarize.sqlite_store import SqliteStore, open_sqlite

if TYPE_CHECKING:
    from mlflow import MlflowClient


class RunSource(Protocol):
    uri: str

    def experiment(self, name: str) -> tuple[str, str]:
        """(experiment id, name); SummarizeError naming the known ones if absent."""

    def runs(self, experiment_id: str) -> list[RunRecord]:
        """Every active run, earliest started first."""

    def tags(self, run_id: str) -> dict[str, str]: ...

    def histories(self, run_ids: Sequence[str], keys: Sequence[str]) -> History: ...


class SqliteReadFailed(Exception):
    """A query on the SQLite file failed (locked, corrupt): read it with MLflow instead."""


class MlflowSource:
    def __init__(self, client: MlflowClient, history_path: str = "auto") -> None:
        self.client = client
        self.uri = client.tracking_uri
        self._history_path = history_path

    def experiment(self, name: str) -> tuple[str, str]:
        found = find_experiment(self.client, name)
        return found.experiment_id, found.name

    def runs(self, experiment_id: str) -> list[RunRecord]:
        from mlflow.exceptions import MlflowException

        try:
            return load_runs(self.client, experiment_id)
        except MlflowException as exc:
            raise SummarizeError(f"cannot read the runs at {self.uri}: {exc.message}") from None

    def tags(self, run_id: str) -> dict[str, str]:
        return dict(self.client.get_run(run_id).data.tags)

    def histories(self, run_ids: Sequence[str], keys: Sequence[str]) -> History:
        return load_histories(self.client, run_ids, keys, self._history_path)


class StoreSource:
    """Runs read without MLflow: from a SqliteStore or an HttpStore."""

    def __init__(self, store: SqliteStore | HttpStore, uri: str) -> None:
        self.store = store
        self.uri = uri

    def experiment(self, name: str) -> tuple[str, str]:
        found = self._read(self.store.experiment, name)
        if found is None:
            known = self._read(self.store.experiment_names)
            raise SummarizeError(unknown_experiment(name, self.uri, known))
        return found

    def runs(self, experiment_id: str) -> list[RunRecord]:
        return records_of(self._read(self.store.runs, experiment_id))

    def tags(self, run_id: str) -> dict[str, str]:
        return self._read(self.store.tags, run_id)

    def histories(self, run_ids: Sequence[str], keys: Sequence[str]) -> History:
        return as_history(self._read(self.store.history_rows, run_ids, keys), run_ids)

    def _read(self, query, *args):
        try:
            return query(*args)
        except sqlite3.Error as exc:
            raise SqliteReadFailed(str(exc)) from exc
        except HttpReadFailed as exc:
            raise SummarizeError(f"cannot read {self.uri}: {exc}") from None


def open_source(uri: str, client: MlflowClient | None = None) -> RunSource:
    """SQL on the file for a SQLite store, REST for a server without credentials
    (unless a client is given), else MLflow's client; a missing store or an
    unreachable server is a SummarizeError."""
    if client is not None:
        return MlflowSource(client)
    check_store(uri)
    store = open_sqlite(uri) or open_http(uri)
    if store is not None:
        return StoreSource(store, uri)
    return MlflowSource(open_client(uri))
