"""A trainer that runs out of memory (issue 17, item 5).

The dummy trainer leaks 16 MiB per step (`grow_mb_per_step`); the test puts a memory
limit on the running trainer process from outside, as an operator's limit or the
kernel would, and checks what the sweep makes of it:

* an address-space limit (`prlimit --as`, the issue's example): the next allocation
  fails inside the trainer; with `retries: 0` the run is FAILED, once, and its error
  tag says out of memory;
* a memory cgroup limit (cgroup v1 `memory.limit_in_bytes`, what container runtimes
  set): the kernel's OOM killer sends SIGKILL; the error names the signal and exit 137,
  and with `retries: 1` the trial runs again and finishes. Skipped, saying why, where
  no writable memory cgroup exists.

Only the trainer processes these tests started are limited, by pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.faults import finish, start_sweep, trainer_pids, trial_folder, wait_until
from tests.support.reliability import record
from tests.support.sweeps import kill_group, new_sweep, runs_by_role, sweeper_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEAK = {"grow_mb_per_step": 16, "sleep_per_step": 0.3}
CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def _running_trainer(out: Path, proc: subprocess.Popen[bytes], log: Path) -> int:
    """The pid of seed 1's dummy trainer, once it runs."""

    def find() -> int | None:
        folder = trial_folder(out, 1)
        pids = trainer_pids(folder) if folder is not None else []
        return pids[0] if pids else None

    return wait_until(find, proc, log, timeout=120)


def _vm_kb(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE).group(1))


def _attempts(out: Path) -> int:
    """How many times the trainer was started in seed 1's folder (runner's `$ ` lines)."""
    text = (trial_folder(out, 1) / record_names.TRAINER_LOG_FILE).read_text(errors="replace")
    return sum(1 for line in text.splitlines() if line.startswith("$ "))


def test_an_address_space_limit_fails_the_trial_once_saying_out_of_memory(
    tmp_path, tmp_path_factory
):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "aslimit", grid={"seed": [1]}, retries=0)
    log = tmp_path / "sweep.log"
    proc = start_sweep(log, spec, env=sweeper_env({"*": LEAK}))
    try:
        pid = _running_trainer(out, proc, log)
        limit_kb = _vm_kb(pid, "VmSize") + 8 * 1024  # room for half a step's leak
        subprocess.run(["prlimit", f"--pid={pid}", f"--as={limit_kb * 1024}"], check=True)
        text = finish(proc, log)
    finally:
        kill_group(proc.pid)
    assert proc.returncode == 1, text[-3000:]
    (run,) = runs_by_role(out, "aslimit")[1]
    error = run.data.tags[record_names.TAG_ERROR]
    assert run.info.status == "FAILED"
    assert error.startswith("dummy trainer exited with code 1: out of memory (MemoryError"), error
    assert _attempts(out) == 1  # retries: 0, so no second start
    record(
        "trainer out of memory: address-space limit",
        "`prlimit --as` on the running dummy trainer (its VmSize + 8 MiB) while it leaks "
        "16 MiB per step; `retries: 0`",
        f"exit 1; run FAILED after 1 attempt; error tag: `{error.splitlines()[0]}`",
    )


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    """A cgroup v1 memory group limited to `limit_bytes` (swap too, where accounted)."""
    if not os.access(CGROUP_V1, os.W_OK):
        pytest.skip(f"no writable cgroup v1 memory controller at {CGROUP_V1}")
    group = CGROUP_V1 / f"sweeper-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        swap = group / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(limit_bytes))
        yield group
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_the_oom_killer_names_sigkill_and_the_retry_finishes(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "oomkill", grid={"seed": [1]}, retries=1)
    log = tmp_path / "sweep.log"
    with memory_cgroup(96 * 1024 * 1024) as group:
        proc = start_sweep(log, spec, env=sweeper_env({"*": LEAK}))
        try:
            pid = _running_trainer(out, proc, log)
            (group / "cgroup.procs").write_text(str(pid))  # new pages count against it
            text = finish(proc, log)
        finally:
            kill_group(proc.pid)
        control = (group / "memory.oom_control").read_text()
        oom_kills = re.search(r"^oom_kill (\d+)", control, re.MULTILINE)
    assert proc.returncode == 0, text[-3000:]
    retry = next((ln for ln in text.splitlines() if "retrying:" in ln), "")
    assert "dummy trainer was killed by SIGKILL (exit 137)" in retry, text[-3000:]
    (run,) = runs_by_role(out, "oomkill")[1]
    assert run.info.status == "FINISHED"
    assert _attempts(out) == 2
    killed = oom_kills.group(1) if oom_kills else "not kept by this kernel"
    assert oom_kills is None or int(killed) >= 1
    record(
        "trainer out of memory: killed by the kernel",
        "the running dummy trainer moved into a 96 MiB memory cgroup while it leaks 16 MiB "
        "per step; `retries: 1`",
        f"the kernel's OOM killer ended it (the cgroup's oom_kill count: {killed}); driver: "
        f"`{retry.split('] ', 1)[-1][:200]}`; the retry (outside the cgroup) finished: run "
        "FINISHED after 2 attempts, exit 0",
    )
