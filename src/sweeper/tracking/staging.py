"""Trial inputs through the artifact store, with a node-local cache keyed by content hash.

Invariant 7 (docs/architecture.md, "Storage without a shared filesystem"): a trial must
not depend on reading the driver's disk. When the sweep's artifact store is remote (a
tracking server's `mlflow-artifacts:` proxy, or S3), the driver `publish`es what every
trial reads (the prepared data folders, the pretrained weights) once,
under the experiment's artifact root at `inputs/<sha256>/`, and ships the list in the
trial context. A trial then `localize`s each one:

- the driver's path exists on this node and has the same content hash (one machine, or
  a shared filesystem): it is used in place, nothing is copied;
- otherwise the node's cache (`$SWEEPER_CACHE`, default `~/.cache/sweeper`) holds it
  under its hash, or it is downloaded there, its hash checked, and only then renamed
  into place. A download whose hash differs is refused (`StagingError`), never used.
  A cached copy is hashed again before each use (a disk that rots, or a hand that
  edits the cache, must not change a trial's inputs): one that no longer matches is
  fetched again.

A local artifact store (a path, `file:`) publishes nothing: it is reachable only where
the driver's disk is, so trials read the driver's paths as they always did.

Hashes: a file's is the sha256 of its bytes; a folder's is the sha256 of its sorted
`relative path, size, file sha256` lines, so renaming, adding or changing any file
changes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sweeper.hashing import file_sha256
from sweeper.tracking.artifacts import repository

if TYPE_CHECKING:
    from sweeper.trainers.trial_pipeline import SweepInputs

CACHE_ENV = "SWEEPER_CACHE"
INPUTS_DIR = "inputs"
PAYLOAD = "data"
"""Artifact folder holding the input itself, beside the commit marker."""
MARKER = "complete.json"
"""Uploaded last: an input folder without it is an interrupted upload, done again."""
PRETRAINED = "pretrained"
"""The role of a `SweepInputs.pretrained` entry without an objective; an objective's
checkpoint's is `pretrained:<objective>` (`pretrained_role`); a prepared folder's is
`<format>_data`, after its key in `SweepInputs.data` (`fairseq_data`, `hf_data`,
`lm_data`)."""
DATA_ROLE = "_data"

Log = Callable[[str], None]


class StagingError(RuntimeError):
    """An input could not be made available on this node (or failed its hash check)."""


@dataclass(frozen=True)
class StagedInput:
    """One input as the driver published it: what a trial needs to find or fetch it."""

    role: str
    digest: str
    uri: str
    """Artifact URI of `inputs/<digest>` (the payload is in its `data/`)."""
    driver_path: str
    name: str
    """The file's or folder's own name, kept on download."""
    is_dir: bool


def is_remote(uri: str) -> bool:
    """Whether an artifact URI is reachable without the driver's disk (not a path/file:)."""
    scheme = urlparse(uri).scheme
    return len(scheme) > 1 and scheme != "file"


