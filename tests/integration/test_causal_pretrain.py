"""The causal (left-to-right) pretraining stage on a tiny generated corpus: a real HF run.

Its `model.pt` must start trials of both frameworks through `sweeper.models.init` with
exactly the weights of the HF model it trained (the round trip HF -> fairseq -> each
framework loses nothing); it must start from the weights the masked-LM stage starts
from (fairseq-train run with a zero learning rate keeps them); a second call reuses it;
its cache folder is never the masked-LM stage's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sweeper.trainers.fairseq.fairseq_pretrain import cache_key, pretrain
from sweeper.trainers.hf.roberta_causal_pretrain import causal_cache_key, pretrain_causal
from tests.support.specs import tiny_pretrain_spec

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

STEPS = 20


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """(spec, prepared data, checkpoint path, progress lines) of one real pretraining."""
    from sweeper.data import prepare

    spec = tiny_pretrain_spec(tmp_path_factory.mktemp("causal"), STEPS)
    prepared = prepare(spec, log=lambda _: None)
    messages: list[str] = []
    path = pretrain_causal(spec, prepared, log=messages.append)
    return spec, prepared, path, messages


def test_result_is_published_with_what_it_learned(pretrained) -> None:
    *_, path, messages = pretrained
    folder = path.parent
    assert path.name == "model.pt" and folder.name.startswith("causal_lm-")
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temp left
    assert sorted(p.name for p in folder.iterdir()) == ["hf", "model.pt", "pretrain.json",
                                                        "train.log"]  # fmt: skip
    info = json.loads((folder / "pretrain.json").read_text())
    assert info["objective"] == "causal_lm" and info["steps"] == STEPS
    assert math.isfinite(info["train_loss_nats"]) and math.isfinite(info["valid_loss_nats"])
    assert info["train_samples"] > 0
    config = json.loads((folder / "hf" / "config.json").read_text())
    assert config["is_decoder"] is True and config["architectures"] == ["RobertaForCausalLM"]
    steps = [m for m in messages if "pretrain step" in m]
    assert steps and f"step {STEPS}/{STEPS}" in steps[-1]
    assert messages[-1] == f"pretrained checkpoint: {path}"


def test_both_frameworks_start_from_the_trained_weights(pretrained, tmp_path: Path) -> None:
    import torch
    from transformers import RobertaForCausalLM

    from sweeper.models.convert import hf_to_fairseq
    from sweeper.models.init import fairseq_init_model, hf_init_model, init_checkpoint
    from sweeper.trainers.hf.roberta_causal_main import causal_model

    spec, prepared, path, _ = pretrained
    arch = spec.model.arch
    trained = RobertaForCausalLM.from_pretrained(path.parent / "hf")
    init = init_checkpoint(arch, prepared.vocab_size, 2, "pretrained", 1, path, tmp_path)
    hf_encoder = hf_init_model(init).roberta.state_dict()
    trained_encoder = trained.roberta.state_dict()
    assert hf_encoder.keys() == trained_encoder.keys()
    for key, value in trained_encoder.items():
        assert torch.equal(hf_encoder[key], value), key
    fairseq_state = fairseq_init_model(init).state_dict()
    converted = hf_to_fairseq(trained.state_dict())
    for key, value in converted.items():  # encoder and LM head
        assert torch.equal(fairseq_state[key], value), key
    start = hf_to_fairseq(causal_model(arch, prepared.vocab_size, spec.model.pretrain.seed)
                          .state_dict())  # fmt: skip
    word = "encoder.sentence_encoder.embed_tokens.weight"
    assert not torch.equal(converted[word], start[word])  # it did train


def test_it_starts_where_the_masked_lm_stage_starts(pretrained, tmp_path: Path) -> None:
    """fairseq-train masked_lm for one update at learning rate 0 keeps its initial
    weights: they must be the causal stage's initial weights for the same seed."""
    import torch

    from sweeper.models.convert import hf_to_fairseq
    from sweeper.models.init import read_fairseq_state
    from sweeper.trainers.fairseq.fairseq_checkpoints import allow_fairseq_checkpoints
    from sweeper.trainers.hf.roberta_causal_main import causal_model

    spec, prepared, _, _ = pretrained
    frozen = spec.model.pretrain.model_copy(update={"lr": 0.0, "steps": 1})
    model = spec.model.model_copy(update={"pretrain": frozen})
    still = spec.model_copy(update={"model": model, "output_dir": tmp_path})
    allow_fairseq_checkpoints()
    masked = read_fairseq_state(pretrain(still, prepared, log=lambda _: None))
    causal = hf_to_fairseq(causal_model(spec.model.arch, prepared.vocab_size, frozen.seed)
                           .state_dict())  # fmt: skip
    assert masked.keys() == causal.keys()
    for key, value in masked.items():
        assert torch.equal(causal[key], value), key


def test_second_call_reuses_the_checkpoint(pretrained) -> None:
    spec, prepared, path, _ = pretrained
    written = path.stat().st_mtime_ns
    messages: list[str] = []
    assert pretrain_causal(spec, prepared, log=messages.append) == path
    assert messages == [f"pretrained checkpoint (cached): {path}"]
    assert path.stat().st_mtime_ns == written


def test_masked_lm_and_causal_lm_never_share_a_folder(pretrained) -> None:
    spec, prepared, path, _ = pretrained
    data, arch, config = Path(prepared.pretrain_dir), spec.model.arch, spec.model.pretrain
    masked, causal = cache_key(data, arch, config), causal_cache_key(data, arch, config)
    assert path.parent.name == causal != masked
    assert masked not in causal  # not the masked-LM key with a prefix: a different hash
