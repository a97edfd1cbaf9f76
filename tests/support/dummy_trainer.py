"""A trainer with no framework behind it, for tests of everything around trainers.

It runs a real subprocess (`python tests/support/dummy_trainer.py JOB`) that emits the same
metric events as the real trainers, writes a "checkpoint" per epoch, resumes from the
last one, and can be told through `job.extra` to crash, hang or produce NaN, so the
runner, retries and resume logic are tested quickly and deterministically.

It reads the inputs a real trainer would (its backend's prepared folder, whose
training lines it counts, and the initial checkpoint) and fails when one is missing or
does not match `num_train`, so a sweep of dummy trials still proves that every node got the
inputs (tests without a spec pass empty paths: nothing to read).

`job.extra` keys: `sleep_per_step` (s), `fail_at_step`, `nan_at_step`, `fail_once_marker`
(a path: fail at `fail_at_step` only while this file does not exist, then create it),
`grow_mb_per_step` (keep that much more memory, touched, at every step: a leak, for the
tests that put a memory limit on the trainer), `noise` (shift the trial's whole curve by
that many points times a standard-normal draw fixed by its seed, init, framework and
lr, so that two groups' seed differences have a spread, as real trials do).

On SIGTERM it keeps the contract of `sweeper.trainers.notice` as the real trainers
do: it finishes the step in progress (the epoch's validation included, when the step
ends one), writes last.json at that step, prints the preemption line and exits with
`PREEMPTED_EXIT`; a later run resumes from that step. Before its first step (reading
its inputs) it exits at once.

Sweep-level tests cannot reach `job.extra` (the sweep engine builds jobs from the spec,
which has no field for it, on purpose), so the child also reads `SWEEPER_DUMMY_EXTRA`:
a JSON object mapping a substring of the trial folder's name (e.g. `random-full-s2`,
or `*` for every trial) to extra keys merged over `job.extra`. The variable reaches
the child through the Ray worker's environment (local Ray inherits the driver's).

Not shipped: it lives with the tests and is registered through `$SWEEPER_PLUGINS`
(tests/conftest.py names `tests.support.dummy_trainer:register` and puts the repository
root on `$PYTHONPATH`), exactly as a third-party plugin would be. Every process a test
starts inherits both, so the CLI, Ray workers (also those of `ray start` nodes) and Ray
job drivers import it from here. Its child runs as a script by path and imports only
`sweeper`, so it needs nothing on the path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

from sweeper import record_names
from sweeper.trainers.base import Checkpoints, TrialJob
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.notice import Notice
from sweeper.trainers.predictions import CheckpointPredictions, Measured

PREFIX = "@@sweeper-event "
EXTRA_ENV = "SWEEPER_DUMMY_EXTRA"


def register() -> None:
    """The `$SWEEPER_PLUGINS` hook: make `dummy` a classification backend (full and LoRA
    methods) that reads the HF folder (written by the hf backend's writer) and starts
    from the task's initial weights."""
    from sweeper.backends import CLASSIFICATION, Backend, register

    register(
        Backend(
            "dummy",
            CLASSIFICATION,
            f"{__name__}:DummyTrainer",
            "sweeper.trainers.classification:build_job",
            "hf",
            ("full", "lora"),
            write="sweeper.data.binarize:write_hf",
        )
    )


class DummyTrainer:
    name = "dummy"

    def command(self, job: TrialJob) -> list[str]:
        return [
            sys.executable,
            str(Path(__file__).resolve()),
            str(Path(job.out_dir) / record_names.TRIAL_CONFIG_FILE),
        ]

    def parse_line(self, line: str, wall_time: float) -> list[MetricEvent]:
        if not line.startswith(PREFIX):
            return []
        return [MetricEvent.from_dict(json.loads(line[len(PREFIX) :]))]

    def checkpoints(self, job: TrialJob) -> Checkpoints:
        folder = job.checkpoint_dir
        best, last = folder / "best.json", folder / "last.json"
        return Checkpoints(best if best.exists() else None, last if last.exists() else None)

    def trainable_params(self, job: TrialJob) -> tuple[int, int] | None:
        return None

    def reload_inputs(self, job: TrialJob) -> list[str]:
        return [job.init_checkpoint] if job.method == "lora" else []

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """The dummy's "model" is the step its best.json holds; its accuracy is the
        curve's value there, computed again, and its predictions `dummy_predictions`
        of that step."""
        best = int(json.loads((checkpoint / "best.json").read_text(encoding="utf-8"))["step"])
        accuracy = _accuracy(job, best, split)
        return Measured(dummy_predictions(job, best), {"accuracy": accuracy})


def dummy_predictions(job: TrialJob, step: int, examples: int = 10) -> CheckpointPredictions:
    """What the dummy's "model" at `step` predicts for `examples` examples: class
    (i * step + seed) % 2 for example i, right where that is i % 2 (a function of the
    step, not of the curve: it only has to change when the checkpoint does)."""
    predicted = tuple((i * step + job.seed) % 2 for i in range(examples))
    correct = tuple(int(p == i % 2) for i, p in enumerate(predicted))
    return CheckpointPredictions(step, predicted, tuple(0.5 + i / 100 for i in predicted), correct)


def _accuracy(job: TrialJob, step: int, split: str, noise: float = 0.0) -> float:
    """A deterministic learning curve that depends on seed, init and (above 0.01) lr,
    shifted by `noise` times the trial's own fixed standard-normal draw."""
    ceiling = 90.0 if job.init == "pretrained" else 65.0
    offset = (job.seed * 7 + (3 if split == "test" else 0)) % 5
    # A learning rate above 0.01 costs accuracy (none below): searches have a signal.
    too_high = 20.0 * max(0.0, math.log10(float(job.train["lr"]) / 0.01))
    shift = noise * _normal_draw(f"{job.seed}:{job.init}:{job.framework}:{job.train['lr']}")
    curve = ceiling - 40.0 * math.exp(-step / job.updates_per_epoch) - offset - too_high
    return round(curve + shift, 2)


def _normal_draw(key: str) -> float:
    """A standard-normal value fixed by `key` (Box-Muller on two hash-derived uniforms)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    u1 = (int.from_bytes(digest[:8], "big") + 1) / 2.0**64
    u2 = int.from_bytes(digest[8:16], "big") / 2.0**64
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def env_extra(out_dir: str, environ: dict[str, str] | None = None) -> dict[str, object]:
    """Extra keys `SWEEPER_DUMMY_EXTRA` assigns to the trial whose folder is `out_dir`
    (patterns applied in the order written; later ones win)."""
    text = (os.environ if environ is None else environ).get(EXTRA_ENV, "")
    if not text.strip():
        return {}
    name = Path(out_dir).name
    merged: dict[str, object] = {}
    for pattern, values in json.loads(text).items():
        if pattern == "*" or pattern in name:
            merged.update(values)
    return merged


def _emit(**fields: object) -> None:
    print(PREFIX + json.dumps(fields), flush=True)


def missing_input(job: TrialJob) -> str | None:
    """What a real trainer could not read on this node, or None."""
    for path in (job.data, job.init_checkpoint):
        if path and not Path(path).exists():
            return f"{path} does not exist on this node"
    if job.data:
        train = Path(job.data) / "train.jsonl"
        lines = sum(1 for _ in train.open(encoding="utf-8")) if train.exists() else 0
        if lines != job.num_train:
            return f"{train} holds {lines} examples, the job expects {job.num_train}"
    return None


def main(job_path: str) -> int:
    notice = Notice().install()
    job = TrialJob.load(Path(job_path))
    problem = missing_input(job)
    if problem:
        print(f"dummy trainer: cannot read its inputs: {problem}", flush=True)
        return 2
    extra = {**job.extra, **env_extra(job.out_dir)}
    job.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    last = job.checkpoint_dir / "last.json"
    start = json.loads(last.read_text())["step"] if last.exists() else 0
    print(f"dummy trainer: starting at step {start} of {job.total_updates}", flush=True)
    if start:
        notice.resuming(start)
    best_file = job.checkpoint_dir / "best.json"
    best = json.loads(best_file.read_text())["accuracy"] if best_file.exists() else -1.0
    held: list[bytearray] = []
    notice.arm()
    for step in range(start + 1, job.total_updates + 1):
        time.sleep(float(extra.get("sleep_per_step", 0.0)))
        grow = int(float(extra.get("grow_mb_per_step", 0)) * 1024 * 1024)
        if grow:
            held.append(bytearray(b"\1" * grow))  # written, so the pages are really used
        marker = extra.get("fail_once_marker")
        if step == extra.get("fail_at_step") and not (marker and Path(marker).exists()):
            if marker:
                Path(marker).touch()
            print(f"dummy trainer: injected crash at step {step}", flush=True)
            return 3
        loss = float("nan") if step == extra.get("nan_at_step") else 1.0 / step
        epoch = step / job.updates_per_epoch
        _emit(step=step, epoch=epoch, split="train", loss=loss, lr=job.train["lr"])
        if step % job.updates_per_epoch == 0 or step == job.total_updates:
            for split in ("valid", "test"):
                acc = _accuracy(job, step, split, float(extra.get("noise", 0.0)))
                _emit(step=step, epoch=epoch, split=split, loss=1.0 - acc / 100, accuracy=acc)
            acc = _accuracy(job, step, "valid", float(extra.get("noise", 0.0)))
            if acc > best:
                best = acc
                best_file.write_text(json.dumps({"step": step, "accuracy": acc}))
            last.write_text(json.dumps({"step": step}))
        if notice.received and step < job.total_updates:
            last.write_text(json.dumps({"step": step}))
            return notice.preempted(step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
