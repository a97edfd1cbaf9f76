"""A tracking server read over MLflow's REST API: exact, parallel, without importing MLflow.

Through a server, `MlflowClient` costs an `import mlflow` (more than the rest of a
1,000-run summary) and reads metric histories one request per run and metric. This
reader asks the same server for the same data with the standard library, several
requests at a time (a server started by `mlflow server` or `sweeper cluster up` runs
4 worker processes), and returns what `sweeper.summarize.mlflow_reader` returns;
`tests/integration/test_summarize_server.py` holds the two to the same records and
summaries on a real server over PostgreSQL. The server's limits and orderings it relies
on are those of MLflow's `mlflow/server/handlers.py` and its SQL store, checked on every
answer rather than assumed:

* Runs: `runs/search`, `SEARCH_PAGE` runs a page, ordered by start time then run id.
  Pages are offsets; the token of the first page is compared with the token this
  module writes for the same offset, and only when they are equal are the later pages
  asked for at once (each page's own next token is checked the same way). Any
  mismatch, or a server that refuses a token, falls back to following the server's
  tokens one page at a time. Either way the pages are those of the sequential read.
* Histories: `get-history-bulk` takes at most `BULK_RUNS` run ids and one metric, and
  returns at most `BULK_POINTS` points, dropping the rest without a word. An answer
  with fewer points is complete. A full one is treated as cut: its runs come grouped
  (the SQL store orders by run id first; the server's fallback reads run by run), so
  every run but the last one in it is complete and the others are asked again; a run
  that alone fills an answer is read with `get-history`, page by page. An answer that
  is not grouped by run is split in halves instead. The sampling endpoint
  (`get-history-bulk-interval`) is never used: it is not exact.

The transport is a function, so `mlflow_reader` reads histories the same way through
MLflow's own HTTP client where the server needs credentials that MLflow configures
(`open_http` leaves such servers to MLflow's client).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

from sweeper.summarize.records import Point

SEARCH_PAGE = 250
"""Runs per `runs/search` request (the server allows up to 50,000): small enough that
the server's workers share a 1,000-run experiment."""
BULK_RUNS = 100
"""`get-history-bulk`'s limit on run ids per request (MAX_RUN_IDS_PER_REQUEST)."""
BULK_POINTS = 25_000
"""`get-history-bulk`'s cap on points per answer (MAX_HISTORY_RESULTS)."""
HISTORY_PAGE = 25_000
"""Points per `get-history` page for a run that fills a bulk answer alone."""
THREADS = 8
"""Requests in flight at once."""
TIMEOUT_S = 120.0
RETRIES = 3

Query = Sequence[tuple[str, str]]
Call = Callable[[str, str, Query | None, dict | None], dict]
Send = Callable[[str, str, Query | None, dict | None], bytes]
"""A request whose answer is returned as it came (an artifact file)."""
"""(method, path, query pairs, JSON body) -> the decoded JSON answer."""

CREDENTIAL_SETTINGS = (
    "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4", "MLFLOW_TRACKING_CLIENT_CERT_PATH",
    "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_WORKSPACE",
)  # fmt: skip
"""Settings MLflow's client applies to its requests; with any of them, MLflow reads."""


class HttpReadFailed(Exception):
    """The server answered with an error, or not at all, after retries."""


