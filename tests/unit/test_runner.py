"""The runner turns a trainer subprocess into events, and failures into clear errors."""

from __future__ import annotations

import threading
import time

import pytest

from sweeper import record_names
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent, best_validation, read_events
from sweeper.trainers.registry import get_trainer
from sweeper.trainers.runner import TrainerError, run_trainer


def _job(tmp_path, **extra) -> TrialJob:
    return TrialJob(
        framework="dummy",
        seed=1,
        init="pretrained",
        method="full",
        train={"batch_size": 8, "epochs": 3, "lr": 1e-4},
        lora=None,
        arch={},
        num_classes=2,
        num_train=40,
        data="",
        init_checkpoint="",
        out_dir=str(tmp_path / "trial"),
        extra=extra,
    )


def test_events_stream_and_files(tmp_path):
    seen: list[MetricEvent] = []
    result = run_trainer(get_trainer("dummy"), _job(tmp_path), on_event=seen.append)
    assert [e.step for e in seen if e.split == "valid"] == [5, 10, 15]
    assert [e.step for e in seen if e.split == "test"] == [5, 10, 15]
    assert read_events(result.out_dir / record_names.EVENTS_FILE) == result.events
    assert (result.out_dir / record_names.TRIAL_CONFIG_FILE).exists()
    assert "starting at step 0" in (result.out_dir / record_names.TRAINER_LOG_FILE).read_text()
    assert result.checkpoints.best is not None and result.checkpoints.last is not None


def test_nonzero_exit_carries_the_log_tail(tmp_path):
    with pytest.raises(TrainerError) as exc:
        run_trainer(get_trainer("dummy"), _job(tmp_path, fail_at_step=7))
    assert "exited with code 3" in exc.value.reason
    assert any("injected crash at step 7" in line for line in exc.value.tail)
    assert len(exc.value.tail) <= 50


def test_nan_loss_stops_the_trial(tmp_path):
    with pytest.raises(TrainerError, match="non-finite train loss/accuracy at step 4"):
        run_trainer(get_trainer("dummy"), _job(tmp_path, nan_at_step=4, sleep_per_step=0.05))


def test_timeout_kills_the_trial(tmp_path):
    started = time.monotonic()
    with pytest.raises(TrainerError, match="timed out"):
        run_trainer(get_trainer("dummy"), _job(tmp_path, sleep_per_step=1.0), timeout_s=1.5)
    assert time.monotonic() - started < 10


def test_restart_resumes_and_keeps_one_event_per_step(tmp_path):
    job = _job(tmp_path, fail_at_step=12, fail_once_marker=str(tmp_path / "crashed"))
    with pytest.raises(TrainerError):
        run_trainer(get_trainer("dummy"), job)
    result = run_trainer(get_trainer("dummy"), job)
    log = (result.out_dir / record_names.TRAINER_LOG_FILE).read_text()
    assert "starting at step 10" in log  # the last checkpoint, not step 0
    steps = [e.step for e in result.events if e.split == "train"]
    assert steps == list(range(1, 16))


def test_an_attempt_cut_mid_line_loses_only_that_line(tmp_path):
    """A full disk or a kill can leave the events file's last line half written: the
    next attempt starts on a new line, and reading skips the torn one."""
    job = _job(tmp_path, fail_at_step=12, fail_once_marker=str(tmp_path / "crashed"))
    with pytest.raises(TrainerError):
        run_trainer(get_trainer("dummy"), job)
    events = tmp_path / "trial" / record_names.EVENTS_FILE
    with open(events, "a", encoding="utf-8") as torn:
        torn.write('{"accuracy": 35.0, "epo')  # no newline: the write was cut here
    log = tmp_path / "trial" / record_names.TRAINER_LOG_FILE
    with open(log, "a", encoding="utf-8") as torn:
        torn.write("half a line")
    result = run_trainer(get_trainer("dummy"), job)
    assert [e.step for e in result.events if e.split == "train"] == list(range(1, 16))
    assert "half a line\n$ " in log.read_text()  # the second attempt's command line
    assert '"epo\n{' in events.read_text()


def test_caller_interrupt_kills_the_subprocess(tmp_path):
    job = _job(tmp_path, sleep_per_step=0.2)
    stop = threading.Event()

    def interrupt(event: MetricEvent) -> None:
        if event.step == 2:
            stop.set()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_trainer(get_trainer("dummy"), job, on_event=interrupt)
    assert stop.is_set()
    size = (tmp_path / "trial" / record_names.EVENTS_FILE).stat().st_size
    time.sleep(0.6)
    assert (tmp_path / "trial" / record_names.EVENTS_FILE).stat().st_size == size


def test_best_validation_prefers_the_earliest_tie():
    events = [
        MetricEvent(step=s, epoch=s / 10, split=split, accuracy=a)
        for s, a in [(10, 70.0), (20, 80.0), (30, 80.0)]
        for split in ("valid", "test")
    ]
    best, test = best_validation(events)
    assert best.step == 20 and test is not None and test.step == 20


