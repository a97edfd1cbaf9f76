"""A sentence-pair sweep (`data.text2_suffix`) with real fairseq and HF trials.

Both trainers must read the pairs (fairseq loads `input1`; HF's jsonl holds the joined
ids), finish, and their stored best checkpoints must give the recorded test accuracy
when reloaded by each framework's own loader, which also reads the pairs.
"""

from __future__ import annotations

import pytest
import yaml

from tests.support.sweeps import new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration


def test_a_pair_task_trains_and_reloads_on_both_frameworks(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    corpus = tmp_path / "pairs"
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "pairs",
        grid={"framework": ["fairseq", "hf"], "seed": [1]},
    )
    raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    raw["data"].update(dir=str(corpus), text2_suffix="review2")  # its own generated corpus
    raw["model"]["sentencepiece"] = str(corpus / "sentencepiece.bpe.model")
    raw["model"]["dictionary"] = str(corpus / "dict.txt")
    spec.write_text(yaml.safe_dump(raw), encoding="utf-8")
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (corpus / "train.review2").is_file()
    _, trials = runs_by_role(out, "pairs")
    assert sorted(t.data.tags["sweeper.framework"] for t in trials) == ["fairseq", "hf"]
    assert all(t.info.status == "FINISHED" for t in trials)
    (log,) = [p for p in (out / "trials").glob("fairseq-*/trainer.log")]
    assert "input1/train" in log.read_text(encoding="utf-8")  # fairseq read the second texts

    checked = run_sweeper("summarize", spec, "--evaluate", "--no-log")
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "2 of 2 agree, exactly" in checked.stdout
