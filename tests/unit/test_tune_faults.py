"""Fault injection for sweep-level tests: SWEEPER_DUMMY_EXTRA reaches chosen trials."""

from __future__ import annotations

import json

import pytest

from sweeper.trainers.base import TrialJob
from sweeper.trainers.registry import get_trainer
from sweeper.trainers.runner import TrainerError, run_trainer
from tests.support.dummy_trainer import EXTRA_ENV, env_extra


def test_env_extra_selects_trials_by_folder_name():
    env = {
        EXTRA_ENV: json.dumps({"*": {"sleep_per_step": 0.1}, "random-full-s2": {"fail_at_step": 3}})
    }
    assert env_extra("/x/trials/dummy-random-full-s2-abcd", env) == {
        "sleep_per_step": 0.1,
        "fail_at_step": 3,
    }
    assert env_extra("/x/trials/dummy-random-full-s1-abcd", env) == {"sleep_per_step": 0.1}
    assert env_extra("/x/trials/any", {}) == {}


def _job(tmp_path, name: str) -> TrialJob:
    return TrialJob(
        framework="dummy", seed=1, init="random", method="full",
        train={"batch_size": 8, "epochs": 1, "lr": 1e-4}, lora=None, arch={},
        num_classes=2, num_train=40, data="", init_checkpoint="",
        out_dir=str(tmp_path / name),
    )  # fmt: skip


def test_the_trainer_subprocess_reads_it(tmp_path, monkeypatch):
    marker = tmp_path / "crashed-once"
    extra = {"s2": {"fail_at_step": 3, "fail_once_marker": str(marker)}}
    monkeypatch.setenv(EXTRA_ENV, json.dumps(extra))
    run_trainer(get_trainer("dummy"), _job(tmp_path, "dummy-s1"))  # not selected: runs
    with pytest.raises(TrainerError, match="exited with code 3"):
        run_trainer(get_trainer("dummy"), _job(tmp_path, "dummy-s2"))
    assert marker.exists()
    result = run_trainer(get_trainer("dummy"), _job(tmp_path, "dummy-s2"))  # retry succeeds
    assert [e.step for e in result.events if e.split == "valid"] == [5]
