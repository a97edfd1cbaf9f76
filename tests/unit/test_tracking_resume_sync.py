"""Checkpoint sync for retries on another node, with a fake trainer and a local folder
standing in for the remote artifact store."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.tracking import resume_sync
from sweeper.tracking.artifacts import repository
from sweeper.tracking.resume_sync import CheckpointSync, Unstable, restore, snapshot
from sweeper.trainers.base import Checkpoints
from sweeper.trainers.events import MetricEvent


class FakeTrainer:
    """The dummy trainer's layout: checkpoints/best.json and checkpoints/last.json."""

    def checkpoints(self, job: object) -> Checkpoints:
        folder = Path(job.out_dir) / record_names.CHECKPOINT_DIR  # type: ignore[attr-defined]
        best, last = folder / "best.json", folder / "last.json"
        return Checkpoints(best if best.exists() else None, last if last.exists() else None)


class Job:
    def __init__(self, out_dir: Path):
        self.out_dir = str(out_dir)


class CountingRepo:
    """Wraps a real local artifact repository, counting uploads."""

    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.inner = repository(str(root), "")
        self.uploads: list[str] = []

    def log_artifact(self, local: str, path: str | None = None) -> None:
        self.uploads.append(Path(local).name)
        self.inner.log_artifact(local, path)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def event(step: int, split: str = "train") -> MetricEvent:
    return MetricEvent(step=step, epoch=step / 2, split=split, loss=0.5, accuracy=50.0)


def train_until(out: Path, step: int, best_step: int) -> None:
    """What the dummy leaves after `step`: its checkpoints and events."""
    folder = out / record_names.CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last.json").write_text(json.dumps({"step": step}))
    (folder / "best.json").write_text(json.dumps({"step": best_step}))
    with open(out / record_names.EVENTS_FILE, "a") as events:
        events.write(event(step, "valid").to_json() + "\n")


def sync_for(
    out: Path, repo: CountingRepo, every: int = 1, interval_s: float = 0.0, copies: bool = True
) -> CheckpointSync:
    warnings: list[str] = []
    sync = CheckpointSync(repo, out, every, warnings.append, interval_s, copies)  # type: ignore[arg-type]
    sync.start(FakeTrainer(), Job(out))  # type: ignore[arg-type]
    sync.warnings = warnings  # type: ignore[attr-defined]
    return sync


def test_a_checkpoint_is_synced_only_once_the_trainer_moved_past_it(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    sync = sync_for(out, repo)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(2, "test"))  # same step: the checkpoint may still be written
    sync.close()
    assert sync.synced == []

    sync = sync_for(out, repo)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(3))
    sync.close()
    assert sync.synced == [2]
    assert not sync.warnings  # type: ignore[attr-defined]


def test_retry_elsewhere_restores_the_newest_and_sends_unchanged_files_once(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    sync = sync_for(out, repo)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(3))
    sync.close()
    first = len(repo.uploads)
    train_until(out, 4, best_step=2)  # best.json unchanged
    sync = sync_for(out, repo)
    sync.on_event(event(4, "valid"))
    sync.on_event(event(5))
    sync.close()
    # last.json and events changed: 2 blobs + 1 manifest; best.json not sent again
    assert len(repo.uploads) - first == 3
    names = [Path(i.path).name for i in repo.list_artifacts()]
    assert [n for n in names if n.startswith("manifest-")] == ["manifest-0000000004.json"]
    assert len(repo.list_artifacts("blobs")) == 3  # older blobs pruned

    other = tmp_path / "other-node"
    assert restore(repo, other) == 4  # type: ignore[arg-type]
    folder = other / record_names.CHECKPOINT_DIR
    assert json.loads((folder / "last.json").read_text()) == {"step": 4}
    assert json.loads((folder / "best.json").read_text()) == {"step": 2}
    assert (other / record_names.EVENTS_FILE).read_text() == (
        out / record_names.EVENTS_FILE
    ).read_text()


def test_every_n_validation_points(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    sync = sync_for(out, repo, every=2)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(3))
    sync.on_event(event(4, "valid"))
    train_until(out, 4, best_step=4)
    sync.on_event(event(5))
    sync.close()
    assert sync.synced == [4]


