"""The pretraining stage as a Ray task, and the gate that holds back the trials needing it.

A sweep is a graph of stages: data preparation feeds every trial, the pretraining stage
feeds only the trials of the `pretrained` init. So the engine (`sweeper.engine.stage_graph`)
prepares the data, creates the runs and then, on Ray, starts pretraining as a task
*beside* the trials: random-init trials train while it runs, and a `pretrained` trial
waits for its result inside its own Ray trial (`pretrained_inputs`) before it builds its
initial weights.

Where and with what it runs:

- on the driver's node (its data is there; on a cluster that is the head node),
  in a placement group of one trial's CPUs (`resources.cpu`) and, where that node has
  GPUs, one GPU (`stage_bundle`), reserved before the Tuner starts: the stage takes one
  trial slot from the pool, and a trial waiting for it can never hold the CPU it
  needs. The reservation is released as soon as the task ends (`PretrainStage.poll`,
  called between Tune's steps);
- the task calls `sweeper.trainers.trial_pipeline.prepare_inputs`, the function the driver
  calls when every input is prepared before the trials (`sweeper.engine.sweep.prepare`):
  data preparation is a cache hit there, and pretraining runs with the same command,
  threads and seed, so the checkpoint (and every record built on it) is the one that
  pretraining before the trials would give;
- with a remote artifact store the task publishes the checkpoint itself
  (`tracking.staging.publish`) and returns where it is, so a trial on another node
  fetches it like any staged input (docs/architecture.md, invariant 7).
- with a `model.pretrain.objective` grid axis the one task trains each objective's
  checkpoint, one after the other (each takes every core of the bundle's node), and
  every `pretrained` trial waits for the whole stage: the simplest order that keeps one
  reservation and one gate.

A failed pretraining fails every `pretrained` trial with the stage's own error ("
pretraining failed: ..."): they never start a trainer, their runs are marked FAILED with
that reason, and the sweep exits 1; `--resume` pretrains again and runs them.

This module imports Ray inside functions; only the engine imports it, inside functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.spec.schema import SweepSpec
from sweeper.tracking.staging import StagedInput, pretrained_role
from sweeper.trainers.runner import TrainerError
from sweeper.trainers.trial_pipeline import SweepInputs

if TYPE_CHECKING:
    from collections.abc import Callable

BESIDE_NICE = 19
"""CPU priority (`nice`) of a trial's trainer started while the stage runs. The stage
keeps every thread it would have alone (its thread count changes the checkpoint: 1 and
2 threads give different weights), so a trial at normal priority beside it
oversubscribes the cores and slows the stage down, and with it every `pretrained` trial,
which waits for the stage. At nice 19 the trial takes only the cycles the stage leaves
idle (its threads sleep while they wait for each other: OMP_WAIT_POLICY=PASSIVE), so
the stage keeps the pace it has alone. A trial started after the stage ended runs
at normal priority; one started before keeps nice 19 to its end (an unprivileged
process cannot raise its priority again)."""
NODE_SHARE = 0.001
"""Of the driver node's `node:<ip>` resource: pins the stage's bundle to that node."""


@dataclass(frozen=True)
class Pretrained:
    """What the pretraining task returns."""

    paths: dict[str | None, Path]
    """The checkpoint of each objective the grid asks for (`SweepInputs.pretrained`)."""
    staged: tuple[StagedInput, ...]
    """The checkpoint as published to a remote artifact store; empty with a local one."""
    log: tuple[str, ...]
    """Its progress lines (the driver prints the last ones)."""
    seconds: float


def pretrain_task(spec: SweepSpec, root_uri: str | None, tracking_uri: str) -> Pretrained:
    """The Ray task: the spec's pretrained checkpoints, one per objective its grid asks
    for, one after the other (trained, or found in the cache), published when
    `root_uri` (a remote artifact root) is given."""
    from sweeper.logs import quiet_root_logger
    from sweeper.tracking.staging import publish
    from sweeper.trainers.trial_pipeline import prepare_inputs

    started = time.monotonic()
    lines: list[str] = []
    try:
        inputs = prepare_inputs(spec, log=lines.append)
    finally:
        quiet_root_logger()
    assert inputs.pretrained
    staged: tuple[StagedInput, ...] = ()
    if root_uri is not None:
        roles = [pretrained_role(objective) for objective in inputs.pretrained]
        staged = tuple(publish(inputs, root_uri, tracking_uri, log=lines.append, roles=roles))
    return Pretrained(inputs.pretrained, staged, tuple(lines), time.monotonic() - started)


def pretrained_inputs(
    ref: Any, inputs: SweepInputs, staged: tuple[StagedInput, ...]
) -> tuple[SweepInputs, tuple[StagedInput, ...]]:
    """A `pretrained` trial's inputs once the stage is done: waits for it; raises
    TrainerError carrying the stage's own error when it failed."""
    import ray

    try:
        done: Pretrained = ray.get(ref)
    except Exception as exc:
        raise stage_error(exc) from None
    return replace(inputs, pretrained=done.paths), (*staged, *done.staged)


