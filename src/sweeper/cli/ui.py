"""Open the MLflow UI on a sweep's tracking store.

For a local store (the default: a SQLite file and an artifact folder in the spec's
output_dir) this starts `mlflow server` on that store, bound to 127.0.0.1 unless
--host says otherwise, prints the URL of the sweep's experiment as soon as the server
answers (its start-up and request lines go to OUTPUT_DIR/logs/sweeper-ui.log unless
-v) and runs until Ctrl-C.
When the sweep's tracking URI is a tracking server (http/https: the spec's, or
$MLFLOW_TRACKING_URI, or the server of a running `sweeper cluster up`), that server
already is the UI: the URL of the sweep's experiment is printed and nothing is started.

The URL opens the runs table grouped by sweeper.group with the best-checkpoint columns
(docs/mlflow_ui.md): the experiment's shared view, written here if the sweep's record
predates it.

examples:
  sweeper ui sweeps/demo.yaml
  sweeper ui sweeps/demo.yaml --port 5001
  sweeper ui sweeps/roberta.yaml --tracking-uri sqlite:////shared/runs/roberta/mlflow.db

exit status: 0 after Ctrl-C (or at once for a tracking server); 1 when the UI server
could not start (e.g. the port is taken); 2 when the sweep has no store yet, or --host
is not a loopback address and --allow-remote is not given.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from sweeper.cli.common import add_spec_argument, fail, load_or_exit
from sweeper.logs import child_output, display
from sweeper.tracking.links import experiment_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5000
START_TIMEOUT_S = 120.0
"""mlflow server imports a lot and may migrate the schema: minutes on a loaded machine
would be unusual, but seconds are not enough."""


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"UI port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"interface to bind (default {DEFAULT_HOST}: only this machine can connect); "
        "any other needs --allow-remote",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="consent to serving the store beyond this machine with a non-loopback "
        "--host: MLflow's UI has no login, so anyone who reaches the port can read every "
        "run, metric and artifact of the store, and change or delete them",
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI (default: the spec's, $MLFLOW_TRACKING_URI, a running "
        "`sweeper cluster up`, else SQLite in output_dir)",
    )


def server_command(uri: str, artifacts: Path, host: str, port: int) -> list[str]:
    """`mlflow server` on the sweep's store, run with this interpreter so the UI matches
    the MLflow version that wrote the store. One worker: this is a personal viewer."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        artifacts.resolve().as_uri(),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def run(args: argparse.Namespace) -> int:
    from sweeper.deploy.resolve import tracking_uri
    from sweeper.tracking import artifact_root, experiment_name
    from sweeper.tracking.drivers import DriverMissing
    from sweeper.tracking.server import StoreMissing, check_server, is_server
    from sweeper.tracking.store import spec_view_metrics

    spec = load_or_exit(args.spec, args.overrides)
    uri = tracking_uri(spec, args.tracking_uri)
    name = experiment_name(spec)
    if is_server(uri):
        url = uri
        with contextlib.suppress(Exception):  # the URL without the experiment still helps
            check_server(uri, timeout=3)  # MLflow's client would retry a dead server long
            experiment_id = _experiment_id(uri, name)
            url = experiment_url(uri, experiment_id)
            if experiment_id is not None:
                _ensure_view(uri, experiment_id, spec_view_metrics(spec))
        print(f"sweep {spec.name!r} is tracked by a server; its UI: {url} (experiment {name!r})")
        return 0
    _consent(args.host, args.port, args.allow_remote)
    try:  # the store must exist: `mlflow server` would create an empty one
        check_server(uri, must_exist=True)
    except StoreMissing as exc:
        fail(f"no runs yet: run `sweeper run {args.spec}` first (no store at {exc.path})")
    except DriverMissing as exc:
        fail(str(exc))
    experiment_id = _experiment_id(uri, name)
    base = f"http://{_url_host(args.host)}:{args.port}"
    url = experiment_url(base, experiment_id)
    if experiment_id is None:
        print(f"note: the store {uri} has no experiment {name!r} yet", file=sys.stderr)
    else:
        try:
            _ensure_view(uri, experiment_id, spec_view_metrics(spec))
        except Exception as exc:  # e.g. a read-only store: the UI's default table then
            print(f"note: the sweep's view could not be stored ({exc})", file=sys.stderr)
    return _serve(server_command(uri, artifact_root(spec), args.host, args.port), base, url)


