"""Checkpoint on notice, per trainer: SIGTERM mid-run, then a resume from that step.

Each trial runs the way a sweep runs it (`run_trial`), on the tiny generated corpus of
`tests.support.sweeps`. Once its events reach step `NOTICE_AT`, SIGTERM goes to the
trainer's process alone (what a VM shutting down sends it; the runner's notice sends
the same). The trainer must save a checkpoint at the step it reached and exit as
preempted (`TrainerPreempted` with that step); running the trial again in the same
folder resumes from that step (the trainer log's `sweeper: resuming at step N`), not
from the previous epoch's checkpoint, and finishes with every validation point once.
An uninterrupted run of the same trial is the reference the resumed run is held to:
every validation and test measurement equal, and the same best checkpoint. fairseq's
train losses are equal too (its checkpoint holds its metric meters); transformers'
first train loss after the resume averages only the updates since it (the running
loss of the interrupted window is not checkpointed), so HF train losses are not
compared.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweeper import record_names
from sweeper.trainers.events import MetricEvent, best_validation
from sweeper.trainers.notice import resumed_steps
from sweeper.trainers.runner import TrainerPreempted, TrialResult
from tests.support.sweeps import new_sweep

pytestmark = pytest.mark.integration

NOTICE_AT = 25
"""The step after which SIGTERM is sent: mid-epoch at 20 updates per epoch (the first
train event; the trainer may run a few more updates before the signal lands)."""
UPDATES_PER_EPOCH = 20
ANSWERS = {"0": "une perte de temps .", "1": "je le recommande vivement ."}


def _trial(tmp_path, tmp_path_factory, framework: str, **changes: Any):
    """(spec, trial, inputs) of a one-trial sweep: 80 training sentences, batch 4."""
    from sweeper.spec.load import load_spec
    from sweeper.trainers.trial_pipeline import prepare_inputs
    from sweeper.trial_keys import make_trial

    grid = {"seed": [1], "init": ["random"], "framework": [framework]}
    path, _ = new_sweep(tmp_path, tmp_path_factory, "notice", grid=grid, **changes)
    spec = load_spec(path, [])
    trial = make_trial(spec, seed=1, init="random", framework=framework, method="full")
    return spec, trial, prepare_inputs(spec, log=lambda _: None, need_pretrained=False)


def _sigterm_at(out_dir: Path, step: int, sent: list[int]):
    """An `on_event` that sends SIGTERM to the trainer process (the one whose command
    line names `out_dir`) once an event of `step` or later is in the events file."""
    import psutil

    def on_event(event: MetricEvent) -> None:
        if sent or event.step < step:
            return
        for proc in psutil.process_iter(["cmdline"]):
            if str(out_dir) in " ".join(proc.info["cmdline"] or []):
                os.kill(proc.pid, signal.SIGTERM)
                sent.append(proc.pid)

    return on_event


def preempt_and_resume(
    spec, trial, inputs, root: Path, saved: Callable[[Path, int], None]
) -> tuple[int, TrialResult, TrialResult]:
    """(notice step, resumed result, uninterrupted result); checks the contract, and
    with `saved(checkpoint folder, step)` the notice checkpoint before the resume. The
    uninterrupted run goes on beside the other two (the trainers' start-up dominates),
    started once the first has built the trial's job (its initial weights, written by
    the first caller: two threads must not draw them from torch's one generator)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from sweeper.trainers.trial_pipeline import run_trial

    uninterrupted: list[Future[TrialResult]] = []

    def start_reference(*_: Any) -> None:  # once the first trainer starts: its job is built
        if not uninterrupted:
            later = beside.submit(run_trial, spec, trial, root / "reference", inputs=inputs)
            uninterrupted.append(later)

    with ThreadPoolExecutor(1) as beside:
        out = root / "preempted"
        step, resumed = _preempt_then_resume(spec, trial, inputs, out, saved, start_reference)
        reference = uninterrupted[0].result()
    per_epoch = reference.events[-1].step // int(trial.train["epochs"])
    for split in ("valid", "test"):
        steps = [e.step for e in resumed.events if e.split == split]
        assert steps == [e.step for e in reference.events if e.split == split]
        assert steps == list(range(per_epoch, resumed.events[-1].step + 1, per_epoch))
    train = [e.step for e in resumed.events if e.split == "train"]
    assert train == [e.step for e in reference.events if e.split == "train"]
    return step, resumed, reference


def _preempt_then_resume(
    spec, trial, inputs, out: Path, saved: Callable[[Path, int], None], on_start: Callable
) -> tuple[int, TrialResult]:
    from sweeper.trainers.trial_pipeline import run_trial

    sent: list[int] = []
    on_event = _sigterm_at(out, NOTICE_AT, sent)
    with pytest.raises(TrainerPreempted) as preempted:
        run_trial(spec, trial, out, inputs=inputs, on_event=on_event, on_start=on_start)
    assert len(sent) == 1, "one trainer process, one SIGTERM"
    step = preempted.value.step
    assert step is not None and step >= NOTICE_AT, preempted.value
    before = [e.step for e in _events(out) if e.split == "valid"]
    assert before and max(before) <= step
    saved(out / record_names.CHECKPOINT_DIR, step)

    resumed = run_trial(spec, trial, out, inputs=inputs)
    log = (out / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert resumed_steps(log) == [step]
    return step, resumed


def _events(out: Path) -> list[MetricEvent]:
    from sweeper.trainers.events import read_events

    return read_events(out / record_names.EVENTS_FILE)


def _measured(result: TrialResult, splits: tuple[str, ...] = ("valid", "test")) -> dict:
    """What the trial measured at each (split, step), without its wall time."""
    return {
        (e.split, e.step): (e.loss, e.accuracy, e.lr, e.metrics)
        for e in result.events
        if e.split in splits
    }


def _hf_saved(folder: Path, step: int) -> None:
    """The notice checkpoint is transformers' own, with what resuming needs, and the
    newest; the best checkpoint the trainer state names is still there."""
    import json

    from sweeper.trainers.hf.hf_trainer import find_checkpoints

    found = find_checkpoints(folder)
    assert found.last == folder / f"checkpoint-{step}"
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth"} <= {
        p.name for p in found.last.iterdir()
    }
    state = json.loads((found.last / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == step
    assert found.best is not None and found.best.is_dir()


def _hf_resumed_from(root: Path, step: int) -> bool:
    log = (root / "preempted" / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    return f"resume from {root / 'preempted' / 'checkpoints' / f'checkpoint-{step}'}" in log


def _fairseq_updates(checkpoint: Path) -> int:
    import torch

    from sweeper.trainers.fairseq.fairseq_checkpoints import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    return int(state["optimizer_history"][-1]["num_updates"])


def _fairseq_saved(folder: Path, step: int) -> None:
    """checkpoint_last.pt holds the notice step; checkpoint_best.pt an earlier one."""
    from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST

    assert _fairseq_updates(folder / LAST) == step
    assert _fairseq_updates(folder / BEST) <= step


@pytest.mark.soak  # `make reliability` runs it; `make test` keeps the causal-LM case
def test_fairseq_saves_checkpoint_last_at_the_notice_and_resumes_there(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST

    train = {"epochs": 5, "batch_size": 4, "lr": 0.002}
    spec, trial, inputs = _trial(tmp_path, tmp_path_factory, "fairseq", train=train)
    step, resumed, reference = preempt_and_resume(spec, trial, inputs, tmp_path, _fairseq_saved)
    log = (tmp_path / "preempted" / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    epoch = step // UPDATES_PER_EPOCH + 1  # the one it was in, or the next at its end
    assert f"checkpoint_last.pt (epoch {epoch} @ {step} updates)" in log

    assert resumed.checkpoints.best is not None and resumed.checkpoints.last is not None
    assert sorted(p.name for p in resumed.checkpoints.last.parent.iterdir()) == [BEST, LAST]
    best = best_validation(resumed.events)
    assert best is not None and _fairseq_updates(resumed.checkpoints.best) == best[0].step
    # bit for bit, train losses too: fairseq's checkpoint holds its metric meters
    assert _measured(resumed, ("train", "valid", "test")) == _measured(
        reference, ("train", "valid", "test")
    )


@pytest.mark.soak  # `make reliability` runs it; `make test` keeps the causal-LM case
def test_hf_classifier_saves_a_checkpoint_at_the_notice_and_resumes_there(
    tmp_path, tmp_path_factory
):
    train = {"epochs": 5, "batch_size": 4, "lr": 0.002}
    spec, trial, inputs = _trial(tmp_path, tmp_path_factory, "hf", train=train)
    step, resumed, reference = preempt_and_resume(spec, trial, inputs, tmp_path, _hf_saved)
    assert _hf_resumed_from(tmp_path, step)

    best = best_validation(resumed.events)
    assert best is not None and resumed.checkpoints.best is not None
    assert resumed.checkpoints.best.name == f"checkpoint-{best[0].step}"
    assert resumed.checkpoints.best.name == reference.checkpoints.best.name  # type: ignore[union-attr]
    on_disk = {p.name for p in resumed.checkpoints.last.parent.iterdir()}  # type: ignore[union-attr]
    assert on_disk == {resumed.checkpoints.best.name, resumed.checkpoints.last.name}  # type: ignore[union-attr]
    assert _measured(resumed) == _measured(reference)


def test_hf_causal_lm_saves_a_checkpoint_at_the_notice_and_resumes_there(
    tmp_path, tmp_path_factory
):
    train = {"epochs": 4, "batch_size": 4, "lr": 0.001, "attention_dropout": 0.0}
    spec, trial, inputs = _trial(
        tmp_path,
        tmp_path_factory,
        "hf",
        task="causal_lm",
        data={"answers": ANSWERS},
        train=train,
    )
    step, resumed, reference = preempt_and_resume(spec, trial, inputs, tmp_path, _hf_saved)
    assert _hf_resumed_from(tmp_path, step)
    assert resumed.checkpoints.best is not None
    best = best_validation(resumed.events, spec.select)
    assert best is not None and resumed.checkpoints.best.name == f"checkpoint-{best[0].step}"
    assert _measured(resumed) == _measured(reference)
