"""One measured run of a GPU-check job: through sweeper's trainer, bare, or k at once.

Each returns what docs/benchmarks.md reports of it (bench/gpu_report.py): whether it
finished (and the last line of its output where not), its wall time from process start
to exit, and the GPU's peak memory in use while it ran (`common.GpuSampler`, whole
device); sweeper's trainer also gives its events, hence updates per second and the best
validation accuracy. A failed run is a result, not an exception: the check goes on.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import common

ON_CUDA = ("hf trial on cuda", "CUDA enviroments for all")
"""What the trainers' logs say when they train on CUDA: sweeper's HF child's own line,
and fairseq's listing of the CUDA devices it trains on (its spelling)."""


def through_sweeper(job: Any, out: Path, sample: bool = True) -> dict[str, Any]:
    """One job through sweeper's trainer, as a Ray trial runs it."""
    import bench_frameworks
    import gpu_report

    from sweeper.trainers.registry import get_trainer
    from sweeper.trainers.runner import TrainerError, run_trainer

    shutil.rmtree(out, ignore_errors=True)
    job, events = replace(job, out_dir=str(out)), []
    with common.GpuSampler(0.5) if sample else contextlib.nullcontext() as gpu:
        started = time.monotonic()
        try:
            result, error = run_trainer(get_trainer(job.framework), job, events.append), None
        except TrainerError as exc:
            result, error = None, exc.reason + "; " + _last_line("\n".join(exc.tail))
        wall = time.monotonic() - started
    log = (out / "trainer.log").read_text(encoding="utf-8", errors="replace")
    rates = bench_frameworks.interval_rates(events)
    return {
        "ok": error is None and bool(result and result.checkpoints.best),
        "error": error,
        "on_cuda": any(marker in log for marker in ON_CUDA),
        "wall_s": round(wall, 1),
        "started": started,
        "updates": max((e.step for e in events), default=0),
        "updates_per_s": round(common.median(rates), 1) if rates else None,
        "peak_gpu_mib": gpu.summary()[1] if gpu is not None else None,
        **gpu_report.best(events),
    }


def bare(job: Any, out: Path) -> dict[str, Any]:
    """The same job with the framework's own trainer, no sweeper around it."""
    import bench_overhead

    from sweeper.trainers.runner import thread_env

    shutil.rmtree(out, ignore_errors=True)
    command = bench_overhead.bare_command(asdict(job), out)
    if job.framework == "fairseq":  # the console script's module: a --target install has no bin
        command = [sys.executable, "-m", "fairseq_cli.train", *command[1:]]
    with common.GpuSampler(0.5) as gpu:
        try:
            timed, error = common.run_timed(command, env=thread_env(job.threads)), None
        except RuntimeError as exc:  # run_timed's: the command and its output's tail
            timed, error = None, _last_line(str(exc))
    return {
        "ok": error is None,
        "error": error,
        "wall_s": None if timed is None else round(timed.wall, 1),
        "peak_gpu_mib": gpu.summary()[1],
    }


def packed(group: list[Any], out: Path) -> dict[str, Any]:
    """`group` through sweeper's trainer all at once on the one GPU."""
    found: list[dict[str, Any]] = [{}] * len(group)

    def one(i: int) -> None:
        found[i] = through_sweeper(group[i], out / f"{i}-{group[i].framework}", sample=False)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(group))]
    with common.GpuSampler(0.5) as gpu:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    util, memory = gpu.summary()
    ends = [t["started"] + t["wall_s"] for t in found]
    return {
        "trials": [f"{job.framework}, {job.train['precision']}" for job in group],
        "ok": all(t["ok"] for t in found),
        "wall_s": round(max(ends) - min(t["started"] for t in found), 1),
        "gpu_util_median": util,
        "peak_gpu_mib": memory,
        "each": found,
    }


def _last_line(text: str) -> str:
    """The last non-empty line of a failed run's output: usually the exception."""
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
