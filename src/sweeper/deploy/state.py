"""The state file of a cluster started by `sweeper cluster up`, and whether it still runs.

`up` records what it started in `$SWEEPER_HOME/cluster.json` (default
`~/.sweeper/cluster.json`): the addresses, the storage folder and the process group of
each server. Three readers need it: `down` (stop exactly those groups and nothing
else), `up` (refuse to start a second cluster over a running one) and every command
that picks a default tracking store (`resolve.tracking_uri`: a running cluster's
server is the default before the local SQLite store).

"Running" is decided by the recorded process groups, checked against what their
leaders' command lines say they are (a recycled pid is not our server), never by
looking for Ray or MLflow processes by name: other people's processes are not ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_FILE = "cluster.json"
HOME_ENV = "SWEEPER_HOME"
STORAGE_ENV = "SWEEPER_STORAGE"
"""Durable folder a Ray job's relative outputs are re-rooted onto. `cluster up` sets it
in the head's environment (so every job driver inherits it); a cluster started by other
means can set it where its `ray start --head` runs."""


def sweeper_home() -> Path:
    """`$SWEEPER_HOME`, else `~/.sweeper`: this user's cluster state and default storage."""
    value = os.environ.get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".sweeper"


def state_path() -> Path:
    return sweeper_home() / STATE_FILE


@dataclass(frozen=True)
class ClusterState:
    """What `sweeper cluster up` started, as recorded in the state file."""

    host: str
    ray_port: int
    dashboard_port: int
    mlflow_port: int
    storage: str
    """Durable folder: the default MLflow store and artifacts, and re-rooted job outputs."""
    ray_temp_dir: str
    """The head's private Ray temp dir: only this cluster's processes name it."""
    auth_mode: str
    """RAY_AUTH_MODE the head runs with: `disabled` or `token`."""
    ray_pgid: int
    mlflow_pgid: int
    backend_store_uri: str
    artifacts_destination: str
    log_dir: str

    @property
    def url_host(self) -> str:
        """The host to put in a URL or address: a wildcard bind is reached on loopback."""
        if self.host in {"0.0.0.0", "::", ""}:
            return "127.0.0.1"
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def tracking_uri(self) -> str:
        return f"http://{self.url_host}:{self.mlflow_port}"

    @property
    def dashboard_url(self) -> str:
        """The Ray dashboard and job server (`ray job submit --address`)."""
        return f"http://{self.url_host}:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        """What a worker's `ray start --address` and a driver's `--address` take."""
        return f"{self.url_host}:{self.ray_port}"

    def groups(self) -> dict[str, int]:
        return {"ray": self.ray_pgid, "mlflow": self.mlflow_pgid}


def load_state(path: Path | None = None) -> ClusterState | None:
    """The recorded cluster, None when there is no state file (or it is unreadable)."""
    path = path or state_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ClusterState(**data)
    except (OSError, ValueError, TypeError):
        return None


def save_state(state: ClusterState, path: Path | None = None) -> Path:
    """Write the state file atomically (a reader never sees half of it)."""
    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def remove_state(path: Path | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        (path or state_path()).unlink()


GROUP_MARKERS = {"ray": b"ray", "mlflow": b"mlflow"}
"""A recorded group counts as ours only if its leader's command line still names this."""


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, from /proc. A zombie has
    finished: only its parent can reap it, and it must not make a stopped cluster look
    running (a `ray start` whose launcher exited is reparented and may stay a zombie)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def running(pid: int) -> bool:
    """The process exists and has not finished (a zombie, or a pid gone, is not)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after "pid (comm) ": state, ppid, pgid, ...; [] when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rindex(")") + 2 :].split()


def group_alive(pgid: int, marker: bytes = b"") -> bool:
    """The process group has live members, and its leader (pid == pgid), if still
    alive, has `marker` in its command line: a pid reused by another program (a new
    group of the same number) is not our group. A leader that exited leaves its group
    alive as long as a member is."""
    if pgid <= 1:
        return False
    members = group_members(pgid)
    if not members:
        return False
    if pgid not in members:
        return True  # leader gone, members remain
    try:
        return marker in Path(f"/proc/{pgid}/cmdline").read_bytes()
    except OSError:
        return False


def alive_groups(state: ClusterState) -> dict[str, bool]:
    return {name: group_alive(pgid, GROUP_MARKERS[name]) for name, pgid in state.groups().items()}


def running_cluster(timeout: float = 2.0) -> ClusterState | None:
    """The recorded cluster if both its servers' groups live and its tracking server
    answers; None otherwise (no state file, a stopped or crashed cluster)."""
    state = load_state()
    if state is None or not all(alive_groups(state).values()):
        return None
    from sweeper.tracking.server import TrackingUnreachable, check_server

    try:
        check_server(state.tracking_uri, timeout=timeout, store=False)  # the caller's own
        # check then says whether its database answers
    except TrackingUnreachable:
        return None
    return state


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send `sig` to a process group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
