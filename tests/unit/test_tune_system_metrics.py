"""System metrics of a trial: what the sampler measures, and when the Reporter sends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sweeper import record_names
from sweeper.trainers.events import MetricEvent
from sweeper.tune.system_metrics import PREFIX, SystemSampler
from sweeper.tune.trainable import POINTS, Reporter


def test_the_sampler_measures_the_process_tree_under_its_root():
    # a shell whose child spins: the tree's CPU share is the child's, not the shell's
    busy = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
    command = ["sh", "-c", f'"{sys.executable}" -c "$0"; exit 0', busy]
    root = subprocess.Popen(command, start_new_session=True)
    try:
        time.sleep(0.5)  # the child is running
        sampler = SystemSampler(interval_s=60, pid=root.pid)
        time.sleep(1.0)
        values = sampler.sample()
    finally:
        os.killpg(root.pid, signal.SIGKILL)  # the shell and its child
        root.wait()
    assert all(name.startswith(PREFIX) for name in values)
    assert values[f"{PREFIX}process_cpu_utilization_percentage"] > 20  # the spinning child
    assert values[f"{PREFIX}process_memory_usage_megabytes"] > 1
    assert 0 < values[f"{PREFIX}system_memory_usage_percentage"] < 100
    assert f"{PREFIX}cpu_utilization_percentage" in values
    assert not sampler.due()  # just sampled, 60 s interval


def test_cpu_time_counts_the_tree_live_and_its_children_once_ended():
    spin = "import time\nend = time.process_time() + {}\nwhile time.process_time() < end: pass"
    sampler = SystemSampler(interval_s=60)  # this process: children it waits for count
    before = sampler.cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", spin.format(30)])
    try:
        deadline, live = time.monotonic() + 20, before
        while live < before + 0.5 and time.monotonic() < deadline:  # a busy machine
            time.sleep(0.2)
            live = sampler.cpu_seconds()  # the running child, read from its own times
    finally:
        child.kill()
        child.wait()
    subprocess.run([sys.executable, "-c", spin.format(0.8)], check=True)
    ended = sampler.cpu_seconds()  # the ended children, through this process's children times
    assert 0 <= before < 0.5
    assert live > before + 0.5
    assert ended > live + 0.7  # the second child's 0.8 s, the first one's kept too
    assert sampler.gpu_seconds is None or sampler.gpu_seconds >= 0


class FakeSampler:
    def __init__(self, due_at: set[int]):
        self.due_at = due_at
        self.step = 0
        self.calls = 0
        self.gpu_seconds = None

    def cpu_seconds(self) -> float:
        return 0.5 * self.calls

    def due(self) -> bool:
        return self.step in self.due_at

    def sample(self) -> dict[str, float]:
        self.calls += 1
        return {f"{PREFIX}cpu_utilization_percentage": float(self.calls)}


def _event(step: int, split: str) -> MetricEvent:
    accuracy = None if split == "train" else 50.0
    return MetricEvent(step=step, epoch=step / 10, split=split, loss=0.5, accuracy=accuracy)


def test_validation_points_are_sampled_and_train_events_only_when_due():
    sent: list[dict] = []
    sampler = FakeSampler(due_at={3})
    reporter = Reporter(sent.append, node="n", sampler=sampler)  # type: ignore[arg-type]
    reporter.replay([_event(1, "train"), _event(2, "valid"), _event(2, "test")])
    assert sampler.calls == 0  # a past attempt's events: nothing sampled for them
    for step, split in ((3, "train"), (4, "train"), (5, "valid"), (5, "test")):
        sampler.step = step
        reporter.on_event(_event(step, split))
    system = [(s, v) for report in sent for s, k, v in report[POINTS] if k.startswith(PREFIX)]
    assert system == [(3, 1.0), (5, 2.0)]  # due at train step 3, then the validation point


def test_every_report_carries_the_attempts_cpu_time_so_far():
    sent: list[dict] = []
    sampler = FakeSampler(due_at=set())
    reporter = Reporter(sent.append, node="n", sampler=sampler)  # type: ignore[arg-type]
    for step, split in ((5, "valid"), (5, "test"), (10, "valid"), (10, "test")):
        reporter.on_event(_event(step, split))
    assert [r[record_names.REPORT_CPU_TIME] for r in sent] == [0.5, 1.0]  # one sample each
    assert all(r[record_names.REPORT_GPU_TIME] is None for r in sent)  # no GPU sampled


def test_gpu_busy_time_sums_each_samples_utilization_over_the_time_since_the_last(
    monkeypatch,
):
    import sweeper.tune.system_metrics as system_metrics

    now = [100.0]
    monkeypatch.setattr(system_metrics, "visible_gpus", lambda: ["gpu0", "gpu1"])
    monkeypatch.setattr(
        system_metrics,
        "_gpu_values",
        lambda handles: {
            "gpu_0_utilization_percentage": 50.0,
            "gpu_0_memory_usage_megabytes": 10.0,
            "gpu_1_utilization_percentage": 25.0,
        },
    )
    monkeypatch.setattr(system_metrics.time, "monotonic", lambda: now[0])
    sampler = SystemSampler(interval_s=60)
    assert sampler.gpu_seconds == 0.0
    now[0] = 104.0
    sampler.sample()
    now[0] = 110.0
    sampler.sample()
    assert sampler.gpu_seconds == (0.5 + 0.25) * 10  # two GPUs, 10 s
