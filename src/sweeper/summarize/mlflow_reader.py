"""Reading a sweep's runs through MLflow's client, fast enough for thousands of trials.

A SQLite store with the expected tables is read without MLflow at all
(`sweeper.summarize.sqlite_store`), and so is an http(s) tracking server that needs
no credentials (`sweeper.summarize.http_store`), both chosen by
`sweeper.summarize.source`; this module is the path for other databases and for
servers with credentials, and the reference both readers are tested against. Two
reads carry almost all the cost (bench/bench_summarize.py times them;
docs/benchmarks.md has the figures):

* `MlflowClient.search_runs`, paged at 50,000 runs a page (through the engine's own
  `sweeper.tracking.runs.search_all`), returns every run's tags and latest metrics: the
  run records, whatever the store.
* Metric histories (valid/test accuracy and epoch at every step), by the fastest path
  the store allows, tried in this order (`path="auto"`):

  `sqlite`   a read-only SQL query on MLflow's `metrics` table, 500 runs per query
             (the fastest; `SqliteStore.history_rows`). The tables' columns are checked
             first and NaN is restored from `is_nan` as MLflow's own `SqlMetric` does;
             any mismatch or SQLite error falls through to the next path, so a future
             schema change costs speed, not correctness. Nothing is written.
  `bulk`     MLflow's SQL store's `get_metric_history_bulk(run_ids, key, max_results)`,
             one query per metric for 500 runs at a time (PostgreSQL/MySQL too), on a
             `SqlAlchemyStore` opened for the URI (it shares the client's cached
             engine; no private client attribute is read).
  `server`   an http(s) server's `get-history-bulk` endpoint, 100 runs and one metric a
             request, several at a time, exact despite the endpoint's silent cap of
             25,000 points an answer (`HttpStore.history_rows` says how), through
             MLflow's own HTTP client and credentials.
  `per_run`  `MlflowClient.get_metric_history(run_id, key)`, one query or HTTP request
             per run and metric, from a thread pool so network latency overlaps (the
             slowest; what remains for other stores).

All paths return the same histories; tests compare them on the same store. Every
reader turns its runs into RunRecords through `records_of`, which upgrades a record
written in an older format (`sweeper.tracking.record_format`) and refuses a newer one.

Reachability (`check_store`) is `sweeper.tracking.server.check_server`, the check
`sweeper run` makes too, with the summariser's own wording of its failures.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from sweeper import record_names
from sweeper.summarize.records import Point, RunRecord
from sweeper.summarize.sqlite_store import open_sqlite
from sweeper.tracking import record_format
from sweeper.tracking.drivers import DriverMissing
from sweeper.tracking.runs import search_all
from sweeper.tracking.server import StoreMissing, TrackingUnreachable, check_server, is_server

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment, Run

BULK_CHUNK = 500  # run ids per query: far below SQLite's bound-variable limit
BULK_LIMIT = 100_000_000  # rows per bulk query; reaching it would mean truncation
THREADS = 8

History = dict[str, dict[str, tuple[Point, ...]]]
"""run id -> metric key -> points sorted by (step, timestamp)."""


class SummarizeError(Exception):
    """Bad input the user can fix (unknown experiment, unreachable store): exit 2."""


def check_store(uri: str) -> None:
    """Fail fast and clearly when the store is absent or the server unreachable.

    MLflow would otherwise create an empty SQLite file for a mistyped path (and then
    report "no such experiment"), or retry an unreachable server for minutes.
    """
    try:
        check_server(uri, must_exist=True)
    except (StoreMissing, DriverMissing) as exc:
        raise SummarizeError(str(exc)) from None
    except TrackingUnreachable as exc:
        raise SummarizeError(f"cannot reach the tracking server at {uri}: {exc.reason}") from None


def open_client(uri: str) -> MlflowClient:
    """An MlflowClient on `uri`, after `check_store`; a store that will not open (not a
    database, an incompatible schema) is a SummarizeError, not a traceback."""
    check_store(uri)
    from mlflow import MlflowClient

    try:
        return MlflowClient(uri)  # opens (and for SQL stores, checks) the store now
    except Exception as exc:  # any failure to open the store is the user's to fix
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SummarizeError(
            f"cannot open the MLflow store at {uri}: {type(exc).__name__}: {first}"
        ) from None


def find_experiment(client: MlflowClient, name: str) -> Experiment:
    """The active experiment called `name`, or a SummarizeError listing the known ones."""
    from mlflow.exceptions import MlflowException

    try:
        experiment = client.get_experiment_by_name(name)
        if experiment is None or experiment.lifecycle_stage == "deleted":
            known = sorted(e.name for e in client.search_experiments(max_results=200))
            raise SummarizeError(unknown_experiment(name, client.tracking_uri, known))
    except MlflowException as exc:
        raise SummarizeError(f"cannot read {client.tracking_uri}: {exc.message}") from None
    return experiment


def unknown_experiment(name: str, uri: str, known: Sequence[str]) -> str:
    listed = ", ".join(repr(k) for k in known[:10]) + (" ..." if len(known) > 10 else "")
    return f"no experiment named {name!r} at {uri}" + (
        f"; experiments there: {listed}" if known else "; the store is empty"
    )


PARENT_RUN_TAG = "mlflow.parentRunId"
"""MLflow's `MLFLOW_PARENT_RUN_ID`, spelled out so that parsing imports no mlflow."""