def test_unknown_trainer_names_the_registered_ones():
    with pytest.raises(KeyError, match="dummy, fairseq, hf"):
        get_trainer("jax")


def test_one_stream_loop_kills_on_a_lines_verdict(tmp_path):
    """The loop trainers and pretraining share: a reason from `on_line` kills the whole
    process group; the output read so far stays in the log and the tail."""
    import io
    import sys

    from sweeper.trainers.runner import stream_process, thread_env

    script = (
        "import time\nfor i in range(100):\n    print('line', i, flush=True)\n    time.sleep(0.05)"
    )
    log = io.StringIO()
    ended = stream_process(
        [sys.executable, "-c", script],
        thread_env(1),
        log,
        lambda line: "saw line 3" if line.strip() == "line 3" else None,
    )
    assert ended.stopped == "saw line 3"
    assert ended.code != 0
    assert ended.tail[:4] == ["line 0", "line 1", "line 2", "line 3"]
    assert len(ended.tail) < 100
    assert log.getvalue().startswith(f"$ {sys.executable} -c")


def test_timeout_is_the_trials_own(tmp_path, monkeypatch):
    """A `train.timeout_min` grid axis changes the trial key; it must change the limit too."""
    from sweeper.spec.load import validate_mapping
    from sweeper.trainers import trial_pipeline as trial_module
    from sweeper.trial_keys import make_trial
    from tests.support.specs import minimal_spec

    raw = minimal_spec()
    raw["train"] = {"timeout_min": 5}
    spec = validate_mapping(raw, "s.yaml", tmp_path)
    trial = make_trial(spec, seed=1, init="random", framework="dummy", method="full",
                       varied={"train.timeout_min": 0.5})  # fmt: skip
    seen = {}
    monkeypatch.setattr(trial_module, "build_job", lambda *a, **k: None)
    monkeypatch.setattr(
        trial_module, "run_trainer", lambda trainer, job, on_event, timeout_s, **_: seen.setdefault(
            "timeout", timeout_s)
    )  # fmt: skip
    trial_module.run_trial(spec, trial, tmp_path, inputs=object())  # type: ignore[arg-type]
    assert seen["timeout"] == 30.0


@pytest.mark.parametrize(("asked", "ok"), [(2, True), (3, True), (1, False)])
def test_num_classes_must_hold_every_label(tmp_path, asked, ok):
    from sweeper.data.errors import DataError
    from sweeper.spec.load import validate_mapping
    from sweeper.trainers.classification import check_classes
    from tests.support.specs import minimal_spec

    raw = minimal_spec()
    raw["train"] = {"num_classes": max(asked, 2)}
    if asked < 2:  # below the schema's floor: only reachable as a grid axis
        raw["grid"] = {"params": {"train.num_classes": [asked, 2]}}
    spec = validate_mapping(raw, "s.yaml", tmp_path)
    if ok:
        check_classes(spec, ("neg", "pos"))
    else:
        with pytest.raises(DataError, match=r"train.num_classes is 1, but the labels have 2"):
            check_classes(spec, ("neg", "pos"))