def tree_digest(path: Path) -> str:
    """Content hash of a file or a folder (see the module docstring)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    lines = []
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = item.relative_to(path).as_posix()
        lines.append(f"{rel}\0{item.stat().st_size}\0{file_sha256(item)}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sweeper")


def publish(
    inputs: SweepInputs,
    root_uri: str,
    tracking_uri: str,
    log: Log = print,
    roles: Sequence[str] | None = None,
) -> list[StagedInput]:
    """Upload each input not yet under `root_uri/inputs/<digest>`; returns them all.
    Keyed by content, so a resumed sweep or a second sweep on the same data uploads
    nothing. `roles`: the inputs to publish (the pretraining stage publishes its
    checkpoint alone, once it exists)."""
    staged = []
    for role in roles if roles is not None else input_roles(inputs):
        value = role_path(inputs, role)
        if value is None:
            continue
        path = Path(value)
        digest = tree_digest(path)
        uri = f"{root_uri.rstrip('/')}/{INPUTS_DIR}/{digest}"
        repo = repository(uri, tracking_uri)
        if any(Path(f.path).name == MARKER for f in repo.list_artifacts()):
            log(f"{role}: already in the artifact store ({digest[:12]})")
        else:
            if path.is_dir():
                repo.log_artifacts(str(path), PAYLOAD)
            else:
                repo.log_artifact(str(path), PAYLOAD)
            with tempfile.TemporaryDirectory(prefix="sweeper-stage-") as tmp:
                marker = Path(tmp) / MARKER
                marker.write_text(json.dumps({"role": role, "digest": digest}), encoding="utf-8")
                repo.log_artifact(str(marker))
            log(f"{role}: uploaded to {uri}")
        staged.append(StagedInput(role, digest, uri, str(path), path.name, path.is_dir()))
    return staged


def localize(
    inputs: SweepInputs, staged: list[StagedInput], tracking_uri: str, cache: Path | None = None
) -> SweepInputs:
    """`inputs` with every staged path replaced by one that holds the same content on
    this node: the driver's own path when it does, else the node cache's copy."""
    changes = {}
    for item in staged:
        local = Path(item.driver_path)
        if local.exists() and tree_digest(local) == item.digest:
            continue
        changes[item.role] = fetch(item, tracking_uri, cache or cache_root())
    if not changes:
        return inputs
    data = {key: changes.get(key + DATA_ROLE, path) for key, path in inputs.data.items()}
    pretrained = {
        objective: changes.get(pretrained_role(objective), path)
        for objective, path in inputs.pretrained.items()
    }
    return replace(inputs, data=data, pretrained=pretrained)


def pretrained_role(objective: str | None) -> str:
    """The role of the pretrained weights of `objective` (None: weights without one)."""
    return PRETRAINED if objective is None else f"{PRETRAINED}:{objective}"


def input_roles(inputs: SweepInputs) -> list[str]:
    """Every input a trial reads from disk: each prepared folder, the pretrained weights."""
    return [key + DATA_ROLE for key in inputs.data] + [
        pretrained_role(objective) for objective in inputs.pretrained
    ]


def role_path(inputs: SweepInputs, role: str) -> Path | None:
    """The path of `role` (see `input_roles`) in `inputs`; None when it has none."""
    if role.endswith(DATA_ROLE):
        return inputs.data[role.removesuffix(DATA_ROLE)]
    objective = role.partition(":")[2] or None
    return inputs.pretrained.get(objective)


def fetch(item: StagedInput, tracking_uri: str, cache: Path) -> Path:
    """The cached copy of `item`, downloaded and hash-checked on a miss. Concurrent
    trials on one node wait for one download (a file lock per digest)."""
    home = cache / INPUTS_DIR / item.digest
    target = home / item.name
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home / ".lock"):
        if (home / MARKER).is_file() and target.exists():
            found = tree_digest(target)
            if found == item.digest:
                return target
            print(
                f"{item.role}: the cached copy at {target} has hash {found[:12]}, expected "
                f"{item.digest[:12]}: fetching it again",
                flush=True,
            )
            (home / MARKER).unlink()
        with tempfile.TemporaryDirectory(prefix=".download-", dir=home) as tmp:
            try:
                repo = repository(item.uri, tracking_uri)
                got = Path(repo.download_artifacts(PAYLOAD, tmp))
            except Exception as exc:
                raise StagingError(
                    f"{item.role}: download from {item.uri} failed: {type(exc).__name__}: {exc}"
                ) from exc
            payload = got if item.is_dir else got / item.name
            found = tree_digest(payload)
            if found != item.digest:
                raise StagingError(
                    f"{item.role}: the copy downloaded from {item.uri} has hash {found[:12]}, "
                    f"expected {item.digest[:12]}: refused"
                )
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            os.replace(payload, target)
        (home / MARKER).write_text(json.dumps({"digest": item.digest}), encoding="utf-8")
    return target


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
