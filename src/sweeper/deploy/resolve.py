"""Where a sweep's record and outputs go: the tracking-URI precedence, and Ray job copies.

**Tracking URI.** Everything that opens a sweep's store (`run` and `sweeper.api.run_sweep`,
every summary: `summarize`, `run`'s closing report and its `--until-decided` looks
through `sweeper.summarize.request`, `ui`, and `submit` for what it passes on)
resolves it here, in this order:

1. `--tracking-uri`;
2. the spec's `tracking.uri`;
3. `$MLFLOW_TRACKING_URI`;
4. the tracking server of a cluster started by `sweeper cluster up` on this machine,
   if it is running (state file, live process groups, `/health` answers);
5. the local default: a SQLite file in `output_dir` (`tracking.store.spec_store_uri`).

Given no spec (`summarize --experiment NAME`), steps 1, 3 and 4 apply and there is
no default. So a sweep run from the checkout, a Ray job on that cluster (its head exports
`MLFLOW_TRACKING_URI`), and `summarize`/`ui` afterwards all meet in one store.

**Ray job copies.** `ray job submit --working-dir .` runs the entrypoint in a temporary
copy of the working dir: `<session>/runtime_resources/working_dir_files/_ray_pkg_<hash>/`
(Ray 2.60, `_private/runtime_env/working_dir.py`), which Ray deletes later. A spec's
relative `output_dir` resolves into that copy, and the sweep's data, checkpoints and
SQLite record would be lost without a word (docs/architecture.md, invariant 7). Inside
such a copy, `durable_spec` re-roots every spec path that lies in it and is written by
the sweep (`output_dir` and whatever lies under it, and any path the copy lacks) onto
durable storage, keeping the path relative to the working dir: `runs/demo` becomes
`STORAGE/runs/demo`. Files the copy does hold (uploaded inputs) are read where they are.
STORAGE is `$SWEEPER_STORAGE`, else a running `sweeper cluster up` cluster's storage;
with neither, the sweep stops before anything runs (exit 2) saying what to set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sweeper.deploy.state import STORAGE_ENV, ClusterState, running_cluster
from sweeper.spec.schema import SweepSpec
from sweeper.tracking.server import is_server
from sweeper.tracking.store import spec_store_uri, sqlite_path

RAY_PKG_PREFIX = "_ray_pkg_"
WORKING_DIR_FILES = "working_dir_files"


@dataclass(frozen=True)
class ResolvedUri:
    uri: str
    source: str
    """Where it came from, for the line a command prints: `--tracking-uri`, `spec`,
    `$MLFLOW_TRACKING_URI`, `cluster`, `default`."""


def resolve_tracking_uri(
    spec: SweepSpec, explicit: str | None = None, cluster: ClusterState | None = None
) -> ResolvedUri:
    """The sweep's tracking URI by the precedence in the module docstring. `cluster`
    skips the state-file lookup when the caller already has it."""
    named = _named(explicit, spec.tracking.uri, cluster)
    return named or ResolvedUri(spec_store_uri(spec), "default")


def tracking_uri(spec: SweepSpec, explicit: str | None = None) -> str:
    """`resolve_tracking_uri(...).uri`: the one precedence, for callers that need only it."""
    return resolve_tracking_uri(spec, explicit).uri


def tracking_uri_without_spec(explicit: str | None = None) -> str | None:
    """The same precedence for a command given no spec (`summarize --experiment`):
    steps 1, 3 and 4, so no spec field and no default; None when none names a store."""
    named = _named(explicit, None, None)
    return named.uri if named is not None else None


def _named(
    explicit: str | None, spec_uri: str | None, cluster: ClusterState | None
) -> ResolvedUri | None:
    """Steps 1 to 4 of the precedence: the first that names a store, else None."""
    if explicit:
        return ResolvedUri(explicit, "--tracking-uri")
    if spec_uri:
        return ResolvedUri(spec_uri, "spec")
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return ResolvedUri(env, "$MLFLOW_TRACKING_URI")
    cluster = cluster or running_cluster()
    if cluster is not None:
        return ResolvedUri(cluster.tracking_uri, "cluster")
    return None


def job_copy_root(path: Path | str) -> Path | None:
    """The root of the Ray job working-dir copy that `path` lies in, else None.

    Recognised by its place, which is what makes it temporary:
    `.../working_dir_files/_ray_pkg_<hash>/`."""
    resolved = Path(path).resolve()
    for folder in (resolved, *resolved.parents):
        if folder.name.startswith(RAY_PKG_PREFIX) and folder.parent.name == WORKING_DIR_FILES:
            return folder
    return None


class NotDurable(Exception):
    """A Ray job would write into its temporary copy and no durable place is known."""


@dataclass(frozen=True)
class Placement:
    """Where a sweep run inside a Ray job copy puts its outputs."""

    copy_root: Path
    storage: Path
    moved: dict[str, tuple[Path, Path]]
    """field path (e.g. `output_dir`, `data.dir`) -> (path in the copy, durable path)"""


def storage_root(cluster: ClusterState | None = None) -> Path | None:
    """`$SWEEPER_STORAGE`, else the running cluster's storage; None when neither."""
    value = os.environ.get(STORAGE_ENV)
    if value:
        return Path(value).expanduser().resolve()
    cluster = cluster or running_cluster()
    return Path(cluster.storage) if cluster is not None else None


