"""Ctrl-C and SIGTERM on `sweeper run`: a graceful stop, then exit 130 or 143.

Two slow dummy trials run at once. Ctrl-C is sent as a terminal sends it, to the whole
process group; SIGTERM as a service manager or `ray job stop` sends it, to the driver
alone. Either way the running trials stop, their runs are marked KILLED, the --resume
command is printed, no stack dump appears, and the exit status is 128 + the signal.
After SIGTERM, `--resume` finishes both trials in their own runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.reliability import record
from tests.support.sweeps import (
    kill_group,
    new_sweep,
    run_sweeper,
    runs_by_role,
    sweeper_command,
    sweeper_env,
)

pytestmark = pytest.mark.integration

SLOW = {"*": {"sleep_per_step": 0.5}}


def _stopped_by(signum: int, tmp_path: Path, tmp_path_factory) -> tuple[Path, Path, str, int]:
    """Start the sweep, signal it mid-trial, return (spec, out, its output, exit status)."""
    name = f"sig{int(signum)}"
    spec, out = new_sweep(tmp_path, tmp_path_factory, name, grid={"seed": [1, 2]})
    log = tmp_path / "driver.log"
    with open(log, "w", encoding="utf-8") as stdout:
        proc = subprocess.Popen(
            sweeper_command("run", spec),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=sweeper_env(SLOW),
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "step 10/20" not in log.read_text(encoding="utf-8"):
            assert proc.poll() is None, log.read_text(encoding="utf-8")[-3000:]
            assert time.monotonic() < deadline, "no trial reached step 10"
            time.sleep(0.2)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole group
        else:
            os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        kill_group(proc.pid)
    return spec, out, log.read_text(encoding="utf-8"), code


@pytest.mark.parametrize(
    ("signum", "expected"),
    [
        pytest.param(signal.SIGINT, 130, marks=pytest.mark.soak),
        pytest.param(signal.SIGTERM, 143, marks=pytest.mark.soak),
    ],
)  # `make reliability` runs both (Ctrl-C takes the same path as SIGTERM)
def test_a_signal_stops_the_sweep_gracefully(tmp_path, tmp_path_factory, signum, expected):
    spec, out, text, code = _stopped_by(signum, tmp_path, tmp_path_factory)
    assert code == expected, text[-3000:]
    assert "--resume` runs them again" in text
    for marker in ("Traceback", "Stack trace", "*** SIG", "Aborted"):
        assert marker not in text, text[-3000:]
    _, trials = runs_by_role(out, f"sig{int(signum)}")
    assert len(trials) == 2 and {t.info.status for t in trials} == {"KILLED"}
    if signum != signal.SIGTERM:
        return
    resumed = run_sweeper("run", spec, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _, after = runs_by_role(out, "sig15")
    assert {t.info.run_id for t in after} == {t.info.run_id for t in trials}
    assert {t.data.tags[record_names.TAG_STATUS] for t in after} == {record_names.Status.FINISHED}
    record(
        "c2. SIGINT / SIGTERM to the driver",
        "Ctrl-C (SIGINT to the process group) or SIGTERM (to the driver) while two dummy "
        "trials run",
        f"exit 130 and 143; both runs KILLED, the --resume line printed, no stack dump; "
        f"`--resume` exit {resumed.returncode}: both trials FINISHED in their own runs",
    )