def test_a_niced_trainer_runs_at_lower_priority(tmp_path):
    """`nice` > 0 starts the trainer under `nice -n` (its log's command line says so);
    the trainer process itself, seen while it runs, has that priority."""
    import psutil

    job = _job(tmp_path, sleep_per_step=0.05)
    seen: list[int] = []

    def on_event(event: MetricEvent) -> None:
        if not seen:
            (trainer,) = [
                p for p in psutil.process_iter(["cmdline"])
                if job.out_dir in " ".join(p.info["cmdline"] or [])
            ]  # fmt: skip
            seen.append(trainer.nice())

    result = run_trainer(get_trainer("dummy"), job, on_event=on_event, nice=7)
    assert seen == [7]
    log = (result.out_dir / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert log.splitlines()[0].startswith("$ nice -n 7 ")


def test_on_output_sees_every_line_the_log_gets(tmp_path):
    """`sweeper trial -v`: the trainer's own output, line for line as trainer.log."""
    seen: list[str] = []
    result = run_trainer(get_trainer("dummy"), _job(tmp_path), on_output=seen.append)
    logged = (result.out_dir / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert seen and "".join(seen) == logged.split("\n", 1)[1]  # after the `$ command` line


# Checkpoint on notice (sweeper.trainers.notice): the runner's side.


def _notice_when(notice: threading.Event, step: int):
    """An `on_event` that sets `notice` once the trial has reached `step`."""

    def on_event(event: MetricEvent) -> None:
        if event.step >= step:
            notice.set()

    return on_event


def test_a_notice_stops_the_trainer_with_a_checkpoint_and_the_next_run_resumes(tmp_path):
    from sweeper.trainers.notice import resumed_steps
    from sweeper.trainers.runner import TrainerPreempted

    job = _job(tmp_path, sleep_per_step=0.05)
    notice = threading.Event()
    with pytest.raises(TrainerPreempted) as preempted:
        run_trainer(get_trainer("dummy"), job, on_event=_notice_when(notice, 7), notice=notice)
    step = preempted.value.step
    assert step is not None and 7 <= step < 15
    assert preempted.value.reason == f"dummy trainer preempted: checkpoint saved at step {step}"
    assert f"sweeper: preempted: checkpoint saved at step {step}" in preempted.value.tail

    result = run_trainer(get_trainer("dummy"), job)
    log = (result.out_dir / record_names.TRAINER_LOG_FILE).read_text(encoding="utf-8")
    assert resumed_steps(log) == [step]
    assert [e.step for e in result.events if e.split == "train"] == list(range(1, 16))
    assert [e.step for e in result.events if e.split == "valid"] == [5, 10, 15]


def test_a_notice_before_the_trainer_started_training_saves_nothing(tmp_path):
    from sweeper.trainers.runner import TrainerPreempted

    notice = threading.Event()
    notice.set()
    with pytest.raises(TrainerPreempted, match="preempted before training started") as caught:
        run_trainer(get_trainer("dummy"), _job(tmp_path, sleep_per_step=0.05), notice=notice)
    assert caught.value.step is None
    assert not (tmp_path / "trial" / "checkpoints" / "last.json").exists()


FAKE_TRAINER = """
import os, signal, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
terms = []
signal.signal(signal.SIGTERM, lambda *_: terms.append(1))
print("ready", flush=True)
while not terms:
    time.sleep(0.01)
time.sleep(0.5)  # a second SIGTERM would arrive now
print(f"terms {len(terms)} helper alive {helper.poll() is None}", flush=True)
helper.kill()
if sys.argv[1] == "finish":
    sys.exit(0)
print("sweeper: preempted: checkpoint saved at step 42", flush=True)
sys.exit(75)
"""


class ScriptTrainer:
    """A trainer that runs `FAKE_TRAINER` with one argument: `finish` (exit 0 on the
    notice: training had just ended) or `preempt`; no events, no checkpoints."""

    name = "script"

    def __init__(self, script, mode: str):
        self.script, self.mode = script, mode

    def command(self, job: TrialJob) -> list[str]:
        import sys

        return [sys.executable, str(self.script), self.mode]

    def parse_line(self, line: str, wall_time: float) -> list[MetricEvent]:
        return []

    def checkpoints(self, job: TrialJob):
        from sweeper.trainers.base import Checkpoints

        return Checkpoints(None, None)

    def trainable_params(self, job: TrialJob):
        return None


@pytest.mark.parametrize("mode", ["preempt", "finish"])
def test_the_notice_is_one_sigterm_to_the_trainer_alone(tmp_path, mode):
    """The notice reaches the trainer's main process once (a helper in its group lives
    on: stopping it is the trainer's job); exit 75 is a preemption with the step the
    trainer printed, exit 0 after the notice a normal finish."""
    from sweeper.trainers.runner import TrainerPreempted

    script = tmp_path / "fake.py"
    script.write_text(FAKE_TRAINER, encoding="utf-8")
    notice = threading.Event()
    lines: list[str] = []

    def on_output(line: str) -> None:
        lines.append(line.strip())
        if line.strip() == "ready":
            notice.set()

    run = lambda: run_trainer(  # noqa: E731
        ScriptTrainer(script, mode), _job(tmp_path), notice=notice, on_output=on_output
    )
    if mode == "preempt":
        with pytest.raises(TrainerPreempted) as caught:
            run()
        assert caught.value.step == 42
        assert caught.value.reason == "script trainer preempted: checkpoint saved at step 42"
    else:
        assert run().checkpoints.last is None
    assert "terms 1 helper alive True" in lines


def test_a_sigterm_the_runner_did_not_send_stays_a_failure(tmp_path):
    """Killed by SIGTERM without a notice from its caller: a failure, as before."""
    from sweeper.trainers.runner import TrainerPreempted

    script = tmp_path / "fake.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", encoding="utf-8")
    with pytest.raises(TrainerError, match=r"killed by SIGTERM \(exit 143\)") as caught:
        run_trainer(ScriptTrainer(script, "preempt"), _job(tmp_path), notice=threading.Event())
    assert not isinstance(caught.value, TrainerPreempted)


def test_preemption_lines_are_parsed_from_one_format():
    from sweeper.trainers.notice import (
        PREEMPTED_LINE,
        RESUMED_LINE,
        preempted_step,
        resumed_steps,
    )

    assert preempted_step(PREEMPTED_LINE.format(step=1234) + "\n") == 1234
    assert (
        preempted_step("sweeper: preempted: before training started, no checkpoint saved") is None
    )
    log = "x\n" + RESUMED_LINE.format(step=30) + "\ny\n" + RESUMED_LINE.format(step=70) + "\n"
    assert resumed_steps(log) == [30, 70]
