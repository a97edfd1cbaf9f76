"""The driver's cost ledger: each attempt's held seconds, lost work, measured time, and
totals that a resumed sweep adds to (a fake clock; the Recorder on a real SQLite store)."""

from __future__ import annotations

import itertools

import pytest

from sweeper import record_names as rn
from sweeper.tracking.cost_ledger import CostLedger, recorded_totals
from sweeper.tracking.recorder import MetricLog, Recorder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _by_key(points):
    return {key: (step, value) for step, key, value in points}


def test_an_attempt_holds_cpu_and_gpu_times_its_wall_and_lost_ones_count_again():
    clock = Clock()
    ledger = CostLedger(cpu=2, gpu=0.5, clock=clock)
    ledger.open("r")
    ledger.measured("r", 30.0, None)
    clock.now += 40  # the first attempt fails after 40 s: Ray retries it
    first = _by_key(ledger.close("r", lost=True))
    assert first[rn.METRIC_ATTEMPT_WALL] == (1, 40.0)
    assert first[rn.METRIC_ATTEMPT_CPU] == (1, 80.0)
    assert first[rn.METRIC_ATTEMPT_GPU] == (1, 20.0)
    assert first[rn.METRIC_ATTEMPT_LOST] == (1, 1.0)
    assert first[rn.METRIC_ATTEMPT_CPU_TIME] == (1, 30.0)
    assert rn.METRIC_ATTEMPT_GPU_TIME not in first  # no GPU sampled
    ledger.open("r")
    ledger.measured("r", 50.0, 12.0)
    ledger.measured("r", None, None)  # a report without values keeps the last ones
    clock.now += 60
    second = _by_key(ledger.close("r", lost=False))
    assert second[rn.METRIC_ATTEMPT_LOST] == (2, 0.0)
    assert second[rn.METRIC_COST_ATTEMPTS] == (2, 2.0)
    assert second[rn.METRIC_COST_LOST_ATTEMPTS] == (2, 1.0)
    assert second[rn.METRIC_COST_WALL] == (2, 100.0)
    assert second[rn.METRIC_COST_CPU] == (2, 200.0)
    assert second[rn.METRIC_COST_GPU] == (2, 50.0)
    assert second[rn.METRIC_COST_LOST_CPU] == (2, 80.0)
    assert second[rn.METRIC_COST_LOST_GPU] == (2, 20.0)
    assert second[rn.METRIC_COST_CPU_TIME] == (2, 80.0)
    assert second[rn.METRIC_COST_GPU_TIME] == (2, 12.0)


def test_an_end_reported_twice_or_without_a_start_is_counted_once():
    clock = Clock()
    ledger = CostLedger(cpu=1, gpu=0, clock=clock)
    assert ledger.close("r", lost=True) == []
    ledger.open("r")
    clock.now += 5
    assert ledger.close("r", lost=False)
    assert ledger.close("r", lost=True) == []
    assert not ledger.is_open("r")


def test_a_seeded_run_numbers_its_attempts_after_the_recorded_ones_and_adds_to_them():
    clock = Clock()
    ledger = CostLedger(cpu=1, gpu=0, clock=clock)
    ledger.seed("r", {rn.METRIC_COST_ATTEMPTS: 2.0, rn.METRIC_COST_CPU: 70.0, "other": 1.0})
    ledger.open("r")
    clock.now += 30
    points = _by_key(ledger.close("r", lost=False))
    assert points[rn.METRIC_ATTEMPT_WALL] == (3, 30.0)
    assert points[rn.METRIC_COST_ATTEMPTS] == (3, 3.0)
    assert points[rn.METRIC_COST_CPU] == (3, 100.0)


_names = itertools.count()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}")


def _run(client, tmp_path) -> str:
    experiment = client.create_experiment(f"e{next(_names)}", artifact_location=tmp_path.as_uri())
    return client.create_run(experiment).info.run_id


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_the_recorder_logs_every_attempt_and_a_resumed_driver_adds_to_them(client, tmp_path):
    run_id = _run(client, tmp_path)
    clock = Clock()
    first = Recorder(client, {"k": run_id}, MetricLog(), ledger=CostLedger(1, 0, clock))
    first.started("k", "t1")
    first.result("k", {rn.REPORT_CPU_TIME: 4.0, "points": []})
    clock.now += 10
    first.retrying("k")  # Tune's on_trial_recover: lost
    first.started("k", "t1")
    clock.now += 7
    first.interrupted("k")  # Ctrl-C: lost, resumable
    first.drain()
    # a new driver (--resume) seeds from the record and adds a finished attempt
    ledger = CostLedger(2, 0, clock)
    ledger.seed(run_id, recorded_totals(client, run_id))
    second = Recorder(client, {"k": run_id}, MetricLog(), ledger=ledger)
    second.started("k", "t2")
    clock.now += 5
    second.finished("k")
    second.drain()

    assert _history(client, run_id, rn.METRIC_ATTEMPT_WALL) == [(1, 10.0), (2, 7.0), (3, 5.0)]
    assert _history(client, run_id, rn.METRIC_ATTEMPT_CPU) == [(1, 10.0), (2, 7.0), (3, 10.0)]
    assert _history(client, run_id, rn.METRIC_ATTEMPT_LOST) == [(1, 1.0), (2, 1.0), (3, 0.0)]
    assert _history(client, run_id, rn.METRIC_ATTEMPT_CPU_TIME) == [(1, 4.0)]
    totals = recorded_totals(client, run_id)
    assert totals[rn.METRIC_COST_ATTEMPTS] == 3 and totals[rn.METRIC_COST_LOST_ATTEMPTS] == 2
    assert totals[rn.METRIC_COST_CPU] == 27.0 and totals[rn.METRIC_COST_LOST_CPU] == 17.0
    assert totals[rn.METRIC_COST_CPU_TIME] == 4.0 and totals[rn.METRIC_COST_GPU] == 0.0
    # the latest value of each total is the sum of the attempts' values
    attempts = _history(client, run_id, rn.METRIC_ATTEMPT_CPU)
    assert totals[rn.METRIC_COST_CPU] == sum(v for _, v in attempts)


def test_a_recorder_without_a_ledger_records_no_cost(client, tmp_path):
    run_id = _run(client, tmp_path)
    recorder = Recorder(client, {"k": run_id}, MetricLog())
    recorder.started("k", "t")
    recorder.finished("k")
    recorder.drain()
    assert recorded_totals(client, run_id) == {}
