"""The driver lease's rules on a fake store: who may take it, and the read-back."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from sweeper.tracking import lease
from sweeper.tracking.lease import Holder, LeaseHeld, read_holder, tag_key, take


class FakeClient:
    """Experiment tags only; `steal` overwrites the lease right after a write (a racer)."""

    def __init__(self, steal: str | None = None):
        self.tags: dict[str, str] = {}
        self.steal = steal

    def get_experiment(self, experiment_id):
        return SimpleNamespace(tags=dict(self.tags))

    def set_experiment_tag(self, experiment_id, key, value):
        self.tags[key] = value
        if self.steal is not None:
            self.tags[key] = self.steal

    def delete_experiment_tag(self, experiment_id, key):
        self.tags.pop(key, None)


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(lease, "SETTLE_S", 0.0)


def _holder(**changes) -> Holder:
    base = {"host": "elsewhere", "pid": 1, "started": "then", "token": "t", "beat": time.time()}
    return Holder(**{**base, **changes})


def _held_by(client: FakeClient, holder: Holder) -> None:
    client.tags[tag_key("s")] = json.dumps(holder.__dict__)


def test_a_live_holder_is_named_and_kept():
    client = FakeClient()
    _held_by(client, _holder())
    with pytest.raises(LeaseHeld, match="pid 1 on elsewhere, started then"):
        take(client, "1", "s")
    assert read_holder(client, "1", "s").token == "t"


def test_expired_dead_local_or_forced_leases_are_taken():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for holder, force in (
        (_holder(beat=time.time() - lease.TTL_S - 1), False),  # no heartbeat for TTL
        (_holder(host=socket.gethostname(), pid=dead.pid), False),  # its process is gone
        (_holder(), True),  # --force-resume
    ):
        client = FakeClient()
        _held_by(client, holder)
        me = take(client, "1", "s", force)
        assert me.pid == os.getpid() and read_holder(client, "1", "s").token == me.token


def test_a_live_local_holder_is_kept():
    client = FakeClient()
    _held_by(client, _holder(host=socket.gethostname(), pid=os.getpid()))
    with pytest.raises(LeaseHeld):
        take(client, "1", "s")


def test_of_two_writers_the_one_read_back_wins():
    racer = json.dumps(_holder(token="other").__dict__)
    with pytest.raises(LeaseHeld, match="pid 1 on elsewhere"):
        take(FakeClient(steal=racer), "1", "s")


def test_release_deletes_only_its_own_lease(monkeypatch):
    monkeypatch.setattr(lease, "BEAT_S", 0.01)
    client = FakeClient()
    held = lease.Lease.acquire(client, "1", "s")
    time.sleep(0.05)  # a few heartbeats
    assert read_holder(client, "1", "s").beat >= held.holder.beat
    held.release()
    assert tag_key("s") not in client.tags
    other = lease.Lease.acquire(client, "1", "s")
    _held_by(client, _holder(token="newer"))  # taken over (--force-resume elsewhere)
    other.release()
    assert read_holder(client, "1", "s").token == "newer"


def test_a_claim_still_settling_is_waited_for_and_the_driver_that_keeps_it_named(monkeypatch):
    """Three drivers at once: B's claim is on the store when C reads it, then A's
    overwrites it and B gives way; C must name A, the driver that goes on."""
    monkeypatch.setattr(lease, "SETTLE_S", 0.5)
    client = FakeClient()
    _held_by(client, _holder(pid=2, token="b"))  # written just now: still settling
    waited = []

    def sleep(seconds):
        waited.append(seconds)
        _held_by(client, _holder(pid=3, token="a"))  # A's write lands; B's read-back fails

    monkeypatch.setattr(lease.time, "sleep", sleep)
    with pytest.raises(LeaseHeld, match="pid 3 on elsewhere"):
        take(client, "1", "s")
    assert len(waited) == 1 and 0.5 < waited[0] <= 1.0  # the rest of the settling window

    waited.clear()
    _held_by(client, _holder(pid=4, beat=time.time() - 5))  # settled long ago
    with pytest.raises(LeaseHeld, match="pid 4 on elsewhere"):
        take(client, "1", "s")
    assert waited == []  # no wait when nothing can be settling


def test_under_a_sqlite_stores_file_lock_nothing_waits(monkeypatch, tmp_path):
    """The store's file lock makes a claim atomic on its machine: no read-back pause, and
    a claim written a moment ago is named at once; without the lock (a tracking server)
    the same claim is waited for."""
    monkeypatch.setattr(lease, "SETTLE_S", 0.5)
    waited: list[float] = []
    monkeypatch.setattr(lease.time, "sleep", waited.append)
    db = tmp_path / "mlflow.db"
    client = FakeClient()
    held = lease.Lease.acquire(client, "1", "s", db=db)
    assert waited == [] and read_holder(client, "1", "s").token == held.holder.token
    held.release()

    _held_by(client, _holder(pid=2, token="b"))  # written just now
    with pytest.raises(LeaseHeld, match="pid 2 on elsewhere"):
        lease.Lease.acquire(client, "1", "s", db=db)
    assert waited == []
    with pytest.raises(LeaseHeld, match="pid 2 on elsewhere"):
        lease.Lease.acquire(client, "1", "s")
    assert len(waited) == 1 and 0.5 < waited[0] <= 1.0
