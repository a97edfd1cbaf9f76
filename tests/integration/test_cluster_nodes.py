"""Two Ray nodes on one machine: a head and a worker, 1 CPU each, joined over
127.0.0.1. A 2-trial sweep with resources.cpu=1 must put one trial on each node, and
each trial run's node tag must say which node ran it.

Which node ran a trial is also read from Ray itself (the state API's actors, with
their node ids), so a failure tells apart "the trials did not spread" from "the tag
does not distinguish the nodes".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from sweeper import record_names
from tests.support.cluster import get, ray_cluster
from tests.support.sweeps import new_sweep, runs_by_role

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_trials_spread_over_two_nodes_and_say_where(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "twonodes", max_concurrent=2)
    slow = json.dumps({"*": {"sleep_per_step": 0.3}})  # both trials overlap: 20 steps, 6 s
    started = time.monotonic()
    with ray_cluster(tmp_path / "ray_logs", head_cpus=1, SWEEPER_DUMMY_EXTRA=slow) as cluster:
        cluster.add_worker(num_cpus=1)
        nodes = {n["node_id"] for n in cluster.alive_nodes()}
        assert len(nodes) == 2
        done = subprocess.run(
            [sys.executable, "-m", "sweeper.cli.main", "run", str(spec),
             "--address", cluster.address],
            capture_output=True, text=True, env=cluster.env, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        actors = json.loads(get(f"{cluster.dashboard}/api/v0/actors?limit=1000", cluster.headers()))
        listed = actors["data"]["result"]["result"]
        # Tune runs a function trainable as an actor of class ImplicitFunc (Ray reports
        # it by name or by qualified name, `wrap_function.<locals>.ImplicitFunc`)
        trial_nodes = {
            a["node_id"] for a in listed if a.get("class_name", "").endswith("ImplicitFunc")
        }
        classes = sorted({a.get("class_name", "") for a in listed})
    elapsed = time.monotonic() - started
    assert trial_nodes == nodes, f"trial actors on {trial_nodes}, nodes {nodes}; actors: {classes}"
    _, trials = runs_by_role(out, "twonodes")
    assert len(trials) == 2 and all(t.info.status == "FINISHED" for t in trials)
    tags = sorted(t.data.tags[record_names.TAG_NODE] for t in trials)
    assert len(set(tags)) == 2, f"{record_names.TAG_NODE} does not tell the two nodes apart: {tags}"
    print(f"two nodes: {elapsed:.1f}s, node tags {tags}")
