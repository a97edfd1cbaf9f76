"""The Tune callback through which the driver records every trial's fate.

It translates Tune's events (start, result, recover, complete, error) into calls on
the Recorder (MLflow) and the Progress view. The same events bound each attempt of a
trial for the cost ledger (`sweeper.tracking.cost_ledger`): Tune calls `on_trial_start`
once the trial's resources are placed and its actor runs, and one of recover, complete
or error when that actor's attempt is over, so the driver times what each attempt
held without the trial sending anything. Deliberately not Ray's
`MLflowLoggerCallback`: that one opens a new MLflow run each time a trial is restored,
which would break "one trial key, one run"; here the run of each key was fixed before
Tune started.

State. Tune checkpoints a callback's state through `get_state`/`set_state` (for
`Tuner.restore`, which sweeper does not use: MLflow is the state a resume starts from);
the state here is `ended`. Ray 2.60 also pickles every callback whole into the
experiment's `tuner.pkl` when the Tuner is built; the live MLflow client (inside the
Recorder) and the terminal (inside Progress) are not picklable and are not state, so
pickling goes through the same `get_state`/`set_state` pair and nothing else.

This module imports Ray at the top; only the engine and the search stage import it,
inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.tune import Callback

from sweeper.tracking.recorder import Recorder
from sweeper.trainers.runner import TrainerError
from sweeper.tune.preemption import history_of, is_preemption
from sweeper.tune.progress import Progress
from sweeper.tune.trainable import CONFIG_KEY, FINAL

ERROR_LINES = 60


class TrackingCallback(Callback):
    """Driver-side writer of trial statuses, metrics and errors."""

    def __init__(self, recorder: Recorder, progress: Progress):
        self.recorder = recorder
        self.progress = progress
        self.ended: set[str] = set()
        """Keys whose run was closed (finished or failed) in this invocation."""

    def get_state(self) -> dict[str, Any]:
        """Tune's checkpoint of this callback: which keys' runs were closed."""
        return {"ended": set(self.ended)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.ended = set(state["ended"])

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (into `tuner.pkl`) as Tune's own state: see the module docstring."""
        return self.get_state()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.recorder, self.progress = None, None  # type: ignore[assignment]
        self.set_state(state)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        key = trial.config[CONFIG_KEY]
        self.recorder.started(key, trial.trial_id)
        self.progress.started(key, attempt=trial.num_failures)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        key = trial.config[CONFIG_KEY]
        self.recorder.result(key, result)
        if not result.get(FINAL):
            self.progress.result(key, result)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A trial Tune runs again: preempted (no retry spent, `tune.preemption`) or
        failed within its retries."""
        key = trial.config[CONFIG_KEY]
        self.recorder.retrying(key)  # the attempt ended without ending the trial
        error = _latest_error(trial)
        self._note_preemptions(key, error)
        if is_preemption(error):
            self.progress.preempted(key, str(getattr(error, "cause", error)))
        else:
            self.progress.retrying(key, trial.num_failures, first_line(error_text(trial)))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        key = trial.config[CONFIG_KEY]
        self.recorder.finished(key)
        self.ended.add(key)
        self.progress.finished(key)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """Between Tune's steps: retry buffered writes that are due, and stop the sweep
        (TrackingDown) once the store has been unreachable past the bound. Raised here,
        it ends `Tuner.fit`; raised from a trial event, Tune would fail that trial."""
        self.recorder.check()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        key = trial.config[CONFIG_KEY]
        self._note_preemptions(key, _latest_error(trial))
        text = error_text(trial)
        self.recorder.failed(key, text)
        self.ended.add(key)
        self.progress.failed(key, first_line(text))

    def _note_preemptions(self, key: str, error: BaseException | None) -> None:
        history = history_of(error)
        if history is not None:
            self.recorder.preempted(key, [(p.step, p.node) for p in history])


class StageCallback(Callback):
    """Between Tune's steps: lets a stage running beside the trials (pretraining,
    `sweeper.tune.pretrain_task`) notice its end, free its CPU and say so. Not state: pickled
    (into `tuner.pkl`) as nothing, like TrackingCallback's live parts."""

    def __init__(self, poll: Callable[[], None]):
        self.poll: Callable[[], None] | None = poll

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if self.poll is not None:
            self.poll()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.poll = None


def error_text(trial: Any) -> str:
    """Why a trial failed, first line first: a TrainerError's reason and trainer-log
    tail, else the exception and the end of the traceback Tune stored."""
    error = _latest_error(trial)
    cause = getattr(error, "cause", error)
    if isinstance(cause, TrainerError):
        if not cause.tail:
            return cause.reason
        return cause.reason + "\n--- last log lines ---\n" + "\n".join(cause.tail)
    lines = _error_trace(trial).strip().splitlines()[-ERROR_LINES:]
    head = f"{type(cause).__name__}: {cause}".splitlines()[0] if cause is not None else ""
    text = "\n".join([head, *lines]).strip()
    return text or "trial failed (Ray stored no error text)"


def _latest_error(trial: Any) -> BaseException | None:
    """The trial's latest exception, from the driver-side file Tune writes *before*
    calling back (`trial.get_pickled_error()` reads the synced copy in storage, which
    may not exist yet when the callback runs)."""
    from ray import cloudpickle

    path = getattr(trial, "pickled_error_file", None)
    try:
        if path and Path(path).is_file():
            return cloudpickle.loads(Path(path).read_bytes())
        return trial.get_pickled_error()
    except Exception:  # unpicklable or unreadable: the text trace still says enough
        return None


def _error_trace(trial: Any) -> str:
    """The error text file Tune appends every failure to (local copy first)."""
    path = getattr(trial, "error_file", None)
    try:
        if path and Path(path).is_file():
            return Path(path).read_text(encoding="utf-8", errors="replace")
        return trial.get_error() or ""
    except Exception:
        return ""


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
