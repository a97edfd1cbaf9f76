"""The trainer's device: CPU without a visible NVIDIA GPU, decided without torch."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from sweeper.trainers import devices


def test_no_visible_gpu_means_cpu_and_torch_stays_unimported():
    """What a Ray trial's worker asks before its trainer starts: on a CPU node (or with
    Ray's CUDA_VISIBLE_DEVICES leaving no GPU) the answer must not cost a torch import."""
    code = (
        "import os, sys\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = ''\n"
        "from sweeper.trainers.devices import detect_device, gpu_count\n"
        "print(detect_device(), gpu_count(), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "0", "False"]


def test_where_nvml_sees_a_gpu_torch_decides(monkeypatch):
    """A driver's GPU is no use to a CPU build of torch: then the job says cpu."""
    monkeypatch.setattr(devices, "visible_gpus", lambda: ["gpu0"])
    for available, expected in ((True, "cuda"), (False, "cpu")):
        torch = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda a=available: a))
        monkeypatch.setitem(sys.modules, "torch", torch)
        assert devices.detect_device() == expected


def test_cuda_visible_devices_picks_the_processs_own_gpus(monkeypatch):
    """NVML numbers every GPU of the machine; the process may use only the listed ones."""
    asked: list[int] = []
    fake = SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 4,
        nvmlDeviceGetHandleByIndex=lambda i: asked.append(i) or f"handle{i}",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert devices.visible_gpus() == ["handle2", "handle3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.gpu_count() == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert devices.gpu_count() == 4
