"""The driver's buffered, retried MLflow writes (sweeper.tracking.outbox), with a fake
store that is down for its first N calls and a fake clock: order kept, nothing lost,
nothing sent twice, the backoff respected, and the bound enforced."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sweeper import record_names
from sweeper.tracking.outbox import NOTE_EVERY_S, Outbox, TrackingDown
from sweeper.tracking.recorder import MetricLog, Recorder
from sweeper.tracking.store_errors import QUICK_HTTP, clock_time, is_permanent, quick_http, reason


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Rejected(Exception):
    error_code = "INVALID_PARAMETER_VALUE"


class FlakyClient:
    """MlflowClient's write methods; the first `down` calls fail like a refused
    connection (MLflow raises MlflowException with INTERNAL_ERROR then)."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0
        self.points: dict[str, list[tuple[int, str, float]]] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.status: dict[str, str] = {}
        self.ended: dict[str, int | None] = {}
        self.log: list[str] = []

    def _call(self, what: str) -> None:
        self.calls += 1
        if self.calls <= self.down:
            raise ConnectionError(f"connection refused ({what})")
        self.log.append(what)

    def log_batch(self, run_id: str, metrics: Any = (), tags: Any = (), **_: Any) -> None:
        self._call("log_batch")
        self.points.setdefault(run_id, []).extend((m.step, m.key, m.value) for m in metrics)
        self.tags.setdefault(run_id, {}).update({t.key: t.value for t in tags})

    def update_run(self, run_id: str, status: str) -> None:
        self._call("update_run")
        self.status[run_id] = status

    def set_terminated(self, run_id: str, status: str, end_time: int | None = None) -> None:
        self._call("set_terminated")
        self.status[run_id] = status
        self.ended[run_id] = end_time

    def log_text(self, run_id: str, text: str, name: str) -> None:
        self._call("log_text")


WALL0 = 1_795_790_000.0
"""The wall-clock time at the fake clock's 0."""


def _recorder(client: FlakyClient, clock: Clock, bound: float = 60.0) -> Recorder:
    outbox = Outbox(
        bound, clock=clock, sleep=clock.sleep, log=client.log.append, wall=lambda: WALL0 + clock()
    )
    return Recorder(client, {"k": "run"}, MetricLog(), outbox)  # type: ignore[arg-type]


def _report(first: int, last: int) -> dict[str, Any]:
    return {
        "points": [[s, record_names.METRIC_TRAIN_LOSS, 1.0 / s] for s in range(first, last + 1)]
    }


def test_writes_during_an_outage_are_kept_in_order_and_sent_once_it_ends():
    client, clock = FlakyClient(down=3), Clock()
    recorder = _recorder(client, clock)
    recorder.started("k", "ray_0")  # call 1 fails: buffered, retry due at t=1
    recorder.result("k", _report(1, 5))  # not due yet: queued, no call made
    assert client.calls == 1 and len(recorder.outbox.pending) == 3
    clock.now = 1.0
    recorder.result("k", _report(6, 10))  # due: call 2 fails, backoff 2 s
    clock.now = 2.5
    recorder.result("k", _report(11, 12))  # not due (t < 3)
    assert client.calls == 2
    clock.now = 3.0
    recorder.finished("k")  # due: call 3 fails, backoff 4 s
    assert client.calls == 3 and not client.status
    recorder.drain()  # waits until t=7, then everything goes through
    assert clock.now == 7.0
    assert not recorder.outbox.pending
    steps = [s for s, _, _ in client.points["run"]]
    assert steps == list(range(1, 13))  # every point once, in order
    assert client.status["run"] == "FINISHED"
    assert client.tags["run"][record_names.TAG_STATUS] == record_names.Status.FINISHED
    calls = [line for line in client.log if " " not in line]
    # the tags and points buffered, 5 batches of the one run, go as one request; the
    # RUNNING status buffered behind them is not sent, FINISHED (last) overrides it
    assert calls == ["log_batch", "set_terminated"]
    messages = [line for line in client.log if " " in line]
    since = clock_time(WALL0)
    assert messages == [  # the 2nd and 3rd failures came within NOTE_EVERY_S: no line
        f"tracking store unreachable since {since}, retrying; 0 points buffered (1 writes), "
        "limit 60s; connection refused (update_run)",
        f"tracking store reachable again after 7.0s (unreachable since {since}); "
        "7 buffered write(s) sent",
    ]


