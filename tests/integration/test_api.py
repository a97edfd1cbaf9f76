"""`sweeper.api.run_sweep` from Python, in this process: the call `sweeper run` makes.

A notebook or a benchmark runs a sweep with one call and gets `sweeper run`'s exit
status; real embedded Ray, real MLflow SQLite store, the dummy trainer.
"""

from __future__ import annotations

import pytest
import ray

from sweeper.api import RunOptions, run_sweep
from sweeper.specio import load_spec
from tests.support.sweeps import new_sweep, runs_by_role

pytestmark = pytest.mark.integration


def test_one_call_runs_the_grid_and_returns_the_exit_status(
    tmp_path, tmp_path_factory, capfd, monkeypatch
):
    # The embedded Ray keeps to loopback by setting this in the process environment;
    # monkeypatch restores it, so later tests' `ray start` worker nodes may join.
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    path, out = new_sweep(
        tmp_path, tmp_path_factory, "api", grid={"seed": [1, 2]}, train={"epochs": 1}
    )
    spec = load_spec(path)
    assert run_sweep(RunOptions(spec_path=str(path)), spec) == 0
    assert not ray.is_initialized()  # the Ray it started is stopped again
    parents, trials = runs_by_role(out, "api")
    assert len(parents) == 1 and len(trials) == 2
    assert all(t.info.status == "FINISHED" for t in trials)
    assert "Table 2" in capfd.readouterr().out

    again = run_sweep(RunOptions(spec_path=str(path)), spec)  # runs exist, no --resume
    assert again == 2
    assert "--resume" in capfd.readouterr().err
