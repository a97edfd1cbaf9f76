"""A real PostgreSQL server for tests and benchmarks: Debian's binaries, a temp data dir,
127.0.0.1 and a free port, stopped by its pid.

`make install` puts the server binaries on the machine where they are missing
(`apt-get install postgresql`); nothing here installs anything. The server runs as an
unprivileged user: `initdb` and `postgres` refuse root, so under root (CI, the dev
machines) they run as the `postgres` system user the Debian package creates, elsewhere
as the current user. `postgres` itself runs in the foreground as our child, in a
process group of its own, so the pid we hold is the postmaster's and stopping it stops
exactly this server.

Trust authentication on loopback only: the server listens on 127.0.0.1 and a private
socket folder, and the database `mlflow` belongs to the role `mlflow`, as in
docker/compose.yaml.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
DATABASE = "mlflow"
ROLE = "mlflow"
START_TIMEOUT_S = 60.0


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine (`make install` installs them)."""


def server_bin_dir() -> Path:
    """The newest `/usr/lib/postgresql/<version>/bin` holding `initdb` and `postgres`."""

    def version(path: str) -> int:
        name = Path(path).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=version)
    if not found:
        raise PostgresMissing(
            "no PostgreSQL server under /usr/lib/postgresql/*/bin (`make install` runs "
            "`apt-get install postgresql` where it is missing)"
        )
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _run_as() -> tuple[Callable[[], None] | None, int | None, int | None]:
    """(preexec_fn, uid, gid) to drop root to the `postgres` user; nothing otherwise."""
    if os.geteuid() != 0:
        return None, None, None
    user = pwd.getpwnam("postgres")

    def drop() -> None:
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    return drop, user.pw_uid, user.pw_gid


@dataclass
class PostgresServer:
    """One server: its data dir, port and the postmaster process while it runs."""

    root: Path
    port: int
    bin_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    @property
    def uri(self) -> str:
        """The backend store URI MLflow takes, in the form docs/cluster.md shows."""
        return f"postgresql://{ROLE}@{HOST}:{self.port}/{DATABASE}"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def init(self) -> None:
        """`initdb` into a fresh data dir (owned by the server's user)."""
        drop, uid, gid = _run_as()
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if uid is not None:
            for path in (self.root, self.socket_dir):
                os.chown(path, uid, gid)
        subprocess.run(
            [
                str(self.bin_dir / "initdb"),
                "-D", str(self.data_dir),
                "-U", "postgres",
                "--auth", "trust",
                "--encoding", "UTF8",
                "--no-sync",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=drop,
            cwd=self.root,
        )  # fmt: skip

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the postmaster in the foreground (our child) and wait until it accepts
        connections. Started again after `stop`, it is the same server restarted."""
        drop, _, _ = _run_as()
        log = open(self.log_file, "ab")  # noqa: SIM115 (lives with the process)
        self.proc = subprocess.Popen(
            [
                str(self.bin_dir / "postgres"),
                "-D", str(self.data_dir),
                "-h", HOST,
                "-p", str(self.port),
                "-k", str(self.socket_dir),
                "-c", "fsync=off",
                "-c", "max_connections=200",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=drop,
            start_new_session=True,
            cwd=self.root,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}): {self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.2)
        raise TimeoutError(f"postgres did not accept connections in {timeout:.0f}s")

    def _ready(self) -> bool:
        probe = subprocess.run(
            [str(self.bin_dir / "pg_isready"), "-h", HOST, "-p", str(self.port), "-q"],
            check=False,
        )
        return probe.returncode == 0

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser; its output (psql's unaligned tuples)."""
        result = subprocess.run(
            [
                str(self.bin_dir / "psql"),
                "-h", HOST, "-p", str(self.port), "-U", "postgres", "-d", database,
                "-v", "ON_ERROR_STOP=1", "-A", "-t", "-c", sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )  # fmt: skip
        return result.stdout

    def create_database(self, name: str = DATABASE, owner: str = ROLE) -> str:
        """A database owned by `owner` (created if missing); its URI."""
        if not self.psql(f"SELECT 1 FROM pg_roles WHERE rolname = '{owner}'").strip():
            self.psql(f'CREATE ROLE "{owner}" LOGIN')
        self.psql(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return f"postgresql://{owner}@{HOST}:{self.port}/{name}"

    def stop(self, mode: signal.Signals = signal.SIGINT, timeout: float = 30) -> None:
        """Stop the postmaster by its pid: SIGINT is PostgreSQL's fast shutdown (clients
        are disconnected, nothing is lost); SIGKILL after `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(mode)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


@contextlib.contextmanager
def postgres_server(root: Path | None = None) -> Iterator[PostgresServer]:
    """A running server with the database `mlflow` (owner `mlflow`); stopped and its
    data dir removed on exit. `root` defaults to a fresh temp dir (which the server's
    user must be able to reach: /tmp is)."""
    owned = root is None
    root = Path(tempfile.mkdtemp(prefix="sweeper-pg-")) if root is None else root
    if owned:
        os.chmod(root, 0o755)
    server = PostgresServer(root=root / "pg", port=_free_port(), bin_dir=server_bin_dir())
    try:
        server.init()
        server.start()
        server.create_database()
        yield server
    finally:
        server.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)