def test_a_store_that_stays_down_stops_the_sweep_at_the_bound():
    client, clock = FlakyClient(down=10**6), Clock()
    recorder = _recorder(client, clock, bound=100.0)
    recorder.result("k", _report(1, 3))
    clock.now = 50.0
    recorder.check()  # within the bound: keeps buffering
    clock.now = 101.0
    with pytest.raises(TrackingDown) as raised:
        recorder.check()
    assert raised.value.pending == 1
    assert "1 write(s) (3 metric points) not recorded" in str(raised.value)
    assert "connection refused" in str(raised.value)


def test_drain_gives_up_after_the_bound_with_backoff_capped():
    client, clock = FlakyClient(down=10**6), Clock()
    recorder = _recorder(client, clock, bound=120.0)
    recorder.result("k", _report(1, 2))
    with pytest.raises(TrackingDown):
        recorder.drain()
    assert 120.0 < clock.now <= 135.0  # the bound, plus at most one capped delay
    # attempts at 0, 1, 3, 7, 15, 30, 45, ..., 120, 135: backoff doubles up to 15 s
    assert client.calls == 13


def test_a_permanent_rejection_is_raised_not_buffered():
    outbox = Outbox(60.0)

    def reject() -> None:
        raise Rejected("bad value")

    with pytest.raises(Rejected):
        outbox.put("tags", reject)
    assert not outbox.pending


def test_a_server_whose_database_pool_is_exhausted_is_retried_not_rejected():

    class Busy(Exception):
        error_code = "BAD_REQUEST"  # what MLflow 3.17's server answers then

    busy = Busy("QueuePool limit of size 5 overflow 10 reached, connection timed out")
    assert not is_permanent(busy)
    assert is_permanent(Busy("Invalid value for parameter 'x'"))
    clock = Clock()
    outbox = Outbox(60.0, clock=clock, sleep=clock.sleep)
    calls: list[int] = []

    def send() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise busy

    outbox.put("metrics", send)  # buffered, not raised
    outbox.drain()
    assert len(calls) == 2 and not outbox.pending


def test_no_outage_means_no_waiting_and_no_message():
    client, clock = FlakyClient(down=0), Clock()
    recorder = _recorder(client, clock)
    recorder.started("k", "ray_0")
    recorder.result("k", {**_report(1, 3), "node": "a"})
    recorder.result("k", {**_report(4, 4), "node": "b"})  # retried elsewhere: re-tagged
    recorder.drain()
    assert clock.now == 0.0 and client.log == [
        "update_run",
        "log_batch",  # the RUNNING tags
        "log_batch",  # a report: its node tag with its points
        "log_batch",
    ]
    assert client.tags["run"][record_names.TAG_NODE] == "b"