class HttpStore:
    """A tracking server's runs and histories; `call` makes one request."""

    def __init__(self, uri: str, call: Call, send: Send | None = None) -> None:
        self.uri = uri
        self._call = call
        self._send = send

    def experiment(self, name: str) -> tuple[str, str] | None:
        """(experiment id, name) of the active experiment called `name`, or None."""
        try:
            found = self._call(
                "GET", "/api/2.0/mlflow/experiments/get-by-name", [("experiment_name", name)], None
            )["experiment"]
        except HttpReadFailed as exc:
            if "RESOURCE_DOES_NOT_EXIST" in str(exc):
                return None
            raise
        return None if found.get("lifecycle_stage") == "deleted" else (found["experiment_id"], name)

    def experiment_names(self) -> list[str]:
        """The active experiments' names (the first 200, as MlflowSource lists them)."""
        found = self._call("POST", "/api/2.0/mlflow/experiments/search", None, {"max_results": 200})
        return sorted(e["name"] for e in found.get("experiments", []))

    def artifact(self, run_id: str, path: str) -> bytes | None:
        """A run's artifact file through the server (its `/get-artifact` route, which
        serves proxied and server-side artifact stores alike); None where this store's
        requests cannot return raw bytes (MLflow's client then reads)."""
        if self._send is None:
            return None
        return self._send("GET", "/get-artifact", [("path", path), ("run_uuid", run_id)], None)

    def tags(self, run_id: str) -> dict[str, str]:
        run = self._call("GET", "/api/2.0/mlflow/runs/get", [("run_id", run_id)], None)["run"]
        return _pairs(run.get("data", {}).get("tags", []))

    def runs(self, experiment_id: str) -> list[dict[str, Any]]:
        """Every active run, earliest started first (ties by run id), as the keyword
        arguments of `sweeper.summarize.mlflow_reader.record_of`."""
        return [_raw_run(run) for run in self._search(experiment_id)]

    def _search(self, experiment_id: str) -> list[dict]:
        body = {
            "experiment_ids": [experiment_id],
            "max_results": SEARCH_PAGE,
            "order_by": ["attributes.start_time ASC"],
        }

        def page(token: str | None) -> tuple[list[dict], str | None]:
            found = self._call("POST", "/api/2.0/mlflow/runs/search", None,
                               {**body, "page_token": token} if token else body)  # fmt: skip
            return found.get("runs", []), found.get("next_page_token") or None

        with ThreadPoolExecutor(THREADS) as pool:
            ahead: dict[int, Future] = {
                i: pool.submit(page, offset_token(i * SEARCH_PAGE)) for i in range(1, THREADS)
            }
            runs, token = page(None)
            index = 1
            while token is not None and token == offset_token(index * SEARCH_PAGE):
                try:
                    found, next_token = ahead.pop(index).result()
                except HttpReadFailed:
                    break  # the server refused a token it did not write: follow its own
                runs += found
                token, index = next_token, index + 1
                if index + THREADS - 2 not in ahead and token is not None:
                    ahead[index + THREADS - 2] = pool.submit(
                        page, offset_token((index + THREADS - 2) * SEARCH_PAGE)
                    )
            for future in ahead.values():
                future.cancel()
        while token is not None:  # the server's own tokens, one page at a time
            found, token = page(token)
            runs += found
        return runs

    def history_rows(
        self, run_ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, list[tuple[str, Point]]]:
        """key -> [(run id, point)] of every logged value of `keys` for `run_ids`."""
        tasks = [
            (key, list(run_ids[start : start + BULK_RUNS]))
            for key in keys
            for start in range(0, len(run_ids), BULK_RUNS)
        ]
        rows: dict[str, list[tuple[str, Point]]] = {key: [] for key in keys}
        with ThreadPoolExecutor(THREADS) as pool:
            found_all = pool.map(lambda task: self._bulk(*task), tasks)
            for (key, _), found in zip(tasks, found_all, strict=True):
                rows[key] += found
        return rows

    def _bulk(self, key: str, run_ids: list[str]) -> list[tuple[str, Point]]:
        """Every point of `key` for `run_ids` (at most BULK_RUNS), however many."""
        rows: list[tuple[str, Point]] = []
        pending = list(run_ids)
        while pending:
            query = [("run_id", r) for r in pending] + [
                ("metric_key", key), ("max_results", str(BULK_POINTS))
            ]  # fmt: skip
            found = self._call("GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk", query, None)
            points = [(m["run_id"], _point(m)) for m in found.get("metrics", [])]
            if not set(pending) >= {run_id for run_id, _ in points}:
                raise HttpReadFailed(f"{self.uri} sent the history of a run not asked for")
            if len(points) < BULK_POINTS:
                return rows + points
            order = _grouped_runs(points)
            if order is None:  # not grouped by run: nothing is known complete
                if len(pending) == 1:
                    return rows + self._one_history(key, pending[0])
                half = len(pending) // 2
                return rows + self._bulk(key, pending[:half]) + self._bulk(key, pending[half:])
            complete = set(order[:-1])
            rows += [p for p in points if p[0] in complete]
            if not complete:  # one run filled the answer alone
                rows += self._one_history(key, order[-1])
                complete = {order[-1]}
            pending = [r for r in pending if r not in complete]
        return rows

    def _one_history(self, key: str, run_id: str) -> list[tuple[str, Point]]:
        rows: list[tuple[str, Point]] = []
        token: str | None = None
        while True:
            query = [("run_id", run_id), ("metric_key", key), ("max_results", str(HISTORY_PAGE))]
            query += [("page_token", token)] if token else []
            found = self._call("GET", "/api/2.0/mlflow/metrics/get-history", query, None)
            rows += [(run_id, _point(m)) for m in found.get("metrics", [])]
            token = found.get("next_page_token") or None
            if token is None:
                return rows


def offset_token(offset: int) -> str:
    """The page token MLflow's stores write for a page starting at `offset`."""
    return base64.b64encode(json.dumps({"offset": offset}).encode("utf-8")).decode("ascii")


