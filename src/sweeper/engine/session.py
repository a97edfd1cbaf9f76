"""The driver's Ray session: join the cluster or start Ray here, and stop what it started.

One place decides where the sweep runs (docs/architecture.md, invariant 6): `--address`,
else $RAY_ADDRESS, else an embedded Ray on 127.0.0.1. A session opened while Ray is
already connected (the search stage's confirm step runs the grid engine inside the
search's session) neither starts nor stops Ray: whoever started it shuts it down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.engine.options import RunOptions

if TYPE_CHECKING:
    from sweeper.spec import SweepSpec


@dataclass(frozen=True)
class RaySession:
    """Where this driver's trials run."""

    address: str | None
    """The cluster joined; None for Ray on this machine."""
    embedded: bool
    """Started here (then stopped when the session ends)."""

    def describe(self) -> str:
        """The cluster as the parent run records it."""
        return self.address or "local"

    def resources(self) -> dict[str, float]:
        """The cluster's total resources (CPU, GPU, memory, ...), as Ray counts them."""
        import ray

        return dict(ray.cluster_resources())


def driver_log(spec: SweepSpec, options: RunOptions) -> Path:
    """The file Ray's own log lines go to, one per driver invocation."""
    return Path(spec.output_dir) / "ray" / f"driver-{options.stamp}.log"


@contextmanager
def ray_session(options: RunOptions, spec: SweepSpec) -> Iterator[RaySession]:
    """Connect to (or start) Ray for the body; shut it down after if started here."""
    from sweeper.engine import signals
    from sweeper.tune.cluster import ray_address, start_ray

    address = ray_address(options.address)
    embedded = start_ray(address, driver_log(spec, options))
    signals.install()  # ray.init replaced the SIGTERM handler with one that dumps stacks
    try:
        yield RaySession(address, embedded)
    finally:
        if embedded:
            import ray

            ray.shutdown()
