"""Checkpoint on notice: what a trainer process does on SIGTERM, and how its parent reads it.

A node about to be taken away (a spot VM's shutdown, a drained Ray node) gives a trial
seconds of notice. The runner passes it on as SIGTERM to the trainer's main process
(`runner.run_trainer(notice=...)`, through `sigterm_on_notice`), and a VM shutting
down sends SIGTERM to it directly. Either way every trainer process (fairseq, HF
classifier, HF causal LM, the tests' dummy) answers the same way, through a `Notice`
its `main` installs first thing:

* before training has begun (imports, model load, resume: `Notice.arm` not yet
  called) it exits at once with `PREEMPTED_EXIT`, printing `EARLY_LINE`: nothing was
  trained since the checkpoint it started from, so there is nothing to save;
* once armed, the handler only records the notice; the trainer finishes the update in
  progress, saves a checkpoint at that step through its framework's normal checkpoint
  path (so its ordinary resume continues from there), prints `PREEMPTED_LINE` with
  that step and exits with `PREEMPTED_EXIT`;
* a trainer whose training had reached its last update when the notice came finishes
  as usual (exit 0): the trial is done, not preempted.

A SIGTERM that comes before `main` (the interpreter's start; the HF children's
module-level imports of torch and transformers) kills the process the default way;
when the runner sent it, the runner counts that as preempted before training too.

The line formats live here alone: the children print them, the runner parses them.
A resumed trainer prints `RESUMED_LINE` with the step it continues from, in whatever
words its framework also logs it.

Imports nothing heavy: the runner (in the Ray worker) and the trainer children use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from types import FrameType

PREEMPTED_EXIT = 75
"""A trainer's exit status after it acted on the notice (sysexits' EX_TEMPFAIL: try
again later, elsewhere). Neither a success nor a failure of the trial."""
PREEMPTED_LINE = "sweeper: preempted: checkpoint saved at step {step}"
"""Printed by a trainer that saved its notice checkpoint, just before it exits."""
EARLY_LINE = "sweeper: preempted: before training started, no checkpoint saved"
"""Printed by a trainer that got the notice before its first update."""
RESUMED_LINE = "sweeper: resuming at step {step}"
"""Printed by a trainer that continues from a checkpoint, before its first update."""
_PREEMPTED = re.compile(r"^sweeper: preempted: checkpoint saved at step (\d+)\s*$")
_RESUMED = re.compile(r"^sweeper: resuming at step (\d+)\s*$", re.MULTILINE)


def preempted_step(line: str) -> int | None:
    """The step in a `PREEMPTED_LINE`, or None for any other line."""
    match = _PREEMPTED.match(line)
    return int(match.group(1)) if match else None


def resumed_steps(log: str) -> list[int]:
    """The steps a trainer log's attempts resumed from (`RESUMED_LINE`), in order."""
    return [int(step) for step in _RESUMED.findall(log)]


def print_line(text: str) -> None:
    """One whole line on stdout, written with a single system call: safe inside a
    signal handler, which may interrupt a `print` in progress (whose buffered part
    then follows it, and is flushed first where that is possible)."""
    with contextlib.suppress(RuntimeError, OSError, ValueError):
        sys.stdout.flush()
    os.write(sys.stdout.fileno(), (text + "\n").encode())


class Notice:
    """The SIGTERM notice as a trainer process sees it (see the module docstring)."""

    def __init__(self) -> None:
        self.received = False
        """SIGTERM came: stop after the current update."""
        self.armed = False
        """Training has begun: a SIGTERM now waits for the notice checkpoint."""

    def install(self) -> Notice:
        """Take over SIGTERM for this process (main thread only, as Python requires)."""
        signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def arm(self) -> None:
        """From now on a SIGTERM is answered with a checkpoint; before, with an exit."""
        self.armed = True

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        if not self.armed:
            print_line(EARLY_LINE)  # flushes stdout first where it can
            os._exit(PREEMPTED_EXIT)  # `exit_now` would flush and shut logging down: unsafe here

    @staticmethod
    def preempted(step: int) -> int:
        """Say that the notice checkpoint at `step` is saved; the exit status to leave
        with (`PREEMPTED_EXIT`)."""
        print_line(PREEMPTED_LINE.format(step=step))
        return PREEMPTED_EXIT

    @staticmethod
    def resuming(step: int) -> None:
        """Say, once, which step this attempt continues from (`RESUMED_LINE`)."""
        print(RESUMED_LINE.format(step=step), flush=True)


NOTICE_POLL_S = 0.1
"""How often the notice watcher looks whether the process has ended without one."""


def sigterm_on_notice(
    proc: subprocess.Popen, notice: threading.Event, ended: threading.Event, noticed: list[bool]
) -> threading.Thread:
    """The runner's side: a thread that sends SIGTERM to `proc` (the trainer's main
    process, not its group) once `notice` is set, appending to `noticed`; it ends
    then, or when `ended` is set (the process was reaped), whichever comes first."""

    def watch() -> None:
        while not ended.is_set():
            if notice.wait(NOTICE_POLL_S):
                if not ended.is_set() and proc.poll() is None:
                    noticed.append(True)
                    proc.send_signal(signal.SIGTERM)
                return

    thread = threading.Thread(target=watch, name="trainer-notice", daemon=True)
    thread.start()
    return thread
