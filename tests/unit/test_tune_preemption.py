"""The trial side of preemption: the count in the trial folder, the errors, and Tune's
own rule that a preempted actor error is not a failure (checked on Tune's Trial)."""

from __future__ import annotations

import pickle

import pytest

from sweeper import record_names
from sweeper.trainers.runner import TrainerError
from sweeper.tune.preemption import (
    Preemption,
    PreemptionBoundError,
    TrialPreempted,
    history_of,
    is_preemption,
    note_preemption,
    read_preemptions,
)


def test_preemptions_are_noted_in_the_trial_folder_in_order(tmp_path):
    assert read_preemptions(tmp_path) == []
    note_preemption(tmp_path, 12, "node-a")
    seen = note_preemption(tmp_path, None, "node-b")
    assert seen == [Preemption(12, "node-a"), Preemption(None, "node-b")]
    assert read_preemptions(tmp_path) == seen
    assert (tmp_path / record_names.PREEMPTIONS_FILE).read_text().count("\n") == 2


def test_the_errors_pickle_with_their_history_and_say_where():
    history = [Preemption(7, "head"), Preemption(15, "worker")]
    preempted = pickle.loads(pickle.dumps(TrialPreempted(history, 10)))
    assert preempted.history == history and preempted.preempted
    assert str(preempted).startswith("preempted at step 15 on worker (preemption 2 of at most 10)")
    bound = pickle.loads(pickle.dumps(PreemptionBoundError(history, 1)))
    assert isinstance(bound, TrainerError) and bound.history == history
    assert "preempted 2 times, more than preemptions: 1 allows" in str(bound)
    early = TrialPreempted([Preemption(None, "w")], 3)
    assert "before training started on w" in str(early)


def _ray_task_error(cause: BaseException):
    from ray.exceptions import RayTaskError

    return RayTaskError("train", "Traceback (most recent call last): ...", cause)


def test_tune_counts_a_failure_but_not_a_preemption(monkeypatch):
    """Tune's Trial.handle_error decides what counts against max_failures; a
    TrialPreempted reaches the driver wrapped in a RayTaskError, as here."""
    from ray.tune.experiment import Trial

    monkeypatch.setattr(Trial, "local_path", property(lambda self: None))
    trial = Trial("__fake", stub=True)
    trial.handle_error(_ray_task_error(TrialPreempted([Preemption(5, "n")], 3)))
    assert trial.run_metadata.num_failures == 0
    trial.handle_error(_ray_task_error(PreemptionBoundError([Preemption(5, "n")] * 2, 1)))
    assert trial.run_metadata.num_failures == 1
    trial.handle_error(_ray_task_error(ValueError("a crash")))
    assert trial.run_metadata.num_failures == 2


@pytest.mark.parametrize(
    ("cause", "preemption", "history"),
    [
        (TrialPreempted([Preemption(5, "n")], 3), True, [Preemption(5, "n")]),
        (PreemptionBoundError([Preemption(5, "n")], 0), False, [Preemption(5, "n")]),
        (TrainerError("exit 3"), False, None),
        (None, False, None),
    ],
)
def test_the_driver_reads_preemptions_from_the_error_tune_kept(cause, preemption, history):
    for error in (cause, _ray_task_error(cause) if cause is not None else None):
        assert is_preemption(error) is preemption
        assert history_of(error) == history
