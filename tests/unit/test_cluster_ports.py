"""The test cluster's port choice (tests/support/cluster.py): Ray refuses to start a node
whose worker port range covers one of its own listening ports."""

from __future__ import annotations

import pytest

from tests.support import cluster


def _worker_range(args: list[str]) -> range:
    low = int(args[args.index("--min-worker-port") + 1])
    high = int(args[args.index("--max-worker-port") + 1])
    return range(low, high + 1)


def test_the_worker_range_never_covers_a_port_taken_before(monkeypatch: pytest.MonkeyPatch):
    draws = iter([30000, 30000, 40000])  # the first two ranges cover 30100
    monkeypatch.setattr(cluster.random, "randrange", lambda *_: next(draws))
    args = cluster._node_ports(30100, 50000)
    assert _worker_range(args) == range(40000, 40200)
    listeners = [int(args[i + 1]) for i, a in enumerate(args) if a.endswith("-port")
                 and "worker" not in a]  # fmt: skip
    assert len(listeners) == 6 and not set(listeners) & set(_worker_range(args))
