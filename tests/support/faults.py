"""Injecting faults into real sweeps from outside, and checking what MLflow kept.

Shared by the fault tests (tests/integration/test_faults.py, test_faults_db.py,
test_cluster_no_shared_fs.py, ...): start `sweeper run` in its own process group, find a
trial's folder, checkpoint step and trainer processes, SIGKILL a set of pids, take part
of the tracking store away mid-sweep (`sweep_through_outage`), and compare a trial run's
metric history with the trainer's own events file (0 lost, 0 duplicated).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from sweeper.trainers.events import read_events
from sweeper.tune.trainable import event_points
from tests.support.cluster import MlflowServer, mlflow_server
from tests.support.postgres import PostgresServer
from tests.support.processes import kill_group
from tests.support.sweeps import roles_in, runs_by_role, shared, sweeper_command

TRAINER_SCRIPT = "dummy_trainer.py"
"""What a dummy trainer's command line holds (it runs as a script, by path)."""
# Ray declares a node dead after failure_threshold missed health checks, 5 x 3 s by
# default; the test cluster checks every second (set for every node's `ray start`).
FAST_NODE_DEATH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


# --- processes and trial folders ---------------------------------------------------------


def start_sweep(log: Path, *args: str | Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`sweeper run ...` in its own process group, stdout and stderr to `log`."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            sweeper_command("run", *args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def trial_folder(out: Path, seed: int) -> Path | None:
    return next((out / "trials").glob(f"dummy-random-full-s{seed}-*"), None)


def trainer_log(out: Path, seed: int) -> Path:
    """The trainer log of the dummy trial of `seed` (its folder must exist)."""
    folder = trial_folder(out, seed)
    assert folder is not None, f"no folder for s{seed}"
    return folder / record_names.TRAINER_LOG_FILE


def checkpoint_step(folder: Path) -> int:
    """The step of the trial's last checkpoint (0: none yet)."""
    last = folder / record_names.CHECKPOINT_DIR / "last.json"
    with contextlib.suppress(OSError, ValueError):
        return int(json.loads(last.read_text())["step"])
    return 0


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def trainer_pids(
    folder: Path, among: set[int] | None = None, marker: str = TRAINER_SCRIPT
) -> list[int]:
    """Live trainer processes working in `folder` (optionally only among `among`): the
    dummy's by default; `marker="sweeper.trainers."` for fairseq and HF trainers, whose
    command lines name their module and the folder (the Ray worker's names neither)."""
    found = []
    for pid in among if among is not None else _pids():
        line = _cmdline(pid)
        if marker.encode() in line and folder.name.encode() in line:
            found.append(pid)
    return found


def descendants(root: int) -> set[int]:
    """Every live process below `root` in the process tree (from /proc/PID/stat)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def sigkill(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def wait_until(check: Any, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> Any:
    """Poll `check()` until it returns something truthy; fail if the sweep ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"sweeper exited ({proc.returncode}) first:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def wait_for_text(
    log: Path, texts: list[str], proc: subprocess.Popen[bytes], timeout: float
) -> None:
    """Wait until the sweep's output holds every one of `texts`."""

    def printed() -> bool:
        content = log.read_text(errors="replace") if log.exists() else ""
        return all(text in content for text in texts)

    wait_until(printed, proc, log, timeout)


RESUME_FAULTS = {"*": {"sleep_per_step": 0.4}, "random-full-s1": {"sleep_per_step": 0.02}}
"""The killed-driver scenarios' dummy trials: s1 fast (it finishes first), the rest slow."""


def kill_driver_once(log: Path, proc: subprocess.Popen[bytes], texts: list[str]) -> None:
    """SIGKILL the driver once its output holds `texts` (nothing of its own runs at
    exit), then the Ray helpers its process group leaves behind."""
    try:
        wait_for_text(log, texts, proc, timeout=180)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc.pid)


def event_lines(out: Path) -> int:
    """Metric events the sweep's trials have written so far (every trial's events file)."""
    return sum(
        len(p.read_text().splitlines())
        for p in (out / "trials").glob(f"*/{record_names.EVENTS_FILE}")
    )


