"""A driver killed mid-sweep (SIGKILL), then `sweeper run --resume`.

Four dummy trials, two at a time: s1 is fast, s2-s4 slow. The driver is killed once s1
has finished and s2 has passed its step-10 checkpoint. Without --resume the command
refuses (exit 2). With it: s1 is not run again (its trainer log is untouched, its run
id unchanged), s2 continues in its own run from step 10, s3 and s4 run, and every key
ends with exactly one FINISHED run whose metric steps are each logged once.
"""

from __future__ import annotations

import time

import pytest

from sweeper import record_names
from tests.support.faults import RESUME_FAULTS, kill_driver_once, start_sweep, trainer_log
from tests.support.reliability import record
from tests.support.sweeps import (
    history,
    new_sweep,
    run_sweeper,
    runs_by_role,
    sweeper_env,
)

pytestmark = pytest.mark.integration


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_killed_driver_then_resume(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "resume", grid={"seed": [1, 2, 3, 4]})
    log = tmp_path / "first.log"
    proc = start_sweep(log, spec, env=sweeper_env(RESUME_FAULTS))
    kill_driver_once(log, proc, ["s1: finished", "s2: step 10/20"])
    time.sleep(1)

    _, before = runs_by_role(out, "resume")
    ids_before = {r.data.tags[record_names.TAG_TRIAL_KEY]: r.info.run_id for r in before}
    status_before = {int(r.data.tags[record_names.TAG_SEED]): r.info.status for r in before}
    assert len(before) == 4
    assert status_before[1] == "FINISHED" and status_before[2] == "RUNNING"
    s1_log = trainer_log(out, 1).read_text()

    refused = run_sweeper("run", spec, timeout=60)
    assert refused.returncode == 2 and "--resume" in refused.stderr

    resumed = run_sweeper("run", spec, "--resume", extra=RESUME_FAULTS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "1 finished before, 3 to resume, 0 new" in resumed.stdout
    assert "dummy-random-full-s1: started" not in resumed.stdout
    assert "4 trials counted" in resumed.stdout

    _, after = runs_by_role(out, "resume")
    assert len(after) == 4
    assert {r.data.tags[record_names.TAG_TRIAL_KEY]: r.info.run_id for r in after} == ids_before
    points = 0
    for run in after:
        assert run.info.status == "FINISHED"
        assert run.data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
        steps = [s for s, _ in history(out, run.info.run_id, record_names.METRIC_TRAIN_LOSS)]
        assert steps == list(range(1, 21)), run.info.run_name
        assert [s for s, _ in history(out, run.info.run_id, record_names.METRIC_VALID_ACC)] == [
            10,
            20,
        ]
        points += len(steps)
    assert trainer_log(out, 1).read_text() == s1_log  # finished trial not re-run
    assert "starting at step 10" in trainer_log(out, 2).read_text()  # resumed from checkpoint
    record(
        "c. driver SIGKILLed, then `--resume`",
        "SIGKILL to the `sweeper run` driver once s1 had finished and s2 had passed its "
        "step-10 checkpoint (4 trials, 2 at a time)",
        f"runs before resume: 4 ({sorted(status_before.values())}); plain re-run refused "
        f"with exit {refused.returncode}; `--resume` exit {resumed.returncode}: 1 finished "
        "before, 3 resumed, 0 new; after: 4/4 keys with exactly one FINISHED run, same run "
        f"ids; s1 not re-run; s2 resumed from step 10; train_loss points {points} = "
        "4 x 20 steps, 0 duplicates",
    )
