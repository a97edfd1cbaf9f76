"""The runner turns a trainer subprocess into events, and failures into clear errors."""

from __future__ import annotations

import threading
import time

import pytest

from sweeper import layout
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent, best_validation, read_events
from sweeper.trainers.registry import get_trainer
from sweeper.trainers.runner import TrainerError, run_trainer


def _job(tmp_path, **extra) -> TrialJob:
    return TrialJob(
        framework="dummy",
        seed=1,
        init="pretrained",
        method="full",
        train={"batch_size": 8, "epochs": 3, "lr": 1e-4},
        lora=None,
        arch={},
        num_classes=2,
        num_train=40,
        fairseq_data="",
        hf_data="",
        init_checkpoint="",
        out_dir=str(tmp_path / "trial"),
        extra=extra,
    )


def test_events_stream_and_files(tmp_path):
    seen: list[MetricEvent] = []
    result = run_trainer(get_trainer("dummy"), _job(tmp_path), on_event=seen.append)
    assert [e.step for e in seen if e.split == "valid"] == [5, 10, 15]
    assert [e.step for e in seen if e.split == "test"] == [5, 10, 15]
    assert read_events(result.out_dir / layout.EVENTS_FILE) == result.events
    assert (result.out_dir / layout.TRIAL_CONFIG_FILE).exists()
    assert "starting at step 0" in (result.out_dir / layout.TRAINER_LOG_FILE).read_text()
    assert result.checkpoints.best is not None and result.checkpoints.last is not None


def test_nonzero_exit_carries_the_log_tail(tmp_path):
    with pytest.raises(TrainerError) as exc:
        run_trainer(get_trainer("dummy"), _job(tmp_path, fail_at_step=7))
    assert "exited with code 3" in exc.value.reason
    assert any("injected crash at step 7" in line for line in exc.value.tail)
    assert len(exc.value.tail) <= 50


def test_nan_loss_stops_the_trial(tmp_path):
    with pytest.raises(TrainerError, match="non-finite train loss/accuracy at step 4"):
        run_trainer(get_trainer("dummy"), _job(tmp_path, nan_at_step=4, sleep_per_step=0.05))


def test_timeout_kills_the_trial(tmp_path):
    started = time.monotonic()
    with pytest.raises(TrainerError, match="timed out"):
        run_trainer(get_trainer("dummy"), _job(tmp_path, sleep_per_step=1.0), timeout_s=1.5)
    assert time.monotonic() - started < 10


def test_restart_resumes_and_keeps_one_event_per_step(tmp_path):
    job = _job(tmp_path, fail_at_step=12, fail_once_marker=str(tmp_path / "crashed"))
    with pytest.raises(TrainerError):
        run_trainer(get_trainer("dummy"), job)
    result = run_trainer(get_trainer("dummy"), job)
    log = (result.out_dir / layout.TRAINER_LOG_FILE).read_text()
    assert "starting at step 10" in log  # the last checkpoint, not step 0
    steps = [e.step for e in result.events if e.split == "train"]
    assert steps == list(range(1, 16))


def test_caller_interrupt_kills_the_subprocess(tmp_path):
    job = _job(tmp_path, sleep_per_step=0.2)
    stop = threading.Event()

    def interrupt(event: MetricEvent) -> None:
        if event.step == 2:
            stop.set()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_trainer(get_trainer("dummy"), job, on_event=interrupt)
    assert stop.is_set()
    size = (tmp_path / "trial" / layout.EVENTS_FILE).stat().st_size
    time.sleep(0.6)
    assert (tmp_path / "trial" / layout.EVENTS_FILE).stat().st_size == size


def test_best_validation_prefers_the_earliest_tie():
    events = [
        MetricEvent(step=s, epoch=s / 10, split=split, accuracy=a)
        for s, a in [(10, 70.0), (20, 80.0), (30, 80.0)]
        for split in ("valid", "test")
    ]
    best, test = best_validation(events)
    assert best.step == 20 and test is not None and test.step == 20


def test_unknown_trainer_names_the_registered_ones():
    with pytest.raises(KeyError, match="dummy, fairseq, hf"):
        get_trainer("jax")
