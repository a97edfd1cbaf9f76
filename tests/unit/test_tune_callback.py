"""The failure text a FAILED trial run gets, read from what Tune stored for the trial."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper.trainers.runner import TrainerError

pytest.importorskip("ray")


def _trial(tmp_path: Path, error: BaseException | None, trace: str = "") -> SimpleNamespace:
    """A stand-in for a Tune Trial: its driver-side error files, and storage getters
    that find nothing yet (they read the synced copy, which lags behind)."""
    from ray import cloudpickle

    pickled = tmp_path / "error.pkl"
    text = tmp_path / "error.txt"
    if error is not None:
        pickled.write_bytes(cloudpickle.dumps(error))
    if trace:
        text.write_text(trace)
    return SimpleNamespace(
        pickled_error_file=str(pickled),
        error_file=str(text),
        get_pickled_error=lambda: None,
        get_error=lambda: None,
    )


def test_a_trainer_error_gives_its_reason_and_log_tail(tmp_path):
    from ray.exceptions import RayTaskError

    from sweeper.tune.callback import error_text, first_line

    cause = TrainerError("fairseq trainer exited with code 1", ["line a", "CUDA out of memory"])
    wrapped = RayTaskError("train", "traceback text", cause)
    text = error_text(_trial(tmp_path, wrapped, trace="Failure # 1\nTraceback ..."))
    assert text == (
        "fairseq trainer exited with code 1\n--- last log lines ---\nline a\nCUDA out of memory"
    )
    assert first_line(text) == "fairseq trainer exited with code 1"


def test_another_error_gives_its_type_message_and_trace_end(tmp_path):
    from sweeper.tune.callback import ERROR_LINES, error_text

    trace = "Failure # 1\n" + "\n".join(f"frame {i}" for i in range(200))
    error = FileNotFoundError("the trainer left no best checkpoint in /x")
    text = error_text(_trial(tmp_path, error, trace=trace))
    lines = text.splitlines()
    assert lines[0] == "FileNotFoundError: the trainer left no best checkpoint in /x"
    assert lines[-1] == "frame 199" and len(lines) == ERROR_LINES + 1


def test_nothing_stored_still_says_something(tmp_path):
    from sweeper.tune.callback import error_text

    assert error_text(_trial(tmp_path, None)) == "trial failed (Ray stored no error text)"
