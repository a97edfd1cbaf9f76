"""Run a trainer's subprocess: stream its output into metric events, enforce limits.

This is where failure becomes explicit: a non-zero exit carries the last 50 log lines,
a NaN/inf loss stops the trial with that reason, and the spec's timeout kills it. The
events file and log are appended to, so a restarted trial keeps its history.

The first line of a failure names its cause where the exit shows one
(`sweeper.trainers.failures`).

A trial whose node is about to go away is not a failure: given a `notice`, the runner
sends SIGTERM to the trainer's main process once the notice is set, and a trainer that
then saves a checkpoint at its current step and exits with `PREEMPTED_EXIT` (the
protocol of `sweeper.trainers.notice`) raises `TrainerPreempted`, which says at
which step the next attempt resumes.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sweeper import record_names
from sweeper.trainers.base import Checkpoints, Trainer, TrialJob
from sweeper.trainers.events import MetricEvent, read_events
from sweeper.trainers.failures import disk_full, exit_reason
from sweeper.trainers.notice import PREEMPTED_EXIT, preempted_step, sigterm_on_notice

TAIL_LINES = 50


class TrainerError(RuntimeError):
    """A trial that did not finish; `tail` holds the last lines of its log."""

    def __init__(self, reason: str, tail: list[str] | None = None):
        self.reason = reason
        self.tail = tail or []
        text = (
            reason
            if not self.tail
            else reason + "\n--- last log lines ---\n" + "\n".join(self.tail)
        )
        super().__init__(text)


class TrainerPreempted(TrainerError):
    """A trial stopped by a preemption notice (SIGTERM) rather than by a fault.

    `step` is the step of the checkpoint the trainer saved on the notice (the trainer's
    ordinary resume continues from it); None when it got the notice before its first
    update, and the trial resumes from the checkpoint it had started from, if any.
    """

    def __init__(self, reason: str, tail: list[str] | None = None, step: int | None = None):
        super().__init__(reason, tail)
        self.step = step


@dataclass(frozen=True)
class TrialResult:
    """What a finished trial leaves behind in its output folder."""

    out_dir: Path
    events: list[MetricEvent]
    checkpoints: Checkpoints
    wall_time: float
    trainable_params: tuple[int, int] | None


def thread_env(threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment pinning math libraries to the trial's CPU share, so concurrent trials
    on one machine do not oversubscribe its cores."""
    env = dict(os.environ if base is None else base)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(max(1, threads))
    # Idle OpenMP threads yield instead of spinning: a spinning pool steals the core a
    # concurrent trial is computing on, and under contention both slow down several-fold.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_trainer(
    trainer: Trainer,
    job: TrialJob,
    on_event: Callable[[MetricEvent], None] | None = None,
    timeout_s: float | None = None,
    nice: int = 0,
    on_output: Callable[[str], None] | None = None,
    notice: threading.Event | None = None,
) -> TrialResult:
    """Run one trial to completion (resuming from its checkpoints if any), or raise.
    `nice` > 0 runs the trainer at that lower CPU priority (`nice -n`: every thread it
    starts inherits it), so it takes only the cores a more urgent process leaves idle.
    `on_output` sees every line of the trainer's output as it comes (`sweeper trial
    -v`); the log file gets them either way.

    `notice` set while the trainer runs (the node is being preempted) sends it SIGTERM,
    once: it saves a checkpoint at its current step and exits, and this raises
    `TrainerPreempted` with that step. A trainer that had just finished exits 0 and the
    trial's result is returned as usual. The timeout still applies."""
    out = Path(job.out_dir)
    try:
        return _run(trainer, job, out, on_event, timeout_s, nice, on_output, notice)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise TrainerError(f"{trainer.name} trial stopped: {disk_full(out)}") from exc