def load_runs(client: MlflowClient, experiment_id: str) -> list[RunRecord]:
    """Every active run of the experiment (all pages), as RunRecords (`records_of`)."""
    return records_of([raw_of(run) for run in search_all(client, experiment_id)])


def raw_of(run: Run) -> dict[str, Any]:
    """An MLflow run as the keyword arguments of `record_of`."""
    return {
        "run_id": run.info.run_id,
        "run_name": run.info.run_name or "",
        "status": run.info.status,
        "start_time": run.info.start_time,
        "end_time": run.info.end_time,
        "tags": run.data.tags,
        "params": run.data.params,
        "metrics": dict(run.data.metrics),
    }


def records_of(raws: Sequence[dict[str, Any]]) -> list[RunRecord]:
    """The RunRecords of an experiment's runs, read by any reader (the keyword arguments
    of `record_of`), in the current record format: each run upgraded from its sweep's
    format version (`sweeper.tracking.record_format`; a sweep with several sweep runs
    from the oldest, one without any from version 1). SummarizeError when a sweep run
    is newer than this code."""
    oldest: dict[str | None, int] = {}
    try:
        for raw in raws:
            tags = raw["tags"]
            if tags.get(record_names.TAG_ROLE) == record_names.ROLE_SWEEP:
                sweep = tags.get(record_names.TAG_SWEEP)
                version = record_format.version_of(tags)
                record_format.check(version, sweep)
                oldest[sweep] = min(version, oldest.get(sweep, version))
    except record_format.RecordTooNew as exc:
        raise SummarizeError(str(exc)) from None
    records = []
    for raw in raws:
        version = oldest.get(raw["tags"].get(record_names.TAG_SWEEP), record_format.FIRST_VERSION)
        tags, params = record_format.upgrade(version, raw["tags"], raw["params"])
        records.append(record_of(**{**raw, "tags": tags, "params": params}))
    return records


def record_of(
    *,
    run_id: str,
    run_name: str,
    status: str,
    start_time: int | None,
    end_time: int | None,
    tags: dict[str, str],
    params: dict[str, str],
    metrics: dict[str, float],
) -> RunRecord:
    """Parse a run's sweeper tags, whichever reader found them, in the current record
    format (`records_of` upgrades older ones); a tag that is absent or malformed becomes
    None."""
    framework = tags.get(record_names.TAG_FRAMEWORK, "?")
    init = tags.get(record_names.TAG_INIT, "?")
    method = tags.get(record_names.TAG_METHOD, "?")
    return RunRecord(
        run_id=run_id,
        run_name=run_name,
        parent_run_id=tags.get(PARENT_RUN_TAG),
        mlflow_status=status,
        start_time=start_time,
        end_time=end_time,
        role=tags.get(record_names.TAG_ROLE),
        sweep=tags.get(record_names.TAG_SWEEP),
        trial_key=tags.get(record_names.TAG_TRIAL_KEY) or None,
        group=tags.get(record_names.TAG_GROUP) or f"{framework}/{init}/{method}",
        seed=_int(tags.get(record_names.TAG_SEED)),
        init=init,
        framework=framework,
        method=method,
        stage=tags.get(record_names.TAG_STAGE),
        status=tags.get(record_names.TAG_STATUS),
        error=tags.get(record_names.TAG_ERROR),
        trainable_params=_int(tags.get(record_names.TAG_TRAINABLE_PARAMS)),
        latest=metrics,
        search_params=tags.get(record_names.TAG_SEARCH_PARAMS),
        inputs=tags.get(record_names.TAG_INPUTS),
        versions=tags.get(record_names.TAG_VERSIONS),
        preemptions=_int(tags.get(record_names.TAG_PREEMPTIONS)) or 0,
        report_digest=tags.get(record_names.TAG_REPORT_DIGEST),
        select=tags.get(record_names.TAG_SELECT),
        sequential_plan=tags.get(record_names.TAG_SEQUENTIAL_PLAN),
        cost=tags.get(record_names.TAG_COST),
        precision=params.get(record_names.PARAM_PRECISION, ""),
        seed_source=tags.get(record_names.TAG_SEED_SOURCE) or record_names.SEED_ALL,
        seeds={
            source: seed
            for source, tag in record_names.TAG_SEED_OF.items()
            if (seed := _int(tags.get(tag))) is not None
        },
        predictions=tuple(
            split for split in tags.get(record_names.TAG_PREDICTIONS, "").split(",") if split
        ),
    )