def durable_spec(
    spec: SweepSpec, spec_path: str | Path, cluster: ClusterState | None = None
) -> tuple[SweepSpec, Placement | None]:
    """The spec with its outputs moved out of a Ray job's working-dir copy, and where
    they went; `(spec, None)` unchanged when the spec does not lie in such a copy or
    writes nothing into it. Raise NotDurable when it would and no storage is known."""
    copy_root = job_copy_root(spec_path)
    if copy_root is None:
        copy_root = job_copy_root(Path.cwd())
    if copy_root is None:
        return spec, None
    output_dir = Path(spec.output_dir)
    inside = _under(output_dir, copy_root)
    if not inside and not _writes_into(spec, copy_root, output_dir):
        return spec, None
    storage = storage_root(cluster)
    if storage is None:
        raise NotDurable(
            f"this sweep runs inside Ray's temporary copy of the working dir ({copy_root}), "
            f"which Ray deletes: its outputs (output_dir {output_dir}) would be lost. Set "
            f"{STORAGE_ENV}=/durable/folder in the environment of the cluster's "
            "`ray start --head` (or start the cluster with `sweeper cluster up`, which "
            "sets it), or give output_dir as an absolute path outside the working dir"
        )
    moved: dict[str, tuple[Path, Path]] = {}

    def move(path: Path, field: str) -> Path:
        if not _under(path, copy_root):
            return path
        if not (_under(path, output_dir) or not path.exists()):
            return path  # an uploaded input: read from the copy
        target = storage / path.relative_to(copy_root)
        moved[field] = (path, target)
        return target

    return _map_paths(spec, move, ""), Placement(copy_root, storage, moved)


def record_in_copy(uri: str, copy_root: Path) -> bool:
    """A local store (SQLite file or folder) that lies in the job's copy."""
    if is_server(uri):
        return False
    db = sqlite_path(uri)
    path = db if db is not None else Path(uri.removeprefix("file://"))
    return _under(path.resolve() if not path.is_absolute() else path, copy_root)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _writes_into(spec: SweepSpec, copy_root: Path, output_dir: Path) -> bool:
    found: list[bool] = []

    def probe(path: Path, _field: str) -> Path:
        found.append(_under(path, copy_root) and (_under(path, output_dir) or not path.exists()))
        return path

    _map_paths(spec, probe, "")
    return any(found)


def _map_paths(model: BaseModel, fn: Any, prefix: str) -> Any:
    """A copy of `model` with `fn(path, field)` applied to every Path field, nested
    blocks included (new path fields are covered without listing them here)."""
    update: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        field = f"{prefix}{name}"
        if isinstance(value, Path):
            new = fn(value, field)
            if new != value:
                update[name] = new
        elif isinstance(value, BaseModel):
            new_block = _map_paths(value, fn, f"{field}.")
            if new_block is not value:
                update[name] = new_block
    return model.model_copy(update=update) if update else model