def running(ref: Any) -> bool:
    """Whether the stage behind `ref` is still running."""
    import ray

    return not ray.wait([ref], timeout=0)[0]


def stage_error(exc: BaseException) -> TrainerError:
    """The error a failed stage's waiting trials fail with: its reason and log tail."""
    cause = getattr(exc, "cause", None) or exc
    if isinstance(cause, TrainerError):
        return TrainerError(f"pretraining failed: {cause.reason}", cause.tail)
    text = str(cause).strip().splitlines()
    return TrainerError(f"pretraining failed: {type(cause).__name__}: {text[-1] if text else ''}")


def driver_node() -> dict[str, Any]:
    """The Ray node this driver runs on, as `ray.nodes()` describes it."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    return next(node for node in ray.nodes() if node.get("NodeID") == here)


def stage_bundle(spec: SweepSpec, node: dict[str, Any]) -> dict[str, float]:
    """The stage's placement-group bundle: one trial's CPUs (as many as the driver's
    node has, none on a head started with 0 CPUs: pretraining then runs there as it
    did in the driver), one GPU when that node has any (pretraining in the driver saw
    them, and fairseq trains on one), and a share of the node's own `node:<ip>`
    resource, which pins the bundle there."""
    have = node.get("Resources", {})
    bundle = {"CPU": min(float(spec.resources.cpu), float(have.get("CPU", 0)))}
    if have.get("GPU", 0) >= 1:
        bundle["GPU"] = 1.0
    pins = [key for key in have if key.startswith("node:") and not key.startswith("node:__")]
    bundle[pins[0] if pins else f"node:{node['NodeManagerAddress']}"] = NODE_SHARE
    return bundle


class PretrainStage:
    """The running stage as the driver holds it: the task, its reservation, its end."""

    def __init__(self, spec: SweepSpec, root_uri: str | None, tracking_uri: str):
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = stage_bundle(spec, driver_node())
        self._group = placement_group([bundle])
        ray.get(self._group.ready())
        task = ray.remote(pretrain_task).options(
            num_cpus=bundle["CPU"],
            num_gpus=bundle.get("GPU", 0),
            max_retries=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self._group),
        )
        self.ref = task.remote(spec, root_uri, tracking_uri)
        self.outcome: Pretrained | TrainerError | None = None
        """None while it runs; then its result, or the error its trials fail with."""

    def poll(self, note: Callable[[str], None]) -> None:
        """Once the task has ended: release its reservation, say how it went."""
        import ray

        if self.outcome is not None or running(self.ref):
            return
        try:
            done: Pretrained = ray.get(self.ref)
        except Exception as exc:
            self.outcome = stage_error(exc)
            note(f"pretraining FAILED: {self.outcome.reason}")
        else:
            self.outcome = done
            for line in done.log[-2:]:
                note(line.strip())
            note(f"pretraining done in {done.seconds:.0f} s: the pretrained trials start")
        self._release()

    def stop(self) -> None:
        """At the end of the trials (or on Ctrl-C): a stage still running is cancelled,
        which kills its trainer (`runner.stream_process`), and its reservation freed."""
        import ray

        if self.outcome is None and running(self.ref):
            ray.cancel(self.ref)
            ray.wait([self.ref], timeout=30)
        self._release()

    def _release(self) -> None:
        from ray.util.placement_group import remove_placement_group

        if self._group is not None:
            remove_placement_group(self._group)
            self._group = None
