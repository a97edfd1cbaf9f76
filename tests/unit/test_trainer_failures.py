"""The one-line cause a failed trainer's error leads with (sweeper.trainers.failures)."""

from __future__ import annotations

import shutil
from collections import namedtuple

from sweeper.trainers.failures import exit_reason

Usage = namedtuple("Usage", "total used free")
MIB = 1024 * 1024


def _disk(monkeypatch, free_mib: float, total_mib: float = 10_000) -> None:
    usage = Usage(int(total_mib * MIB), 0, int(free_mib * MIB))
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage)


def test_a_signal_is_named_with_its_shell_exit_code(tmp_path):
    killed = exit_reason("hf", -9, [], tmp_path)
    assert killed.startswith("hf trainer was killed by SIGKILL (exit 137): a memory limit")
    assert exit_reason("hf", -15, [], tmp_path) == "hf trainer was killed by SIGTERM (exit 143)"


def test_a_full_disk_is_named_with_its_file_system(tmp_path, monkeypatch):
    _disk(monkeypatch, free_mib=0.5)
    reason = exit_reason("hf", 1, ["OSError: [Errno 28] No space left on device"], tmp_path)
    assert reason.startswith(f"hf trainer exited with code 1: the disk holding {tmp_path} is full")
    assert "0.5 MiB free of 10000.0 MiB" in reason


def test_a_silent_write_failure_is_a_full_disk_only_when_space_is_low(tmp_path, monkeypatch):
    tail = ["RuntimeError: basic_ios::clear: iostream error"]
    _disk(monkeypatch, free_mib=2)
    assert "is full" in exit_reason("fairseq", 1, tail, tmp_path)
    _disk(monkeypatch, free_mib=5_000)  # plenty left: some other write problem
    assert exit_reason("fairseq", 1, tail, tmp_path) == "fairseq trainer exited with code 1"


def test_out_of_memory_and_plain_failures(tmp_path):
    assert exit_reason("dummy", 1, ["MemoryError"], tmp_path) == (
        "dummy trainer exited with code 1: out of memory (MemoryError; an address-space "
        "limit or the node's RAM)"
    )
    torch_says = ["RuntimeError: [enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
                  "can't allocate memory: you tried to allocate 1073741824 bytes."]  # fmt: skip
    assert "out of memory (can't allocate memory" in exit_reason("hf", 1, torch_says, tmp_path)
    assert exit_reason("hf", 2, ["ValueError: bad"], tmp_path) == "hf trainer exited with code 2"
