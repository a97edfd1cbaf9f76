"""A grid sweep as a graph of stages: what must be ready before the trials, what not.

Data preparation feeds every trial, so it runs in the driver before any run is created
(what it refuses is exit 2, invariant 5). The pretraining stage feeds only the trials
of the `pretrained` init: when the trials to run include others too, it runs as a Ray
task beside them (`sweeper.tune.pretrain_task.PretrainStage`) instead of before them, and the
random-init trials are queued first. On the demo that hides most of the pretraining
behind the random-init trials (docs/benchmarks.md, "Stage graph", has the measurements).

The stage runs only when it can overlap something. When every trial to run needs the
checkpoint, or the checkpoint is given (`model.checkpoint`), or no trial needs it, the
inputs are all prepared in the driver before the trials (`sweeper.engine.sweep.prepare`),
and a pretraining failure there is exit 1 before any run exists. Beside the
trials, a pretraining failure fails the `pretrained` trials without starting them
(their runs FAILED, the stage's error as their reason), the others finish, and the
sweep exits 1 naming the stage; `--resume` runs it again. Every check pretraining's
recipe needs (`engine.preflight.check_pretrain`) is made before anything is created.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from sweeper.engine.sweep import Sweep, prepare

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.trainers.trial_pipeline import SweepInputs
    from sweeper.tune.pretrain_task import PretrainStage


def pretrain_beside(sweep: Sweep) -> bool:
    """Whether the pretraining stage can run beside trials that do not need it."""
    model = sweep.spec.model
    if model.checkpoint is not None or model.pretrain is None:
        return False
    inits = {sweep.trials[key].init for key in (*sweep.plan.create, *sweep.plan.resume)}
    return "pretrained" in inits and len(inits) > 1


def prepare_stages(sweep: Sweep) -> tuple[SweepInputs, bool]:
    """The inputs every trial needs now, and whether pretraining is left for Ray (then
    `inputs.pretrained` is None until the stage is done)."""
    later = pretrain_beside(sweep)
    return prepare(sweep.spec, need_pretrained=not later), later


def remote_root(client: MlflowClient, experiment_id: str) -> str | None:
    """The experiment's artifact root when it is remote (inputs are staged there:
    `sweeper.tracking.staging`), else None."""
    from sweeper.tracking.staging import is_remote

    root = client.get_experiment(experiment_id).artifact_location
    return root if is_remote(root) else None


def start_pretraining(sweep: Sweep) -> PretrainStage:
    """Start the pretraining task on Ray (inside the driver's Ray session)."""
    from sweeper.tune.pretrain_task import PretrainStage

    waiting = sum(t.init == "pretrained" for k, t in sweep.trials.items() if _runs(sweep, k))
    print(
        f"pretraining runs beside the trials on one trial's resources; the {waiting} "
        "pretrained trial(s) start once it is done",
        flush=True,
    )
    root = remote_root(sweep.client, sweep.experiment_id)
    return PretrainStage(sweep.spec, root, sweep.uri)


def trial_order(sweep: Sweep, keys: list[str], stage: PretrainStage | None) -> list[str]:
    """Grid order, with the trials that wait for a running stage last: Ray starts the
    others first, and a waiting trial takes a slot only when nothing else can."""
    if stage is None:
        return keys
    return sorted(keys, key=lambda key: sweep.trials[key].init == "pretrained")


def report_failed_stage(sweep: Sweep, stage: PretrainStage | None) -> None:
    """After the trials: a failed pretraining named, with what it left undone."""
    from sweeper.trainers.runner import TrainerError

    if stage is None or not isinstance(stage.outcome, TrainerError):
        return
    print(
        f"error: {stage.outcome.reason}\nthe pretrained trials did not start (their runs "
        f"are FAILED with this reason); `{sweep.options.resume_command()}` pretrains again "
        "and runs them",
        file=sys.stderr,
        flush=True,
    )


def _runs(sweep: Sweep, key: str) -> bool:
    return key in sweep.plan.create or key in sweep.plan.resume
