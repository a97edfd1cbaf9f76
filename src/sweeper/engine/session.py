"""The driver's Ray session: join the cluster or start Ray here, and stop what it started.

One place decides where the sweep runs (docs/architecture.md, invariant 6): `--address`,
else $RAY_ADDRESS, else an embedded Ray on 127.0.0.1. A session opened while Ray is
already connected (`sweeper run` opens one around the whole command; the grid and the
search stage open theirs inside it) neither starts nor stops Ray: whoever started it
shuts it down.

Starting Ray takes seconds, most of them spent waiting for its processes to come up.
`beside` work runs in a thread meanwhile, so that its time is hidden inside Ray's start:
`sweeper run` opens the tracking store and takes the sweep's lease there (importing
MLflow, itself slow), and the thread imports Ray Tune (docs/benchmarks.md has the
measurements). `ray.init` itself stays on the main thread: started from another thread,
Ray loses its SIGTERM handling and its driver's first call to the cluster hangs until
Ray aborts it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.engine.options import RunOptions

if TYPE_CHECKING:
    from sweeper.spec.schema import SweepSpec


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
def ray_session(
    options: RunOptions,
    spec: SweepSpec,
    beside: Callable[[], AbstractContextManager[object]] | None = None,
) -> Iterator[RaySession]:
    """Connect to (or start) Ray for the body; shut it down after if started here.

    `beside()` is entered in a thread while Ray starts and held for the body (exited
    before Ray stops). If it raises (the store refuses, another driver holds the
    lease), Ray is stopped again and its error propagates."""
    from sweeper.engine import signals
    from sweeper.tune.cluster import keep_ray_on_loopback, ray_address, route_ray_logs, start_ray

    address = ray_address(options.address)
    if not address:
        keep_ray_on_loopback()  # before the thread below imports Ray
    import ray

    connected = ray.is_initialized()
    with ExitStack() as held:
        thread = _Beside(held, beside)
        thread.start()
        embedded = False
        try:
            embedded = start_ray(address)
            thread.join()
            thread.reraise()
        except BaseException:
            thread.join()
            _stop(embedded)
            raise
        if not connected:
            route_ray_logs(driver_log(spec, options))
        signals.install()  # ray.init replaced the SIGTERM handler with one that dumps stacks
        try:
            yield RaySession(address, embedded)
        finally:
            held.close()
            _stop(embedded)


class _Beside(threading.Thread):
    """Enters `beside()` into `held` and imports Ray Tune, while the main thread starts
    Ray; keeps the error, for the main thread to raise."""

    def __init__(
        self, held: ExitStack, beside: Callable[[], AbstractContextManager[object]] | None
    ):
        super().__init__(name="sweeper-beside-ray-start", daemon=True)
        self._held, self._beside = held, beside
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            if self._beside is not None:
                self._held.enter_context(self._beside())
            import ray.tune  # noqa: F401  (the Tuner's import, off the critical path)
        except BaseException as exc:  # handed to the main thread
            self._error = exc

    def reraise(self) -> None:
        if self._error is not None:
            raise self._error


def _stop(embedded: bool) -> None:
    if embedded:
        import ray

        ray.shutdown()
