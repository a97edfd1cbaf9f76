"""Ending a process whose work is saved without the interpreter's teardown.

After the last result is written, Python's teardown (finalizing every module, the
native extensions of Ray, gRPC, torch and MLflow's stack among them) still takes time
in which nothing is saved, at the end of `sweeper run` and of every HF trainer
subprocess, so on every trial (docs/benchmarks.md has the measurements). Teardown can
also abort (SIGABRT) as a native worker thread is destroyed, which would turn a finished
fairseq trial into a failed one (`sweeper.trainers.fairseq.fairseq_main`).

A trainer subprocess that has saved its results leaves through `exit_now`; the `sweeper`
command through `exit_after_atexit`, which first runs what Python runs before teardown.
Callers must have closed the files they write; both flush the standard streams and the
logging handlers.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int = 0) -> NoReturn:
    """Exit with `code` at once: no atexit handlers, no teardown."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # a reader that left, or an already-closed stream: nothing more can be shown
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def exit_after_atexit(code: int) -> NoReturn:
    """Exit with `code` as Python would, minus the teardown: the atexit handlers run (a
    Ray driver's disconnect, MLflow's end of run), then `exit_now`. A non-daemon thread
    still running makes it exit the ordinary way, which waits for that thread."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()  # the handlers, in the order Python itself runs them
    exit_now(code)