def test_quick_http_turns_mlflow_retries_off_for_one_attempt_only(monkeypatch):
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")  # the user's setting wins
    with quick_http():
        assert (
            os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
            == QUICK_HTTP["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
        )
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"


def test_an_error_txt_the_store_refuses_does_not_hold_up_the_failed_status():
    """error.txt goes to the artifact store, which may be what failed (scenario e): it
    is dropped with a warning, and the FAILED status and error tag still go through."""
    client, clock = FlakyClient(down=0), Clock()

    def refuse(run_id: str, text: str, name: str) -> None:
        raise NotADirectoryError("artifact folder is a file")

    client.log_text = refuse  # type: ignore[method-assign]
    recorder = _recorder(client, clock)
    recorder.failed("k", "UploadError: artifact upload to file:///x failed")
    assert not recorder.outbox.pending
    assert client.status["run"] == "FAILED"
    assert client.tags["run"][record_names.TAG_ERROR].startswith("UploadError")
    assert "error.txt of run run not recorded: artifact folder is a file" in client.log


def _metric(step: int) -> Any:
    from mlflow.entities import Metric

    return Metric(record_names.METRIC_TRAIN_LOSS, 1.0 / step, 0, step)


def _tag(key: str, value: str) -> Any:
    from mlflow.entities import RunTag

    return RunTag(key, value)


def _batch(outbox: Outbox, client: FlakyClient, run_id: str, steps: range, **tags: str) -> None:
    def send(metrics: list[Any], tags: list[Any]) -> None:
        client.log_batch(run_id, metrics=metrics, tags=tags)

    outbox.put_batch("batch", run_id, send, [_metric(s) for s in steps],
                     [_tag(k, v) for k, v in tags.items()])  # fmt: skip


def test_buffered_batches_of_a_run_go_joined_in_order_stopping_at_its_other_writes():
    client, clock = FlakyClient(down=1), Clock()
    outbox = Outbox(60.0, clock=clock, sleep=clock.sleep)
    _batch(outbox, client, "a", range(1, 4), x="1")  # fails: everything after is buffered
    outbox.put("b's status", lambda: client.update_run("b", "RUNNING"), run_id="b")
    _batch(outbox, client, "a", range(4, 6), x="2")  # joins the first: only b's between
    outbox.put("a's status", lambda: client.update_run("a", "RUNNING"), run_id="a")
    _batch(outbox, client, "a", range(6, 7))  # after a's status: not moved before it
    _batch(outbox, client, "b", range(1, 3))
    outbox.drain()
    assert client.log == ["log_batch", "update_run", "update_run", "log_batch", "log_batch"]
    assert [s for s, _, _ in client.points["a"]] == list(range(1, 7))  # each once, in order
    assert [s for s, _, _ in client.points["b"]] == [1, 2]
    assert client.tags["a"] == {"x": "2"}  # the later value, as two requests would leave
    assert outbox.requests == 6 and not outbox.pending  # the failed attempt, then 5


def test_a_joined_batch_stays_within_mlflows_limits_and_barriers_are_kept():
    client, clock = FlakyClient(down=1), Clock()
    outbox = Outbox(60.0, clock=clock, sleep=clock.sleep)
    _batch(outbox, client, "a", range(1, 901))
    _batch(outbox, client, "a", range(901, 1001))  # 1,000 points: joins
    _batch(outbox, client, "a", range(1001, 1002))  # the 1,001st: a request of its own
    outbox.put("sweep-wide", lambda: client.log.append("barrier"))  # names no run
    _batch(outbox, client, "a", range(1002, 1003))
    outbox.drain()
    assert client.log == ["log_batch", "log_batch", "barrier", "log_batch"]
    assert [s for s, _, _ in client.points["a"]] == list(range(1, 1003))


def test_in_the_background_put_never_sends_and_drain_waits_for_every_write():
    import threading

    gate = threading.Event()
    client = FlakyClient(down=0)
    first = client.log_batch

    def held(run_id: str, metrics: Any = (), tags: Any = (), **_: Any) -> None:
        gate.wait(30)  # the store is slow: later writes queue up behind this one
        first(run_id, metrics, tags)

    client.log_batch = held  # type: ignore[method-assign]
    outbox = Outbox(60.0, background=True)
    for step in range(1, 51):
        _batch(outbox, client, "a", range(step, step + 1))
    assert not client.log  # nothing sent on the caller's thread
    gate.set()
    outbox.drain()
    assert [s for s, _, _ in client.points["a"]] == list(range(1, 51))
    assert outbox.requests <= 2  # the first write alone at most, the 49 others joined
    assert not outbox.pending


def test_in_the_background_a_permanent_rejection_is_raised_by_check_and_drain():
    outbox = Outbox(60.0, background=True)

    def reject() -> None:
        raise Rejected("bad value")

    outbox.put("tags", reject)
    with pytest.raises(Rejected):
        outbox.drain()
    assert not outbox.pending
    outbox.check()  # raised once


def test_in_the_background_a_slow_write_of_one_run_does_not_hold_up_another_run():
    import threading

    from sweeper.tracking.outbox import LANES

    assert LANES > 1
    gate = threading.Event()
    client = FlakyClient(down=0)
    send = client.log_batch

    def slow_for_a(run_id: str, metrics: Any = (), tags: Any = (), **_: Any) -> None:
        if run_id == "a":
            gate.wait(30)
        send(run_id, metrics, tags)

    client.log_batch = slow_for_a  # type: ignore[method-assign]
    outbox = Outbox(60.0, background=True)
    _batch(outbox, client, "a", range(1, 2))  # runs "a" and "b" go through other lanes
    _batch(outbox, client, "b", range(1, 3))
    deadline = time.monotonic() + 30
    while "b" not in client.points and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.points.get("b") and "a" not in client.points  # b went first
    gate.set()
    outbox.drain()
    assert [s for s, _, _ in client.points["a"]] == [1]


def test_a_server_gets_several_sender_lanes_a_sqlite_file_one():
    from sweeper.tracking.outbox import LANES, lanes_for

    assert lanes_for("sqlite:////tmp/x/mlflow.db") == 1
    assert lanes_for("http://127.0.0.1:5000") == LANES > 1


def test_while_the_store_is_away_a_progress_line_says_since_when_and_what_waits():
    """A line at the first failure, then at most every NOTE_EVERY_S (at a failed
    retry), each with the outage's start, the metric points waiting and the bound."""
    client, clock = FlakyClient(down=10**6), Clock()
    recorder = _recorder(client, clock, bound=300.0)
    recorder.result("k", _report(1, 5))  # t=0: fails, line 1
    for now in range(1, 40):  # a report every second; retries at 1, 3, 7, 15, 30
        clock.now = float(now)
        recorder.result("k", _report(5 * now + 1, 5 * now + 5))
        recorder.check()
    notes = [line for line in client.log if "unreachable since" in line]
    since = clock_time(WALL0)
    assert len(notes) == 3  # at 0, 15 and 30: the retries at 1, 3, 7 came too soon
    assert notes[0].startswith(f"tracking store unreachable since {since}, retrying; 5 points")
    assert f"since {since}, retrying; 80 points buffered (16 writes), limit 300s" in notes[1]
    assert f"since {since}, retrying; 155 points buffered (31 writes), limit 300s" in notes[2]
    assert NOTE_EVERY_S <= 15


class MlflowLike(Exception):
    error_code = "INTERNAL_ERROR"


API = "API request to http://127.0.0.1:5000/api/2.0/mlflow/runs/log-batch failed with exception "


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            API + "HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries exceeded with "
            "url: /api/2.0/mlflow/runs/log-batch (Caused by ResponseError('too many 503 error "
            "responses'))",
            "http://127.0.0.1:5000 answers HTTP 503 Service Unavailable (an MLflow server's "
            "answer while its database is away)",
        ),
        (
            API + "HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries exceeded with "
            "url: /api/2.0/mlflow/runs/log-batch (Caused by ResponseError('too many 500 error "
            "responses'))",
            "http://127.0.0.1:5000 answers HTTP 500",
        ),
        (
            API + "HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries exceeded with "
            'url: /api/2.0/mlflow/runs/log-batch (Caused by NewConnectionError("HTTPConnection'
            "(host='127.0.0.1', port=5000): Failed to establish a new connection: [Errno 111] "
            'Connection refused"))',
            "http://127.0.0.1:5000: connection refused (is the server down?)",
        ),
        (
            API + "HTTPConnectionPool(host='127.0.0.1', port=5000): Read timed out. (read "
            "timeout=30)",
            "http://127.0.0.1:5000: no answer (timed out)",
        ),
        ("database is locked\ntraceback...", "database is locked"),
    ],
    ids=["503", "500", "refused", "timeout", "other"],
)
def test_the_reason_names_the_server_and_what_it_answered(text: str, expected: str):
    exc = MlflowLike(text)
    assert reason(exc) == expected
    assert not is_permanent(exc)  # an outage: buffered, never raised


