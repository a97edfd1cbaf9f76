"""Cluster start-up for the driver: join a Ray cluster, or start Ray on this machine.

With an address (`--address`, else $RAY_ADDRESS) the driver joins that cluster; without,
it starts an embedded Ray bound to 127.0.0.1 with every core it may use, and shuts it
down when the sweep ends (`sweeper.engine.session` decides when). Ray's own log lines go
to a file in output_dir, not the terminal, which belongs to the progress view.

Ray is imported inside the functions: `sweeper --help` must not load it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path


def ray_address(address: str | None) -> str | None:
    """The cluster to join: `address`, else $RAY_ADDRESS; None for an embedded Ray."""
    return address or os.environ.get("RAY_ADDRESS") or None


def keep_ray_on_loopback() -> None:
    """Make an embedded Ray stay on 127.0.0.1.

    Ray rewrites a node address of 127.0.0.1 to the machine's outward address
    (`resolve_ip_for_localhost`) unless its multi-node support is off, in which case it
    uses the loopback address. A single-machine sweep needs no other node, so it turns
    that support off: set before Ray is imported (its constant is read at import, and
    Ray's worker processes inherit the environment), and on the constant in case
    something imported Ray already.
    """
    import sys

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


def start_ray(address: str | None) -> bool:
    """Connect to the cluster at `address` (or $RAY_ADDRESS), else start Ray on this
    machine bound to 127.0.0.1 with all its cores. Returns True when Ray was started
    here (embedded). Already connected (the grid inside `sweeper run`'s session, a
    search's confirm stage), it returns False: whoever connected shuts Ray down. The
    caller sends Ray's log lines to a file (`route_ray_logs`) once it has connected."""
    address = ray_address(address)
    if not address:
        keep_ray_on_loopback()
    import ray

    if ray.is_initialized():
        return False

    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(
            address="local",  # a new instance, never a `ray start` cluster found on disk
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            num_cpus=len(os.sched_getaffinity(0)),
            **quiet,
        )
    return not address


def route_ray_logs(log_file: Path) -> None:
    """Send the `ray` loggers (Tune's tracebacks, warnings) to a file: the progress view
    reports every trial's fate, and the full text stays available there."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("ray")
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
