"""The HuggingFace transformers trainer, as seen from the parent process.

This module runs in the Ray worker (or the CLI) that supervises a trial, so it imports
neither torch nor transformers: it only builds the child's command line, reads the
child's event lines, and inspects what the child left on disk. The child itself is
`sweeper.trainers.hf.hf_main`; the two share the small helpers below (line format,
checkpoint discovery, warmup arithmetic) so they cannot drift apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from sweeper import record_names
from sweeper.trainers.base import Checkpoints, TrialJob, read_param_counts
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.predictions import Measured
from sweeper.trainers.runner import python_module_command

CHILD_MODULE = "sweeper.trainers.hf.hf_main"
EVENT_PREFIX = "@@sweeper-event "
"""Marks the child's metric lines; everything else it prints is plain log."""
"""`{"trainable": int, "total": int}`, written by the child before training starts."""
CHECKPOINT_PREFIX = "checkpoint-"
"""transformers' folder naming: `checkpoint-<global_step>`."""
STATE_FILE = "trainer_state.json"
"""Written last when transformers saves a checkpoint: its presence means complete."""
_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")


def format_event(event: MetricEvent) -> str:
    """One stdout line carrying an event (the child's side of `parse_event_line`)."""
    return EVENT_PREFIX + event.to_json()


def parse_event_line(line: str) -> MetricEvent | None:
    """The event on a child's output line, or None for ordinary log lines.

    A line that carries the prefix but not valid JSON is a bug in the child, and is
    reported rather than silently dropped.
    """
    line = line.strip()
    if not line.startswith(EVENT_PREFIX):
        return None
    payload = line[len(EVENT_PREFIX) :]
    try:
        return MetricEvent.from_dict(json.loads(payload))
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"malformed hf event line: {line!r}") from exc


def checkpoint_step(path: Path) -> int | None:
    """The global step in a `checkpoint-<step>` folder name, None for other names."""
    match = _STEP.match(path.name)
    return int(match.group(1)) if match else None


def complete_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Fully written checkpoints, oldest first. transformers writes the trainer state
    last, so a kill or a full disk during a save leaves a folder without it, or with
    it cut short; such a folder can be neither resumed from nor evaluated."""
    if not checkpoint_dir.is_dir():
        return []
    found = [
        path
        for path in checkpoint_dir.iterdir()
        if path.is_dir() and checkpoint_step(path) is not None and _state_readable(path)
    ]
    return sorted(found, key=lambda path: checkpoint_step(path) or 0)


def _state_readable(folder: Path) -> bool:
    try:
        json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def find_checkpoints(checkpoint_dir: Path) -> Checkpoints:
    """Best and last checkpoints: the last is the highest step; the best is the one the
    last checkpoint's trainer state names (transformers tracks it, ties keeping the
    earliest). The recorded path is matched by folder name, so a moved trial still
    resolves."""
    complete = complete_checkpoints(checkpoint_dir)
    if not complete:
        return Checkpoints(best=None, last=None)
    last = complete[-1]
    state = json.loads((last / STATE_FILE).read_text(encoding="utf-8"))
    recorded = state.get("best_model_checkpoint")
    best = checkpoint_dir / Path(recorded).name if recorded else None
    if best is not None and not (best / STATE_FILE).is_file():
        best = None
    return Checkpoints(best=best, last=last)


class HFTrainer:
    """Runs a classification trial with `transformers.Trainer` in a child process (see
    hf_main); `child` is the module that process runs (the causal-LM backend's trainer,
    `sweeper.trainers.hf.lm_trial.LMTrainer`, names its own)."""

    name = "hf"
    child = CHILD_MODULE

    def command(self, job: TrialJob) -> list[str]:
        """The child reads the job the runner saved; it resumes by itself."""
        config = str(Path(job.out_dir) / record_names.TRIAL_CONFIG_FILE)
        return python_module_command(self.child, config)

    def parse_line(self, line: str, wall_time: float) -> list[MetricEvent]:
        """Event lines only; the runner's clock replaces the child's, so wall time means
        the same thing for fairseq and HF trials (seconds since the trial started).

        A torn event line (the child killed mid-write) yields nothing rather than an
        exception: a kill must stay a TrainerError the retry logic knows, and the line
        itself is still in the trainer log.
        """
        try:
            event = parse_event_line(line)
        except ValueError:
            return []
        return [] if event is None else [replace(event, wall_time=wall_time)]

    def checkpoints(self, job: TrialJob) -> Checkpoints:
        return find_checkpoints(job.checkpoint_dir)

    def trainable_params(self, job: TrialJob) -> tuple[int, int] | None:
        return read_param_counts(Path(job.out_dir))

    def reload_inputs(self, job: TrialJob) -> list[str]:
        """The prepared test split; a LoRA checkpoint holds adapters only, so the init
        weights they apply to too."""
        return [job.data, *([job.init_checkpoint] if job.method == "lora" else [])]

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """A best checkpoint classifying `split`, measured as the trial measured it."""
        from sweeper.trainers.reload import hf_predict

        return hf_predict(job, checkpoint, step, (split,))[split]
