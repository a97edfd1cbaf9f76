"""A trial's resume state in its run's artifacts, so a retry on another node resumes.

Ray retries a failed trial on whichever node has room. The trainer resumes from the
last checkpoint in its trial folder, which is on the node that failed; without a
shared filesystem the retry would start again from step 0. So, when the artifact store
is remote (`staging.is_remote`), the trial copies what a resume needs (the trainer's
last and best checkpoints, `Trainer.checkpoints`, and its events file) to the trial
run's artifacts under `resume/`, every `spec.sync_every` validation points but not
within `spec.sync_interval_s` seconds of the attempt's start or its last sync (a node
loss then costs less training than the copies would cost requests and bandwidth),
and once more when the trainer saved a checkpoint on a preemption notice (with the
trial's preemptions, `record_names.PREEMPTIONS_FILE`); a trial whose folder has no
checkpoint `restore`s the newest copy before the trainer starts. A finished trial
deletes its copies (`discard`), where there may be any.

Never a torn file. A checkpoint is synced only once the trainer has moved past the
validation point it belongs to (the next event with a later step: every trainer saves
after logging validation, synchronously), and each file is copied aside with its size
and mtime checked before and after the copy: a file still being written fails the
round, which is retried at the next event. The events file is cut at its last full
line. The upload is content-addressed: files go to `resume/blobs/<sha256>` (one not
changed since the last sync, often the best checkpoint, is not sent again), then
`resume/manifest-<step>.json` names them; the manifest is uploaded last, so a sync
killed halfway leaves the previous one whole. Older manifests and the blobs only
they named are then deleted. `restore` checks every blob's hash and falls back to an
older manifest, or to step 0, rather than resume from a damaged copy.

The upload runs on a thread of its own: the trainer's output keeps streaming while a
large checkpoint goes over the network.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import record_names
from sweeper.hashing import file_sha256
from sweeper.redact import contained
from sweeper.tracking.artifacts import repository

if TYPE_CHECKING:
    from mlflow.store.artifact.artifact_repo import ArtifactRepository

    from sweeper.trainers.base import Trainer, TrialJob
    from sweeper.trainers.events import MetricEvent

RESUME_DIR = "resume"
BLOBS = "blobs"
MANIFEST_PREFIX = "manifest-"
_SHA256 = re.compile(r"[0-9a-f]{64}")

log = logging.getLogger(__name__)


class Unstable(RuntimeError):
    """A file changed while it was copied: it is being written; try again later."""


def resume_repo(artifact_uri: str, tracking_uri: str) -> ArtifactRepository:
    return repository(f"{artifact_uri.rstrip('/')}/{RESUME_DIR}", tracking_uri)


def snapshot(out_dir: Path, paths: list[Path], into: Path) -> dict[str, Path]:
    """Copy `paths` (files or folders under `out_dir`) aside: relative path -> copy.
    Raises Unstable when a file changes during its copy."""
    copies: dict[str, Path] = {}
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for item in files:
            rel = item.relative_to(out_dir).as_posix()
            copy = into / f"{len(copies):05d}"
            try:
                before = item.stat()
                shutil.copyfile(item, copy)
                after = item.stat()
            except FileNotFoundError as exc:  # rotated away while listed
                raise Unstable(f"{rel} disappeared") from exc
            if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
                raise Unstable(f"{rel} changed while copied")
            if rel == record_names.EVENTS_FILE:
                _cut_at_last_line(copy)
            copies[rel] = copy
    return copies


def _cut_at_last_line(path: Path) -> None:
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        path.write_bytes(data[:end])


def upload(repo: ArtifactRepository, step: int, copies: dict[str, Path], known: set[str]) -> dict:
    """Send the blobs not in `known` (updated), at once, then the manifest; prune older
    ones. A blob is sent under its hash through a hard link to the copy (a copy where
    no link can be made)."""
    from concurrent.futures import ThreadPoolExecutor

    files, new = {}, {}
    with tempfile.TemporaryDirectory(prefix="sweeper-sync-") as tmp:
        for rel, copy in copies.items():
            sha = file_sha256(copy)
            files[rel] = {"sha256": sha, "size": copy.stat().st_size}
            if sha not in known and sha not in new:
                new[sha] = Path(tmp) / sha
                try:
                    os.link(copy, new[sha])
                except OSError:
                    shutil.copyfile(copy, new[sha])
        with ThreadPoolExecutor(max_workers=max(1, min(4, len(new)))) as pool:
            for sent in [pool.submit(repo.log_artifact, str(p), BLOBS) for p in new.values()]:
                sent.result()
        known.update(new)
        manifest = {"step": step, "files": files}
        path = Path(tmp) / f"{MANIFEST_PREFIX}{step:010d}.json"
        path.write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        repo.log_artifact(str(path))
    _prune(repo, path.name, {f["sha256"] for f in files.values()}, known)
    return manifest


def _prune(repo: ArtifactRepository, keep: str, used: set[str], known: set[str]) -> None:
    """Best effort: a failed delete only costs storage."""
    try:
        for info in repo.list_artifacts():
            name = Path(info.path).name
            if name.startswith(MANIFEST_PREFIX) and name != keep:
                repo.delete_artifacts(info.path)
        for info in repo.list_artifacts(BLOBS):
            sha = Path(info.path).name
            if sha not in used:
                repo.delete_artifacts(info.path)
                known.discard(sha)
    except Exception as exc:
        log.warning("pruning old resume copies failed: %s", exc)


def has_checkpoint(out_dir: Path) -> bool:
    """The trial folder holds a checkpoint of its own (this node ran the trial before)."""
    checkpoints = out_dir / record_names.CHECKPOINT_DIR
    return checkpoints.is_dir() and any(p.is_file() for p in checkpoints.rglob("*"))


def synced_manifests(repo: ArtifactRepository) -> list[str] | None:
    """The synced copies' manifests, newest first; None when they cannot be listed."""
    try:
        found = (Path(i.path).name for i in repo.list_artifacts())
        return sorted((n for n in found if n.startswith(MANIFEST_PREFIX)), reverse=True)
    except Exception as exc:
        log.warning("listing synced checkpoints failed: %s", exc)
        return None