def _run(
    trainer: Trainer,
    job: TrialJob,
    out: Path,
    on_event: Callable[[MetricEvent], None] | None,
    timeout_s: float | None,
    nice: int = 0,
    on_output: Callable[[str], None] | None = None,
    notice: threading.Event | None = None,
) -> TrialResult:
    """`run_trainer`'s body; writing the log or events file can meet a full disk."""
    out.mkdir(parents=True, exist_ok=True)
    job.save(out / record_names.TRIAL_CONFIG_FILE)
    started = time.monotonic()
    saved_at: list[int] = []  # the step of the trainer's notice checkpoint

    with (
        open_for_append(out / record_names.TRAINER_LOG_FILE) as log,
        open_for_append(out / record_names.EVENTS_FILE) as events_file,
    ):

        def on_line(line: str) -> str | None:
            if on_output is not None:
                on_output(line)
            step = preempted_step(line)
            if step is not None:
                saved_at.append(step)
            stop = None
            for event in trainer.parse_line(line, time.monotonic() - started):
                events_file.write(event.to_json() + "\n")
                events_file.flush()
                if not event.is_finite() and stop is None:
                    stop = f"non-finite {event.split} loss/accuracy at step {event.step}"
                if on_event is not None:
                    on_event(event)
            return stop

        command = trainer.command(job)
        if nice > 0:
            command = ["nice", "-n", str(nice), *command]
        ended = stream_process(
            command, thread_env(job.threads), log, on_line, timeout_s, notice=notice
        )

    if ended.stopped:
        raise TrainerError(ended.stopped, ended.tail)
    if ended.code == PREEMPTED_EXIT or (ended.noticed and ended.code == -signal.SIGTERM):
        raise _preempted(trainer.name, saved_at[-1] if saved_at else None, ended.tail)
    if ended.code != 0:
        raise TrainerError(exit_reason(trainer.name, ended.code, ended.tail, out), ended.tail)
    return TrialResult(
        out_dir=out,
        events=read_events(out / record_names.EVENTS_FILE),
        checkpoints=trainer.checkpoints(job),
        wall_time=time.monotonic() - started,
        trainable_params=trainer.trainable_params(job),
    )


def _preempted(name: str, step: int | None, tail: list[str]) -> TrainerPreempted:
    """The trainer acted on a notice. A trainer killed by the SIGTERM the runner sent
    (it came before the trainer had installed its handler) trained nothing either."""
    if step is None:
        return TrainerPreempted(f"{name} trainer preempted before training started", tail)
    return TrainerPreempted(
        f"{name} trainer preempted: checkpoint saved at step {step}", tail, step
    )


def open_for_append(path: Path) -> TextIO:
    """Open a trial's log or events file to add to it, starting on a line of its own:
    an attempt that died mid-write (killed, or on a full disk) leaves a last line cut
    short, which must not swallow the next attempt's first line."""
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (the caller closes it)
    if handle.tell() > 0:
        handle.seek(handle.tell() - 1)
        if handle.read(1) != "\n":
            handle.write("\n")
    return handle


@dataclass(frozen=True)
class Ended:
    """How a streamed process ended."""

    code: int
    tail: list[str]
    """Its last TAIL_LINES lines of output."""
    stopped: str | None
    """Why it was killed (a line's verdict, the timeout), or None if it exited itself."""
    noticed: bool = False
    """It was sent SIGTERM because the caller's notice was set."""


def stream_process(
    command: list[str],
    env: dict[str, str],
    log: TextIO,
    on_line: Callable[[str], str | None],
    timeout_s: float | None = None,
    notice: threading.Event | None = None,
) -> Ended:
    """Run `command` in its own process group, copying every output line to `log` and
    handing it to `on_line`, until it exits. The one stream-and-kill loop of trainers
    and pretraining: a line whose `on_line` returns a reason, or the timeout, kills the
    whole group (the rest of its output is still read); an exception here (Ctrl-C, a
    failing callback) kills it too, so no trainer outlives its caller. `notice`, once
    set, sends SIGTERM to the process itself (not its group: helpers it spawned are its
    own to stop) and the loop reads on until it exits."""
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    stop_reason: list[str] = []
    proc = start_process(command, env)
    timer = _start_timeout(proc, timeout_s, stop_reason)
    reaped = threading.Event()
    noticed: list[bool] = []
    if notice is not None:
        sigterm_on_notice(proc, notice, reaped, noticed)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            tail.append(line.rstrip("\n"))
            reason = on_line(line)
            if reason is not None and not stop_reason:
                stop_reason.append(reason)
                kill_group(proc)
        code = proc.wait()
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    finally:
        reaped.set()
        if timer is not None:
            timer.cancel()
    return Ended(code, list(tail), stop_reason[0] if stop_reason else None, bool(noticed))


def start_process(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a trainer with its output as text lines on one pipe, in its own process
    group so that a kill reaches every process it spawned."""
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=env,
        start_new_session=True,
    )


def _start_timeout(
    proc: subprocess.Popen, timeout_s: float | None, stop_reason: list[str]
) -> threading.Timer | None:
    if not timeout_s:
        return None

    def expire() -> None:
        if proc.poll() is None:
            stop_reason.append(f"timed out after {timeout_s / 60:.1f} min (train.timeout_min)")
            kill_group(proc)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    return timer


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the trainer's whole process group (fairseq and HF may spawn workers)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def python_module_command(module: str, *args: str) -> list[str]:
    """Run a module with the same interpreter as the caller (the project's venv)."""
    return [sys.executable, "-m", module, *args]
