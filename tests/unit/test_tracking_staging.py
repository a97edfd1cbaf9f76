"""The input staging cache: content hashes, publish once, hit/miss, corrupt copies refused.

A local folder stands in for the remote artifact store (the functions take any
artifact URI; only the driver's choice to publish looks at the scheme)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sweeper.tracking import staging
from sweeper.tracking.staging import (
    StagingError,
    is_remote,
    localize,
    publish,
    role_path,
    tree_digest,
)
from sweeper.trainers.trial_pipeline import SweepInputs


def make_inputs(root: Path) -> SweepInputs:
    fairseq = root / "prepared" / "fairseq"
    (fairseq / "input0").mkdir(parents=True)
    (fairseq / "input0" / "train.bin").write_bytes(b"\x01\x02" * 100)
    (fairseq / "input0" / "dict.txt").write_text("a 1\n")
    hf = root / "prepared" / "hf"
    hf.mkdir()
    (hf / "train.jsonl").write_text('{"input_ids": [0, 2], "label": 1}\n')
    pretrained = root / "pretrain" / "checkpoint_best.pt"
    pretrained.parent.mkdir()
    pretrained.write_bytes(b"weights" * 50)
    return SweepInputs(
        {"fairseq": fairseq, "hf": hf}, root / "prepared", 10, 2, 1, {"masked_lm": pretrained}
    )


@pytest.fixture
def published(tmp_path: Path):
    driver = tmp_path / "driver"
    inputs = make_inputs(driver)
    store = tmp_path / "store"
    store.mkdir()
    lines: list[str] = []
    staged = publish(inputs, str(store), "", log=lines.append)
    return inputs, staged, store, lines


def test_remote_means_not_a_local_path():
    assert is_remote("mlflow-artifacts:/3/abc/artifacts")
    assert is_remote("s3://bucket/x")
    assert not is_remote("/tmp/mlartifacts/3")
    assert not is_remote("file:///tmp/mlartifacts/3")
    assert not is_remote("C:/runs")


def test_tree_digest_follows_content_and_names(tmp_path: Path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "x.txt").write_text("one")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    assert tree_digest(a) == tree_digest(b)
    (b / "x.txt").write_text("two")
    assert tree_digest(a) != tree_digest(b)
    (b / "x.txt").write_text("one")
    (b / "x.txt").rename(b / "y.txt")
    assert tree_digest(a) != tree_digest(b)


def test_publish_once_per_content(published, tmp_path: Path):
    inputs, staged, store, lines = published
    assert [s.role for s in staged] == ["fairseq_data", "hf_data", "pretrained:masked_lm"]
    assert all("uploaded" in line for line in lines)
    again: list[str] = []
    assert publish(inputs, str(store), "", log=again.append) == staged
    assert all("already" in line for line in again)


def test_same_content_on_the_node_is_read_in_place(published, tmp_path: Path):
    inputs, staged, _, _ = published
    cache = tmp_path / "cache"
    assert localize(inputs, staged, "", cache=cache) == inputs
    assert not cache.exists()  # nothing downloaded


def test_a_node_without_the_driver_files_downloads_and_then_hits_the_cache(
    published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    inputs, staged, _, _ = published
    shutil.rmtree(tmp_path / "driver")  # this "node" cannot see the driver's disk
    cache = tmp_path / "cache"
    local = localize(inputs, staged, "", cache=cache)
    for item in staged:
        path = role_path(local, item.role)
        assert cache in path.parents
        assert tree_digest(path) == item.digest
    assert local.pretrained["masked_lm"].name == "checkpoint_best.pt"

    def no_network(*_: object, **__: object):
        raise AssertionError("a cache hit must not download")

    monkeypatch.setattr(staging, "repository", no_network)
    assert localize(inputs, staged, "", cache=cache) == local


def test_different_content_at_the_driver_path_is_not_used(published, tmp_path: Path):
    inputs, staged, _, _ = published
    (inputs.data["hf"] / "train.jsonl").write_text("stale\n")
    local = localize(inputs, staged, "", cache=tmp_path / "cache")
    assert local.data["hf"] != inputs.data["hf"]
    assert local.data["fairseq"] == inputs.data["fairseq"]
    assert (local.data["hf"] / "train.jsonl").read_text().startswith('{"input_ids"')


def test_a_corrupted_download_is_refused(published, tmp_path: Path):
    inputs, staged, store, _ = published
    shutil.rmtree(tmp_path / "driver")
    item = next(s for s in staged if s.role == "pretrained:masked_lm")
    stored = store / "inputs" / item.digest / "data" / "checkpoint_best.pt"
    stored.write_bytes(b"torn")
    cache = tmp_path / "cache"
    with pytest.raises(StagingError, match="refused"):
        localize(inputs, [item], "", cache=cache)
    home = cache / "inputs" / item.digest
    assert not (home / "checkpoint_best.pt").exists()
    assert not (home / staging.MARKER).exists()


def test_a_cached_copy_that_changed_is_fetched_again(published, tmp_path: Path, capsys):
    inputs, staged, _, _ = published
    shutil.rmtree(tmp_path / "driver")  # a node without the driver's disk
    cache = tmp_path / "cache"
    first = localize(inputs, staged, "", cache=cache)
    (first.data["hf"] / "train.jsonl").write_text("rotted\n")
    again = localize(inputs, staged, "", cache=cache)
    assert again.data["hf"] == first.data["hf"]
    assert (again.data["hf"] / "train.jsonl").read_text().startswith('{"input_ids"')
    assert "hf_data: the cached copy at" in capsys.readouterr().out