def finish(proc: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> str:
    """Wait for the sweep to end; its whole output."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"sweep did not end within {timeout:.0f}s:\n{log.read_text()[-3000:]}")
    return log.read_text(errors="replace")


def server_root(tmp_path: Path, tmp_path_factory: Any) -> Path:
    """A tracking server's folder whose SQLite backend is already migrated (copied from
    the session's empty store): the server then starts in seconds, not tens of them."""
    root = tmp_path / "server"
    root.mkdir()
    shutil.copy(shared(tmp_path_factory)["store"], root / "server.db")
    return root


# --- what MLflow holds against what the trial measured ----------------------------------


def compare_with_events(
    client: Any, run: Any, folder: Path, ignore: tuple[str, ...] = ()
) -> tuple[int, int, int]:
    """(points in the events file, of them missing in MLflow, duplicate or extra points
    in MLflow) for one trial run: every point of the trial's local events file (the
    trainer's own record, latest measurement per step) must be the latest point of its
    step in the run's metric history, and no point may be logged twice. A step measured
    again after a resume may hold its first value too, superseded (the Reporter's
    corrections); that is neither missing nor extra. Metrics in `ignore` are left out."""
    expected = expected_points(folder, ignore)
    history: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for key in compared_keys(expected, ignore):
        for m in client.get_metric_history(run.info.run_id, key):
            history.setdefault((key, m.step), []).append((m.timestamp, m.value))
    return compare_points(expected, history)


def expected_points(folder: Path, ignore: tuple[str, ...] = ()) -> dict[tuple[str, int], float]:
    """(metric, step) -> value of every point in a trial's events file."""
    return {
        (key, int(step)): float(value)
        for event in read_events(folder / record_names.EVENTS_FILE)
        for step, key, value in event_points(event)
        if key not in ignore
    }


def compared_keys(expected: dict[tuple[str, int], float], ignore: tuple[str, ...] = ()) -> set[str]:
    """The metrics whose history `compare_points` needs: the events file's and the
    trainers' own names (a point under one of those, not in the file, is extra)."""
    return ({k for k, _ in expected} | set(record_names.METRIC_NAMES)) - set(ignore)


def compare_points(
    expected: dict[tuple[str, int], float],
    history: dict[tuple[str, int], list[tuple[int, float]]],
) -> tuple[int, int, int]:
    """`compare_with_events`'s rule, for a history read any way ((metric, step) ->
    [(timestamp, value)] of the `compared_keys`): (expected, missing, duplicated or
    extra)."""
    latest = {where: max(points)[1] for where, points in history.items()}
    missing = sum(1 for where, value in expected.items() if latest.get(where) != value)
    repeated = sum(len(p) - len({v for _, v in p}) for p in history.values())
    return len(expected), missing, repeated + len(set(history) - set(expected))


def trials_by_seed(out: Path, experiment: str) -> dict[int, list[Any]]:
    return by_seed(runs_by_role(out, experiment)[1])


def by_seed(trials: list[Any]) -> dict[int, list[Any]]:
    """Trial runs grouped by their seed tag (a key with two runs is a duplicate)."""
    grouped: dict[int, list[Any]] = {}
    for run in trials:
        grouped.setdefault(int(run.data.tags[record_names.TAG_SEED]), []).append(run)
    return grouped


def server_counts(client: Any, experiment: str, out: Path) -> tuple[list[Any], dict[int, Any]]:
    """(trial runs of the experiment in any store, `compare_with_events` per seed)."""
    _, trials = roles_in(client, experiment)
    counts = {}
    for run in trials:
        seed = int(run.data.tags[record_names.TAG_SEED])
        counts[seed] = compare_with_events(client, run, trial_folder(out, seed) or out)
    return trials, counts


# --- part of the tracking store taken away mid-sweep, then given back ---------------------


@dataclass
class Outage:
    """What a sweep did through a tracking store that went away mid-sweep and came back."""

    returncode: int
    text: str
    """the driver's whole output"""
    down_s: float
    made_while_down: int
    """metric events the trials wrote between the fault and the store's return"""
    trials: list[Any]
    counts: dict[int, tuple[int, int, int]]
    """seed -> (points in its events file, missing in MLflow, duplicated or extra)"""

    def totals(self) -> tuple[int, int, int]:
        points, missing, extra = zip(*self.counts.values(), strict=True)
        return sum(points), sum(missing), sum(extra)

    def line(self, text: str) -> str:
        """The driver's first output line holding `text`, without its `warning: `."""
        found = next(line for line in self.text.splitlines() if text in line)
        return found.removeprefix("warning: ")

    def last_line(self, text: str) -> str:
        """The driver's last output line holding `text`, without its `warning: `."""
        found = [line for line in self.text.splitlines() if text in line][-1]
        return found.removeprefix("warning: ")

    def assert_every_point_once(self, seeds: list[int]) -> None:
        """Exit 0, the outage said so and its end too, every trial FINISHED once, and
        MLflow holds each trial's events file exactly (0 lost, 0 duplicated)."""
        assert self.returncode == 0, self.text[-3000:]
        assert self.made_while_down > 0  # the trials measured things while it was away
        assert "tracking store unreachable" in self.text, self.text[-3000:]
        assert "tracking store reachable again" in self.text, self.text[-3000:]
        assert len(self.trials) == len(seeds), [r.info.run_name for r in self.trials]
        assert all(r.info.status == "FINISHED" for r in self.trials)
        assert sorted(self.counts) == seeds
        for seed, (points, missing, extra) in self.counts.items():
            assert points > 0 and (missing, extra) == (0, 0), f"s{seed}: {points} {missing} {extra}"


def sweep_through_outage(
    spec: Path,
    out: Path,
    log: Path,
    uri: str,
    env: dict[str, str],
    outage: Callable[[], AbstractContextManager[object]],
) -> Outage:
    """`sweeper run spec --tracking-uri uri`; once the trials have begun, `outage()` is
    entered: it takes part of the store away and gives it back before its body runs,
    which waits for the sweep and reads what the store holds (the store must still be
    up for that: the outage's context is left afterwards)."""
    from mlflow import MlflowClient

    experiment = yaml_name(spec)
    proc = start_sweep(log, spec, "--tracking-uri", uri, env=env)
    try:
        wait_until(lambda: event_lines(out) >= 4, proc, log, timeout=240)
        down_at, lines_down = time.monotonic(), event_lines(out)
        with outage():
            down_s = time.monotonic() - down_at
            made_while_down = event_lines(out) - lines_down
            text = finish(proc, log)
            trials, counts = server_counts(MlflowClient(uri), experiment, out)
    finally:
        kill_group(proc.pid)
    return Outage(proc.wait(), text, down_s, made_while_down, trials, counts)


def yaml_name(spec: Path) -> str:
    """The sweep's name (its MLflow experiment) from its sweep file."""
    import yaml

    return str(yaml.safe_load(spec.read_text(encoding="utf-8"))["name"])


@contextlib.contextmanager
def server_restarted(
    server: MlflowServer, root: Path, backend_store_uri: str | None = None, pause_s: float = 3
) -> Iterator[MlflowServer]:
    """SIGKILL to the `mlflow server` process group (the server and its workers), then
    the same server (root, port, backend store) started again `pause_s` later."""
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=30)
    time.sleep(pause_s)
    with mlflow_server(root, port=server.port, backend_store_uri=backend_store_uri) as again:
        yield again


@contextlib.contextmanager
def database_stopped(postgres: PostgresServer, pause_s: float) -> Iterator[None]:
    """PostgreSQL stopped (fast shutdown: its clients are cut off) and, `pause_s` later,
    the same server (data dir, port) started again; the MLflow server is left running."""
    postgres.stop()
    time.sleep(pause_s)
    postgres.start()
    yield
