"""Start, inspect and stop a Ray head and an MLflow tracking server on this machine.

  sweeper cluster up       start both as real processes; print the addresses
  sweeper cluster status   nodes, server health, addresses
  sweeper cluster down     stop only what `up` started (idempotent)

`up` starts `ray start --head` (bound to --host, 127.0.0.1 by default) and `mlflow
server` with served artifacts (SQLite and a folder under --storage by default; Postgres
and S3 with --backend-store-uri / --artifacts-destination), waits until both answer,
and records them in $SWEEPER_HOME/cluster.json (default ~/.sweeper). Ray's auth mode
is set explicitly (`disabled` on loopback, `token` otherwise; --auth), so Ray's own CLI
works from this machine with no extra variables. Every Ray job on the cluster inherits
MLFLOW_TRACKING_URI and SWEEPER_STORAGE from the head: `ray job submit --working-dir .
-- sweeper run SPEC` records to this server and keeps its outputs under the storage
(a relative output_dir `runs/demo` becomes STORAGE/runs/demo), not in Ray's temporary
copy of the working dir; the head's PATH starts with this Python's folder, so a job's
`sweeper` is this environment's. While the cluster runs, `sweeper run|summarize|ui` on this
machine use its tracking server by default.

examples:
  sweeper cluster up
  ray job submit --address http://127.0.0.1:8265 --working-dir . -- sweeper run sweeps/demo.yaml
  sweeper summarize sweeps/demo.yaml
  sweeper cluster up --host 0.0.0.0 --storage /data/sweeper \\
      --backend-store-uri postgresql://mlflow:PW@DB/mlflow --artifacts-destination s3://bucket
  sweeper cluster up --ray-args "--num-cpus 8 --num-gpus 1"
  sweeper cluster down

exit status: 0 on success; 1 when a server fails to start or `status` finds the
cluster down; 2 when a cluster is already running, a port is taken (a process listens
on it; TIME_WAIT does not count), the backend store's database driver is missing (pip
install 'sweeper[server]' for postgresql://), or an option is wrong.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from sweeper.cli.common import EXIT_BAD_INPUT


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["up", "status", "down"], help="what to do")
    up = parser.add_argument_group("up")
    up.add_argument(
        "--host", default="127.0.0.1", help="address both bind to (default: %(default)s)"
    )
    for flag, default, what in (
        ("--ray-port", 6379, "Ray GCS port"),
        ("--dashboard-port", 8265, "Ray dashboard and job server port"),
        ("--mlflow-port", 5000, "MLflow tracking server port"),
    ):
        up.add_argument(
            flag, type=int, default=default, metavar="N", help=f"{what} (default: {default})"
        )
    up.add_argument(
        "--storage",
        type=Path,
        metavar="DIR",
        help="durable folder: the MLflow store and artifacts by default, Ray jobs' outputs, "
        "logs (default: $SWEEPER_HOME/cluster, i.e. ~/.sweeper/cluster)",
    )
    up.add_argument(
        "--backend-store-uri",
        metavar="URI",
        help="MLflow backend store (default: sqlite:///STORAGE/mlflow.db), e.g. "
        "postgresql://USER:PW@HOST:5432/DB (its driver: pip install 'sweeper[server]')",
    )
    up.add_argument(
        "--artifacts-destination",
        metavar="URI",
        help="where the server stores artifacts (default: STORAGE/mlartifacts), e.g. s3://bucket",
    )
    up.add_argument(
        "--auth",
        choices=["disabled", "token"],
        help="Ray's RAY_AUTH_MODE (default: disabled on a loopback --host, else token)",
    )
    up.add_argument(
        "--ray-args", default="", metavar="ARGS", help='more `ray start` arguments: "--num-cpus 4"'
    )
    up.add_argument(
        "--mlflow-args", default="", metavar="ARGS", help="more `mlflow server` arguments"
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        return _up(args)
    if args.action == "status":
        return _status()
    return _down()


def _up(args: argparse.Namespace) -> int:
    from sweeper.deploy.local import ClusterError, UpOptions, up

    try:
        options = UpOptions(
            host=args.host,
            ray_port=args.ray_port,
            dashboard_port=args.dashboard_port,
            mlflow_port=args.mlflow_port,
            storage=args.storage,
            backend_store_uri=args.backend_store_uri,
            artifacts_destination=args.artifacts_destination,
            auth=args.auth,
            ray_args=tuple(shlex.split(args.ray_args)),
            mlflow_args=tuple(shlex.split(args.mlflow_args)),
        )
    except ValueError as exc:  # unbalanced quotes in --ray-args
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"starting a Ray head on {args.host} and an MLflow server ...", flush=True)
    try:
        state = up(options)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if exc.bad_input else 1
    env = "" if state.auth_mode == "disabled" else "RAY_AUTH_MODE=token "
    submit = f"{env}ray job submit --address {state.dashboard_url} --working-dir ."
    print(f"""cluster up (state: {_state_path()})
  Ray head:        {state.gcs_address}   (auth: {state.auth_mode})
  Ray dashboard:   {state.dashboard_url}   (job server)
  MLflow UI:       {state.tracking_uri}
  storage:         {state.storage}
  MLflow store:    {state.backend_store_uri}, artifacts in {state.artifacts_destination}
  logs:            {state.log_dir}

