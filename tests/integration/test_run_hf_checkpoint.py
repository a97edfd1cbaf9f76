"""`model.checkpoint: <HF model folder>`: a sweep starts both frameworks from it.

The folder is saved by the test (`save_pretrained` of a RoBERTa masked-LM holding
perturbed weights, and a tokenizer with the sweep's own vocabulary). Real fairseq and HF
trials must finish from the one converted init file, whose encoder is the folder's and
whose classifier logits agree across the frameworks; a folder missing a piece is exit 2
naming it before anything is created.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from sweeper.data.vocab import fairseq_ids
from sweeper.models.arch import HEAD_NAME
from sweeper.spec.model_block import ArchConfig
from tests.support.hf_models import perturbed_fairseq_state, save_hf_folder
from tests.support.sweeps import new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration


def _hf_sweep(tmp_path, tmp_path_factory, name: str) -> tuple[Path, Path, Path, object]:
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        name,
        grid={"framework": ["fairseq", "hf"], "init": ["pretrained"], "seed": [1]},
    )
    raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    model = raw["model"]
    arch = ArchConfig.model_validate(model["arch"])
    sp, dictionary = Path(model["sentencepiece"]), Path(model["dictionary"])
    size = len(fairseq_ids(dictionary))
    folder = tmp_path / "my-roberta"
    hf = save_hf_folder(folder, perturbed_fairseq_state(arch, size), arch, size, sp, dictionary)
    del model["pretrain"]
    model["checkpoint"] = str(folder)
    spec.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return spec, out, folder, hf


def test_trials_of_both_frameworks_start_from_the_hf_folder(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    from sweeper.models.init import fairseq_init_model, hf_init_model, read_init_checkpoint

    spec, out, folder, hf = _hf_sweep(tmp_path, tmp_path_factory, "hfckpt")
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"HF folder {folder}, converted to" in done.stdout + done.stderr
    _, trials = runs_by_role(out, "hfckpt")
    assert sorted(t.data.tags["sweeper.framework"] for t in trials) == ["fairseq", "hf"]
    assert all(t.info.status == "FINISHED" for t in trials)

    (init,) = (out / "init").glob("init-pretrained-s1-*.pt")
    _, state = read_init_checkpoint(init)
    words = hf.roberta.embeddings.word_embeddings.weight
    assert torch.equal(state["encoder.sentence_encoder.embed_tokens.weight"], words)
    tokens = torch.tensor([[0, 5, 9, 14, 2, 1], [0, 7, 8, 2, 1, 1]])
    fairseq = fairseq_init_model(init).eval()
    hf_classifier = hf_init_model(init).eval()
    with torch.no_grad():
        ours, _ = fairseq(tokens, classification_head_name=HEAD_NAME)
        theirs = hf_classifier(input_ids=tokens, attention_mask=(tokens != 1).long()).logits
    assert float((ours - theirs).abs().max()) < 1e-4


def test_a_folder_missing_its_tokenizer_exits_2_naming_it(tmp_path, tmp_path_factory):
    spec, out, folder, _ = _hf_sweep(tmp_path, tmp_path_factory, "hfbad")
    (folder / "tokenizer.json").unlink()
    done = run_sweeper("run", spec, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert str(folder) in done.stderr and "no tokenizer" in done.stderr
    parents, trials = runs_by_role(out, "hfbad")
    assert not parents and not trials