def restore(repo: ArtifactRepository, out_dir: Path, names: list[str] | None = None) -> int | None:
    """Put the newest intact synced copy into `out_dir`; returns its step, or None when
    there is none (or none intact). Only for a folder with no checkpoint of its own:
    a node that ran the trial before resumes from its own files. `names`: the
    manifests as `synced_manifests` listed them (listed here if not given)."""
    if has_checkpoint(out_dir):
        return None
    names = synced_manifests(repo) if names is None else names
    for name in names or ():
        with tempfile.TemporaryDirectory(prefix="sweeper-restore-") as tmp:
            try:
                manifest = json.loads(Path(repo.download_artifacts(name, tmp)).read_text())
                got = _download_blobs(repo, manifest["files"], Path(tmp))
            except Exception as exc:
                log.warning("synced checkpoint %s not usable: %s", name, exc)
                continue
            for rel, path in got.items():
                dest = contained(out_dir, rel)  # checked for every file in _download_blobs
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(path), dest)
            return int(manifest["step"])
    return None


def _download_blobs(repo: ArtifactRepository, files: dict, tmp: Path) -> dict[str, Path]:
    got = {}
    for rel, meta in files.items():
        contained(tmp / "out", rel)  # a name leading out of the trial folder: not usable
        if not _SHA256.fullmatch(str(meta["sha256"])):
            raise ValueError(f"{rel}: {meta['sha256']!r} is not a sha256")
        path = Path(repo.download_artifacts(f"{BLOBS}/{meta['sha256']}", str(tmp)))
        if file_sha256(path) != meta["sha256"]:
            raise ValueError(f"{rel}: hash mismatch")
        got[rel] = path.rename(tmp / f"restored-{len(got):05d}")
    return got