@pytest.mark.parametrize("status", [503, 500])
def test_mlflows_client_meeting_a_server_whose_database_is_away_buffers(status: int):
    """What MLflow's own HTTP client raises when a live server answers 503 (MLflow's
    TEMPORARILY_UNAVAILABLE: its SQLAlchemy store lost the database) or 500: taken for
    an outage, worded as such, not raised as a rejection."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    body = json.dumps({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "db away"}).encode()

    class Away(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Away)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    lines: list[str] = []
    try:
        client = MlflowClient(url)
        outbox = Outbox(60.0, log=lines.append)
        send = lambda: client.log_batch("r1", metrics=[Metric("m", 1.0, 1, 1)])  # noqa: E731
        outbox.put("1 metric point(s) of run r1", send, points=1)
    finally:
        server.shutdown()
        server.server_close()
    assert len(outbox.pending) == 1 and outbox.points() == 1
    assert len(lines) == 1 and "; 1 points buffered (1 writes), limit 60s; " in lines[0]
    said = {503: "answers HTTP 503 Service Unavailable", 500: "answers HTTP 500"}[status]
    assert f"; {url} {said}" in lines[0], lines[0]


def test_in_the_background_a_short_trials_writes_wait_their_linger_and_go_as_three_requests():
    """RUNNING, its tags, three reports and FINISHED queued within the linger: the
    RUNNING status is overridden (not sent), tags and reports go as one batch, then the
    end; the record is what six requests would have made."""
    client = FlakyClient(down=0)
    outbox = Outbox(60.0, background=True, linger_s=30.0)  # longer than the test: held
    recorder = Recorder(client, {"k": "run"}, MetricLog(), outbox)  # type: ignore[arg-type]
    recorder.started("k", "ray_0")
    for first in (1, 6, 11):
        recorder.result("k", _report(first, first + 4))
    recorder.finished("k")
    learned = time.time() * 1000
    assert not client.log  # held by the linger
    time.sleep(0.05)
    outbox.drain()  # the end of the sweep sends at once
    assert client.log == ["log_batch", "set_terminated"]
    assert [s for s, _, _ in client.points["run"]] == list(range(1, 16))
    assert client.tags["run"][record_names.TAG_STATUS] == record_names.Status.FINISHED
    assert client.status["run"] == record_names.RunState.FINISHED
    assert client.ended["run"] <= learned  # the end the driver learned, not the send
    assert outbox.requests == 2


def test_in_the_background_a_write_is_sent_once_its_linger_has_passed_without_a_drain():
    client = FlakyClient(down=0)
    outbox = Outbox(60.0, background=True, linger_s=0.05)
    _batch(outbox, client, "a", range(1, 3))
    deadline = time.monotonic() + 30
    while not client.log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.log == ["log_batch"] and not outbox.pending


def test_a_sweeps_outbox_lingers_in_the_background_with_its_stores_lanes():
    from sweeper.tracking.outbox import LINGER_S, sweep_outbox

    outbox = sweep_outbox("http://127.0.0.1:5000")
    assert outbox.background and outbox.linger_s == LINGER_S > 0
    assert Outbox(60.0).linger_s == 0.0  # in the foreground every write is due at once
