"""Submit `sweeper run SPEC [overrides]` to a Ray cluster as a Ray job.

The spec is validated here first (exit 2 on a bad spec, before anything is
submitted). The --working-dir folder (default: the current one) is uploaded to the
cluster, without virtual environments, run outputs, checkpoints and VCS data; SPEC
must lie inside it, and the job runs `sweeper run` from there on the cluster's head
node, where $RAY_ADDRESS points the sweep at the cluster itself.

Outputs: the job runs in Ray's temporary copy of the working dir, which Ray deletes
later. `sweeper run` there re-roots a relative output_dir onto the cluster's durable
storage ($SWEEPER_STORAGE on the head, which `sweeper cluster up` sets: runs/demo ->
STORAGE/runs/demo) and records to the cluster's tracking server ($MLFLOW_TRACKING_URI on
the head, or --tracking-uri); with no durable place the job exits 2 before anything runs.

With no --address (and no $RAY_API_SERVER_ADDRESS), the job server of a running
`sweeper cluster up` on this machine is used.

By default the job's logs are followed until it ends and the exit status is the job's;
with --no-wait the job id and the commands to follow it are printed and sweeper exits.

examples:
  sweeper submit sweeps/roberta.yaml --address http://HEAD:8265
  sweeper submit sweeps/roberta.yaml grid.seed=[1] --address http://HEAD:8265 --no-wait
  sweeper submit sweeps/roberta.yaml --address http://HEAD:8265 --tracking-uri http://MLFLOW:5000

exit status: 0 when the job succeeded (or was submitted, with --no-wait); 1 when it
failed or was stopped; 2 for a bad spec, a SPEC outside --working-dir or an unreachable
job server.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.cli.common import add_spec_argument, fail, load_or_exit

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

EXCLUDES = [
    ".venv",
    "venv",
    ".git",
    "runs",
    "mlruns",
    "mlartifacts",
    "*.pt",
    "*.ckpt",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "*.egg-info",
    ".env",
]
"""Never uploaded: Ray caps a working dir at a few hundred MiB, and these are either
rebuilt on the cluster (environments, caches) or outputs that must not travel back;
`.env` files (docker/.env) hold credentials, which belong in the cluster's own secrets."""


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument(
        "--address",
        metavar="URL",
        help="Ray job server, e.g. http://HEAD:8265 (default: $RAY_API_SERVER_ADDRESS, else "
        "a running `sweeper cluster up`)",
    )
    parser.add_argument(
        "--working-dir",
        default=".",
        metavar="DIR",
        help="folder uploaded as the job's working dir; must contain SPEC (default: .)",
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="print the job id and exit; do not follow logs"
    )
    parser.add_argument(
        "--tracking-uri", metavar="URI", help="passed to `sweeper run --tracking-uri`"
    )
    parser.add_argument("--resume", action="store_true", help="passed to `sweeper run --resume`")
    parser.add_argument(
        "--max-concurrent", type=int, metavar="N", help="passed to `sweeper run --max-concurrent`"
    )


def entrypoint(spec: str, overrides: list[str], args: argparse.Namespace) -> str:
    """The job's shell command: `sweeper run` with the spec path relative to the
    working dir (the job's cwd) and every argument quoted for the shell."""
    words = ["sweeper", "run", spec, *overrides]
    if args.tracking_uri:
        words += ["--tracking-uri", args.tracking_uri]
    if args.resume:
        words.append("--resume")
    if args.max_concurrent is not None:
        words += ["--max-concurrent", str(args.max_concurrent)]
    return shlex.join(words)


def spec_in_working_dir(spec: str, working_dir: str) -> str:
    """SPEC's path relative to the working dir (POSIX form, as the cluster sees it);
    exit 2 when SPEC is outside it, since the job could not read it."""
    root = Path(working_dir).resolve()
    if not root.is_dir():
        fail(f"--working-dir {working_dir}: not a folder")
    path = Path(spec).resolve()
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        fail(f"{spec}: the spec must be inside --working-dir ({root}) to reach the cluster")


def run(args: argparse.Namespace) -> int:
    load_or_exit(args.spec, args.overrides)  # a bad spec stops here, before any upload
    if args.max_concurrent is not None and args.max_concurrent < 1:
        fail("--max-concurrent must be at least 1")
    address = args.address or os.environ.get("RAY_API_SERVER_ADDRESS") or _cluster_address()
    if not address:
        fail("no Ray job server: pass --address http://HEAD:8265 (or `sweeper cluster up`)")
    relative = spec_in_working_dir(args.spec, args.working_dir)
    command = entrypoint(relative, list(args.overrides), args)
    client = _client(address)
    runtime_env: dict[str, Any] = {
        "working_dir": str(Path(args.working_dir).resolve()),
        "excludes": EXCLUDES,
    }
    job_id = client.submit_job(entrypoint=command, runtime_env=runtime_env)
    print(f"submitted job {job_id}: {command}")
    print(f"  follow: ray job logs --address {address} --follow {job_id}")
    print(f"  status: ray job status --address {address} {job_id}")
    print(f"  stop:   ray job stop --address {address} {job_id}", flush=True)
    if args.no_wait:
        return 0
    return _follow(client, job_id, address)


def _cluster_address() -> str | None:
    """The job server of a running `sweeper cluster up` on this machine, if any."""
    from sweeper.deploy.state import running_cluster

    cluster = running_cluster()
    return cluster.dashboard_url if cluster is not None else None


def _client(address: str) -> JobSubmissionClient:
    """A Jobs client; an unreachable job server is bad input (exit 2), said plainly.
    Ray's own INFO lines (the working dir's upload) go to the third-party log."""
    from ray.job_submission import JobSubmissionClient

    from sweeper.logs import quiet_root_logger

    quiet_root_logger()  # importing Ray attached its terminal handler (sweeper.logs)

    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        fail(f"cannot reach the Ray job server at {address}: {exc}")


def _follow(client: JobSubmissionClient, job_id: str, address: str) -> int:
    """Stream the job's logs until it ends; 0 when it succeeded, else 1. Ctrl-C stops
    following, not the job."""
    import asyncio
    import time

    from ray.job_submission import JobStatus

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            sys.stdout.write(chunk)
            sys.stdout.flush()

    try:
        asyncio.run(tail())
        status = client.get_job_status(job_id)
        while not status.is_terminal():  # the log stream can close just before the end
            time.sleep(1)
            status = client.get_job_status(job_id)
    except KeyboardInterrupt:
        print(
            f"\nstopped following; job {job_id} keeps running "
            f"(ray job stop --address {address} {job_id} stops it)",
            file=sys.stderr,
        )
        return 130
    succeeded = status == JobStatus.SUCCEEDED
    print(f"job {job_id}: {status.value}", file=sys.stdout if succeeded else sys.stderr)
    return 0 if succeeded else 1