def discard(repo: ArtifactRepository) -> None:
    """Delete a finished trial's resume copies (best effort): its best checkpoint is
    uploaded on its own, and nothing resumes a finished trial. The whole `resume/`
    folder goes in one request (its root: nothing to list first)."""
    try:
        repo.delete_artifacts()
    except Exception as exc:
        log.warning("deleting resume copies failed: %s", exc)


def discard_run_copies(artifact_uri: str, tracking_uri: str) -> None:
    """Delete the resume copies of a run that ended where its trial could not clean up:
    a trial the scheduler stopped early is killed mid-run, copies left behind."""
    from sweeper.tracking.staging import is_remote

    if is_remote(artifact_uri):
        discard(resume_repo(artifact_uri, tracking_uri))


class CheckpointSync:
    """Syncs a running trial's resume state (see the module docstring).

    `start(trainer, job)` once the job is known, `on_event` for every metric event,
    `close()` when the trainer has ended (waits for an upload in flight). `copies`:
    whether the run's artifacts may already hold copies (an earlier attempt's), which
    `discard` then deletes even if this attempt synced none."""

    def __init__(
        self,
        repo: ArtifactRepository,
        out_dir: Path,
        every: int,
        warn: Callable[[str], None],
        interval_s: float = 0.0,
        copies: bool = True,
    ):
        self._repo = repo
        self._out = Path(out_dir)
        self._every = max(1, every)
        self._interval_s = interval_s
        self._warn = warn
        self._copies = copies
        self._trainer: Trainer | None = None
        self._job: TrialJob | None = None
        self._valid_points = 0
        self._last = time.monotonic()
        """When the attempt started or the last sync was asked for."""
        self._due: int | None = None
        self._request: int | None = None
        self._known: set[str] | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="checkpoint-sync", daemon=True)
        self.synced: list[int] = []
        """Steps synced so far (for the log and tests)."""

    def start(self, trainer: Trainer, job: TrialJob) -> None:
        self._trainer, self._job = trainer, job
        self._thread.start()

    def on_event(self, event: MetricEvent) -> None:
        with self._cond:
            if self._due is not None and event.step > self._due:
                self._request, self._due = self._due, None
                self._cond.notify()
            if event.split == "valid":
                self._valid_points += 1
                waited = time.monotonic() - self._last >= self._interval_s
                if self._valid_points >= self._every and waited:
                    self._due, self._valid_points = event.step, 0
                    self._last = time.monotonic()

    def discard(self) -> None:
        """The trial finished: its resume copies are no longer needed (none to delete
        when no attempt made any)."""
        if self._copies or self.synced:
            discard(self._repo)

    def sync_now(self, step: int) -> None:
        """Sync the trainer's checkpoint as of `step` on this thread, after `close()`:
        the checkpoint a trainer saved on a preemption notice before it exited."""
        if self._trainer is not None:
            self._sync(step)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._request is None and not self._closed:
                    self._cond.wait()
                if self._request is None:
                    return
                step, self._request = self._request, None
            self._sync(step)

    def _sync(self, step: int) -> None:
        assert self._trainer is not None and self._job is not None
        found = self._trainer.checkpoints(self._job)
        if found.last is None:
            return
        paths = list(dict.fromkeys(p for p in (found.last, found.best) if p is not None))
        paths.append(self._out / record_names.EVENTS_FILE)
        noted = self._out / record_names.PREEMPTIONS_FILE
        if noted.is_file():  # the count follows the trial to the node that resumes it
            paths.append(noted)
        try:
            if self._known is None:
                self._known = {Path(i.path).name for i in self._repo.list_artifacts(BLOBS)}
            with tempfile.TemporaryDirectory(prefix="sweeper-snap-") as tmp:
                copies = snapshot(self._out, paths, Path(tmp))
                upload(self._repo, step, copies, self._known)
            self.synced.append(step)
        except Unstable as exc:  # retried at the next event
            with self._cond:
                self._due = step if self._due is None else self._due
            log.info("checkpoint sync at step %d deferred: %s", step, exc)
        except Exception as exc:
            self._warn(f"checkpoint sync at step {step} failed: {type(exc).__name__}: {exc}")
