"""Every trial must fit on some node: checked before anything is created.

Ray Tune queues a trial whose `resources` no node can provide and waits for one to
appear, silently and for ever: on a laptop without a GPU, `resources.gpu: 0.5` (what
`sweeps/roberta.yaml` asks for) would sit after data preparation until killed. So
`sweeper run` compares what one trial asks for with the nodes that exist *before*
preparing data or creating runs, and exits 2 naming both (docs/architecture.md,
invariant 5).

The nodes: without an address, this machine as the embedded Ray will see it (the CPUs
this process may use, `os.sched_getaffinity`, and the GPUs NVML reports, honouring
CUDA_VISIBLE_DEVICES), without starting Ray; with an address, the alive nodes of that
cluster (`ray.nodes()`), read through a short connection.

Autoscaling. Ray reports only the nodes that exist: nothing in its public API says
whether an autoscaler (the cluster launcher's, KubeRay's) will add one that fits, or
what it would look like. So sweeper cannot tell an autoscaling cluster from a small one
and is told instead: `sweeper run --wait-for-nodes SECONDS` waits that long for a node
that fits to join, saying so every poll, and exits 2 at the time-out as without it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sweeper.engine.options import SweepError


@dataclass(frozen=True)
class Node:
    """What one node offers a trial."""

    name: str
    cpu: float
    gpu: float

    def fits(self, cpu: float, gpu: float) -> bool:
        return self.cpu >= cpu and self.gpu >= gpu


def local_nodes() -> list[Node]:
    """This machine, as `sweeper.tune.cluster.start_ray` starts Ray on it."""
    from sweeper.trainers.devices import gpu_count

    return [Node("this machine", float(len(os.sched_getaffinity(0))), float(gpu_count()))]


@contextmanager
def _connected(address: str) -> Iterator[None]:
    """A short driver connection to the cluster at `address`, for reading its nodes."""
    import ray

    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    try:
        yield
    finally:
        ray.shutdown()


def _alive_nodes() -> list[Node]:
    """The alive nodes of the cluster this process is connected to."""
    import ray

    return [
        Node(
            n.get("NodeManagerAddress", "?"),
            float(n.get("Resources", {}).get("CPU", 0)),
            float(n.get("Resources", {}).get("GPU", 0)),
        )
        for n in ray.nodes()
        if n.get("Alive")
    ]


def unfit(cpu: float, gpu: float, nodes: Sequence[Node]) -> str | None:
    """Why no node can run a trial asking for `cpu` CPUs and `gpu` GPUs, or None."""
    if any(node.fits(cpu, gpu) for node in nodes):
        return None
    offered = "; ".join(f"{n.name}: {n.cpu:g} CPUs, {n.gpu:g} GPUs" for n in nodes) or "none"
    hint = (
        "set resources.gpu=0 or join a cluster with GPUs (--address)"
        if gpu
        else (f"lower resources.cpu (at most {max((n.cpu for n in nodes), default=0):g})")
    )
    return (
        f"each trial asks for {cpu:g} CPUs and {gpu:g} GPUs (resources), and no node "
        f"has that: nodes {offered}. Ray would queue the trials for ever; {hint}"
    )


def check_resources(
    cpu: float,
    gpu: float,
    address: str | None,
    wait_s: float = 0,
    poll_s: float = 5,
    log: Callable[[str], None] = print,
) -> None:
    """Raise SweepError (exit 2) when no node of the cluster fits one trial; with
    `wait_s`, first wait that long for one to join (an autoscaling cluster), saying so.
    Waiting needs a cluster: this machine does not grow."""
    if address is None:
        why = unfit(cpu, gpu, local_nodes())
        if why is not None:
            extra = " (--wait-for-nodes waits for a cluster's nodes: give --address)"
            raise SweepError(why + (extra if wait_s else ""))
        return
    with _connected(address):
        why = unfit(cpu, gpu, _alive_nodes())
        deadline = time.monotonic() + wait_s
        while why is not None and time.monotonic() < deadline:
            left = deadline - time.monotonic()
            log(f"waiting for a node that fits, {left:.0f} s left (--wait-for-nodes): {why}")
            time.sleep(min(poll_s, max(left, 0)))
            why = unfit(cpu, gpu, _alive_nodes())
        if why is not None and wait_s:
            raise SweepError(f"no node that fits joined in {wait_s:g} s: {why}")
        if why is not None:
            raise SweepError(f"{why}; on an autoscaling cluster, --wait-for-nodes SECONDS")
        if wait_s:
            log("a node that fits is in the cluster: starting")
