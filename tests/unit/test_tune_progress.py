"""The progress view: plain lines when not a TTY, a rich table when it is."""

from __future__ import annotations

import io

from sweeper.tune.progress import (
    DONE_BEFORE,
    FAILED,
    FINISHED,
    RUNNING,
    Progress,
    TrialView,
    duration,
    step_text,
)


def _progress(n: int = 12) -> tuple[Progress, io.StringIO]:
    views = {f"k{i}": TrialView(name=f"hf-pretrained-full-s{i}", total=1125) for i in range(n)}
    out = io.StringIO()
    return Progress(views, stream=out, live=False), out


def test_plain_line_format():
    progress, out = _progress()
    for key in ("k0", "k2", "k3"):
        progress.views[key].status = FINISHED
    progress.started("k1")
    progress.result("k1", {"step": 225, "valid_accuracy": 81.0, "test_accuracy": 79.0})
    progress.result("k1", {"step": 450, "valid_accuracy": 80.0, "test_accuracy": 82.0})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[3/12 done] hf-pretrained-full-s1: started"
    assert lines[-1] == "[3/12 done] hf-pretrained-full-s1: step 450/1125 valid 80.0 (best 81.0)"


def test_best_keeps_the_earliest_tie_and_its_test_accuracy():
    view = TrialView(name="t", total=100)
    view.update({"step": 10, "valid_accuracy": 70.0, "test_accuracy": 60.0})
    view.update({"step": 20, "valid_accuracy": 70.0, "test_accuracy": 99.0})
    assert (view.best, view.best_step, view.best_test) == (70.0, 10, 60.0)
    view.update({"step": 30})  # a report without validation (flush) moves only the step
    assert (view.step, view.valid) == (30, 70.0)


def test_eta_from_the_current_attempts_rate():
    view = TrialView(name="t", total=1000, status=RUNNING)
    assert view.eta() is None
    view.update({"step": 250, "valid_accuracy": 50.0, "wall_time": 50.0})
    assert view.eta() == 150.0
    assert step_text(view) == "step 250/1000 valid 50.0 (best 50.0) eta 2m30s"
    # later reports measure from the first one: start-up time is not a step's cost
    view.update({"step": 500, "valid_accuracy": 51.0, "wall_time": 70.0})
    assert view.eta() == 40.0
    view.restart(attempt=1)  # a retry resuming at step 500 starts a new measurement
    view.update({"step": 750, "valid_accuracy": 52.0, "wall_time": 30.0})
    assert view.eta() == 30.0 / 750 * 250
    view.status = FINISHED
    assert view.eta() is None


def test_duration_formats():
    assert [duration(s) for s in (None, 0, 59.4, 61, 3600 + 125)] == [
        "?",
        "0s",
        "59s",
        "1m01s",
        "1h02m",
    ]


def test_done_count_includes_earlier_finished_and_failed():
    progress, out = _progress(4)
    progress.views["k0"].status = DONE_BEFORE
    progress.started("k1")
    progress.finished("k1")
    progress.started("k2", attempt=1)
    progress.failed("k2", "dummy trainer exited with code 3")
    text = out.getvalue()
    assert "[2/4 done] hf-pretrained-full-s2: started (retry 1)" in text
    assert "[2/4 done] hf-pretrained-full-s1: finished: best valid -" in text
    assert "[3/4 done] hf-pretrained-full-s2: FAILED: dummy trainer exited with code 3" in text
    assert progress.views["k2"].status == FAILED


def test_live_mode_draws_a_table_and_prints_failures():
    views = {"k": TrialView(name="fairseq-random-full-s3", total=40)}
    out = io.StringIO()
    with Progress(views, stream=out, live=True) as progress:
        progress.started("k")
        progress.result("k", {"step": 20, "valid_accuracy": 55.5, "wall_time": 10.0})
        progress.retrying("k", 1, "killed")
    text = out.getvalue()
    assert "fairseq-random-full-s3" in text and "20/40" in text and "55.5" in text
    assert "failed (attempt 1), retrying: killed" in text
