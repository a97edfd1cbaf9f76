"""A cluster that grows on demand: `sweeper run --wait-for-nodes S`.

An autoscaler adds a node when work asks for one; Ray does not say beforehand that it
will. So a sweep whose trials fit no node of the cluster waits only when told to: it
prints what it waits for, starts once a node that fits joins, and exits 2 at the
time-out with nothing created. Here a real head with 1 CPU stands for the cluster
before it scales and a real `ray start` worker with 2 CPUs for the node the autoscaler
adds; each trial asks for 2 CPUs.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from sweeper import record_names
from tests.support.cluster import ray_cluster
from tests.support.processes import kill_group, sweeper_command
from tests.support.reliability import record
from tests.support.sweeps import new_sweep, runs_by_role

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_a_sweep_waits_for_a_node_that_fits_then_runs_on_it(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "grows", grid={"seed": [1], "init": ["random"],
        "framework": ["dummy"]}, resources={"cpu": 2},
    )  # fmt: skip
    with ray_cluster(tmp_path / "ray_logs", head_cpus=1) as cluster:
        run = [*sweeper_command("run", spec, "--address", cluster.address)]
        started = time.monotonic()
        refused = subprocess.run(
            [*run, "--wait-for-nodes", "4"], capture_output=True, text=True,
            env=cluster.env, timeout=120,
        )  # fmt: skip
        refused_s = time.monotonic() - started
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "no node that fits joined in 4 s" in refused.stderr
        assert "2 CPUs and 0 GPUs" in refused.stderr
        assert "waiting for a node that fits" in refused.stdout
        assert runs_by_role(out, "grows") == ([], [])  # nothing created

        errors = open(tmp_path / "waiting.err", "w+")  # noqa: SIM115 (read after the run)
        waiting = subprocess.Popen(
            [*run, "--wait-for-nodes", "180"], stdout=subprocess.PIPE, stderr=errors,
            text=True, env=cluster.env, start_new_session=True,
        )  # fmt: skip
        lines: list[str] = []  # the only reader of its stdout, line by line as printed
        reader = threading.Thread(target=lambda: lines.extend(waiting.stdout or []))
        reader.start()
        try:
            deadline = time.monotonic() + 90
            while not any("waiting for a node that fits" in line for line in lines):
                assert waiting.poll() is None, "".join(lines)
                assert time.monotonic() < deadline, "".join(lines)
                time.sleep(0.5)
            cluster.add_worker(num_cpus=2)  # the node an autoscaler would add
            joined = time.monotonic()
            waiting.wait(timeout=240)
        finally:
            kill_group(waiting.pid)
        reader.join(timeout=10)
        errors.seek(0)
        err = errors.read()
        errors.close()
        stdout = "".join(lines)
    assert waiting.returncode == 0, stdout[-3000:] + err[-3000:]
    assert "a node that fits is in the cluster: starting" in stdout
    _, trials = runs_by_role(out, "grows")
    assert [t.info.status for t in trials] == ["FINISHED"]
    node = trials[0].data.tags[record_names.TAG_NODE]
    assert "127.0.0.3" in node, f"the trial ran on {node}, not on the worker that joined"
    record(
        "cluster: trials that fit no node yet (an autoscaling cluster)",
        "a head with 1 CPU, trials asking for 2 CPUs; `sweeper run --wait-for-nodes 4` "
        "with no node joining, then `--wait-for-nodes 180` and a 2-CPU `ray start` "
        "worker joining while it waits",
        f"first: exit 2 after {refused_s:.1f} s naming the 2 CPUs asked and the nodes "
        "found, no run created; second: printed what it waited for, started once the "
        f"worker joined, exit 0 {time.monotonic() - joined:.0f} s later, the trial ran "
        f"on the worker ({node})",
    )