HISTORY_PATHS = ("auto", "sqlite", "bulk", "server", "per_run")


def load_histories(
    client: MlflowClient, run_ids: Sequence[str], keys: Iterable[str], path: str = "auto"
) -> History:
    """Histories of `keys` for `run_ids`, by `path` (see the module docstring).

    `auto` takes the fastest path the store supports; naming a path forces it (tests
    and the benchmark compare them), still falling back if the store cannot serve it.
    """
    if path not in HISTORY_PATHS:
        raise ValueError(f"path must be one of {HISTORY_PATHS}, not {path!r}")
    keys = list(keys)
    run_ids = list(run_ids)
    rows: dict[str, list[tuple[str, Point]]] | None = None
    if path in {"auto", "sqlite"}:
        rows = _sqlite_rows(client.tracking_uri, run_ids, keys)
    if rows is None and path in {"auto", "sqlite", "bulk"}:
        store = _bulk_store(client.tracking_uri)
        if store is not None:
            rows = {key: _bulk_rows(store, run_ids, key) for key in keys}
    if rows is None and path in {"auto", "server"} and is_server(client.tracking_uri):
        rows = _server_rows(client.tracking_uri, run_ids, keys)
    if rows is None:
        rows = {key: _per_run_rows(client, run_ids, key) for key in keys}

    return as_history(rows, run_ids)


def as_history(rows: dict[str, list[tuple[str, Point]]], run_ids: Sequence[str]) -> History:
    """key -> [(run id, point)] rearranged per run, each metric's points in step order."""
    history: dict[str, dict[str, list[Point]]] = {run_id: {} for run_id in run_ids}
    for key, found in rows.items():
        for run_id, point in found:
            history[run_id].setdefault(key, []).append(point)
    return {
        run_id: {
            key: tuple(sorted(points, key=lambda p: (p.step, p.timestamp)))
            for key, points in metrics.items()
        }
        for run_id, metrics in history.items()
    }


def _sqlite_rows(
    uri: str, run_ids: Sequence[str], keys: Sequence[str]
) -> dict[str, list[tuple[str, Point]]] | None:
    """Histories straight from a SQLite store's `metrics` table; None if not possible."""
    store = open_sqlite(uri)
    if store is None:
        return None
    try:
        return store.history_rows(run_ids, keys)
    except sqlite3.Error:
        return None


def _bulk_store(uri: str) -> Any | None:
    """MLflow's SQL store on `uri` (which offers `get_metric_history_bulk`); None for
    any other store, or one that will not open as a SQL store. MLflow keeps one engine
    per database URI, so this shares the client's connection pool."""
    from mlflow.store.db.db_types import DATABASE_ENGINES

    if urlparse(uri).scheme.lower().partition("+")[0] not in DATABASE_ENGINES:
        return None
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:  # the artifact root is unused: only metrics are read
        return SqlAlchemyStore(uri, DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    except Exception:  # any failure to open it costs speed (per_run), not correctness
        return None


def _bulk_rows(store: Any, run_ids: Sequence[str], key: str) -> list[tuple[str, Point]]:
    rows: list[tuple[str, Point]] = []
    for start in range(0, len(run_ids), BULK_CHUNK):
        chunk = list(run_ids[start : start + BULK_CHUNK])
        found = store.get_metric_history_bulk(chunk, key, BULK_LIMIT)
        if len(found) >= BULK_LIMIT:
            raise SummarizeError(  # far beyond any sweep (500 runs x 200,000 points)
                f"more than {BULK_LIMIT} points of {key!r} for {len(chunk)} runs"
            )
        rows.extend((item.run_id, _point(item)) for item in found)
    return rows


def _server_rows(
    uri: str, run_ids: Sequence[str], keys: Sequence[str]
) -> dict[str, list[tuple[str, Point]]] | None:
    """Histories from an http(s) server's bulk endpoint through MLflow's HTTP client;
    None (per_run) where the server has no such endpoint (databricks)."""
    if urlparse(uri).scheme.lower() not in {"http", "https"}:
        return None
    from sweeper.summarize.http_store import HttpReadFailed, HttpStore, mlflow_call

    try:
        return HttpStore(uri, mlflow_call(uri)).history_rows(run_ids, keys)
    except HttpReadFailed as exc:
        raise SummarizeError(f"cannot read the metric histories at {uri}: {exc}") from None


def _per_run_rows(
    client: MlflowClient, run_ids: Sequence[str], key: str
) -> list[tuple[str, Point]]:
    def one(run_id: str) -> list[tuple[str, Point]]:
        return [(run_id, _point(m)) for m in client.get_metric_history(run_id, key)]

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        return [row for rows in pool.map(one, run_ids) for row in rows]


def _point(metric: Any) -> Point:
    return Point(step=int(metric.step), timestamp=int(metric.timestamp), value=float(metric.value))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
