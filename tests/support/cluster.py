"""Real Ray clusters and MLflow servers on 127.0.0.1 for the cluster tests.

Every process is started here with `--block` (Ray) or in the foreground (MLflow) as a
child in its own process group, and stopped by that group at teardown. `ray stop` is
never used: it would kill every Ray process on the machine, other people's included.
Ray's daemons are found a second way too, through the cluster's own temp dir named on
their command lines, so a daemon that left the group is still stopped.

Ports are chosen free at start and every listening port Ray would otherwise default
(client server, dashboard agent, worker range) is set, so parallel runs don't collide.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import BIN, clean_env

RAY = str(BIN / "ray")
SWEEPER = str(BIN / "sweeper")
HOST = "127.0.0.1"
# Ray rewrites a node address of exactly 127.0.0.1 to the machine's outward address
# (`resolve_ip_for_localhost`), so nodes take other loopback addresses: the head
# 127.0.0.2, worker k 127.0.0.(2+k). Traffic stays in 127.0.0.0/8 and each node of the
# one-machine cluster has an address of its own, as on a real cluster.
HEAD_IP = "127.0.0.2"
FIRST_WORKER_IP = "127.0.0.3"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _node_ports(*taken: int) -> list[str]:
    """Ports of one node's own listeners: dedicated so two nodes on one host (or two
    test runs) never ask for the same one. Ray refuses a component port inside the
    worker range, so none is picked there, nor does the range cover a port of the node
    chosen before (`taken`: the head's GCS, dashboard and client ports)."""
    low = random.randrange(20000, 60000 - 400, 200)
    while any(low <= port <= low + 199 for port in taken):
        low = random.randrange(20000, 60000 - 400, 200)

    def outside() -> str:
        port = free_port()
        while low <= port <= low + 199:
            port = free_port()
        return str(port)

    return [
        "--node-manager-port", outside(),
        "--object-manager-port", outside(),
        "--dashboard-agent-listen-port", outside(),
        "--dashboard-agent-grpc-port", outside(),
        "--runtime-env-agent-port", outside(),
        "--metrics-export-port", outside(),
        "--min-worker-port", str(low),
        "--max-worker-port", str(low + 199),
    ]  # fmt: skip


def sweeper_cluster_up(
    env: dict[str, str],
    cwd: Path,
    storage: Path,
    *extra: str,
    ports: list[int] | None = None,
    timeout: float = 200,
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """`sweeper cluster up` on HEAD_IP with 2 CPUs, as a user runs it, on `ports` ([gcs,
    dashboard, mlflow]) or free ones; (its outcome, those ports). `extra`: more options."""
    ports = [*(ports or [free_port() for _ in range(3)]), free_port()]
    ray_args = ["--num-cpus", "2", "--num-gpus", "0", "--ray-client-server-port", str(ports[3])]
    started = subprocess.run(
        [SWEEPER, "cluster", "up", "--host", HEAD_IP, "--ray-port", str(ports[0]),
         "--dashboard-port", str(ports[1]), "--mlflow-port", str(ports[2]),
         "--storage", str(storage),
         "--ray-args", " ".join(ray_args + _node_ports(ports[0], ports[1], ports[3])), *extra],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return started, ports[:3]


def time_wait_ports() -> set[int]:
    """Local ports of this machine's IPv4 TCP sockets in TIME_WAIT (state 06), which a
    server that closed its connections first leaves behind for a minute."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "06":
            found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return found


def ray_env(**extra: str) -> dict[str, str]:
    """clean_env() plus this test cluster's own token authentication.

    Ray 2.5x turns token authentication on for a head by itself when
    `~/.ray/auth_token` exists, but a joining `ray start --address` does not, and then
    fails to join; and the dashboard answers 401 to clients without the token. So the
    mode is never left to machine state: every process of a test cluster, and every
    client the test runs against it, gets RAY_AUTH_MODE=token and a fresh token.
    """
    return clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32), **extra)


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 5) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return answer.read()


def wait_http(
    url: str,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Wait until `url` answers 200; fail early if `proc` (the server) exits."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}) before {url} answered")
        try:
            request = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(request, timeout=3) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s: {last}")


def _kill(proc: subprocess.Popen[bytes], marker: str | None = None) -> None:
    """SIGTERM then SIGKILL the process group of `proc`, and any process whose command
    line names `marker` (this cluster's private temp dir)."""
    pids = [proc.pid]
    if marker:
        pids += _pids_naming(marker)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _pids_naming(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


@dataclass
class RayCluster:
    """A head (and optional workers) started with `ray start --block`."""

    gcs_port: int
    dashboard_port: int
    temp_dir: str
    log_dir: Path
    env: dict[str, str]
    """for every process of the cluster and every client of it (token included)"""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        """For `sweeper run --address` / `ray.init`."""
        return f"{HEAD_IP}:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        """For `ray job submit --address` / `sweeper submit --address`."""
        return f"http://{HOST}:{self.dashboard_port}"

    def _start(self, name: str, args: list[str], wrap: tuple[str, ...] = ()) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 (lives with proc)
        proc = subprocess.Popen(
            [*wrap, RAY, "start", "--block", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.env['RAY_AUTH_TOKEN']}"}

    def add_worker(self, num_cpus: int, timeout: float = 90, wrap: tuple[str, ...] = ()) -> None:
        """Start one more node and wait until the cluster counts it alive. `wrap` is a
        command that execs `ray start ...` (e.g. `private_disk(...)`, a node of its own)."""
        expected = len(self.procs) + 1
        self._start(
            f"worker{expected - 1}",
            [
                "--address", self.address,
                "--node-ip-address", f"127.0.0.{2 + expected - 1}",
                "--num-cpus", str(num_cpus),
                "--temp-dir", self.temp_dir,
                *_node_ports(),
            ],
            wrap,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[-1].poll() is not None:
                raise RuntimeError(f"worker exited: {self.logs()}")
            if len(self.alive_nodes()) >= expected:
                return
            time.sleep(1)
        raise TimeoutError(f"worker did not join within {timeout}s: {self.logs()}")

    def alive_nodes(self) -> list[dict[str, object]]:
        """The cluster's ALIVE nodes, from the dashboard's state API."""
        url = f"{self.dashboard}/api/v0/nodes?limit=100"
        try:
            body = json.loads(get(url, self.headers()))
        except (urllib.error.URLError, OSError, ValueError):
            return []
        nodes = body.get("data", {}).get("result", {}).get("result", [])
        return [n for n in nodes if n.get("state") == "ALIVE"]

    def logs(self) -> str:
        """The tail of every node's `ray start` output, for failure messages."""
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _kill(proc, self.temp_dir)
        for pid in _pids_naming(self.temp_dir):  # anything the groups did not hold
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def private_disk(*folders: Path) -> tuple[str, ...]:
    """A command prefix that runs the rest of the command line as a machine of its own
    as far as `folders` go: in a private mount namespace (root only) with an empty tmpfs
    mounted over each folder, so the process tree neither reads what is there nor
    writes where the rest of this machine looks."""
    mounts = " && ".join(f'mount -t tmpfs sweeper-node "${i + 1}"' for i in range(len(folders)))
    script = f'{mounts} && shift {len(folders)} && exec "$@"'
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            *map(str, folders))  # fmt: skip


def mount_namespace(pid: int) -> str:
    """The mount namespace of a live process (e.g. `mnt:[4026532291]`)."""
    return os.readlink(f"/proc/{pid}/ns/mnt")


def namespace_pids(namespace: str) -> set[int]:
    """Every live process in `namespace`: with `private_disk`, the whole node, whatever
    process group or session its daemons moved to."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "mnt") == namespace:
                    found.add(int(entry.name))
    return found


@contextlib.contextmanager
def ray_cluster(
    log_dir: Path, head_cpus: int, timeout: float = 120, **env: str
) -> Iterator[RayCluster]:
    """A running head on 127.0.0.1 (job server included); torn down on exit. `env`
    adds variables to every node's environment (Ray workers inherit it)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    # Ray's socket paths live under the temp dir and must stay short (AF_UNIX limit).
    temp_dir = tempfile.mkdtemp(prefix="swr-", dir="/tmp")
    cluster = RayCluster(free_port(), free_port(), temp_dir, log_dir, ray_env(**env))
    client_port = free_port()
    try:
        cluster._start(
            "head",
            [
                "--head",
                "--node-ip-address", HEAD_IP,
                "--port", str(cluster.gcs_port),
                "--dashboard-host", HOST,
                "--dashboard-port", str(cluster.dashboard_port),
                "--ray-client-server-port", str(client_port),
                "--num-cpus", str(head_cpus),
                "--num-gpus", "0",
                "--temp-dir", temp_dir,
                "--disable-usage-stats",
                *_node_ports(cluster.gcs_port, cluster.dashboard_port, client_port),
            ],
        )  # fmt: skip
        wait_http(f"{cluster.dashboard}/api/version", timeout, cluster.procs[0], cluster.headers())
        deadline = time.monotonic() + timeout
        while not cluster.alive_nodes():  # the job server needs the head node registered
            if time.monotonic() > deadline:
                raise TimeoutError(f"head node not alive: {cluster.logs()}")
            time.sleep(0.5)
        yield cluster
    except BaseException:
        print(cluster.logs(), file=sys.stderr)
        raise
    finally:
        cluster.stop()


@dataclass
class MlflowServer:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"


@contextlib.contextmanager
def mlflow_server(
    root: Path,
    timeout: float = 120,
    port: int | None = None,
    backend_store_uri: str | None = None,
    workers: int = 1,
) -> Iterator[MlflowServer]:
    """`mlflow server` on 127.0.0.1 with a proxied artifact folder under `root` and a
    SQLite backend there, or `backend_store_uri` (a PostgreSQL database from
    tests/support/postgres.py: the cluster's own store). Started again with the same
    root, port and store, it is the same server restarted."""
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = open(root / "server.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server",
            "--host", HOST,
            "--port", str(port),
            "--workers", str(workers),
            "--backend-store-uri", backend_store_uri or f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination", str(root / "artifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # MLflow's job runner (for GenAI jobs, unused here) more than doubles start-up
        env=clean_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
        start_new_session=True,
    )  # fmt: skip
    log.close()
    server = MlflowServer(port, proc)
    try:
        wait_http(f"{server.uri}/health", timeout, proc)
        yield server
    except BaseException:
        print((root / "server.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        _kill(proc)
