"""Preemption on the trial's side: the notice, the count, and the error Tune does not count.

A spot or preemptible node is taken back with notice: the cloud tells the VM, and
Ray's autoscaler (or `ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION`) drains the
node with a deadline. `DrainWatcher` polls Ray's list of draining nodes from the trial
and, once its own node is on it, sets the trial's notice; the runner then sends the
trainer SIGTERM, which is also what a VM shutting down sends it directly. Either way
the trainer saves a checkpoint at its current step and exits as preempted
(`trainers.runner.TrainerPreempted`).

The trial then syncs that checkpoint (the same path as its periodic ones, so no shared
filesystem is needed), notes the preemption in its folder (`PREEMPTIONS_FILE`, synced
with the checkpoint, so the count follows the trial to whichever node resumes it) and
raises `TrialPreempted`. That error is a `RayActorError` marked `preempted`: Ray Tune
does not count such an error against `FailureConfig.max_failures` (its documented
rule for actors lost to node preemption), so the trial is rescheduled, on a node not
being drained, without spending one of `spec.retries`. Preemptions have their own
bound, `spec.preemptions`: the one past it fails the trial as an ordinary error
(`PreemptionBoundError`), which does count against retries.

This module imports Ray at the top; `tune.trainable` imports it inside the trial.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import ray
from ray._private import state as ray_state
from ray.exceptions import RayActorError

from sweeper import record_names
from sweeper.trainers.runner import TrainerError

POLL_S = 2.0
"""How often a trial asks Ray whether its node is being drained: a notice is seen
within this long of the drain (AWS gives 120 s of notice, GKE about 30 s)."""


@dataclass(frozen=True)
class Preemption:
    """One preemption of a trial: the step its notice checkpoint holds (None: the
    trainer had not started training) and the node it was taken from."""

    step: int | None
    node: str


def read_preemptions(out_dir: Path) -> list[Preemption]:
    """The trial's preemptions so far, oldest first (none when the file is absent)."""
    path = Path(out_dir) / record_names.PREEMPTIONS_FILE
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            found.append(Preemption(entry.get("step"), str(entry.get("node", ""))))
    return found


def note_preemption(out_dir: Path, step: int | None, node: str) -> list[Preemption]:
    """Append a preemption to the trial's folder; returns all of them, this one last."""
    path = Path(out_dir) / record_names.PREEMPTIONS_FILE
    entry = {"step": step, "node": node, "time": time.time()}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
    return read_preemptions(out_dir)


def _where(entry: Preemption) -> str:
    at = f"at step {entry.step}" if entry.step is not None else "before training started"
    return f"{at} on {entry.node}"


class TrialPreempted(RayActorError):
    """The trial left its node on a preemption notice, its checkpoint synced. Being a
    RayActorError with `preempted` set, Tune reschedules it without counting a failure.
    `history`: every preemption of the trial so far, this one last. Its arguments are
    its state, so it pickles to the driver unchanged."""

    def __init__(self, history: list[Preemption], bound: int):
        last = history[-1]
        message = (
            f"preempted {_where(last)} (preemption {len(history)} of at most {bound}): "
            "resuming from the checkpoint saved on the notice"
        )
        super().__init__(error_msg=message, preempted=True)
        self.history, self.bound = list(history), bound

    def __reduce__(self) -> tuple[type, tuple[list[Preemption], int]]:
        return (type(self), (self.history, self.bound))


class PreemptionBoundError(TrainerError):
    """A trial preempted more often than `spec.preemptions` allows: a failure, which
    Tune counts against `retries`. `history` as in TrialPreempted."""

    def __init__(self, history: list[Preemption], bound: int):
        self.history, self.bound = list(history), bound
        super().__init__(
            f"preempted {len(history)} times, more than preemptions: {bound} allows (the "
            f"last {_where(history[-1])}); raise `preemptions` in the sweep file for a "
            "pool that takes nodes back this often"
        )

    def __reduce__(self) -> tuple[type, tuple[list[Preemption], int]]:
        return (type(self), (self.history, self.bound))


def history_of(error: BaseException | None) -> list[Preemption] | None:
    """The preemptions a trial's error (as the driver reads it back) reports, if any."""
    cause = getattr(error, "cause", error)
    return (
        getattr(cause, "history", None)
        if isinstance(cause, (TrialPreempted, PreemptionBoundError))
        else None
    )


def is_preemption(error: BaseException | None) -> bool:
    """Whether a trial's error (as the driver reads it back) is a preemption: ours, or
    Ray's own for an actor lost with a node drained for preemption."""
    cause = getattr(error, "cause", error)
    return isinstance(cause, RayActorError) and bool(getattr(cause, "preempted", False))


class DrainWatcher:
    """Sets `notice` once Ray lists this trial's node among the draining ones.

    A daemon thread polls every `poll_s` seconds until `stop()`; a failing poll (the
    cluster's control plane busy or gone) is retried at the next one. `deadline_ms`
    holds the drain's deadline once seen (0: the drain gave none)."""

    def __init__(self, notice: threading.Event, poll_s: float = POLL_S):
        self.notice = notice
        self.deadline_ms: int | None = None
        self._node_id = ray.get_runtime_context().get_node_id()
        self._poll_s = poll_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="drain-watcher", daemon=True)

    def __enter__(self) -> DrainWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(self._poll_s):
            try:
                draining = ray_state.state.get_draining_nodes()  # what Ray Train polls too
            except Exception:
                continue
            if self._node_id in draining:
                self.deadline_ms = int(draining[self._node_id])
                self.notice.set()
                return
