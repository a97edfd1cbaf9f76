"""Which device a trial's trainer gets, and which GPUs this process may use.

The job a trainer subprocess runs names its device (`TrialJob.device`), decided in the
process that builds the job: a Ray trial's worker, or `sweeper trial`. torch answers
"is there a GPU" with `torch.cuda.is_available()`, but importing torch in the worker is
slow and would delay every first trial of a worker on a CPU machine, for an answer the
trainer (which imports torch anyway) never needs from it (docs/benchmarks.md has the
measurements).

NVML (nvidia-ml-py, the library the system metrics and the resource check read too)
answers the common case without torch: no NVIDIA GPU visible to this process (no
driver, or a CUDA_VISIBLE_DEVICES that Ray or the user set leaves none) means CPU. Where
NVML does see a GPU, torch still decides: a CPU build of torch beside a driver sees
none, and the job must then say CPU.
"""

from __future__ import annotations

import os
from typing import Any


def visible_gpus() -> list[Any]:
    """NVML handles of the GPUs this process may use, or none (no driver, no GPU, no
    nvidia-ml-py). NVML numbers every GPU of the machine and ignores
    CUDA_VISIBLE_DEVICES, so the process's own devices are picked from it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            indices = list(range(pynvml.nvmlDeviceGetCount()))
        else:
            indices = [int(i) for i in visible.split(",") if i.strip().isdigit()]
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
    except Exception:
        return []


def gpu_count() -> int:
    """GPUs this process may use (CUDA_VISIBLE_DEVICES honoured); 0 without NVML."""
    return len(visible_gpus())


def detect_device() -> str:
    """ "cuda" when this process can use a GPU, else "cpu"; torch is imported only
    where NVML sees one (see the module docstring)."""
    if not visible_gpus():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
