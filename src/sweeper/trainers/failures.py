"""Why a trainer failed, in one line a researcher can act on.

The first line of a failure is what the progress view, the retry message and the
run's error tag lead with, so it names the cause where the exit shows one: a signal
(SIGKILL is what the kernel's out-of-memory killer and cgroup/container memory limits
send), a full disk (with the file system and its free space), or an allocation that
failed (an address-space limit, or memory simply exhausted). The trainer's own last
lines follow it in the error, so nothing is hidden by the summary.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

OUT_OF_MEMORY = (
    "MemoryError",
    "can't allocate memory",  # torch's CPU allocator
    "not enough memory",  # torch's CPU allocator, newer wording
    "CUDA out of memory",
    "Cannot allocate memory",  # ENOMEM from the OS
)
NO_SPACE = "No space left on device"
WRITE_FAILED = (
    "iostream error",  # torch.save's C++ stream on a full disk
    "PytorchStreamWriter failed writing",
    "unexpected pos",  # torch's zip writer when a write came up short
)
"""A failed write that does not say why: a full disk when little space is left."""
LOW_SPACE = 64 * 1024 * 1024


def exit_reason(name: str, code: int, tail: list[str], out: Path) -> str:
    """One line on why the trainer exited with `code` (negative: killed by a signal)."""
    if code < 0:
        signum = -code
        killed = f"{name} trainer was killed by {_signal_name(signum)} (exit {128 + signum})"
        if signum == signal.SIGKILL:
            killed += (
                ": a memory limit (the kernel's out-of-memory killer, a cgroup or container "
                "limit) is the usual sender; `dmesg` on the node says"
            )
        return killed
    exited = f"{name} trainer exited with code {code}"
    text = "\n".join(tail)
    if NO_SPACE in text or (any(m in text for m in WRITE_FAILED) and _low_space(out)):
        return f"{exited}: {disk_full(out)}"
    cause = next((marker for marker in OUT_OF_MEMORY if marker in text), None)
    if cause is not None:
        return f"{exited}: out of memory ({cause}; an address-space limit or the node's RAM)"
    return exited


def disk_full(folder: Path) -> str:
    """`the disk holding FOLDER is full (mount M: N MiB free of T MiB)`."""
    mount = folder.resolve()
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return f"the disk holding {folder} is full"
    mib = 1024 * 1024
    return (
        f"the disk holding {folder} is full (file system at {mount}: "
        f"{usage.free / mib:.1f} MiB free of {usage.total / mib:.1f} MiB)"
    )


def _low_space(folder: Path) -> bool:
    """Less free space than 64 MiB or 1% of the file system, whichever is more."""
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return False
    return usage.free < max(LOW_SPACE, usage.total // 100)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
