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

With `background=True` (the sweep engines) the writes are sent by threads of the
outbox's own, so Ray Tune's event loop never waits for a request: `put` only queues,
`check` raises what the threads met (the bound passed, a permanent rejection), and
`drain` waits for them to empty the queue. A thread sends a write of a run no sooner
than `LINGER_S` after it was queued (`drain` sends at once): the writes one trial makes
in quick succession (its RUNNING status, tags, reports, then FINISHED) meet in the queue
and go as fewer requests (below), at the price of a trial's live metrics showing up to
`LINGER_S` late. There are `lanes_for(uri)` threads: for a
tracking server `LANES`, every write of one run through the same one (chosen by its
run id), so a run's writes keep their order while two runs' writes travel at once (a
server answers requests in parallel); for a local SQLite file one (it takes one writer
at a time). An outage holds every lane. Without it (`background=False`, the unit
tests' fake clock) `put` sends what is due itself, in one lane.

Fewer requests, the same record. A run's metric and tag writes are batches
(`put_batch`): before sending one, the outbox joins to it every later batch of the same
run that nothing else of that run stands between (a status change, a logged model),
within MLflow's per-request limits; a tag set twice keeps its later value, as two
requests would. Writes of other runs keep their own order; a write that names no run
(`put` without `run_id`) is a barrier nothing is moved across. Under load, when the
queue is longer than one write, a trial's reports, tags and cost points go as one
request instead of several. Likewise a status change (`put(..., status=True)`)
that a later status change of its run overrides (RUNNING, then FINISHED) is not sent:
the run's final status is the same.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeper.tracking.store_errors import clock_time, first_line, is_permanent, quick_http, reason

BOUND_ENV = "SWEEPER_TRACKING_RETRY_S"
DEFAULT_BOUND_S = 300.0
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 15.0
NOTE_EVERY_S = 10.0
"""While the store is away, a progress line at most this often (on a failed retry)."""
LANES = 4
"""sender threads in the background (runs whose writes travel at once)"""
LINGER_S = 1.0
"""in the background, the least time a run's write waits in the queue for later ones
of its run to join it (or, for a status, to override it)"""
MAX_METRICS, MAX_TAGS, MAX_ENTITIES = 1000, 100, 1000
"""MLflow's log_batch limits (mlflow.utils.validation): a joined batch stays within them."""


class TrackingDown(RuntimeError):
    """The store stayed unreachable past the bound; writes are still pending."""

    def __init__(self, waited_s: float, pending: int, cause: BaseException, points: int = 0):
        self.waited_s, self.pending, self.cause = waited_s, pending, cause
        super().__init__(
            f"the tracking store has been unreachable for {waited_s:.0f}s "
            f"(limit ${BOUND_ENV}); {pending} write(s) ({points} metric points) not "
            f"recorded; last error: {reason(cause)}"
        )


@dataclass(eq=False)
class Batch:
    """One run's metrics and tags, for `log_batch(run_id, metrics=..., tags=...)`."""

    metrics: list[Any] = field(default_factory=list)
    tags: list[Any] = field(default_factory=list)
    send: Callable[[list[Any], list[Any]], object] = lambda metrics, tags: None

    def fits(self, other: Batch) -> bool:
        metrics, tags = len(self.metrics) + len(other.metrics), len(self.tags) + len(other.tags)
        return metrics <= MAX_METRICS and tags <= MAX_TAGS and metrics + tags <= MAX_ENTITIES

    @staticmethod
    def joined(batches: Sequence[Batch]) -> Batch:
        """Every metric in order; each tag key once, at its last value."""
        tags: dict[str, Any] = {}
        for batch in batches:
            tags.update((tag.key, tag) for tag in batch.tags)
        metrics = [m for batch in batches for m in batch.metrics]
        return Batch(metrics, list(tags.values()), batches[0].send)


@dataclass(eq=False)
class Write:
    what: str
    """for messages: e.g. 'metrics of run abc'"""
    send: Callable[[], object]
    optional: bool = False
    """a copy of something recorded elsewhere: skipped (with a warning) if it fails"""
    run_id: str | None = None
    """the run it writes to; None: a barrier no write is moved across"""
    batch: Batch | None = None
    """set for a run's metrics and tags: may be joined with later ones of the run"""
    status: bool = False
    """a run status change: not sent if a later one of the run is queued"""
    points: int = 0
    """metric points it carries (counted in the progress line while the store is away)"""
    queued: float = 0.0
    """when it was queued (the outbox's clock): a background lane holds it `LINGER_S`"""


def lanes_for(uri: str) -> int:
    """Sender threads for a store: one for a local SQLite file, `LANES` for a server."""
    return 1 if uri.startswith("sqlite:") else LANES


def sweep_outbox(uri: str, log: Callable[[str], None] = lambda _: None) -> Outbox:
    """The outbox of a sweep's driver writing to the store at `uri`: in the background,
    with its lanes (`lanes_for`) and `LINGER_S`."""
    return Outbox(log=log, background=True, lanes=lanes_for(uri), linger_s=LINGER_S)


def bound_from_env() -> float:
    return float(os.environ.get(BOUND_ENV) or DEFAULT_BOUND_S)


class Outbox:
    """Ordered, retried delivery of the driver's writes (see the module docstring)."""

    def __init__(
        self,
        bound_s: float | None = None,
        *,
        log: Callable[[str], None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        background: bool = False,
        lanes: int = LANES,
        wall: Callable[[], float] = time.time,
        linger_s: float = 0.0,
    ):
        self.bound_s = bound_from_env() if bound_s is None else bound_s
        self.log, self.clock, self.sleep, self.wall = log, clock, sleep, wall
        self.background = background
        self.pending: deque[Write] = deque()
        self.failing_since: float | None = None
        """when the first write of the current outage failed (None: no outage)"""
        self.next_try = 0.0
        self.delay = FIRST_DELAY_S
        self.retried = 0
        """writes that went through only after an outage, over the whole sweep"""
        self.requests = 0
        """requests sent (joined batches count once), over the whole sweep"""
        self._sent_late = 0
        """writes sent so far in the current outage"""
        self.last_error: BaseException | None = None
        self._since_wall = 0.0
        """wall-clock time of the current outage's first failure (for messages)"""
        self._noted_at = 0.0
        """when the last progress line of the current outage was written"""
        self._lock = threading.Condition()
        self._lanes = max(1, lanes) if background else 1
        self.linger_s = linger_s if background else 0.0
        """the least time a run's write waits to be sent (0: at once; `drain` ignores it)"""
        self._draining = False
        self._threads: list[threading.Thread] = []
        self._rejected: BaseException | None = None
        """a permanent rejection the sender thread met, raised by the next check/drain"""

    def put(
        self,
        what: str,
        send: Callable[[], object],
        optional: bool = False,
        run_id: str | None = None,
        status: bool = False,
        points: int = 0,
    ) -> None:
        """Queue a write behind the pending ones and send what is due now (in the
        background: wake the sender). Never waits and never raises for an outage (Tune
        turns a callback's exception into a trial failure); a permanent rejection is
        raised at once (in the background: by the next `check` or `drain`). An
        `optional` write that fails is dropped with a warning instead (it must not hold
        up the others). `points`: how many metric points it carries (for the progress
        line)."""
        self._queue(Write(what, send, optional, run_id, status=status, points=points))

    def put_batch(
        self,
        what: str,
        run_id: str,
        send: Callable[[list[Any], list[Any]], object],
        metrics: Sequence[Any] = (),
        tags: Sequence[Any] = (),
    ) -> None:
        """Queue `send(metrics, tags)` (a `log_batch` of run `run_id`), which may go
        joined with later batches of the same run (the module docstring)."""
        batch = Batch(list(metrics), list(tags), send)
        self._queue(
            Write(
                what,
                lambda: send(batch.metrics, batch.tags),
                run_id=run_id,
                batch=batch,
                points=len(batch.metrics),
            )
        )

    def _queue(self, write: Write) -> None:
        write.queued = self.clock()
        with self._lock:
            self.pending.append(write)
            if self.background:
                if not self._threads:
                    self._threads = [
                        threading.Thread(
                            target=self._sender, args=(lane,), name="tracking-outbox", daemon=True
                        )
                        for lane in range(self._lanes)
                    ]
                    for thread in self._threads:
                        thread.start()
                self._lock.notify_all()
                return
        if self.clock() >= self.next_try:
            self._send_pending()

    def check(self) -> None:
        """Raise TrackingDown once the outbox has not caught up for the bound: the
        sweep's event loop calls this between steps, where raising stops the sweep."""
        if self.background:
            self._raise_rejected()
        elif self.pending and self.clock() >= self.next_try:
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
        with self._lock:
            return sum(write.points for write in self.pending)

    def drain(self) -> None:
        """Send everything, waiting (with backoff) up to the bound: the end of a sweep."""
        if self.background:
            with self._lock:
                self._draining = True
                self._lock.notify_all()
                try:
                    while self.pending and self._rejected is None:
                        self._lock.wait(0.5)
                        self.check()
                finally:
                    self._draining = False
            self._raise_rejected()
            return
        while self.pending:
            self.sleep(max(0.0, self.next_try - self.clock()))
            self._send_pending()
            self.check()

    def _raise_rejected(self) -> None:
        if self._rejected is not None:
            rejected, self._rejected = self._rejected, None
            raise rejected

    def _lane(self, write: Write) -> int:
        return zlib.crc32((write.run_id or "").encode()) % self._lanes

    def _head(self, lane: int) -> Write | None:
        """The lane's oldest write (the caller holds the lock)."""
        return next((w for w in self.pending if self._lane(w) == lane), None)

    def _due(self, write: Write) -> float:
        """When `write` may be sent (the caller holds the lock): after a failure's
        backoff and, for a run's write, its linger (unless the outbox is draining)."""
        if self._draining or write.run_id is None:
            return self.next_try
        return max(self.next_try, write.queued + self.linger_s)

    def _sender(self, lane: int) -> None:
        """A background thread: send its lane's writes when due, else sleep until they
        are due or another is put."""
        while True:
            with self._lock:
                while (head := self._head(lane)) is None or self.clock() < self._due(head):
                    self._lock.wait(self._due(head) - self.clock() if head else None)
            try:
                self._send_pending(lane)
            except Exception as exc:  # permanent: for the driver's next check or drain
                with self._lock:
                    self._rejected = exc
            with self._lock:
                self._lock.notify_all()

    def _next(self, lane: int) -> tuple[Write | None, list[Write]]:
        """The lane's head write, joined with the later batches of its run that may go
        with it, or (None: nothing to send) a status change a later one overrides (the
        module docstring); returns (what to send, the writes it covers)."""
        with self._lock:
            head = self._head(lane)
            assert head is not None
            later_writes = list(self.pending)[self.pending.index(head) + 1 :]
            if head.status and any(w.status and w.run_id == head.run_id for w in later_writes):
                return None, [head]
            if head.batch is None or head.run_id is None:
                return head, [head]
            covered, batches, total = [head], [head.batch], head.batch
            for later in later_writes:
                if later.run_id is None:
                    break
                if later.run_id != head.run_id:
                    continue
                if later.batch is None or not total.fits(later.batch):
                    break
                covered.append(later)
                batches.append(later.batch)
                total = Batch(total.metrics + later.batch.metrics, total.tags + later.batch.tags)
        if len(covered) == 1:
            return head, covered
        joined = Batch.joined(batches)
        what = f"{len(covered)} joined writes of run {head.run_id}"
        send = joined.send
        joined_write = Write(
            what,
            lambda: send(joined.metrics, joined.tags),
            run_id=head.run_id,
            points=len(joined.metrics),
        )
        return joined_write, covered

    def _send_pending(self, lane: int = 0) -> None:
        while True:
            with self._lock:
                head = self._head(lane)
                if head is None or self.clock() < self._due(head):
                    return
            write, covered = self._next(lane)
            if write is None:  # overridden: as good as sent
                self._sent(covered)
                continue
            try:
                with quick_http():
                    with self._lock:
                        self.requests += 1
                    write.send()
            except Exception as exc:
                if write.optional:
                    self._done(covered)
                    self.log(f"{write.what} not recorded: {first_line(exc)}")
                    continue
                if is_permanent(exc):
                    self._done(covered)
                    raise
                self._failed(exc)
                return
            self._sent(covered)

    def _sent(self, covered: list[Write]) -> None:
        self._done(covered)
        if self.failing_since is not None:
            self.retried += len(covered)
            self._sent_late += len(covered)
            if not self.pending:
                self._recovered(self.failing_since)

    def _done(self, covered: list[Write]) -> None:
        with self._lock:
            for write in covered:
                self.pending.remove(write)
            self._lock.notify_all()

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
