"""Staged inputs whose bytes no longer match their hash (issue 17 item 5), on a real server.

The driver publishes a sweep's inputs to a real `mlflow server`'s artifact store; a
"node" without the driver's disk (the driver's folders are gone) fetches them over HTTP
into its cache. Then the two copies a trial may read rot in turn: the node's cached copy
is fetched again, and a stored copy on the server that no longer matches its digest is
refused, naming the input and both hashes, with nothing left in the cache as complete.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from sweeper.tracking import staging
from sweeper.tracking.staging import StagingError, localize, publish
from sweeper.trainers.trial_pipeline import SweepInputs
from tests.support.cluster import mlflow_server
from tests.support.faults import server_root
from tests.support.reliability import record

pytestmark = pytest.mark.integration

ROOT = "mlflow-artifacts:/staging-integrity"


def driver_inputs(root: Path) -> SweepInputs:
    fairseq = root / "prepared" / "fairseq" / "input0"
    fairseq.mkdir(parents=True)
    (fairseq / "train.bin").write_bytes(bytes(range(256)) * 40)
    hf = root / "prepared" / "hf"
    hf.mkdir()
    (hf / "train.jsonl").write_text('{"input_ids": [0, 5, 2], "label": 1}\n' * 50)
    pretrained = root / "pretrain" / "checkpoint_best.pt"
    pretrained.parent.mkdir()
    pretrained.write_bytes(b"weights" * 2000)
    return SweepInputs(
        {"fairseq": fairseq.parent, "hf": hf},
        root / "prepared",
        50,
        2,
        1,
        {None: pretrained},
    )


def test_rotted_copies_of_staged_inputs_are_fetched_again_or_refused(tmp_path, tmp_path_factory):
    root = server_root(tmp_path, tmp_path_factory)
    with mlflow_server(root) as server:
        inputs = driver_inputs(tmp_path / "driver")
        staged = publish(inputs, ROOT, server.uri, log=lambda line: None)
        shutil.rmtree(tmp_path / "driver")  # this node never had the driver's disk
        cache = tmp_path / "node-cache"
        first = localize(inputs, staged, server.uri, cache=cache)
        assert first.data["hf"].is_relative_to(cache)

        (first.data["hf"] / "train.jsonl").write_text("rotted on the node\n")
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            again = localize(inputs, staged, server.uri, cache=cache)
        refetched = said.getvalue()
        assert again.data["hf"] == first.data["hf"]
        assert (again.data["hf"] / "train.jsonl").read_text().startswith('{"input_ids"')
        assert "hf_data: the cached copy at" in refetched and "fetching it again" in refetched

        item = next(s for s in staged if s.role == "pretrained")
        stored = root / "artifacts" / "staging-integrity" / "inputs" / item.digest / "data"
        (stored / "checkpoint_best.pt").write_bytes(b"torn on the server")
        with pytest.raises(StagingError) as refused:
            localize(inputs, [item], server.uri, cache=tmp_path / "other-node")
    message = str(refused.value)
    home = tmp_path / "other-node" / "inputs" / item.digest
    assert message.startswith("pretrained: the copy downloaded from") and "refused" in message
    assert item.digest[:12] in message
    assert not (home / staging.MARKER).exists() and not (home / item.name).exists()
    record(
        "staging: a staged input whose bytes no longer match its hash",
        "inputs published to a real `mlflow server`; on a node without the driver's disk, "
        "the cached copy of the HF data overwritten, then the server's stored copy of the "
        "pretrained checkpoint overwritten",
        f"cached copy: hashed again before use, fetched again over HTTP (`{refetched.strip()}`); "
        f"stored copy: refused (`{message}`), nothing left in the node's cache as complete",
    )
