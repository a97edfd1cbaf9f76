"""The parent side of the HF trainer: event lines, arithmetic, checkpoints on disk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.trainers.base import TrialJob, log_interval, warmup_updates
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.hf.hf_trainer import (
    EVENT_PREFIX,
    HFTrainer,
    find_checkpoints,
    format_event,
    parse_event_line,
)
from sweeper.trainers.registry import get_trainer


def _job(tmp_path: Path, num_train: int = 1800, batch_size: int = 8, epochs: int = 5) -> TrialJob:
    return TrialJob(
        framework="hf", seed=1, init="pretrained", method="full",
        train={"batch_size": batch_size, "epochs": epochs, "warmup_ratio": 0.06}, lora=None,
        arch={}, num_classes=2, num_train=num_train, data="",
        init_checkpoint="", out_dir=str(tmp_path / "trial"),
    )  # fmt: skip


def test_registry_finds_the_hf_trainer():
    assert isinstance(get_trainer("hf"), HFTrainer)
    assert get_trainer("hf").name == "hf"


def test_command_runs_the_child_on_the_saved_job(tmp_path):
    job = _job(tmp_path)
    command = HFTrainer().command(job)
    assert command == [
        sys.executable, "-m", "sweeper.trainers.hf.hf_main",
        str(Path(job.out_dir) / record_names.TRIAL_CONFIG_FILE),
    ]  # fmt: skip


def test_event_lines_round_trip_and_take_the_runner_clock():
    event = MetricEvent(step=225, epoch=1.0, split="valid", loss=0.61, accuracy=71.5)
    line = format_event(event) + "\n"
    assert line.startswith(EVENT_PREFIX)
    parsed = HFTrainer().parse_line(line, wall_time=12.5)
    assert parsed == [MetricEvent(225, 1.0, "valid", 0.61, 71.5, None, 12.5)]


@pytest.mark.parametrize(
    "line",
    [
        "{'loss': 0.5, 'learning_rate': 1e-05}\n",
        "params: trainable 8,386 of 148,036 (5.66%)\n",
        "",
        'sweeper-event {"step": 1}\n',
    ],
)
def test_other_output_is_not_an_event(line):
    assert HFTrainer().parse_line(line, wall_time=1.0) == []


def test_a_malformed_event_line_is_an_error_but_a_torn_one_does_not_crash_the_runner():
    torn = EVENT_PREFIX + '{"step": 3, "epoch"'
    with pytest.raises(ValueError, match="malformed hf event line"):
        parse_event_line(torn)
    with pytest.raises(ValueError, match="malformed hf event line"):
        parse_event_line(EVENT_PREFIX + '{"epoch": 1.0, "split": "valid"}')  # no step
    assert HFTrainer().parse_line(torn, wall_time=1.0) == []


def test_nan_loss_survives_parsing_so_the_runner_can_stop_the_trial():
    line = format_event(MetricEvent(step=4, epoch=0.1, split="train", loss=float("nan")))
    (event,) = HFTrainer().parse_line(line, wall_time=0.0)
    assert not event.is_finite()


def test_total_updates_and_warmup_follow_the_lab():
    job = _job(Path("/x"))
    assert job.updates_per_epoch == 225 and job.total_updates == 1125
    assert warmup_updates(job.total_updates, 0.06) == 68  # 67.5 rounds half up
    assert _job(Path("/x"), num_train=201).updates_per_epoch == 26  # a partial last batch
    assert warmup_updates(375, 0.06) == 23  # 22.5: half up, not banker's 22
    assert warmup_updates(1125, 0.0) == 0
    assert warmup_updates(50, 0.06) == 3


def test_log_interval_defaults_and_overrides(tmp_path):
    job = _job(tmp_path)
    assert log_interval(job) == 25
    assert log_interval(TrialJob(**{**job.__dict__, "extra": {"log_interval": 5}})) == 5
    assert log_interval(TrialJob(**{**job.__dict__, "extra": {"log_interval": 0}})) == 1


def _checkpoint(folder: Path, step: int, best_step: int | None, complete: bool = True) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"")
    if complete:
        best = None if best_step is None else f"/elsewhere/checkpoints/checkpoint-{best_step}"
        state = {"global_step": step, "best_model_checkpoint": best, "best_global_step": best_step}
        (path / "trainer_state.json").write_text(json.dumps(state))
    return path


def test_checkpoints_are_the_recorded_best_and_the_newest_complete(tmp_path):
    folder = tmp_path / "trial" / "checkpoints"
    best = _checkpoint(folder, 225, best_step=225)
    last = _checkpoint(folder, 450, best_step=225)
    _checkpoint(folder, 675, best_step=None, complete=False)  # killed mid-save
    found = HFTrainer().checkpoints(_job(tmp_path))
    # the best is found by folder name even though the recorded path moved
    assert (found.best, found.last) == (best, last)


def test_best_can_be_the_last_and_nothing_is_none(tmp_path):
    folder = tmp_path / "c"
    assert find_checkpoints(folder) == find_checkpoints(tmp_path / "missing")
    assert find_checkpoints(folder).best is None and find_checkpoints(folder).last is None
    last = _checkpoint(folder, 50, best_step=50)
    assert find_checkpoints(folder).best == last == find_checkpoints(folder).last


def test_trainable_params_come_from_the_childs_file(tmp_path):
    job = _job(tmp_path)
    assert HFTrainer().trainable_params(job) is None
    Path(job.out_dir).mkdir(parents=True)
    (Path(job.out_dir) / "params.json").write_text('{"trainable": 8386, "total": 148036}')
    assert HFTrainer().trainable_params(job) == (8386, 148036)


def test_the_parent_side_imports_no_framework():
    code = (
        "import sys, sweeper.trainers.hf.hf_trainer\n"
        "heavy = [m for m in ('torch', 'transformers', 'peft') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
