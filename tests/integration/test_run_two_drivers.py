"""A second driver on a running sweep is refused (issue 17; invariant 8).

`sweeper run SPEC` runs 4 slow dummy trials one at a time; while it runs, `sweeper run
SPEC --resume` is started on the same spec. The second must exit 2, naming the first
driver (its pid and host), without running or recording anything; the first finishes
with 4 runs whose metric points are each logged once.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from sweeper import record_names
from tests.support.reliability import record
from tests.support.sweeps import (
    history,
    kill_group,
    new_sweep,
    run_sweeper,
    runs_by_role,
    sweeper_command,
    sweeper_env,
)

pytestmark = pytest.mark.integration

SLOW = {"*": {"sleep_per_step": 0.3}}


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_second_driver_is_refused_naming_the_first(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "twodrivers", grid={"seed": [1, 2, 3, 4]}, max_concurrent=1
    )
    log = tmp_path / "first.log"
    with open(log, "w", encoding="utf-8") as stdout:
        first = subprocess.Popen(
            sweeper_command("run", spec),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=sweeper_env(SLOW),
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "step 10/20" not in log.read_text(encoding="utf-8"):
            assert first.poll() is None, log.read_text(encoding="utf-8")[-3000:]
            assert time.monotonic() < deadline, "the first driver ran no trial"
            time.sleep(0.2)
        start = time.monotonic()
        second = run_sweeper("run", spec, "--resume", extra=SLOW, timeout=120)
        refused_in = time.monotonic() - start
        assert first.poll() is None, "the first driver should still be running"
        code = first.wait(timeout=300)
    finally:
        kill_group(first.pid)

    assert second.returncode == 2, second.stdout + second.stderr
    assert "is being run by another driver" in second.stderr
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr
    assert "started" not in second.stdout  # it ran no trial
    assert code == 0, log.read_text(encoding="utf-8")[-3000:]
    _, trials = runs_by_role(out, "twodrivers")
    assert len(trials) == 4
    for run in trials:
        steps = [s for s, _ in history(out, run.info.run_id, record_names.METRIC_TRAIN_LOSS)]
        assert steps == list(range(1, 21)), run.info.run_name  # every point once
    record(
        "c3. a second driver on a running sweep",
        "`sweeper run SPEC --resume` while `sweeper run SPEC` runs (4 trials, one at a time)",
        f"second driver exit {second.returncode} after {refused_in:.1f} s, naming pid "
        f"{first.pid} on {socket.gethostname()}; first driver exit {code}; 4 runs, every "
        "train_loss point once",
    )
