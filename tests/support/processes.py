"""Starting and stopping the processes a test or a benchmark runs: the CLI, its clean
environment, and the process group it leaves behind.

Integration tests, cluster fixtures and bench/ scripts all run `sweeper` in a child
process. They must all strip the same pointers to other clusters and stores (a sweep
under test must never reach a real one) and stop what the child leaves (Ray's helper
processes outlive a killed driver), so those rules are written once, here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
"""This interpreter's bin folder: where `sweeper` and `ray` of the project live."""

FOREIGN = (
    "RAY_ADDRESS",
    "RAY_API_SERVER_ADDRESS",
    "MLFLOW_TRACKING_URI",
    "SWEEPER_DUMMY_EXTRA",
    "SWEEPER_STORAGE",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
)
"""Variables that point a child at another cluster or store, or at another test's faults,
or (the last: an embedded Ray started in the test process sets it to keep to loopback)
would make a `ray start` worker node refuse to join.
($SWEEPER_HOME, where a `sweeper cluster up` cluster is recorded, is pointed away from
the user's own by tests/conftest.py.)"""


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without FOREIGN, with this interpreter's bin first on PATH (Ray
    jobs then find `sweeper` there) and no usage reports, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.update(extra)
    return env


def sweeper_command(*args: str | Path) -> list[str]:
    """The CLI, run by this interpreter (the project's environment)."""
    return [sys.executable, "-m", "sweeper.cli.main", *map(str, args)]


def kill_group(pid: int) -> None:
    """SIGKILL what is left of the process group a test started (its pid is the pgid):
    Ray's helper processes outlive a SIGKILLed driver."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
