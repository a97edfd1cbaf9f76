"""Open the sweep's tracking store and plan its runs: the one way both stages start.

Before any data is prepared or any run created, the driver checks that the store is
reachable, opens (or creates) the experiment, finds the sweep's existing trial runs and
applies the resume rules (`sweeper.tracking.runs.plan_runs`): trial runs exist and no
`--resume` -> bad input, exit 2 (docs/architecture.md, invariants 1 and 5). The grid
plans its trial keys here; the search stage, whose keys are only known as Optuna
samples them, plans none and only applies the rule. `sweep_lease` holds the sweep's
driver lease around a whole invocation (invariant 8).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweeper.engine.options import RunOptions, SweepError

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec
    from sweeper.tracking.runs import FoundRun, RunPlan


@dataclass(frozen=True)
class SweepStore:
    """The open store of one sweep, and what this invocation does with its runs."""

    uri: str
    client: MlflowClient
    experiment_id: str
    found: list[FoundRun]
    """The sweep's trial runs made by earlier invocations (every stage)."""
    plan: RunPlan
    """What happens to each planned key (none for the search stage)."""
    where: str
    """`sweep 'NAME' (experiment 'E' at URI)`, how messages name the sweep."""


def open_and_plan(options: RunOptions, spec: SweepSpec, keys: Sequence[str]) -> SweepStore:
    """Check and open the store, find the sweep's runs, plan `keys`; raise SweepError
    (exit 2) before anything is created when the store or the resume rule says no."""
    from mlflow.exceptions import MlflowException

    from sweeper.deploy.resolve import tracking_uri
    from sweeper.tracking import experiment_name
    from sweeper.tracking.drivers import DriverMissing
    from sweeper.tracking.inputs import check_resume
    from sweeper.tracking.runs import ExistingRunsError, find_trial_runs, plan_runs
    from sweeper.tracking.server import TrackingUnreachable, check_server, open_store

    uri = tracking_uri(spec, options.tracking_uri)
    where = f"sweep {spec.name!r} (experiment {experiment_name(spec)!r} at {uri})"
    try:
        check_server(uri)
        client, experiment_id = open_store(spec, uri)
        found = find_trial_runs(client, experiment_id, spec.name)
        plan = plan_runs(list(keys), found, options.resume)
        if found:  # a resume: the record must have been made from these inputs
            check_resume(client, experiment_id, spec)
    except (TrackingUnreachable, DriverMissing) as exc:
        raise SweepError(str(exc)) from None
    except (ExistingRunsError, ValueError, MlflowException) as exc:
        raise SweepError(f"{where}: {exc}") from None
    return SweepStore(uri, client, experiment_id, found, plan, where)


@contextmanager
def sweep_lease(options: RunOptions, spec: SweepSpec) -> Iterator[None]:
    """Hold the sweep's driver lease (`sweeper.tracking.lease`) for the body; a live
    holder elsewhere is a SweepError (exit 2) naming it, before anything is created.
    So is a record a newer sweeper wrote (`sweeper.tracking.record_format`), before
    the lease is taken: this is where `sweeper run` first opens the store."""
    from sweeper.deploy.resolve import tracking_uri
    from sweeper.tracking import experiment_name
    from sweeper.tracking.drivers import DriverMissing
    from sweeper.tracking.lease import TTL_S, Lease, LeaseHeld
    from sweeper.tracking.record_format import RecordTooNew, check_stored
    from sweeper.tracking.server import TrackingUnreachable, check_server, open_store
    from sweeper.tracking.store import sqlite_path

    uri = tracking_uri(spec, options.tracking_uri)
    try:
        check_server(uri)
        client, experiment_id = open_store(spec, uri)
        check_stored(client, experiment_id, spec.name)
    except (TrackingUnreachable, DriverMissing) as exc:
        raise SweepError(str(exc)) from None
    except RecordTooNew as exc:
        raise SweepError(f"{exc} (at {uri})") from None
    try:
        lease = Lease.acquire(
            client, experiment_id, spec.name, options.force_lease, sqlite_path(uri)
        )
    except LeaseHeld as exc:
        raise SweepError(
            f"sweep {spec.name!r} (experiment {experiment_name(spec)!r} at {uri}) is being "
            f"run by another driver: {exc}. Wait for it to end or stop it; if that driver "
            f"is dead (its lease expires {TTL_S:.0f} s after its last heartbeat), "
            f"`{options.resume_command()} --force-resume` takes over"
        ) from None
    try:
        yield
    finally:
        lease.release()
