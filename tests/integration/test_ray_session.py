"""The driver's Ray session on a real embedded Ray: work beside its start, held for the
session, and a refusal there that leaves no Ray behind (`sweeper.engine.session`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import ray

from sweeper.engine import RunOptions, SweepError
from sweeper.engine.session import ray_session


def _spec(tmp_path):  # the session reads only where Ray's log file goes
    return SimpleNamespace(output_dir=tmp_path / "out")


def test_work_beside_the_start_is_held_until_the_session_ends(tmp_path):
    seen: list[tuple[str, bool]] = []

    @contextmanager
    def beside() -> Iterator[None]:
        seen.append(("entered", threading.current_thread() is threading.main_thread()))
        yield
        seen.append(("exited", ray.is_initialized()))

    options = RunOptions(spec_path="spec.yaml")
    with ray_session(options, _spec(tmp_path), beside=beside) as session:
        assert session.embedded and ray.is_initialized()
        assert seen == [("entered", False)]  # in the thread, while Ray started
        assert ray.get(ray.remote(lambda: 1 + 1).remote()) == 2
        with ray_session(options, _spec(tmp_path)) as inner:  # the grid's, inside
            assert not inner.embedded
        assert ray.is_initialized()  # the inner session did not stop Ray
    assert seen[-1] == ("exited", True)  # the lease goes before Ray does
    assert not ray.is_initialized()
    assert (tmp_path / "out" / "ray" / f"driver-{options.stamp}.log").is_file()


def test_a_refusal_beside_the_start_stops_ray_and_is_raised(tmp_path):
    def beside():
        raise SweepError("sweep 'x' is being run by another driver")

    options = RunOptions(spec_path="spec.yaml")
    with (
        pytest.raises(SweepError, match="another driver"),
        ray_session(options, _spec(tmp_path), beside=beside),
    ):
        pytest.fail("the session's body must not run")
    assert not ray.is_initialized()
    assert not (tmp_path / "out").exists()  # nothing written for a refused sweep
