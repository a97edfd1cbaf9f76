"""Retries and failures in a real sweep (dummy trainer, faults injected per trial).

Three trials, `retries: 1`: s1 runs clean; s2 crashes once at step 15 (after its
step-10 checkpoint) and is retried from that checkpoint; s3 crashes every time and
fails past its retries. The sweep goes on, exits 1 (Table 2 counts s3 as failed), and
MLflow holds exactly one run per key: s1 and s2 FINISHED with every metric step logged
once, s3 FAILED with the trainer's error tail as tag and as error.txt. Each run's cost
ledger holds its attempts (s2's first and both of s3's lost), and the summary's hours
and money, and the parent run's totals, are the sum of the attempts' recorded seconds.
(A `--resume` adding to a run's ledger: tests/unit/test_engine.py, on a real store.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.sweeps import (
    artifacts,
    client_for,
    history,
    new_sweep,
    run_sweeper,
    runs_by_role,
)

pytestmark = pytest.mark.integration


def test_retry_from_checkpoint_and_failure_past_retries(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "faults", grid={"seed": [1, 2, 3]}, cost={"cpu_hour": 0.04}
    )
    marker = tmp_path / "s2-crashed-once"
    extra = {
        "random-full-s2": {"fail_at_step": 15, "fail_once_marker": str(marker)},
        "random-full-s3": {"fail_at_step": 15},
    }
    done = run_sweeper("run", spec, extra=extra)

    assert done.returncode == 1, done.stderr[-3000:]
    assert marker.exists()
    assert "dummy-random-full-s2: failed (attempt 1), retrying" in done.stdout
    assert "dummy-random-full-s3: FAILED: dummy trainer exited with code 3" in done.stdout
    assert "1 trial(s) did not finish: dummy-random-full-s3" in done.stderr
    assert "2 trials counted" in done.stdout  # the summary still comes
    summary = json.loads(run_sweeper("summarize", spec, "--format", "json", "--no-log").stdout)
    (group,) = summary["groups"]  # Table 2 counts the failed trial beside the counted two
    assert (group["n"], group["outcomes"]) == (2, {"failed": 1})

    _, trials = runs_by_role(out, "faults")
    by_seed = {int(r.data.tags[record_names.TAG_SEED]): r for r in trials}
    assert sorted(by_seed) == [1, 2, 3] and len(trials) == 3  # one run per key, retry included

    for seed in (1, 2):
        run = by_seed[seed]
        assert run.info.status == "FINISHED"
        assert run.data.tags[record_names.TAG_STATUS] == record_names.Status.FINISHED
        # every step exactly once, although s2's trainer re-emitted steps 11-14
        assert [
            s for s, _ in history(out, run.info.run_id, record_names.METRIC_TRAIN_LOSS)
        ] == list(range(1, 21))
        assert [s for s, _ in history(out, run.info.run_id, record_names.METRIC_VALID_ACC)] == [
            10,
            20,
        ]

    s2_log = (out / "trials").glob("dummy-random-full-s2-*/trainer.log")
    text = next(s2_log).read_text()
    assert "starting at step 0" in text and "starting at step 10" in text  # resumed

    failed = by_seed[3]
    assert failed.info.status == "FAILED"
    assert failed.data.tags[record_names.TAG_STATUS] == record_names.Status.FAILED
    error = failed.data.tags[record_names.TAG_ERROR]
    assert error.startswith("dummy trainer exited with code 3")
    assert "injected crash at step 15" in error
    assert "error.txt" in artifacts(out, failed.info.run_id)
    local = client_for(out).download_artifacts(failed.info.run_id, "error.txt", str(tmp_path))
    assert "injected crash at step 15" in Path(local).read_text(encoding="utf-8")
    assert "trainer.log" in artifacts(out, failed.info.run_id)  # uploaded despite the failure
    # the steps it made before failing are in its run too
    assert [s for s, _ in history(out, failed.info.run_id, record_names.METRIC_VALID_ACC)] == [10]

    # The cost ledger: every attempt, lost ones included, summed into the summary.
    attempts = {seed: _attempts(out, by_seed[seed].info.run_id) for seed in (1, 2, 3)}
    assert [lost for _, _, lost in attempts[1]] == [0.0]
    assert [lost for _, _, lost in attempts[2]] == [1.0, 0.0]  # the crash, then the retry
    assert [lost for _, _, lost in attempts[3]] == [1.0, 1.0]  # failed past its retries
    for seed, rows in attempts.items():
        assert all(wall > 0 and cpu == wall for wall, cpu, _ in rows)  # resources.cpu: 1
        totals = by_seed[seed].data.metrics
        assert totals[record_names.METRIC_COST_CPU] == pytest.approx(sum(c for _, c, _ in rows))
        assert totals[record_names.METRIC_COST_ATTEMPTS] == len(rows)
    assert by_seed[1].data.metrics[record_names.METRIC_COST_CPU_TIME] > 0  # measured
    held = sum(cpu for rows in attempts.values() for _, cpu, _ in rows)
    lost = sum(cpu for rows in attempts.values() for _, cpu, was in rows if was)
    cost = summary["cost"]
    assert cost["total"]["cpu_seconds"] == pytest.approx(held)
    assert cost["total"]["lost_cpu_seconds"] == pytest.approx(lost)
    assert (cost["total"]["attempts"], cost["total"]["lost_attempts"]) == (5, 3)
    assert group["cpu_hours"] == pytest.approx(held / 3600)  # Table 2: the failed run too
    assert group["cost"] == pytest.approx(0.04 * held / 3600) == cost["cost"]
    assert group["gpu_hours"] is None  # no trial held a GPU
    assert "Cost: " in done.stdout and "CPU-h" in done.stdout  # printed with the summary
    (parent,) = runs_by_role(out, "faults")[0]  # the run's report put the totals there
    assert parent.data.metrics[record_names.METRIC_COST_CPU] == pytest.approx(held)


def _attempts(out: Path, run_id: str) -> list[tuple[float, float, float]]:
    """(wall seconds, CPU-seconds held, lost) of each recorded attempt, in order."""
    walls = history(out, run_id, record_names.METRIC_ATTEMPT_WALL)
    cpus = history(out, run_id, record_names.METRIC_ATTEMPT_CPU)
    lost = history(out, run_id, record_names.METRIC_ATTEMPT_LOST)
    assert [s for s, _ in walls] == [s for s, _ in cpus] == [s for s, _ in lost]
    assert [s for s, _ in walls] == list(range(1, len(walls) + 1))  # numbered, none twice
    return [(w, c, x) for (_, w), (_, c), (_, x) in zip(walls, cpus, lost, strict=True)]
