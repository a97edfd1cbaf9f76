"""The lab's spec at the lab's size, end to end, on stand-ins for the lab's files (issue 16).

`sweeper fixture lab-size` builds the files sweeps/roberta.yaml names (reviews, a
sentencepiece model, a dict.txt of 32,000 model rows, a fairseq RoBERTa of the lab's
4 x 512 arch from 2 masked-LM steps); the shipped roberta.yaml then runs on them with
overrides that shorten it (96 training reviews, 3 epochs: 36 updates, seed 1,
pretrained init, both frameworks, no GPU). Checked: the parameter counts each run
records (the encoders of `sweeper params`: 22,829,056 fairseq, 22,829,568 HF; the
trainable counts), identical starting logits of the two frameworks from the init file
the trials used, and both best checkpoints reloaded by the frameworks' own loaders
(`summarize --evaluate`). About 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sweeper import record_names
from sweeper.cli.fixture import overrides
from sweeper.models.arch import HEAD_NAME, PAD
from sweeper.models.init import fairseq_init_model, hf_init_model
from tests.support.sweeps import client_for, run_sweeper

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROBERTA = Path(__file__).resolve().parents[2] / "sweeps" / "roberta.yaml"
FAIRSEQ_ENCODER, HF_ENCODER = 22_829_056, 22_829_568  # `sweeper params sweeps/roberta.yaml`
HEAD = 512 * 512 + 512 + 512 * 2 + 2  # dense + out_proj of the 2-class head


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_roberta_yaml_runs_at_the_labs_size_in_both_frameworks(tmp_path):
    fixture = tmp_path / "lab"
    built = run_sweeper("fixture", "lab-size", fixture, "--train-size", "96",
                        "--pretrain-steps", "2", timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert "31,995 dict entries" in built.stdout
    out = tmp_path / "runs"
    args = [
        ROBERTA, *overrides(fixture), f"output_dir={out}", "resources.gpu=0",
        "resources.cpu=1", "grid.seed=[1]", "grid.init=[pretrained]", "train.epochs=3",
    ]  # fmt: skip
    ran = run_sweeper("run", *args, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    client = client_for(out)
    experiment = client.get_experiment_by_name("roberta")
    runs = client.search_runs([experiment.experiment_id])
    trials = {
        r.data.tags[record_names.TAG_FRAMEWORK]: r.data.tags
        for r in runs
        if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL
    }
    assert sorted(trials) == ["fairseq", "hf"]
    counts = {
        name: (
            int(tags[record_names.TAG_TRAINABLE_PARAMS]),
            int(tags[record_names.TAG_TOTAL_PARAMS]),
        )
        for name, tags in trials.items()
    }
    # the classifier each framework trains: encoder + head, all of it trainable (fairseq's
    # unused masked-LM head is not counted; HF's extra 512 are its token-type row)
    assert counts["fairseq"] == (FAIRSEQ_ENCODER + HEAD, FAIRSEQ_ENCODER + HEAD)
    assert counts["hf"] == (HF_ENCODER + HEAD, HF_ENCODER + HEAD)

    (init_file,) = (out / "init").glob("init-pretrained-s1-*.pt")
    fs_model, hf_model = fairseq_init_model(init_file).eval(), hf_init_model(init_file).eval()
    tokens = _test_tokens(out)
    with torch.no_grad():
        fs_logits, _ = fs_model(tokens, classification_head_name=HEAD_NAME)
        hf_logits = hf_model(input_ids=tokens, attention_mask=tokens.ne(PAD)).logits
    assert fs_logits.shape == (8, 2)
    assert (fs_logits - hf_logits).abs().max() <= 1e-4

    evaluated = run_sweeper("summarize", *args, "--evaluate", timeout=600)
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr[-3000:]
    assert "2 of 2 agree, exactly" in evaluated.stdout


def _test_tokens(out: Path) -> torch.Tensor:
    """The first 8 prepared test reviews (the ids both frameworks read), right-padded."""
    (test_file,) = out.glob("prepared/*/hf/test.jsonl")
    rows = [json.loads(line)["input_ids"] for line in test_file.read_text().splitlines()[:8]]
    width = max(len(row) for row in rows)
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])
