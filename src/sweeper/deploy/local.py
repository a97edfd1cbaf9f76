"""`sweeper cluster up | status | down`: a Ray head and an MLflow server on this machine.

`up` starts two real processes, each the leader of its own process group so that `down`
stops exactly them and what they spawned:

* `ray start --head --block`, bound to `--host` (loopback by default), with a private
  temp dir (only this cluster's daemons name it) and `RAY_AUTH_MODE` set explicitly.
  Ray 2.5x turns token auth on for a head started where `~/.ray/auth_token` exists (an
  embedded `ray.init`, e.g. `make demo`, leaves one), and then a plain `ray job submit`
  gets "Authentication required". On loopback the default is `disabled`, so Ray's own
  CLI works from this machine with no variables; off loopback it is `token`, and the
  token (`~/.ray/auth_token`, created if missing) must reach every node and client.
  The head's environment also carries `MLFLOW_TRACKING_URI`, `SWEEPER_STORAGE` and
  this interpreter's folder first on PATH: Ray job drivers inherit it, so `ray job
  submit ... -- sweeper run SPEC` runs this environment's `sweeper`, records to this
  cluster's server and keeps its outputs in its storage with no hidden variables.
* `mlflow server` with served artifacts: SQLite plus a folder under the storage by
  default, `--backend-store-uri` / `--artifacts-destination` for PostgreSQL and S3.

Ports and the backend store's driver are checked first (`sweeper.deploy.up_checks`).
Both servers must answer before `up` returns; their logs are under `STORAGE/logs/`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from sweeper.deploy.state import (
    STORAGE_ENV,
    ClusterState,
    alive_groups,
    group_members,
    load_state,
    remove_state,
    running,
    save_state,
    signal_group,
    state_path,
    sweeper_home,
)
from sweeper.deploy.up_checks import ClusterError, check_backend, check_ports, head_path
from sweeper.tracking.server import TrackingUnreachable, check_server

START_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0
"""`ray start --block` and the GCS outlive a SIGTERM to their group (as with `ray stop`,
whatever is left after the grace period is killed)."""


@dataclass(frozen=True)
class UpOptions:
    host: str = "127.0.0.1"
    ray_port: int = 6379
    dashboard_port: int = 8265
    mlflow_port: int = 5000
    storage: Path | None = None
    backend_store_uri: str | None = None
    artifacts_destination: str | None = None
    auth: str | None = None
    """`disabled` | `token`; None: disabled on loopback, token otherwise."""
    ray_args: tuple[str, ...] = ()
    """Extra `ray start` arguments (`--num-cpus 4`, ports)."""
    mlflow_args: tuple[str, ...] = ()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_storage() -> Path:
    return sweeper_home() / "cluster"


def up(options: UpOptions, log=print) -> ClusterState:
    """Start the head and the tracking server, wait until both answer, record them."""
    existing = load_state()
    if existing is not None:
        if any(alive_groups(existing).values()):
            raise ClusterError(
                f"a cluster started by `sweeper cluster up` is still running "
                f"(state file {state_path()}, Ray at {existing.gcs_address}, MLflow at "
                f"{existing.tracking_uri}); `sweeper cluster down` stops it",
                bad_input=True,
            )
        remove_state()  # a crashed cluster's leftover
    ports = {
        "--ray-port": options.ray_port,
        "--dashboard-port": options.dashboard_port,
        "--mlflow-port": options.mlflow_port,
    }
    check_ports(options.host, ports)
    check_backend(options.backend_store_uri)
    auth = options.auth or ("disabled" if is_loopback(options.host) else "token")
    storage = (options.storage or default_storage()).expanduser().resolve()
    logs = storage / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    backend = options.backend_store_uri or f"sqlite:///{storage / 'mlflow.db'}"
    artifacts = options.artifacts_destination or str(storage / "mlartifacts")
    # Ray's socket paths live under the temp dir and must stay short (AF_UNIX limit).
    temp_dir = tempfile.mkdtemp(prefix="sweeper-ray-", dir="/tmp")
    state = ClusterState(
        host=options.host,
        ray_port=options.ray_port,
        dashboard_port=options.dashboard_port,
        mlflow_port=options.mlflow_port,
        storage=str(storage),
        ray_temp_dir=temp_dir,
        auth_mode=auth,
        ray_pgid=0,
        mlflow_pgid=0,
        backend_store_uri=backend,
        artifacts_destination=artifacts,
        log_dir=str(logs),
    )
    tracking = state.tracking_uri
    env = dict(os.environ)
    env.update(
        {
            "PATH": head_path(env.get("PATH")),
            "RAY_AUTH_MODE": auth,
            "MLFLOW_TRACKING_URI": tracking,
            STORAGE_ENV: str(storage),
            "RAY_USAGE_STATS_ENABLED": env.get("RAY_USAGE_STATS_ENABLED", "0"),
            "MLFLOW_DISABLE_TELEMETRY": env.get("MLFLOW_DISABLE_TELEMETRY", "true"),
        }
    )
    if auth == "token":
        _ensure_token(env)
    mlflow = _spawn(
        [
            sys.executable, "-m", "mlflow", "server",
            "--host", options.host,
            "--port", str(options.mlflow_port),
            "--backend-store-uri", backend,
            "--artifacts-destination", artifacts,
            *_allowed_hosts(options),
            *options.mlflow_args,
        ],
        logs / "mlflow.log",
        # MLflow's job runner (GenAI jobs, unused here) more than doubles its start-up
        {**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )  # fmt: skip
    ray = _spawn(
        [
            _ray_bin(), "start", "--head", "--block",
            "--node-ip-address", options.host if options.host not in {"0.0.0.0", "::"} else "",
            "--port", str(options.ray_port),
            "--dashboard-host", options.host,
            "--dashboard-port", str(options.dashboard_port),
            "--temp-dir", temp_dir,
            "--disable-usage-stats",
            *options.ray_args,
        ],
        logs / "ray-head.log",
        env,
    )  # fmt: skip
    state = replace(state, ray_pgid=ray.pid, mlflow_pgid=mlflow.pid)
    save_state(state)  # before waiting: `down` can stop a half-started cluster
    try:
        _wait(
            lambda: check_server(tracking, timeout=2), mlflow, "MLflow server", logs / "mlflow.log"
        )
        version = f"{state.dashboard_url}/api/version"
        _wait(lambda: _get(version, ray_headers(auth)), ray, "Ray head", logs / "ray-head.log")
        _wait_nodes(state, ray, logs / "ray-head.log")
    except BaseException:
        down(log=lambda _line: None)
        raise
    return state


MLFLOW_DEFAULT_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::", "::1", ""}
"""Hosts MLflow 3's DNS-rebinding guard accepts in a Host header without being told
(with private-network addresses: mlflow/server/security_utils.py)."""


def _allowed_hosts(options: UpOptions) -> list[str]:
    """`--allowed-hosts` for a --host MLflow would otherwise answer with 403 "Invalid
    Host header" (say 127.0.0.2, or a public name); unless the user passed their own."""
    if options.host in MLFLOW_DEFAULT_HOSTS or "--allowed-hosts" in options.mlflow_args:
        return []
    name = f"[{options.host}]" if ":" in options.host else options.host
    hosts = [name, f"{name}:*", "localhost", "localhost:*", "127.0.0.1", "127.0.0.1:*"]
    return ["--allowed-hosts", ",".join(hosts)]


