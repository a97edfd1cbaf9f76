"""One live driver per sweep: a lease held in the tracking store, renewed by a heartbeat.

Two drivers on one sweep would run every unfinished trial twice, into the same trial
folders and the same MLflow runs (docs/architecture.md, invariant 8). The lease is an
experiment tag, `sweeper.driver.<sweep>`, holding who drives the sweep (host, pid,
start time), a random token, and the time of its last heartbeat. It lives in the store
because that is what every driver of a sweep shares, on one machine or a cluster.

* Taking it: absent, released, expired (no heartbeat for `TTL_S`), or held by a
  process of this host that no longer exists, it is taken; otherwise `LeaseHeld` names
  the holder. Writing a tag is not a compare-and-set, so the taker waits `SETTLE_S` and
  reads it back: of two drivers that wrote at once, the one whose token is not there
  gives way. A third driver that finds a claim that fresh waits for that read-back
  before naming the holder (`settled_holder`). On a SQLite store the whole step runs
  under the store's file lock instead, so no other driver can write between this one's
  read and write: there it neither waits nor lets a waiting claim stand in its way
  (the read-back then costs nothing, and skipping the `SETTLE_S` wait shortens every
  sweep's start; docs/benchmarks.md has the measurements).
* Holding it: a daemon thread rewrites the heartbeat every `BEAT_S`.
* Giving it back: the tag is deleted when the driver ends, however it ends short of
  SIGKILL; a killed driver's lease is taken at once on its own host (its pid is gone)
  and after `TTL_S` elsewhere. `sweeper run --force-resume` takes a lease the user
  knows is dead. Reading commands (`summarize`, `ui`) never look at it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlflow import MlflowClient

TAG_PREFIX = "sweeper.driver."
TTL_S = 60.0
"""A lease without a heartbeat for this long is dead."""
BEAT_S = 10.0
SETTLE_S = 1.0
RELEASE_S = 10.0
"""How long a driver that is ending waits for the store to delete its lease."""


class LeaseHeld(Exception):
    """Another live driver holds the sweep."""


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    started: str
    token: str
    beat: float

    def describe(self) -> str:
        ago = time.time() - self.beat
        return (
            f"pid {self.pid} on {self.host}, started {self.started}, last heartbeat {ago:.0f} s ago"
        )

    def alive(self, now: float) -> bool:
        """Heartbeat fresh, and on this host the process still exists."""
        if now - self.beat > TTL_S:
            return False
        if self.host == socket.gethostname():
            return _pid_exists(self.pid)
        return True


def tag_key(sweep: str) -> str:
    return TAG_PREFIX + sweep


def read_holder(client: MlflowClient, experiment_id: str, sweep: str) -> Holder | None:
    text = client.get_experiment(experiment_id).tags.get(tag_key(sweep), "")
    try:
        return Holder(**json.loads(text)) if text else None
    except (TypeError, ValueError):
        return None  # unreadable: treated as no lease


class Lease:
    """A held lease: its heartbeat runs until `release()`."""

    def __init__(self, client: MlflowClient, experiment_id: str, sweep: str, me: Holder):
        self.client, self.experiment_id, self.sweep, self.holder = client, experiment_id, sweep, me
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    @classmethod
    def acquire(
        cls,
        client: MlflowClient,
        experiment_id: str,
        sweep: str,
        force: bool = False,
        db: Path | None = None,
    ) -> Lease:
        """Take the sweep's lease or raise LeaseHeld. `db`: the SQLite file of a local
        store, whose file lock makes taking it atomic on this machine."""
        from sweeper.tracking.server import creation_lock

        with creation_lock(db):  # a SQLite store's claims are atomic: nothing to settle
            me = take(client, experiment_id, sweep, force, settle_s=SETTLE_S if db is None else 0)
        return cls(client, experiment_id, sweep, me)

    def release(self) -> None:
        """Stop the heartbeat and delete the tag, if it is still this driver's. A store
        that does not answer within `RELEASE_S` (MLflow's client retries a dead server
        for minutes) is left alone: the tag expires (`TTL_S`), and on this host the
        next driver sees this pid gone at once."""
        self._stop.set()
        done = threading.Thread(target=self._delete, daemon=True)
        done.start()
        done.join(timeout=RELEASE_S)

    def _delete(self) -> None:
        try:
            current = read_holder(self.client, self.experiment_id, self.sweep)
            if current is not None and current.token == self.holder.token:
                self.client.delete_experiment_tag(self.experiment_id, tag_key(self.sweep))
        except Exception:  # the driver is ending anyway; its error is the one to show
            pass

    def _heartbeat(self) -> None:
        while not self._stop.wait(BEAT_S):
            beat = Holder(**{**asdict(self.holder), "beat": time.time()})
            try:
                _write(self.client, self.experiment_id, self.sweep, beat)
            except Exception:  # a store outage: the next beat tries again
                continue


def take(
    client: MlflowClient,
    experiment_id: str,
    sweep: str,
    force: bool = False,
    settle_s: float | None = None,
) -> Holder:
    """Write this process's lease and confirm it stuck (see the module docstring).
    `settle_s`: how long a claim may take to settle (default `SETTLE_S`); 0 where the
    caller holds a lock no other driver can write past."""
    settle_s = SETTLE_S if settle_s is None else settle_s
    holder = settled_holder(client, experiment_id, sweep, settle_s)
    if holder is not None and not force and holder.alive(time.time()):
        raise LeaseHeld(holder.describe())
    me = Holder(
        host=socket.gethostname(),
        pid=os.getpid(),
        started=time.strftime("%Y-%m-%d %H:%M:%S"),
        token=uuid.uuid4().hex,
        beat=time.time(),
    )
    _write(client, experiment_id, sweep, me)
    if settle_s > 0:
        time.sleep(settle_s)
    current = read_holder(client, experiment_id, sweep)
    if current is None or current.token != me.token:
        raise LeaseHeld(current.describe() if current else "a driver that started at once")
    return me


def settled_holder(
    client: MlflowClient, experiment_id: str, sweep: str, settle_s: float = SETTLE_S
) -> Holder | None:
    """The holder, once a claim still in its read-back has settled. A lease written in
    the last 2 x `settle_s` may be one of several drivers' claims written at once, of
    which only the one read back goes on: naming it before then could name a driver
    that gives way a second later. A heartbeat that recent costs the rest of that
    window too (under 2 x `settle_s`)."""
    holder = read_holder(client, experiment_id, sweep)
    settling = 2 * settle_s - (time.time() - holder.beat) if holder is not None else 0.0
    if settling > 0:
        time.sleep(min(settling, 2 * settle_s))  # a clock ahead of ours waits no longer
        holder = read_holder(client, experiment_id, sweep)
    return holder


def _write(client: MlflowClient, experiment_id: str, sweep: str, holder: Holder) -> None:
    client.set_experiment_tag(experiment_id, tag_key(sweep), json.dumps(asdict(holder)))


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
