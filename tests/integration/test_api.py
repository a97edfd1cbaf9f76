"""`sweeper.api.run_sweep` from Python: the call `sweeper run` makes, in a script.

A notebook or a benchmark runs a sweep with one call and gets `sweeper run`'s exit
status; real embedded Ray, real MLflow SQLite store, the dummy trainer. The script runs
in a child process, as a user's would, so the test process never hosts Tune's threads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.processes import clean_env
from tests.support.sweeps import new_sweep, runs_by_role

pytestmark = pytest.mark.integration

SCRIPT = """
import sys
from sweeper.api import RunOptions, run_sweep
from sweeper.spec.load import load_spec
spec = load_spec(sys.argv[1])
print("STATUS", run_sweep(RunOptions(spec_path=sys.argv[1]), spec))
"""


def test_one_call_runs_the_grid_and_returns_the_exit_status(tmp_path, tmp_path_factory):
    path, out = new_sweep(
        tmp_path, tmp_path_factory, "api", grid={"seed": [1, 2]}, train={"epochs": 1}
    )
    command = [sys.executable, "-c", SCRIPT, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert "STATUS 0" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Table 2" in done.stdout
    parents, trials = runs_by_role(out, "api")
    assert len(parents) == 1 and len(trials) == 2
    assert all(t.info.status == "FINISHED" for t in trials)

    again = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert "STATUS 2" in again.stdout  # runs exist and no --resume: bad input
    assert "--resume" in again.stderr