def _strip_empty(command: list[str]) -> list[str]:
    """Drop an option whose value is empty (`--node-ip-address ''` for a wildcard host)."""
    out: list[str] = []
    for word in command:
        if word == "" and out:
            out.pop()
            continue
        out.append(word)
    return out


def _spawn(command: list[str], log_file: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start `command` as the leader of a new session (its own process group), its
    output appended to `log_file`; it outlives this CLI."""
    with open(log_file, "ab") as log:
        return subprocess.Popen(
            _strip_empty(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _ray_bin() -> str:
    """The `ray` of this interpreter's environment (the one sweeper runs in)."""
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


def _ensure_token(env: dict[str, str]) -> None:
    """Token mode needs a token before `ray start`; `ray get-auth-token --generate`
    creates `~/.ray/auth_token` if missing."""
    if env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH"):
        return
    subprocess.run(
        [_ray_bin(), "get-auth-token", "--generate"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ray_headers(auth_mode: str) -> dict[str, str]:
    """The dashboard's Authorization header in token mode (the token Ray would use)."""
    if auth_mode != "token":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN")
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        with contextlib.suppress(OSError):
            token = path.read_text(encoding="utf-8").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _get(url: str, headers: dict[str, str], timeout: float = 3.0) -> bytes:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return answer.read()


def _wait(
    probe: Callable[[], object], proc: subprocess.Popen[bytes], what: str, log_file: Path
) -> None:
    """Until `probe` succeeds (the server answers) or the process dies or time is up.
    MLflow's probe is `tracking.server.check_server`, the check every command makes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{what} exited ({proc.returncode}); {_tail(log_file)}")
        try:
            probe()
            return
        except (urllib.error.URLError, OSError, TrackingUnreachable) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise ClusterError(f"{what} did not answer ({last}); {_tail(log_file)}")


def _wait_nodes(state: ClusterState, proc: subprocess.Popen[bytes], log_file: Path) -> None:
    """The job server accepts jobs once the head node is registered alive."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"Ray head exited ({proc.returncode}); {_tail(log_file)}")
        if alive_nodes(state):
            return
        time.sleep(0.5)
    raise ClusterError(f"the Ray head node did not register; {_tail(log_file)}")


def alive_nodes(state: ClusterState) -> list[dict[str, object]] | None:
    """The cluster's ALIVE nodes from the dashboard's state API; None if it did not answer."""
    url = f"{state.dashboard_url}/api/v0/nodes?limit=1000"
    try:
        body = json.loads(_get(url, ray_headers(state.auth_mode)))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    nodes = body.get("data", {}).get("result", {}).get("result", [])
    return [n for n in nodes if n.get("state") == "ALIVE"]


def _tail(log_file: Path, chars: int = 1500) -> str:
    try:
        return f"its log ({log_file}) ends:\n{log_file.read_text(errors='replace')[-chars:]}"
    except OSError:
        return f"see {log_file}"


def down(log=print) -> bool:
    """Stop what `up` recorded (by process group, then anything naming the cluster's
    private Ray temp dir), remove the state file. False when nothing was recorded."""
    state = load_state()
    if state is None:
        return False
    groups = [pgid for name, pgid in state.groups().items() if alive_groups(state)[name]]
    for pgid in groups:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_group_exists(g) for g in groups):
        time.sleep(0.3)
    for pgid in groups:
        if _group_exists(pgid) and signal_group(pgid, signal.SIGKILL):
            log(f"process group {pgid}: what outlived SIGTERM for {STOP_GRACE_S:g} s was killed")
    killed = _pids_naming(state.ray_temp_dir)  # Ray daemons/workers that left the group
    for pid in killed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    # SIGKILL is delivered, not done: a process still frees its memory and ports after
    # it. `down` returns once they are gone, so a new `up` finds the ports free.
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and (
        any(_group_exists(g) for g in groups) or any(running(p) for p in killed)
    ):
        time.sleep(0.1)
    shutil.rmtree(state.ray_temp_dir, ignore_errors=True)
    remove_state()
    return True


def _group_exists(pgid: int) -> bool:
    return bool(group_members(pgid))


def _pids_naming(marker: str) -> list[int]:
    """This user's processes whose command line names `marker` (never our own)."""
    if not marker.startswith(tempfile.gettempdir()) or "sweeper-ray-" not in marker:
        return []  # only ever a private dir `up` created
    found = []
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found