def test_no_copy_within_the_interval_of_the_start_or_the_last_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A point is copied once `interval_s` has passed since the attempt's start (a
    trial of seconds copies nothing), then not again until it passes once more."""
    import sweeper.tracking.resume_sync as resume_sync

    now = [1000.0]
    monkeypatch.setattr(resume_sync.time, "monotonic", lambda: now[0])
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    sync = sync_for(out, repo, interval_s=30.0)
    for step, clock, copied in (
        (2, 1010.0, []),
        (4, 1031.0, [4]),
        (6, 1050.0, [4]),
        (8, 1062.0, [4, 8]),
    ):
        now[0] = clock
        train_until(out, step, best_step=step)
        sync.on_event(event(step, "valid"))
        sync.on_event(event(step + 1))
        deadline = time.time() + 20  # the copy runs on the sync's own thread
        while sync.synced != copied and time.time() < deadline:
            time.sleep(0.01)
        assert sync.synced == copied
    sync.close()
    assert sync.synced == [4, 8]


def test_discard_sends_nothing_where_no_attempt_made_copies(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    deleted: list[object] = []
    repo.delete_artifacts = lambda path=None: deleted.append(path)  # type: ignore[method-assign]
    sync_for(out, repo, copies=False).discard()
    assert deleted == []
    sync_for(out, repo, copies=True).discard()  # an earlier attempt's may be there
    assert deleted == [None]


def test_a_folder_with_its_own_checkpoint_is_not_overwritten(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 4, best_step=4)
    sync = sync_for(out, repo)
    sync.on_event(event(4, "valid"))
    sync.on_event(event(5))
    sync.close()
    same_node = tmp_path / "same"
    train_until(same_node, 6, best_step=6)
    assert restore(repo, same_node) is None  # type: ignore[arg-type]
    last = same_node / record_names.CHECKPOINT_DIR / "last.json"
    assert json.loads(last.read_text()) == {"step": 6}


def test_a_damaged_copy_is_not_resumed_from(tmp_path: Path):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    sync = sync_for(out, repo)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(3))
    sync.close()
    for blob in (tmp_path / "store" / "blobs").iterdir():
        blob.write_text("torn")
    fresh = tmp_path / "fresh"
    assert restore(repo, fresh) is None  # type: ignore[arg-type]
    assert not (fresh / record_names.CHECKPOINT_DIR).exists()


def test_no_synced_copy_means_step_zero(tmp_path: Path):
    repo = CountingRepo(tmp_path / "store")
    assert restore(repo, tmp_path / "fresh") is None  # type: ignore[arg-type]


def test_snapshot_refuses_a_file_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "trial"
    train_until(out, 2, best_step=2)
    last = out / record_names.CHECKPOINT_DIR / "last.json"
    real_copy = shutil.copyfile

    def copy_while_written(src: Path, dst: Path) -> None:
        real_copy(src, dst)
        if Path(src) == last:
            with open(last, "a") as handle:
                handle.write(" ")

    monkeypatch.setattr(resume_sync.shutil, "copyfile", copy_while_written)
    (tmp_path / "snap").mkdir()
    with pytest.raises(Unstable):
        snapshot(out, [last], tmp_path / "snap")


def test_an_unstable_round_is_retried_at_the_next_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    real_snapshot = resume_sync.snapshot
    calls: list[int] = []

    def flaky(*args: object) -> dict:
        calls.append(1)
        if len(calls) == 1:
            raise Unstable("being written")
        return real_snapshot(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(resume_sync, "snapshot", flaky)
    sync = sync_for(out, repo)
    sync._sync(2)  # the round the worker thread would run: the file was being written
    assert sync.synced == []
    sync.on_event(event(3))  # the next event asks again
    sync.close()
    assert sync.synced == [2]
    assert len(calls) == 2


def test_the_events_copy_ends_at_a_full_line(tmp_path: Path):
    out = tmp_path / "trial"
    train_until(out, 2, best_step=2)
    events = out / record_names.EVENTS_FILE
    whole = events.read_text()
    with open(events, "a") as handle:
        handle.write('{"step": 3, "spl')
    (tmp_path / "snap").mkdir()
    copies = snapshot(out, [events], tmp_path / "snap")
    assert copies[record_names.EVENTS_FILE].read_text() == whole


@pytest.mark.parametrize("name", ["../../escaped.json", "/tmp/escaped.json"])
def test_a_manifest_naming_a_path_out_of_the_trial_folder_is_not_restored(
    tmp_path: Path, name: str
):
    out, repo = tmp_path / "trial", CountingRepo(tmp_path / "store")
    train_until(out, 2, best_step=2)
    sync = sync_for(out, repo)
    sync.on_event(event(2, "valid"))
    sync.on_event(event(3))
    sync.close()
    (manifest,) = (tmp_path / "store").glob(f"{resume_sync.MANIFEST_PREFIX}*")
    data = json.loads(manifest.read_text())
    data["files"] = {name: next(iter(data["files"].values()))}  # a tampered record
    manifest.write_text(json.dumps(data))
    fresh = tmp_path / "deep" / "fresh"
    assert restore(repo, fresh) is None  # type: ignore[arg-type]
    assert not (tmp_path / "escaped.json").exists() and not Path("/tmp/escaped.json").exists()


def test_discard_removes_the_whole_resume_folder_and_tolerates_none(tmp_path: Path):
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    from sweeper.tracking.resume_sync import discard

    repo = LocalArtifactRepository(str(tmp_path / "artifacts" / "resume"))
    blob = tmp_path / "blob"
    blob.write_text("x")
    repo.log_artifact(str(blob), "blobs")
    repo.log_artifact(str(blob))
    discard(repo)
    assert not (tmp_path / "artifacts" / "resume").exists()
    discard(repo)  # nothing left: nothing to do, no error
    assert (tmp_path / "artifacts").is_dir()
