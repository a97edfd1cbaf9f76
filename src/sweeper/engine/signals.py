"""Ctrl-C and SIGTERM stop a sweep the same graceful way; the exit status says which.

Shells, Ray jobs and service managers read an interrupted command's status as 128 +
the signal: 130 after SIGINT (Ctrl-C), 143 after SIGTERM. `sweeper run` therefore
catches both itself:

* while Ray Tune runs trials, the first signal asks Tune for its graceful stop (Tune
  listens on SIGUSR1 for that; its own SIGINT handler is switched off with
  `TUNE_DISABLE_SIGINT_HANDLER`, so both signals take the same road): running trials
  stop, their runs are marked KILLED and the `--resume` command is printed, as after
  any interruption;
* at any other moment (preparing data, pretraining) or on a second signal, it raises
  KeyboardInterrupt, which unwinds the command (subprocesses are killed on the way).

Ray's driver installs a SIGTERM handler of its own in `ray.init` that exits with a
stack dump; `ray_session` reinstalls this one after Ray starts.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143
_CAUGHT = (signal.SIGINT, signal.SIGTERM)


@dataclass
class StopRequest:
    """The signal that stopped this command, if one did."""

    signum: int | None = None

    def exit_code(self, status: int) -> int:
        """128 + the signal once one arrived, else `status`."""
        return 128 + self.signum if self.signum is not None else status


_request: StopRequest | None = None


def _handler(signum: int, frame: object) -> None:
    if _request is not None and _request.signum is None:
        _request.signum = signum
        if _tune_listening():
            os.kill(os.getpid(), signal.SIGUSR1)  # Tune's graceful stop
            return
    raise KeyboardInterrupt


def _tune_listening() -> bool:
    """Whether a Tune run has its graceful-stop handler on SIGUSR1 right now."""
    current = signal.getsignal(signal.SIGUSR1)
    return callable(current) and current is not _handler


def install() -> None:
    """(Re)install the handlers: once at start, again after `ray.init` replaced SIGTERM's."""
    if _request is not None:
        for signum in _CAUGHT:
            signal.signal(signum, _handler)


@contextmanager
def graceful_stop() -> Iterator[StopRequest]:
    """Catch SIGINT and SIGTERM for the body; restore the previous handlers after."""
    global _request
    previous = {signum: signal.getsignal(signum) for signum in _CAUGHT}
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    _request = StopRequest()
    install()
    try:
        yield _request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _request = None
