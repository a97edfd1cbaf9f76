"""The driver's MLflow writes, kept in order and retried while the store is unreachable.

A sweep of many GPU-hours must not die, nor lose a metric point, because the tracking
server restarted. So the Recorder does not write directly: it puts each write (a
batch of points, a set of tags, a status change) in this outbox, which sends them in
the order they were made. When a write fails for a reason that may pass (connection
refused, timeout, server error), it and everything behind it wait; the next write, or
the end of the sweep, tries again once a backoff delay has passed. Only when nothing
has not caught up for `bound_s` seconds does the outbox give up (`TrackingDown`): the
sweep then stops with that message, and every trial's local events file still holds
its points, which `sweeper run --resume` replays.

While the store is away the outbox says so, on its first failure and then at most every
`NOTE_EVERY_S` seconds of failed retries: since when (wall clock), how many metric points
wait, the bound, and why in words (`reason`): connection refused (the server is down),
or HTTP 503 from a server that is up while its database is not (MLflow's server answers
503, and the odd 500, while PostgreSQL is away; neither is a rejection of the write).

Writes are safe to repeat: a metric point is sent with the timestamp it was made
with, and MLflow stores an identical point once; tags and statuses are idempotent.

Each attempt runs with MLflow's own HTTP retries off (unless $MLFLOW_HTTP_REQUEST_*
says otherwise): those retry one request for up to ~4 minutes, blocking Ray Tune's
event loop; here the waiting happens between attempts, without blocking anything.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

BOUND_ENV = "SWEEPER_TRACKING_RETRY_S"
DEFAULT_BOUND_S = 300.0
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 15.0
NOTE_EVERY_S = 10.0
"""While the store is away, a progress line at most this often (on a failed retry)."""
PERMANENT_CODES = frozenset(
    {
        "INVALID_PARAMETER_VALUE",
        "RESOURCE_DOES_NOT_EXIST",
        "RESOURCE_ALREADY_EXISTS",
        "BAD_REQUEST",
        "INVALID_STATE",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
    }
)
"""MLflow error codes that a retry cannot cure: raised at once, not buffered."""
QUICK_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


class TrackingDown(RuntimeError):
    """The store stayed unreachable past the bound; writes are still pending."""

    def __init__(self, waited_s: float, pending: int, cause: BaseException, points: int = 0):
        self.waited_s, self.pending, self.cause = waited_s, pending, cause
        super().__init__(
            f"the tracking store has been unreachable for {waited_s:.0f}s "
            f"(limit ${BOUND_ENV}); {pending} write(s) ({points} metric points) not "
            f"recorded; last error: {reason(cause)}"
        )


@dataclass
class Write:
    what: str
    """for messages: e.g. 'metrics of run abc'"""
    send: Callable[[], object]
    optional: bool = False
    """a copy of something recorded elsewhere: skipped (with a warning) if it fails"""
    points: int = 0
    """metric points it carries (counted in the progress line while the store is away)"""


def bound_from_env() -> float:
    return float(os.environ.get(BOUND_ENV) or DEFAULT_BOUND_S)


def is_permanent(exc: BaseException) -> bool:
    """A rejection the store will repeat (bad value, missing run), not an outage."""
    return getattr(exc, "error_code", None) in PERMANENT_CODES


class Outbox:
    """Ordered, retried delivery of the driver's writes (see the module docstring)."""

    def __init__(
        self,
        bound_s: float | None = None,
        *,
        log: Callable[[str], None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
    ):
        self.bound_s = bound_from_env() if bound_s is None else bound_s
        self.log, self.clock, self.sleep, self.wall = log, clock, sleep, wall
        self.pending: deque[Write] = deque()
        self.failing_since: float | None = None
        """when the first write of the current outage failed (None: no outage)"""
        self.next_try = 0.0
        self.delay = FIRST_DELAY_S
        self.retried = 0
        """writes that went through only after an outage, over the whole sweep"""
        self._sent_late = 0
        """writes sent so far in the current outage"""
        self.last_error: BaseException | None = None
        self._since_wall = 0.0
        """wall-clock time of the current outage's first failure (for messages)"""
        self._noted_at = 0.0
        """when the last progress line of the current outage was written"""

    def put(
        self, what: str, send: Callable[[], object], optional: bool = False, points: int = 0
    ) -> None:
        """Queue a write behind the pending ones and send what is due now. Never waits
        and never raises for an outage (Tune turns a callback's exception into a trial
        failure); a permanent rejection is raised at once. An `optional` write that
        fails is dropped with a warning instead (it must not hold up the others).
        `points`: how many metric points it carries (for the progress line)."""
        self.pending.append(Write(what, send, optional, points))
        if self.clock() >= self.next_try:
            self._send_pending()

    def check(self) -> None:
        """Raise TrackingDown once the outbox has not caught up for the bound: the
        sweep's event loop calls this between steps, where raising stops the sweep."""
        if self.pending and self.clock() >= self.next_try:
            self._send_pending()
        if self.failing_since is None or not self.pending:
            return
        waited = self.clock() - self.failing_since
        if waited > self.bound_s:
            raise TrackingDown(
                waited, len(self.pending), self.last_error or RuntimeError(), self.points()
            )

    def points(self) -> int:
        """Metric points waiting in the outbox."""
        return sum(write.points for write in self.pending)

    def drain(self) -> None:
        """Send everything, waiting (with backoff) up to the bound: the end of a sweep."""
        while self.pending:
            self.sleep(max(0.0, self.next_try - self.clock()))
            self._send_pending()
            self.check()

    def _send_pending(self) -> None:
        while self.pending:
            write = self.pending[0]
            try:
                with quick_http():
                    write.send()
            except Exception as exc:
                if write.optional:
                    self.pending.popleft()
                    self.log(f"{write.what} not recorded: {first_line(exc)}")
                    continue
                if is_permanent(exc):
                    self.pending.popleft()
                    raise
                self._failed(exc)
                return
            self.pending.popleft()
            if self.failing_since is not None:
                self.retried += 1
                self._sent_late += 1
                if not self.pending:
                    self._recovered(self.failing_since)

    def _failed(self, exc: BaseException) -> None:
        now = self.clock()
        self.last_error = exc
        if self.failing_since is None:
            self.failing_since, self.delay, self._sent_late = now, FIRST_DELAY_S, 0
            self._since_wall = self.wall()
            self._note(now)
        else:
            self.delay = min(self.delay * 2, MAX_DELAY_S)
            if now - self._noted_at >= NOTE_EVERY_S:
                self._note(now)
        self.next_try = now + self.delay

    def _note(self, now: float) -> None:
        """The progress line while the store is away (see the module docstring)."""
        self._noted_at = now
        self.log(
            f"tracking store unreachable since {clock_time(self._since_wall)}, retrying; "
            f"{self.points()} points buffered ({len(self.pending)} writes), limit "
            f"{self.bound_s:.0f}s; {reason(self.last_error or RuntimeError())}"
        )

    def _recovered(self, since: float) -> None:
        waited = self.clock() - since
        self.log(
            f"tracking store reachable again after {waited:.1f}s (unreachable since "
            f"{clock_time(self._since_wall)}); {self._sent_late} buffered write(s) sent"
        )
        self.failing_since, self.next_try = None, 0.0


@contextlib.contextmanager
def quick_http() -> Iterator[None]:
    """MLflow's per-request HTTP retries off for one attempt (user settings win)."""
    added = {k: v for k, v in QUICK_HTTP.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


_STATUS = re.compile(r"too many (\d{3}) error responses")
_SERVER = re.compile(r"API request to (\w+://[^/\s]+)")


def reason(exc: BaseException) -> str:
    """Why a write failed, in words: what MLflow's HTTP client says is a whole
    traceback's worth of URL and urllib3 detail, of which the server, the HTTP status
    and "connection refused" are what tells an operator where to look."""
    text = str(exc)
    found = _SERVER.search(text)
    server = found.group(1) if found else "the tracking server"
    status = _STATUS.search(text)
    if status and status.group(1) == "503":
        return (
            f"{server} answers HTTP 503 Service Unavailable (an MLflow server's answer "
            "while its database is away)"
        )
    if status:
        return f"{server} answers HTTP {status.group(1)}"
    if "Connection refused" in text:
        return f"{server}: connection refused (is the server down?)" if found else first_line(exc)
    if "timed out" in text.lower() and found:
        return f"{server}: no answer (timed out)"
    return first_line(exc)


def clock_time(seconds: float) -> str:
    """`HH:MM:SS` of a wall-clock time, in the driver's local time."""
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