def _experiment_id(uri: str, name: str) -> str | None:
    """The sweep's experiment id in the store, None when the experiment is absent. A
    SQLite store is read with SQL (`sweeper.summarize.sqlite_store`): importing MLflow
    and opening its store would take seconds before the server even starts."""
    import logging

    from sweeper.summarize.sqlite_store import open_sqlite

    store = open_sqlite(uri)
    if store is not None:
        found_row = store.experiment(name)
        return found_row[0] if found_row is not None else None
    from mlflow import MlflowClient

    for noisy in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    found = MlflowClient(uri).get_experiment_by_name(name)
    return found.experiment_id if found is not None else None


def _ensure_view(uri: str, experiment_id: str, metrics: tuple[str, ...]) -> None:
    """Give the experiment sweeper's shared view (`tracking.links`), which the printed
    URL opens, if it lacks it or has another one (a record from before the view, or from
    a spec with another `select:`). A SQLite store is read with SQL; MLflow's client is
    imported only to write."""
    import logging

    from sweeper.summarize.sqlite_store import open_sqlite
    from sweeper.tracking.links import VIEW_TAG, first_view, needs_view

    store = open_sqlite(uri)
    if store is not None and not needs_view(store.experiment_tag(experiment_id, VIEW_TAG), metrics):
        return
    from mlflow import MlflowClient

    for noisy in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    client = MlflowClient(uri)
    if store is None:
        tags = client.get_experiment(experiment_id).tags
        if not needs_view(tags.get(VIEW_TAG), metrics):
            return
    client.set_experiment_tag(experiment_id, VIEW_TAG, first_view(metrics, int(time.time() * 1000)))


LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _consent(host: str, port: int, allowed: bool) -> None:
    """A bind beyond loopback is refused (exit 2) unless --allow-remote says yes, and
    warned about when it does."""
    if host in LOOPBACK or host.startswith("127."):
        return
    exposure = (
        f"--host {host} serves the whole store on port {port} to anyone who can reach "
        "this machine: MLflow's UI has no login, and its API can change or delete runs"
    )
    if not allowed:
        fail(f"{exposure}; add --allow-remote to do it anyway, or keep the default host")
    print(f"warning: {exposure}", file=sys.stderr)


def _url_host(host: str) -> str:
    """A host to put in a URL: a wildcard bind is reached through loopback."""
    if host in {"0.0.0.0", "::", ""}:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _serve(command: list[str], base: str, url: str) -> int:
    """Start the server, print the URL once it answers, wait; stop it on Ctrl-C or
    SIGTERM so that no orphaned server keeps the port. The server's own output (its
    start-up lines, a line per request) goes to the command's log file unless -v."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # MLflow's job runner (GenAI scoring jobs) is of no use to a sweep's store and more
    # than doubles the server's start-up (as for `sweeper cluster up`'s server)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with child_output("mlflow server") as (log, path):
        start = path.stat().st_size if path is not None else 0
        server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        try:
            if not _wait_ready(server, base):
                print(  # the rest of its output: the third-party log, named next
                    f"error: the MLflow UI server did not start (exit {server.returncode}); "
                    "is the port taken? try --port",
                    *_error_lines(path, start),
                    sep="\n  ",
                    file=sys.stderr,
                )
                return 1
            where = f"; server log: {display(path)}" if path is not None else ""
            print(f"MLflow UI: {url}  (Ctrl-C to stop{where})", flush=True)
            server.wait()
            return 0 if server.returncode in (0, -signal.SIGINT, -signal.SIGTERM) else 1
        except KeyboardInterrupt:
            return 0
        finally:
            signal.signal(signal.SIGTERM, previous)
            _stop(server)


def _error_lines(path: Path | None, start: int, most: int = 3) -> list[str]:
    """The last `most` ERROR lines the server wrote to the log file from byte `start`:
    why it did not start (a port in use), without its start-up chatter."""
    if path is None:
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        handle.seek(start)
        errors = [line.rstrip() for line in handle if "ERROR" in line]
    return errors[-most:]


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _wait_ready(server: subprocess.Popen[bytes], base: str) -> bool:
    """True once `/health` answers (the reachability check `sweeper run` makes); False
    if the server exits or takes too long."""
    from sweeper.tracking.server import TrackingUnreachable, check_server

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        try:
            check_server(base, timeout=2)
            return True
        except TrackingUnreachable:
            time.sleep(0.5)
    return False


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