def _grouped_runs(points: Sequence[tuple[str, Point]]) -> list[str] | None:
    """The runs of an answer in order, if each run's points are contiguous; else None."""
    order: list[str] = []
    for run_id, _ in points:
        if not order or order[-1] != run_id:
            if run_id in order:
                return None
            order.append(run_id)
    return order


def _number(value: Any) -> float:
    """A JSON number, or one of the strings protobuf's JSON writes for NaN and the
    infinities ("NaN", "Infinity", "-Infinity"), which `float` reads as they are."""
    return float(value)


def _point(metric: dict) -> Point:
    return Point(
        int(metric.get("step", 0)),
        int(metric.get("timestamp", 0)),
        _number(metric.get("value", 0.0)),
    )


def _pairs(items: list[dict]) -> dict[str, str]:
    return {item["key"]: item.get("value", "") for item in items}


def _raw_run(run: dict) -> dict[str, Any]:
    """A run of `runs/search` as MLflow's client reads it (`RunInfo.from_proto`: an
    absent end time is None, an absent start time 0)."""
    info, data = run["info"], run.get("data", {})
    return {
        "run_id": info["run_id"],
        "run_name": info.get("run_name") or "",
        "status": info.get("status", "RUNNING"),
        "start_time": int(info.get("start_time", 0)),
        "end_time": int(info["end_time"]) if info.get("end_time") else None,
        "tags": _pairs(data.get("tags", [])),
        "params": _pairs(data.get("params", [])),
        "metrics": {m["key"]: _number(m.get("value", 0.0)) for m in data.get("metrics", [])},
    }


def plain_call(uri: str, timeout: float = TIMEOUT_S) -> Call:
    """JSON requests with the standard library (`plain_requests`)."""
    return plain_requests(uri, timeout)[0]


def plain_requests(uri: str, timeout: float = TIMEOUT_S) -> tuple[Call, Send]:
    """(JSON requests, raw requests) with the standard library: one kept-alive
    connection per thread, transient failures (no answer, 429, 5xx) retried with a
    short back-off."""
    parsed = urlparse(uri)
    base = parsed.path.rstrip("/")
    local = threading.local()

    def connection() -> http.client.HTTPConnection:
        if getattr(local, "conn", None) is None:
            kind = (
                http.client.HTTPSConnection
                if parsed.scheme == "https"
                else http.client.HTTPConnection
            )
            local.conn = kind(parsed.netloc, timeout=timeout)
        return local.conn

    def call(method: str, path: str, query: Query | None, body: dict | None) -> dict:
        return json.loads(send(method, path, query, body))

    def send(method: str, path: str, query: Query | None, body: dict | None) -> bytes:
        """The body of a 200 answer to one request (retried as the docstring says)."""
        target = base + path + (f"?{urlencode(list(query))}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in range(RETRIES + 1):
            try:
                conn = connection()
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                text = response.read()
            except (OSError, http.client.HTTPException) as exc:
                local.conn = None
                if attempt == RETRIES:
                    raise HttpReadFailed(f"no answer from {uri}: {exc}") from None
            else:
                if response.status == 200:
                    return text
                transient = response.status == 429 or response.status >= 500
                if not transient or attempt == RETRIES:
                    raise HttpReadFailed(_error(response.status, text))
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    return call, send


def _error(status: int, text: bytes) -> str:
    try:
        found = json.loads(text)
        return f"{found.get('error_code', status)}: {found.get('message', '')}"
    except ValueError:
        return f"HTTP {status}: {text[:200].decode(errors='replace')}"


def open_http(uri: str) -> HttpStore | None:
    """An HttpStore for an http(s) tracking URI, unless MLflow's client is configured
    with credentials or other request settings (`CREDENTIAL_SETTINGS`, a
    ~/.mlflow/credentials file, a user name in the URI): then None, and MLflow's
    client reads."""
    parsed = urlparse(uri)
    if parsed.scheme.lower() not in {"http", "https"} or parsed.username is not None:
        return None
    if any(os.environ.get(name) for name in CREDENTIAL_SETTINGS):
        return None
    if (Path.home() / ".mlflow" / "credentials").exists():
        return None
    return HttpStore(uri, *plain_requests(uri))


def mlflow_call(uri: str) -> Call:
    """Requests through MLflow's HTTP client, with the credentials it is configured
    with (for `mlflow_reader`'s `server` path)."""
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    creds = get_default_host_creds(uri)

    def call(method: str, path: str, query: Query | None, body: dict | None) -> dict:
        response = http_request(creds, path, method, params=list(query or []), json=body)
        if response.status_code != 200:
            raise HttpReadFailed(_error(response.status_code, response.content))
        return json.loads(response.text)

    return call
