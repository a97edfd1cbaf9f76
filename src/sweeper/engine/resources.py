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
cluster (`ray.nodes()`), read through a short connection. An autoscaling cluster whose
nodes are not up yet looks too small here: `--no-resource-check` skips the check for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
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
    from sweeper.tune.system_metrics import gpu_count

    return [Node("this machine", float(len(os.sched_getaffinity(0))), float(gpu_count()))]


def cluster_nodes(address: str) -> list[Node]:
    """The alive nodes of the Ray cluster at `address`."""
    import ray

    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    finally:
        ray.shutdown()
    return [
        Node(
            n.get("NodeManagerAddress", "?"),
            float(n.get("Resources", {}).get("CPU", 0)),
            float(n.get("Resources", {}).get("GPU", 0)),
        )
        for n in nodes
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


def check_resources(cpu: float, gpu: float, address: str | None) -> None:
    """Raise SweepError (exit 2) when no node of the cluster fits one trial."""
    nodes = cluster_nodes(address) if address else local_nodes()
    why = unfit(cpu, gpu, nodes)
    if why is not None:
        raise SweepError(why)