a worker machine joins with:
  RAY_AUTH_MODE={state.auth_mode} ray start --address {state.gcs_address}
submit a sweep (from the checkout):
  {submit} -- sweeper run sweeps/demo.yaml
then:
  sweeper summarize sweeps/demo.yaml      (uses this cluster's tracking server)
  sweeper cluster down""")
    if state.auth_mode == "token":
        print(
            "token auth: every node and client needs RAY_AUTH_MODE=token and the token in "
            "~/.ray/auth_token (or $RAY_AUTH_TOKEN)"
        )
    return 0


def _state_path() -> Path:
    from sweeper.deploy.state import state_path

    return state_path()


def _status() -> int:
    from sweeper.deploy.local import alive_nodes
    from sweeper.deploy.state import alive_groups, load_state
    from sweeper.tracking.server import TrackingUnreachable, check_server

    state = load_state()
    if state is None:
        print(f"no cluster: no state file at {_state_path()} (`sweeper cluster up` starts one)")
        return 1
    groups = alive_groups(state)
    try:
        check_server(state.tracking_uri, timeout=3)
        mlflow = "healthy"
    except TrackingUnreachable as exc:
        mlflow = f"not answering ({exc.reason})"
    nodes = alive_nodes(state) if groups["ray"] else None
    print(f"cluster from {_state_path()}")
    print(f"  Ray head:       {state.gcs_address}  process group {state.ray_pgid}: "
          f"{'running' if groups['ray'] else 'stopped'}  (auth: {state.auth_mode})")  # fmt: skip
    print(f"  Ray dashboard:  {state.dashboard_url}")
    print(f"  MLflow:         {state.tracking_uri}  process group {state.mlflow_pgid}: "
          f"{'running' if groups['mlflow'] else 'stopped'}, {mlflow}")  # fmt: skip
    print(f"  storage:        {state.storage}")
    if nodes is None:
        print("  nodes:          the dashboard did not answer")
    else:
        print(f"  nodes:          {len(nodes)} alive")
        for node in nodes:
            resources = node.get("resources_total") or {}
            cpus = resources.get("CPU", 0)
            gpus = resources.get("GPU", 0)
            head = " (head)" if node.get("is_head_node") else ""
            node_id = str(node.get("node_id", ""))[:12]
            print(f"    {node.get('node_ip')}{head}  CPU {cpus:g}  GPU {gpus:g}  {node_id}")
    healthy = all(groups.values()) and mlflow == "healthy" and bool(nodes)
    return 0 if healthy else 1


def _down() -> int:
    from sweeper.deploy.local import down

    if down():
        print("cluster stopped; state file removed")
    else:
        print(f"no cluster to stop (no state file at {_state_path()})")
    return 0
